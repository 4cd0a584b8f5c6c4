"""`race flops`: per-phase FLOPs of GRPO steps from model specs and mean token counts."""

from __future__ import annotations

import argparse
import json
import math

from suite.cli import command
from suite.errors import RaceError
from suite.cli.args import add_engine_profile, add_format, add_grpo, add_lora, add_model, count_arg

PAPER_DEFAULTS = {"group_size": 2, "prompts_per_step": 16, "prompt_tokens": 256.0, "completion_tokens": 1024.0}


def add_step_arguments(p: argparse.ArgumentParser, single_model: bool = True) -> None:
    """The flags that define one GRPO step (shared by `race flops` and `race plan`), from the
    shared builders (suite/cli/args.py)."""
    if single_model:
        add_model(p, list_models=True,
                  config_help="policy from a Hugging Face config.json (or the folder holding it): Qwen2/2.5/3, "
                              "Qwen3-MoE, Qwen3-Next, Qwen3.5, Qwen3.5-MoE, Llama, Mistral, Mixtral, Gemma 2/3, OLMo "
                              "2/3, Phi-3, SmolLM3, DeepSeek-V3, gpt-oss; any other decoder through the traced path")
    add_lora(p)
    add_grpo(p, group_size=PAPER_DEFAULTS["group_size"], prompts_per_step=PAPER_DEFAULTS["prompts_per_step"],
             prompt_tokens=PAPER_DEFAULTS["prompt_tokens"], completion_tokens=PAPER_DEFAULTS["completion_tokens"],
             helps={"group_size": "completions per prompt (default: 2, as in the paper)"})
    p.add_argument("--max-completion-tokens", type=int, default=None, metavar="M",
                   help="longest completion allowed (default: the larger of 2048 and C); recorded, and C must not exceed it")
    p.add_argument("--steps-per-generation", type=int, default=None, metavar="S",
                   help="TRL steps_per_generation: the generation batch is trained in S slices, one per micro-step "
                        "(default: TRL's, = --gradient-accumulation-steps); with the next flag it decides whether TRL "
                        "runs the old-policy forward; a step here stays one generation batch and its mu passes")
    p.add_argument("--gradient-accumulation-steps", type=int, default=1, metavar="G",
                   help="TRL gradient_accumulation_steps: micro-steps per optimizer step (default: 1); TRL takes "
                        "S x mu / G optimizer steps per generation batch")
    p.add_argument("--reward-model", metavar="NAME|PATH", default=None,
                   help="reward model (catalog name or config.json) scoring every completion; absent = rule reward, 0 FLOPs")
    p.add_argument("--reward-tokens", type=count_arg, default=None, metavar="R",
                   help="tokens the reward model scores per completion (default: P + C)")
    from suite.record.runspec import OWN_PROFILE

    add_engine_profile(p, default=OWN_PROFILE, deprecated="--engine", check=False,
                       what=f"engine profile ({OWN_PROFILE}: the suite's own runs on CUDA)")
    p.add_argument("--attention", default="causal", choices=("causal", "full"),
                   help="attention FLOP convention: causal counts the lower triangle, full the whole square (default: causal)")
    add_format(p, ("text", "json"), help="text: the table (default); json: the same numbers for machines")


def adapter_from_args(args):
    """accounting.Adapter from --lora-rank/--lora-alpha/--lora-targets."""
    from suite.accounting import PROJECTIONS, Adapter

    if args.lora_rank < 0:
        raise RaceError(f"--lora-rank must be >= 0, got {args.lora_rank}", "0 means full fine-tuning")
    targets = PROJECTIONS
    if args.lora_targets is not None:
        if args.lora_rank == 0:
            raise RaceError("--lora-targets applies to LoRA only", "drop it, or give --lora-rank R > 0")
        targets = tuple(t.strip() for t in args.lora_targets.split(",") if t.strip())
    return Adapter.from_rank(args.lora_rank, args.lora_alpha, targets)


def settings_from_args(args):
    """accounting.GRPOSettings from the step flags."""
    from suite.accounting import GRPOSettings

    c = args.completion_tokens
    max_c = args.max_completion_tokens
    if max_c is None:
        max_c = max(2048, math.ceil(c)) if math.isfinite(c) and 0 < c <= 1e7 else 2048
    return GRPOSettings(group_size=args.group_size, prompts_per_step=args.prompts_per_step,
                        num_iterations=args.num_iterations, beta=args.beta, max_completion_tokens=max_c,
                        gradient_checkpointing=args.gradient_checkpointing,
                        gradient_accumulation_steps=getattr(args, "gradient_accumulation_steps", 1),
                        steps_per_generation=getattr(args, "steps_per_generation", None))


def compute(policy, args) -> dict:
    """One step (and --steps N of them) for `policy`: the JSON `race flops --format json` prints."""
    from suite.accounting import METHOD, VERSION, get_engine, step_flops
    from suite.accounting.pretraining import share_of_pretraining
    from suite.accounting.specs import priced_by, spec_for
    from suite.record.build import model_entry

    get_engine(args.engine_profile)
    adapter = adapter_from_args(args)
    settings = settings_from_args(args)
    reward = spec_for(args.reward_model) if args.reward_model else None
    if reward is None and args.reward_tokens is not None:
        raise RaceError("--reward-tokens needs --reward-model", "rule rewards cost 0 FLOPs")
    s = step_flops(policy, adapter, settings, args.prompt_tokens, args.completion_tokens, engine=args.engine_profile,
                   attention=args.attention, reward_model=reward, reward_tokens=args.reward_tokens)
    n = getattr(args, "steps", 1)
    total = s.total
    return {
        "method": METHOD, "version": VERSION, "engine_profile": args.engine_profile, "attention": args.attention,
        "policy": model_entry(policy),
        "priced_by": {"policy": priced_by(policy), "reward": priced_by(reward) if reward is not None else None},
        "adapter": {**adapter.to_report(policy), "adapted": adapted_summary(policy, adapter)},
        "grpo": settings.to_dict(),
        "reward": None if reward is None else {"name": reward.name, "params_total": reward.params_total,
                                               "spec": reward.to_dict()},
        "means": {"prompt_tokens": args.prompt_tokens, "completion_tokens": args.completion_tokens,
                  "reward_tokens": s.work["reward.tokens"] / max(1, s.work["count.completions"]) if reward else 0},
        "per_step": {"flops": {**s.flops, "total": total}, "tokens": s.tokens, "work": s.work,
                     "passes": [{"phase": ph, "pass": name, "flops": f} for ph, name, f in s.passes]},
        "steps": n,
        "optimizer_steps_per_generation": _optimizer_steps(settings),
        "total": {"flops": {**{k: v * n for k, v in s.flops.items()}, "total": total * n},
                  "tokens": {k: v * n for k, v in s.tokens.items()}},
        "shares": {k: (v / total if total else 0.0) for k, v in s.flops.items()},
        "expert_lora_folds": _fold_flops(policy, adapter, settings, args, s.work),
        "update_share": s.update_share,
        "pretraining": share_of_pretraining(total * n, policy),
    }


def _optimizer_steps(settings) -> float:
    """TRL optimizer steps per generation batch: steps_per_generation x mu / gradient_accumulation_steps."""
    spg = settings.steps_per_generation or settings.gradient_accumulation_steps
    return spg * settings.num_iterations / settings.gradient_accumulation_steps


def _fold_flops(policy, adapter, settings, args, work) -> int:
    """FLOPs of one step spent folding expert LoRAs per forward call (the work's *.calls terms)."""
    from suite.accounting import coefficients

    table = coefficients(policy, adapter, settings, None, args.engine_profile, args.attention)
    return sum(c * work.get(k, 0) for _, _, coef in table for k, c in coef.items() if k.endswith(".calls"))


def adapted_summary(policy, adapter) -> dict:
    """What peft adapts: {module or parameter name: layers}, and the targets that adapt nothing."""
    from suite.accounting import lora_units, unmatched_targets

    out: dict = {}
    for u in lora_units(policy, adapter):
        out[u.name] = out.get(u.name, 0) + 1
    return {"modules": out, "unmatched_targets": unmatched_targets(policy, adapter)} if adapter.kind == "lora" else {}


def sci(x: float) -> str:
    """FLOPs as 1.234e+18 (0 as 0)."""
    return f"{x:.3e}" if x else "0"


def render(d: dict, show_passes: bool) -> str:
    """The human table."""
    from suite.accounting.modelspec import fmt_params

    pol, ad, g = d["policy"], d["adapter"], d["grpo"]
    if ad["type"] == "lora":
        mods = ad["adapted"]["modules"]
        on = ", ".join(f"{m} x{n}" for m, n in mods.items()) if len(mods) <= 12 else f"{len(mods)} module kinds"
        what = f"LoRA r={ad['rank']} on {on} ({fmt_params(ad['trainable_params'])} trainable)"
    else:
        what = f"full fine-tuning ({fmt_params(ad['trainable_params'])} trainable)"
    size = f"{fmt_params(pol['params_total'])} params"
    if "params_active" in pol:
        sp = pol["spec"]
        size += (f", {fmt_params(pol['params_active'])} active: {sp['experts_per_token']} of {sp['num_experts']} experts "
                 "per token")
    rw = "rule reward (0 FLOPs)" if d["reward"] is None else \
        f"reward model {d['reward']['name']} ({fmt_params(d['reward']['params_total'])}) over {d['means']['reward_tokens']:g} tokens"
    lines = [
        f"policy {pol['name']} ({size}), {what}",
        f"GRPO step: B={g['prompts_per_step']} prompts x K={g['group_size']} completions, P={d['means']['prompt_tokens']:g}, "
        f"C={d['means']['completion_tokens']:g} tokens; mu={g['num_iterations']}, beta={g['beta']:g}, gradient checkpointing "
        f"{'on' if g['gradient_checkpointing'] else 'off'}; {rw}",
        *([f"TRL schedule: steps_per_generation={g['steps_per_generation']}, gradient_accumulation_steps="
           f"{g['gradient_accumulation_steps']}: {d['optimizer_steps_per_generation']:g} optimizer steps per "
           "generation batch (each trains its slice)"] if g.get("steps_per_generation") else []),
        f"engine profile {d['engine_profile']}, attention {d['attention']}, 1 multiply-add = 2 FLOPs; priced by "
        + ("the analytic recipe" if d["priced_by"]["policy"] == "recipe" else
           "tracing its transformers code (FlopCounterMode, meta device)"),
        "",
    ]
    folded = d.get("expert_lora_folds", 0)
    if folded:
        lines.insert(1, f"note: peft folds the LoRA into the expert stacks once per forward call (every decode step of "
                        f"transformers generate): {sci(folded)} FLOPs, {folded / d['per_step']['flops']['total']:.1%} of "
                        "the step; vLLM rollouts (--engine-profile trl-vllm) apply it per routed token")
    miss = ad.get("adapted", {}).get("unmatched_targets")
    if miss:
        lines.insert(1, f"note: {pol['name']} has no {', '.join(miss)}: peft adapts only the target names that exist "
                        "(--lora-targets all-linear, or name its modules)")
    n = d["steps"]
    tok = d["per_step"]["tokens"]
    tok_txt = {"rollout": f"{tok['rollout_prompt']:,} prompt + {tok['rollout_completion']:,} generated",
               "update": f"{tok['update']:,}", "reward": f"{tok['reward']:,}"}
    head = f"{'phase':<9}{'FLOPs/step':>12}{f'FLOPs x{n}':>14}{'share':>8}   tokens/step"
    lines += [head, "-" * len(head)]
    for ph in ("rollout", "update", "reward"):
        lines.append(f"{ph:<9}{sci(d['per_step']['flops'][ph]):>12}{sci(d['total']['flops'][ph]):>14}"
                     f"{d['shares'][ph]:>8.1%}   {tok_txt[ph]}")
    lines.append(f"{'total':<9}{sci(d['per_step']['flops']['total']):>12}{sci(d['total']['flops']['total']):>14}{'':>8}")
    lines.append(f"\nupdate share p = C_update / C_total = {d['update_share']:.4f}")
    from suite.accounting.pretraining import describe

    lines += ["", f"post-training compute of the {n} step(s) against the base model's pretraining:",
              *describe(d["pretraining"], d["total"]["flops"]["total"])]
    if show_passes:
        lines += ["", f"{'phase':<9}{'pass':<24}{'FLOPs/step':>12}"]
        for r in d["per_step"]["passes"]:
            lines.append(f"{r['phase']:<9}{r['pass']:<24}{sci(r['flops']):>12}")
    return "\n".join(lines)


def list_models() -> str:
    """Every catalog entry with its parameter count and how it is priced (a traced entry needs
    torch and transformers to be built; without them it is listed as such)."""
    from suite.accounting.modelspec import fmt_params
    from suite.accounting.specs import PATH_TRACED, catalog_names, lookup, spec_for
    from suite.accounting.stored import INSTALL, traced_available

    rows = []
    for n in catalog_names():
        if lookup(n).priced_by == PATH_TRACED and not traced_available():
            rows.append(f"{n:<32}{'?':>8}  traced: needs torch and transformers ({INSTALL})")
            continue
        s = spec_for(n)
        kind = ("policy" if s.has_lm_head else "reward model") + f", {s.model_type}"
        if s.priced_by == PATH_TRACED:
            kind += ", traced" + (f", MoE: {s.experts_per_token} of {s.num_experts} experts" if s.num_experts else "")
        elif s.is_moe:
            kind += f", MoE: {fmt_params(s.params_active)} active"
        rows.append(f"{n:<32}{fmt_params(s.params_total):>8}  {kind}")
    return "\n".join(rows)


@command("flops", help="Per-phase FLOPs (rollout / update / reward) of GRPO steps from token counts")
def configure(p: argparse.ArgumentParser):
    p.epilog = ("Counts one GRPO step: B*K completions generated (prefill + one decode step per further token, KV cache), "
                "mu update passes (forward, backward, checkpoint recompute; old-policy and reference forwards when they "
                "run) and the reward model's forward. Derivation: docs/accounting.md.")
    add_step_arguments(p)
    p.add_argument("--steps", type=int, default=1, metavar="N",
                   help="number of GRPO steps (each: one generation batch and its mu updates) for the totals (default: 1)")
    p.add_argument("--passes", action="store_true", help="also list FLOPs of every pass (generate, train forward, ...)")
    from suite.cli.args import add_cost
    from suite.cli.costargs import cost_fields, cost_lines

    add_cost(p)

    def run(args) -> int:
        if args.list_models:
            print(list_models())
            return 0
        if args.steps < 1:
            raise RaceError(f"--steps must be >= 1, got {args.steps}")
        from suite.accounting.specs import spec_for

        policy = spec_for(args.model or args.config)  # a recipe, else the traced path (any decoder)
        d = compute(policy, args)
        d.update(cost_fields(policy, d, args.steps, args))
        text = render(d, args.passes)
        if "cost" in d:
            text += "\n\n" + "\n".join(cost_lines(policy.name, d["cost"]))
        print(json.dumps(d, indent=2) if args.format == "json" else text)
        return 0

    return run
