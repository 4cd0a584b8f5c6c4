"""The conformance matrix of docs/conformance.md: every engine counter (suite.accounting.counters)
on one catalog model per family and five GRPO settings, each cell its ratio to the exact count
(suite.accounting.referee), red beyond 5%; then the largest named terms, and verl#6903's four
defects each on a case built to show it. `race compare --conformance` writes the block between
the markers; tests/test_compare.py regenerates it and compares byte for byte."""

from __future__ import annotations

from dataclasses import replace

from .counters import BWD, COUNTERS, FWD, INSTALLED
from .specs import lookup, read_entry, spec_for
from .refcase import Case
from .referee import RED, Verdict, exact_passes, judge, sci

BEGIN, END = "<!-- BEGIN GENERATED: race compare --conformance -->", "<!-- END GENERATED -->"

FAMILIES = (("dense GQA", "Qwen2.5-7B-Instruct"), ("QK-norm, head_dim ≠ hidden/heads", "Qwen3-4B"),
            ("sliding window (5 local : 1 global)", "gemma-3-1b-it"), ("MoE, routed experts", "Qwen3-30B-A3B"),
            ("MoE with a shared expert (hybrid)", "Qwen3.5-397B-A17B"), ("MLA + MoE with a shared expert", "DeepSeek-V3-Base"),
            ("hybrid linear attention", "Qwen3-Next-80B-A3B-Instruct"))
"""(family, catalog model): the checkpoint config.json is what the engines read."""

SETTINGS = (
    ("LoRA r=64, padded", dict(lora_rank=64, layout="padded")),
    ("full FT, packed", dict(lora_rank=0, layout="packed")),
    ("LoRA, 8k packed rows", dict(lora_rank=64, layout="packed", pack_tokens=8192)),
    ("long context (P=2k, C=16k)", dict(lora_rank=0, layout="packed", prompts=4, prompt_tokens=2048,
                                        completion_tokens=16384)),
    ("K=16, μ=2, β=0.04", dict(lora_rank=64, layout="packed", prompts=4, group_size=16, mu=2, beta=0.04)),
)
"""(setting, Case fields); the rest is Case's defaults: B=16 x K=4, P=512, C=1024 ±50%."""


def case_for(model: str, label: str = "", **fields) -> Case:
    """A Case of a catalog model with its checkpoint config."""
    return Case(name=label or model, spec=spec_for(model), config=read_entry(lookup(model)), **fields)


def matrix_cases() -> list[tuple[str, str, Case]]:
    """(family, setting, case) for every cell row."""
    out = []
    for fam, model in FAMILIES:
        base = case_for(model)
        for label, fields in SETTINGS:
            out.append((fam, label, replace(base, name=f"{model} / {label}", **fields)))
    return out


def defect_cases() -> list[tuple[str, Case, str]]:
    """verl#6903's four defects: (defect, case built to show it, the part whose term names it)."""
    q3 = read_entry(lookup("Qwen3-4B"))
    vl = {"model_type": "qwen3_vl", "text_config": q3}
    spec4b = spec_for("Qwen3-4B")
    return [
        ("1. head_dim derived from hidden_size",
         Case(name="Qwen3-VL text tower with Qwen3-4B's dimensions (a qwen3_vl config, no images)",
              spec=replace(spec4b, name="Qwen3-VL-4B text tower"), config=vl, lora_rank=0, prompt_tokens=2048,
              completion_tokens=4096), "attention"),
        ("2. the LM head always counted",
         case_for("Qwen2.5-1.5B-Instruct", "Qwen2.5-1.5B-Instruct, LoRA r=64, long prompts, completions scored",
                  lora_rank=64, layout="padded", prompt_tokens=2048, completion_tokens=256), "LM head"),
        ("3. attention over packed rows, not sequences",
         case_for("Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct, full FT, short sequences packed into 16k rows",
                  lora_rank=0, layout="packed", pack_tokens=16384, prompt_tokens=256, completion_tokens=512),
         "attention"),
        ("4. a model type outside its table gives 0",
         case_for("OLMo-2-1124-7B-Instruct", "OLMo-2-1124-7B-Instruct (olmo2), full FT", lora_rank=0), "*"),
    ]


def defect_term(case: Case, part: str) -> tuple[Verdict, str, int]:
    """verl's verdict on a defect case, and the named term of `part` over the update's forward and
    backward: (verdict, why, FLOPs)."""
    v = judge(case, COUNTERS["verl"])
    terms = [t for t in v.terms if t.part == part and t.group in (FWD, BWD)]
    return v, terms[-1].why, sum(t.flops for t in terms)


def _cell(v: Verdict) -> str:
    if v.figure.error:
        return "raises 🔴"
    r = v.ratio
    if r is None:
        return "n/a"
    text = f"{r:.3f}" if r else "0"
    return f"**{text}** 🔴" if abs(r - 1) > RED else text


def _largest(v: Verdict, k: int = 2) -> str:
    metered = [t for t in v.terms if t.group in v.exact]
    if v.figure.error:
        return v.figure.notes.get("*", v.figure.error)
    top = sorted(metered, key=lambda t: -abs(t.flops))[:k]
    return "; ".join(f"{t.flops / v.exact_total:+.1%} {t.part}: {t.why}" for t in top) if top and v.exact_total else "—"


def document() -> str:
    """The generated block of docs/conformance.md."""
    names = list(COUNTERS)
    counters = [COUNTERS[n] for n in names]
    lines = ["Each cell: the engine's own figure over the exact count of the passes it meters "
             f"(**bold** 🔴: off by more than {RED:.0%}; n/a: it meters nothing here). Exact: the suite's pricing "
             "(`suite.accounting`, checked against torch's FlopCounterMode in tests/test_accounting.py and "
             "tests/test_families.py), causal attention, the `trl` profile for padded settings and `verl` for packed "
             "ones. Unless the setting says otherwise: B=16 prompts x K=4, P=512, C=1024 (completions spread ±50%), "
             "μ=1, β=0, no gradient checkpointing.", "",
             "| engine | counter | origin | source |", "|---|---|---|---|"]
    for c in counters:
        lines.append(f"| `{c.name}` | {c.title} | {c.origin} | {c.source} |")
    lines += ["", "| family | model | setting | " + " | ".join(f"`{n}`" for n in names) + " |",
              "|---|---|---|" + "---:|" * len(names)]
    why: list[str] = []
    for fam, label, case in matrix_cases():
        passes = exact_passes(case)
        verdicts = [judge(case, c, passes) for c in counters]
        lines.append(f"| {fam} | {case.spec.name} | {label} | " + " | ".join(_cell(v) for v in verdicts) + " |")
        if label == SETTINGS[0][0]:
            why += [f"| {case.spec.name} | `{v.counter.name}` | {_cell(v)} | {_largest(v)} |" for v in verdicts]
    lines += ["", f"Why, in the first setting ({SETTINGS[0][0]}): the two largest named terms of each counter, as a "
                  "share of the exact count of the passes it meters (`race compare` lists them all, per pass).", "",
              "| model | engine | ratio | largest terms |", "|---|---|---:|---|", *why]
    lines += ["", "verl#6903's four defects, each on a case built to show it (verl 0.9.1's installed FlopsCounter; "
                  "the term is the part of its difference that the defect makes):", "",
              "| defect | case | verl / exact | named term | term FLOPs | share of exact |", "|---|---|---:|---|---:|---:|"]
    for defect, case, part in defect_cases():
        v, why, flops = defect_term(case, part)
        lines.append(f"| {defect} | {case.name} | {_cell(v)} | {why} | {sci(flops)} | "
                     f"{flops / (v.exact[FWD] + v.exact[BWD]):+.1%} |")
    installed = sum(c.origin == INSTALLED for c in counters)
    lines += ["", f"{len(counters)} counters ({installed} run from their installed code), {len(FAMILIES)} families, "
                  f"{len(SETTINGS)} settings."]
    return "\n".join(lines)


__all__ = ["BEGIN", "END", "FAMILIES", "SETTINGS", "case_for", "matrix_cases", "defect_cases", "defect_term", "document"]
