"""`race plan --budget F`: what one FLOP budget buys for each policy size (the paper's
same-FLOP model-size comparison): GRPO steps, rollouts and update tokens."""

from __future__ import annotations

import argparse
import json

from suite.cli import command
from suite.cli.args import add_cost, count_arg
from suite.cli.commands.flops import add_step_arguments, compute, sci
from suite.cli.costargs import cost_fields, cost_lines
from suite.errors import RaceError


def plan(budget: float, policies, args) -> list[dict]:
    """One row per policy: whole steps the budget buys under the step flags in `args`, and the
    FLOPs they use as a share of the policy's pretraining compute (the indicative EU check)."""
    from suite.accounting.pretraining import share_of_pretraining

    rows = []
    for policy in policies:
        d = compute(policy, args)
        per_step = d["per_step"]["flops"]["total"]
        steps = int(budget // per_step)
        rows.append({
            "model": policy.name, "params_total": policy.params_total,
            # MoE: active parameters buy tokens (they set FLOPs per step), total parameters set memory
            "params_active": policy.params_active if policy.is_moe else policy.params_total,
            "weights_gb_bf16": 2 * policy.params_total / 1e9,
            "trainable_params": d["adapter"]["trainable_params"],
            "flops_per_step": per_step, "steps": steps,
            "rollouts": steps * d["grpo"]["group_size"] * d["grpo"]["prompts_per_step"],
            "update_tokens": steps * d["per_step"]["tokens"]["update"],
            "flops_used": steps * per_step, "update_share": d["update_share"],
            "flops_per_step_by_phase": d["per_step"]["flops"],
            "pretraining": share_of_pretraining(steps * per_step, policy),
            **cost_fields(policy, d, steps, args),
        })
    return rows


def render(budget: float, rows: list[dict], args) -> str:
    """The human table."""
    from suite.accounting.modelspec import fmt_params

    lora = f"LoRA r={args.lora_rank}" if args.lora_rank else "full fine-tuning"
    lines = [f"budget {budget:.3e} FLOPs; {lora}; B={args.prompts_per_step} x K={args.group_size}, P={args.prompt_tokens:g}, "
             f"C={args.completion_tokens:g}, mu={args.num_iterations}, beta={args.beta:g}; engine profile {args.engine_profile}, "
             f"attention {args.attention}", ""]
    head = (f"{'model':<30}{'params':>8}{'active':>8}{'weights':>9}{'FLOPs/step':>12}{'steps':>10}{'rollouts':>12}"
            f"{'update tokens':>15}{'p':>8}{'post/pre':>11}{'EU 1/3':>8}")
    lines += [head, "-" * len(head)]
    for r in rows:
        active = fmt_params(r["params_active"]) if r["params_active"] != r["params_total"] else "="
        lines.append(f"{r['model']:<30}{fmt_params(r['params_total']):>8}{active:>8}{r['weights_gb_bf16']:>7.1f}GB"
                     f"{sci(r['flops_per_step']):>12}{r['steps']:>10,}{r['rollouts']:>12,}{r['update_tokens']:>15,}"
                     f"{r['update_share']:>8.3f}{_share(r['pretraining']):>11}"
                     f"{'above' if r['pretraining']['eu']['exceeds'] else 'below':>8}")
    if any(r["steps"] == 0 for r in rows):
        lines.append("\n0 steps: the budget buys less than one step of that model.")
    if any(r["params_active"] != r["params_total"] for r in rows):
        lines.append("MoE: active parameters (top-k experts) buy tokens -- they set FLOPs per step; total parameters set "
                     "memory (weights = 2 bytes per parameter, bf16, before optimizer state and activations).")
    lines.append("p = C_update / C_total of a step; steps are whole GRPO steps (one generation batch and its mu updates).")
    lines.append("post/pre = FLOPs used / the policy's pretraining compute (published, else 6*N*D; '?' unknown); EU 1/3: "
                 "the indicative check of C(2025) 5045 points 59-61 (one third of the original compute, unknown: of "
                 "10^23 FLOP) -- not legal advice.")
    lines += [x for r in rows if "cost" in r for x in ["", *cost_lines(r["model"], r["cost"])]]
    return "\n".join(lines)


def _share(section: dict) -> str:
    """post-training / pretraining as the table prints it ('?' when the pretraining compute is unknown)."""
    return "?" if section["ratio"] is None else f"{section['ratio']:.2e}"


@command("plan", help="What a FLOP budget buys per policy size: GRPO steps, rollouts, update tokens")
def configure(p: argparse.ArgumentParser):
    p.epilog = ("The inverse of `race flops`: the same per-step accounting, divided into --budget. Compare model "
                "sizes at equal FLOPs, as the paper's IsoFLOP bands do.")
    p.add_argument("--budget", type=count_arg, required=True, metavar="F",
                   help="total training FLOPs to spend, e.g. 1e18")
    p.add_argument("--models", default=None, metavar="LIST",
                   help="comma-separated policies (catalog names, traced ones included, or config.json paths); "
                        "default: every recipe catalog policy")
    add_step_arguments(p, single_model=False)
    add_cost(p)

    def run(args) -> int:
        from suite.accounting.specs import PATH_RECIPE, catalog_names, spec_for

        if args.budget <= 0:
            raise RaceError(f"--budget must be positive, got {args.budget:g}")
        if args.models:
            names = [m.strip() for m in args.models.split(",") if m.strip()]
            if not names:
                raise RaceError("--models is empty")
        else:
            names = [n for n in catalog_names(PATH_RECIPE) if spec_for(n).has_lm_head]
        policies = [spec_for(n) for n in names]  # any family: the recipe, else the traced path
        rows = plan(args.budget, policies, args)
        if args.format == "json":
            print(json.dumps({"budget": args.budget, "engine_profile": args.engine_profile, "attention": args.attention,
                              "rows": rows}, indent=2))
        else:
            print(render(args.budget, rows, args))
        return 0

    return run
