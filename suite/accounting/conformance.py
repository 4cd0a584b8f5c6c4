"""The conformance matrix of docs/conformance.md: every engine counter (suite.accounting.counters)
on one catalog model per family and five GRPO settings, each cell its ratio to the exact count
(suite.accounting.referee), red beyond 5%; then the largest named terms, and verl#6903's four
defects each on a case built to show it (the fourth, the vision tower's, on a Qwen3-VL vision
tower priced here exactly and measured with torch's FlopCounterMode in tests/test_compare.py).
`race compare --conformance` writes the block between the markers; tests/test_compare.py
regenerates it and compares byte for byte."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .counters import BWD, COUNTERS, FWD, INSTALLED, _hf_config, verl_flops_module
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
    """verl#6903's text defects and its table's blind spot: (defect, case built to show it, the part
    whose term names it). The fourth defect, the vision tower's, is `vision_defect`."""
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
        ("5. a model type outside its table gives 0",
         case_for("OLMo-2-1124-7B-Instruct", "OLMo-2-1124-7B-Instruct (olmo2), full FT", lora_rank=0), "*"),
    ]


# ---- verl#6903's fourth defect: the vision tower ----------------------------------------------

QWEN3_VL_VISION = {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "in_channels": 3,
                   "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 3584,
                   "num_position_embeddings": 2304, "deepstack_visual_indexes": [8, 16, 24]}
"""transformers' Qwen3VLVisionConfig defaults (tests/test_compare.py checks them against the installed class)."""
VISION_GRIDS = ((1, 28, 28),) * 4 + ((1, 32, 48),) * 4
"""grid_thw of the vision case: four 448x448 images and four 512x768 ones at patch 16."""
VISION_DEFECT = "4. vision layers over-counted"
VISION_CASE = ("Qwen3-VL vision tower (transformers' default config: 27 blocks of 1152, 3 deepstack mergers), "
               "trained, 4 images 448x448 + 4 at 512x768")


@dataclass(frozen=True)
class VisionTerm:
    """One named part of verl's difference from the exact count of the vision tower."""

    part: str
    flops: int
    """verl minus exact."""
    why: str


@dataclass(frozen=True)
class VisionVerdict:
    """verl's count of one training step of the vision tower (forward + backward) beside the exact one."""

    verl: int
    exact: dict
    """{part: FLOPs}"""
    terms: tuple

    @property
    def exact_total(self) -> int:
        return sum(self.exact.values())

    @property
    def ratio(self) -> float:
        return self.verl / self.exact_total


def _vision_dims(cfg: dict, grids) -> tuple[int, int, dict]:
    """(patch tokens, Σ over frames of frame², {part: weights one token passes}) of a Qwen3-VL
    vision tower over images given as grid_thw; mergers' weights are per merged token."""
    d, m2 = cfg["hidden_size"], cfg["spatial_merge_size"] ** 2
    if any(h * w % m2 for _, h, w in grids):
        raise ValueError(f"every frame's h·w must be a multiple of spatial_merge_size² = {m2}")
    tokens = sum(t * h * w for t, h, w in grids)
    square = sum(t * (h * w) ** 2 for t, h, w in grids)   # attention runs within each frame
    weights = {"patch embedding": d * cfg["in_channels"] * cfg["temporal_patch_size"] * cfg["patch_size"] ** 2,
               "block matmuls": (4 * d * d + 2 * d * cfg["intermediate_size"]) * cfg["depth"],
               "mergers": (m2 * d + cfg["out_hidden_size"]) * m2 * d * (1 + len(cfg["deepstack_visual_indexes"]))}
    return tokens, square, weights


def vision_exact(cfg: dict, grids) -> dict:
    """{part: FLOPs} of one training step (forward + backward) of transformers' Qwen3VLVisionModel,
    what torch's FlopCounterMode counts: 2 per weight and token forward, 4 backward, except the
    patch embedding, whose input (the pixels) takes no gradient (2 backward); the mergers run on
    the merged tokens (tokens / spatial_merge_size²); full attention within each frame, 4·d·s²
    per block forward, twice that backward."""
    tokens, square, w = _vision_dims(cfg, grids)
    merged = tokens // cfg["spatial_merge_size"] ** 2
    return {"patch embedding": 4 * tokens * w["patch embedding"], "block matmuls": 6 * tokens * w["block matmuls"],
            "attention": 12 * cfg["hidden_size"] * square * cfg["depth"], "mergers": 6 * merged * w["mergers"]}


def verl_vision_parts(cfg: dict, grids) -> dict:
    """verl 0.9.1's `_estimate_qwen3_vit_flop`, read part by part (verl/utils/flops_counter.py):
    6 per weight and patch token for every weight, the mergers' included; 12·s²·d per block."""
    tokens, square, w = _vision_dims(cfg, grids)
    return {"patch embedding": 6 * tokens * w["patch embedding"], "block matmuls": 6 * tokens * w["block matmuls"],
            "attention": 12 * cfg["hidden_size"] * square * cfg["depth"], "mergers": 6 * tokens * w["mergers"]}


def verl_vision_installed(cfg: dict, grids) -> int:
    """The installed verl's own vision count: `_estimate_qwen3_vit_flop(images_seqlens, config.vision_config)`
    as `_estimate_qwen3_vl_flops` calls it, with images_seqlens as verl's agent loop builds them
    (h·w repeated t times) and the config transformers builds for a qwen3_vl checkpoint."""
    import json

    hf = _hf_config(json.dumps({"model_type": "qwen3_vl", "vision_config": cfg}, sort_keys=True))
    seqlens = [h * w for t, h, w in grids for _ in range(t)]
    return verl_flops_module()._estimate_qwen3_vit_flop(seqlens, hf.vision_config)


_VISION_WHY = {"mergers": "the patch merger and {n} deepstack mergers charged per patch token, not per merged token "
                          "(x spatial_merge_size² = {m2})",
               "patch embedding": "6 per weight and patch token: the pixels' input gradient counted (they take none)"}


def vision_defect(cfg: dict = QWEN3_VL_VISION, grids=VISION_GRIDS) -> VisionVerdict:
    """verl's vision count (its installed code) against the exact one, its difference split into named terms."""
    exact, mine = vision_exact(cfg, grids), verl_vision_parts(cfg, grids)
    verl = verl_vision_installed(cfg, grids)
    fmt = {"n": len(cfg["deepstack_visual_indexes"]), "m2": cfg["spatial_merge_size"] ** 2}
    terms = [VisionTerm(p, mine[p] - exact[p], _VISION_WHY.get(p, p).format(**fmt))
             for p in exact if mine[p] != exact[p]]
    if verl != sum(mine.values()):
        terms.append(VisionTerm("unexplained", verl - sum(mine.values()), "verl's installed code differs from its "
                                                                          "reading here"))
    return VisionVerdict(verl, exact, tuple(terms))


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
    lines += ["", "verl#6903's four defects, each on a case built to show it, and the blind spot of its table (verl "
                  "0.9.1's installed FlopsCounter; the term is the part of its difference that the defect makes; "
                  "exact: the update's forward and backward):", "",
              "| defect | case | verl / exact | named term | term FLOPs | share of exact |", "|---|---|---:|---|---:|---:|"]
    rows = []
    for defect, case, part in defect_cases():
        v, why, flops = defect_term(case, part)
        rows.append(f"| {defect} | {case.name} | {_cell(v)} | {why} | {sci(flops)} | "
                    f"{flops / (v.exact[FWD] + v.exact[BWD]):+.1%} |")
    vis = vision_defect() if verl_flops_module() is not None else None
    if vis is not None:
        t = next(t for t in vis.terms if t.part == "mergers")
        r = f"{vis.ratio:.3f}"
        rows.insert(3, f"| {VISION_DEFECT} | {VISION_CASE} | {f'**{r}** 🔴' if abs(vis.ratio - 1) > RED else r} | "
                       f"{t.why} | {sci(t.flops)} | {t.flops / vis.exact_total:+.1%} |")
    lines += rows
    if vis is not None:
        lines += ["", f"The vision row's whole difference ({sci(vis.verl - vis.exact_total)}, exact "
                      f"{sci(vis.exact_total)}: transformers' Qwen3VLVisionModel as torch's FlopCounterMode counts it, "
                      "tests/test_compare.py): " + "; ".join(f"{sci(t.flops)} {t.part}: {t.why}" for t in vis.terms)
                  + "; the blocks' matmuls and attention (12·s²·d per block, full within each image) agree exactly."]
    installed = sum(c.origin == INSTALLED for c in counters)
    lines += ["", f"{len(counters)} counters ({installed} run from their installed code), {len(FAMILIES)} families, "
                  f"{len(SETTINGS)} settings."]
    return "\n".join(lines)


__all__ = ["BEGIN", "END", "FAMILIES", "SETTINGS", "QWEN3_VL_VISION", "VISION_GRIDS", "VisionTerm", "VisionVerdict",
           "case_for", "matrix_cases", "defect_cases", "defect_term", "vision_exact", "verl_vision_parts",
           "verl_vision_installed", "vision_defect", "document"]
