"""Regenerate the engine-comparison table of docs/accounting.md (between its GENERATED markers).

    .venv/bin/python scripts/accounting_table.py          # rewrite the table in place
    .venv/bin/python scripts/accounting_table.py --check  # exit 1 if the committed table is stale

Same GRPO step for every row (the paper's setting): B=16 prompts x K=2 completions, 256 prompt
+ 1,024 completion tokens each, mu=1, beta=0, gradient checkpointing on, LoRA on all seven
projections. Columns: our update FLOPs (TRL profile, causal -- what a report states), ours
under the eager convention on the non-Triton path (trl-cpu, full), torch FlopCounterMode
measuring that same TRL training pass on the meta device, verl's formula, and 6*N*T.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "accounting.md"
BEGIN, END = "<!-- BEGIN GENERATED: scripts/accounting_table.py -->", "<!-- END GENERATED -->"
FAMILY_BEGIN = "<!-- BEGIN GENERATED: scripts/accounting_table.py families -->"
FAMILY_MODELS = ("Qwen3-8B", "Llama-3.1-8B-Instruct", "gemma-3-12b-it", "OLMo-2-1124-7B-Instruct", "Qwen3-30B-A3B",
                 "gpt-oss-20b", "Qwen3-Next-80B-A3B-Instruct")
"""One catalog model per family for the second table (LoRA r=64 and full fine-tuning)."""
MODELS = ("Qwen2.5-1.5B-Instruct", "Qwen2.5-7B-Instruct")
RANKS = (8, 64, 256)
K, B, P, C = 2, 16, 256, 1024


def rows(measure: bool = True) -> list[dict]:
    """One row per (model, rank): analytic, measured and other engines' formulas, with
    gradient checkpointing on (TRL's default) and off."""
    from suite.accounting import Adapter, GRPOSettings, phase_flops, six_n_t, verl_update_flops, work_from_lengths
    from suite.accounting.specs import spec_for

    n = K * B
    out = []
    for name in MODELS:
        spec = spec_for(name)
        for rank in RANKS:
            adapter = Adapter.from_rank(rank)
            row = {"model": name, "rank": rank, "trainable": adapter.trainable_params(spec),
                   "verl": verl_update_flops(spec, [P + C] * n), "6nt": six_n_t(spec, n * (P + C))}
            for gc in (True, False):
                settings = GRPOSettings(group_size=K, prompts_per_step=B, max_completion_tokens=C,
                                        gradient_checkpointing=gc)

                def update(engine, attention):
                    w = work_from_lengths([P] * B, [C] * n, settings, engine)
                    return phase_flops(w, spec, adapter, settings, engine=engine, attention=attention)["update"]

                tag = "gc" if gc else "nogc"
                row[f"ours_{tag}"] = update("trl", "causal")
                row[f"ours_full_{tag}"] = update("trl-cpu", "full")
                if measure:
                    from suite.accounting.reference import measure_train_pass

                    row[f"measured_{tag}"] = measure_train_pass(spec, adapter, [P] * n, [C] * n,
                                                                gradient_checkpointing=gc)
            out.append(row)
    return out


def table(rs: list[dict]) -> str:
    """The Markdown table."""
    from suite.accounting.modelspec import fmt_params

    def m(r, tag):
        return f"{r[f'measured_{tag}']:.4e}" if f"measured_{tag}" in r else "—"

    def ratio(r, tag):
        return f"{r['verl'] / r[f'measured_{tag}']:.2f}x" if f"measured_{tag}" in r else "—"

    lines = [
        f"Step: B={B} prompts x K={K}, P={P} prompt + C={C} completion tokens each, mu=1, beta=0, LoRA on all "
        "seven projections; update FLOPs only (verl's formula and 6·N·T count no rollout and no reward). "
        "GC = gradient checkpointing (on by default in TRL).",
        "",
        "| policy | LoRA r | trainable | ours, GC on | ours, GC off | measured, GC on | measured, GC off "
        "| verl formula | 6·N·T | verl / ours, GC on / off | verl / measured, GC on / off | 6·N·T / ours, GC on |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rs:
        lines.append(f"| {r['model']} | {r['rank']} | {fmt_params(r['trainable'])} | {r['ours_gc']:.4e} | "
                     f"{r['ours_nogc']:.4e} | {m(r, 'gc')} | {m(r, 'nogc')} | {r['verl']:.4e} | {r['6nt']:.4e} | "
                     f"{r['verl'] / r['ours_gc']:.2f}x / {r['verl'] / r['ours_nogc']:.2f}x | {ratio(r, 'gc')} / "
                     f"{ratio(r, 'nogc')} | {r['6nt'] / r['ours_gc']:.2f}x |")
    exact = all(r.get(f"measured_{t}") == r[f"ours_full_{t}"] for r in rs for t in ("gc", "nogc"))
    lines += ["", "ours = `trl` profile, causal attention (what a report states). measured = torch FlopCounterMode "
              "(plus in-place addmm_) over TRL's own training pass on the meta device: eager attention, non-Triton "
              "fused LM head (every position), so it is compared with our `trl-cpu` profile under the `full` "
              "convention; equal to it to the FLOP in every row: " + ("yes." if exact else "NO (run the tests).")]
    return "\n".join(lines)


def family_rows(measure: bool = True) -> list[dict]:
    """One row per (family model, adapter): our update FLOPs of the same step, FlopCounterMode
    over TRL's training pass on the meta device (trl-cpu / full convention), verl's estimator
    (None where verl has none) and 6*N*T with total and with active parameters."""
    from suite.accounting import Adapter, GRPOSettings, phase_flops, six_n_t, verl_update_flops, work_from_lengths
    from suite.accounting.specs import spec_for

    n = K * B
    settings = GRPOSettings(group_size=K, prompts_per_step=B, max_completion_tokens=C)
    out = []
    for name in FAMILY_MODELS:
        spec = spec_for(name)
        for rank in (64, 0):
            adapter = Adapter.from_rank(rank)

            def update(engine, attention):
                w = work_from_lengths([P] * B, [C] * n, settings, engine, policy=spec)
                return phase_flops(w, spec, adapter, settings, engine=engine, attention=attention)["update"]

            row = {"model": name, "type": spec.model_type, "rank": rank, "trainable": adapter.trainable_params(spec),
                   "ours": update("trl", "causal"), "ours_full": update("trl-cpu", "full"),
                   "verl": verl_update_flops(spec, [P + C] * n), "6nt": six_n_t(spec, n * (P + C)),
                   "6nt_active": 6 * spec.params_active * n * (P + C)}
            # transformers' mask helper for linear attention reads the mask's values, which meta tensors
            # do not have: those models are measured on tiny CPU configs (tests/test_families.py) only
            if measure and "linear" not in {spec.mixer_of(i) for i in range(spec.num_layers)}:
                from suite.accounting.reference import measure_train_pass

                row["measured"] = measure_train_pass(spec, adapter, [P] * n, [C] * n, gradient_checkpointing=True)
            out.append(row)
    return out


def moe_sanity() -> tuple[float, int, int]:
    """(update FLOPs per trained token, 6 N_active, 6 N_total) of Qwen3-30B-A3B, full fine-tuning
    without checkpointing under the generic profile, for the step of the tables."""
    from suite.accounting import Adapter, GRPOSettings, phase_flops, work_from_lengths
    from suite.accounting.specs import spec_for

    spec = spec_for("Qwen3-30B-A3B")
    settings = GRPOSettings(group_size=K, prompts_per_step=B, max_completion_tokens=C, gradient_checkpointing=False)
    w = work_from_lengths([P] * B, [C] * (K * B), settings, "generic", policy=spec)
    per_token = phase_flops(w, spec, Adapter(kind="full"), settings, engine="generic")["update"] / w["count.update"]
    return per_token, 6 * spec.params_active, 6 * spec.params_total


def family_table(rs: list[dict]) -> str:
    """The Markdown table of the families."""
    from suite.accounting.modelspec import fmt_params

    def e(x):
        return "no formula" if x is None else f"{x:.4e}"

    lines = [
        f"Same step (B={B} x K={K}, P={P}, C={C}, mu=1, beta=0, gradient checkpointing on); update FLOPs; LoRA r=64 on "
        "the seven default names as peft adapts them (MoE: attention plus the expert stacks, gate_up at rank 128) or "
        "full fine-tuning (r=0). 6·N·T with all parameters and with active ones (MoE: top-k experts, no embedding "
        "lookup).",
        "",
        "| policy | model_type | LoRA r | trainable | ours | measured | verl formula | 6·N·T | 6·N_active·T "
        "| verl / ours | 6·N_active·T / ours |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rs:
        verl = "—" if r["verl"] is None else f"{r['verl'] / r['ours']:.2f}x"
        lines.append(f"| {r['model']} | {r['type']} | {r['rank']} | {fmt_params(r['trainable'])} | {r['ours']:.4e} | "
                     f"{e(r.get('measured')) if 'measured' in r else '—'} | {e(r['verl'])} | {r['6nt']:.4e} | "
                     f"{r['6nt_active']:.4e} | {verl} | {r['6nt_active'] / r['ours']:.2f}x |")
    exact = all(r["measured"] == r["ours_full"] for r in rs if "measured" in r)
    moe, active, total = moe_sanity()
    lines += ["", f"MoE sanity check: a full fine-tuning update of Qwen3-30B-A3B (no checkpointing, `generic`, this step) "
              f"costs {moe:.4e} FLOPs per trained token = {moe / active:.3f} x 6·N_active ({active / 6e9:.2f}B active "
              f"parameters; attention is the rest) and {moe / total:.3f} x 6·N_total ({total / 6e9:.2f}B)."]
    lines += ["", "ours = `trl` profile, causal attention. measured = FlopCounterMode over TRL's training pass on the "
              "meta device (experts through batched_mm, which it counts), compared with `trl-cpu` under `full`: equal to "
              "the FLOP in every measured row: " + ("yes." if exact else "NO (run the tests).") + " — : not measurable "
              "on the meta device (transformers' linear-attention mask helper reads mask values), measured exactly on "
              "tiny CPU configs by tests/test_families.py. verl 0.9.1 has no formula for OLMo 2 or Qwen3-Next (it logs "
              "MFU 0); its MoE formulas charge 6 FLOPs per active parameter whatever the adapter."]
    return "\n".join(lines)


def render_doc(text: str, generated: str, begin: str = BEGIN) -> str:
    """`text` with the block between the markers (`begin` ... END) replaced."""
    if begin not in text or END not in text.split(begin, 1)[-1]:
        raise SystemExit(f"{DOC}: markers missing")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{begin}\n{generated}\n{END}{tail}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare with the committed table; exit 1 if stale")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    new = render_doc(render_doc(DOC.read_text(), table(rows())), family_table(family_rows()), FAMILY_BEGIN)
    if args.check:
        if new != DOC.read_text():
            print(f"{DOC} is stale: run scripts/accounting_table.py", file=sys.stderr)
            return 1
        return 0
    tmp = DOC.with_suffix(".md.tmp")
    tmp.write_text(new)
    os.replace(tmp, DOC)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
