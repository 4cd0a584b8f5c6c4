"""The referee: every engine's own FLOP counter (suite.accounting.counters) beside the exact
count of the suite's pricing, pass by pass, with the named terms that make up each difference
(`race compare`, docs/conformance.md).

The exact count is `pricing.coefficients` applied to `work_from_lengths` of the case's real
lengths under the engine profile of its layout (padded: `trl`, packed: `verl`), causal
attention; the rollout is split into the prompt prefill (the same batch generating one token)
and the decode steps (the rest). Each pass is split into parts by the work key its
coefficient multiplies: token positions (matmuls: projections, LoRA, experts), (query, key)
pairs and cached latents (attention), LM-head positions, linear-attention chunks (scan) and
MoE forward calls (peft's expert-LoRA folds).

A term is one part of one pass group: the engine's FLOPs minus the exact ones, named by the
convention of that engine that produces it. The terms of a counter sum to its difference from
the exact count over the passes it meters, plus what it does not meter at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .counters import BWD, COUNTERS, DECODE, FWD, GROUPS, OLD, PREFILL, REF, Counter, Figure
from .pricing import coefficients
from .refcase import Case
from .work import work_from_lengths

EXACT_PASSES = (PREFILL, DECODE, FWD, BWD, "checkpoint recompute", OLD, REF)
"""The exact count's passes, in order (the counters' GROUPS and the checkpoint recompute)."""
_PASS_NAMES = {"train forward": FWD, "train backward": BWD,
               "checkpoint recompute": "checkpoint recompute", "old-policy forward": OLD, "reference forward": REF}
RED = 0.05
"""A counter is marked red when it is off the exact count by more than this fraction."""
NOT_COUNTED = {PREFILL: "generation not counted (prompt prefill)", DECODE: "generation not counted (decode steps)",
               FWD: "the update's forward not metered", BWD: "the update's backward not metered",
               OLD: "old-policy forward not counted",
               REF: "reference forward not counted"}


def _part(key: str) -> str:
    stat = key.split(".")[2 if key.startswith("update.") else 1]
    if stat in ("tokens", "prefill_tokens", "decode_tokens"):
        return "matmuls"
    if stat.startswith("attn_") or stat == "decode_pairs":
        return "attention"
    if stat == "lm_head":
        return "LM head"
    if stat == "calls":
        return "expert-LoRA folds"
    return "linear-attention scan"      # rows, chunks


def _priced(coef: dict, work: dict) -> dict:
    out: dict = {}
    for key, c in coef.items():
        v = c * work.get(key, 0)
        if v:
            out[_part(key)] = out.get(_part(key), 0) + v
    return out


def exact_passes(case: Case) -> dict:
    """{pass: {part: FLOPs}} of the case, exact (EXACT_PASSES; passes that do not run are {})."""
    s, spec = case.settings, case.spec
    table = coefficients(spec, case.adapter, s, None, case.profile, "causal")
    full = work_from_lengths(case.prompt_lengths, case.completion_lengths, s, case.profile, policy=spec)
    first = work_from_lengths(case.prompt_lengths, [1] * case.n, s, case.profile, iterations=0, generation=True,
                              policy=spec)
    out: dict = {p: {} for p in EXACT_PASSES}
    for _, name, coef in table:
        if name == "generate forward":
            whole, pre = _priced(coef, full), _priced(coef, first)
            out[PREFILL] = pre
            out[DECODE] = {k: whole.get(k, 0) - pre.get(k, 0) for k in whole if whole.get(k, 0) != pre.get(k, 0)}
        elif name in _PASS_NAMES:
            out[_PASS_NAMES[name]] = _priced(coef, full)
    return out


def exact_groups(passes: dict) -> dict:
    """{pass: {part: FLOPs}} of the passes a counter may meter: all but the checkpoint recompute
    (MFU conventions leave it out; a term of the backward says so)."""
    return {g: dict(passes.get(g, {})) for g in GROUPS}


@dataclass(frozen=True)
class Term:
    """One named part of a counter's difference from the exact count."""

    group: str
    part: str
    flops: int
    """Engine minus exact (negative: the engine counts less)."""
    why: str


@dataclass(frozen=True)
class Verdict:
    """One counter on one case."""

    counter: Counter
    figure: Figure
    exact: dict
    """{group: exact FLOPs} of the groups the counter meters."""
    terms: list = field(default_factory=list)

    @property
    def engine_total(self) -> int | None:
        tot = [self.figure.total(g) for g in self.exact]
        return None if not tot or self.figure.error else sum(t or 0 for t in tot)

    @property
    def exact_total(self) -> int:
        return sum(self.exact.values())

    @property
    def ratio(self) -> float | None:
        """The counter's figure over the exact count of the passes it meters (None: it meters
        nothing here, or its code raised)."""
        e = self.engine_total
        return None if e is None or not self.exact_total else e / self.exact_total

    def ratio_of(self, group: str) -> float | None:
        e, x = self.figure.total(group), self.exact.get(group)
        return None if e is None or not x else e / x


def judge(case: Case, counter: Counter, passes: dict | None = None) -> Verdict:
    """Run `counter` on `case` and name every part of its difference from the exact count."""
    passes = passes if passes is not None else exact_passes(case)
    groups = exact_groups(passes)
    try:
        fig = counter.count(case)
    except ModuleNotFoundError as e:   # the light core: this counter's package is not installed
        msg = f"needs the compare extra: {e.name} is not installed"
        fig = Figure(error=msg, notes={"*": msg})
    metered = [g for g in GROUPS if g in fig.passes and (groups[g] or fig.total(g))]
    terms: list[Term] = []
    whole = fig.notes.get("*")
    for g in GROUPS:
        x = groups[g]
        if g not in fig.passes:
            if x and (not fig.passes or counter.name != "vllm" or g in (PREFILL, DECODE)):
                terms.append(Term(g, "*", -sum(x.values()), whole if whole and not fig.passes else NOT_COUNTED[g]))
            continue
        e = fig.passes[g]
        if whole:   # one reason for the whole figure (a model type it does not know)
            if sum(e.values()) != sum(x.values()):
                terms.append(Term(g, "*", sum(e.values()) - sum(x.values()), whole))
            continue
        if set(e) == {"matmuls"}:   # one lump (6·N·T, 6·N per input token): against the whole pass
            x = {"matmuls": sum(x.values())}
        for part in sorted(set(e) | set(x)):
            d = e.get(part, 0) - x.get(part, 0)
            if d:
                why = (fig.notes.get(f"{g}:{part}") or (fig.notes.get(f"{FWD}:{part}") if g in (OLD, REF) else None)
                       or fig.notes.get(part) or f"{part} not counted")
                if case.layout == "padded" and part in ("matmuls", "attention", "LM head") and \
                        counter.name not in ("megatron-lm", "hf-trainer"):
                    why += "; the padding the batch computes is not counted"
                terms.append(Term(g, part, d, why))
    rec = sum(passes.get("checkpoint recompute", {}).values())
    if rec and BWD in fig.passes:
        terms.append(Term(BWD, "*", -rec, "checkpoint recompute not counted (MFU counts model FLOPs)"))
    return Verdict(counter, fig, {g: sum(groups[g].values()) for g in metered}, terms)


def judge_all(case: Case, names: list[str] | None = None) -> tuple[dict, list[Verdict]]:
    """The exact passes and every counter's verdict (names: a subset of COUNTERS)."""
    passes = exact_passes(case)
    chosen = [COUNTERS[n] for n in names] if names else list(COUNTERS.values())
    return passes, [judge(case, c, passes) for c in chosen]


# ---- text ------------------------------------------------------------------------------------

def sci(x: float | None) -> str:
    return "—" if x is None else f"{x:.3e}" if x else "0"


def _ratio(r: float | None) -> str:
    return "—" if r is None else f"{r:.3f}x"


def render(case: Case, passes: dict, verdicts: list[Verdict]) -> str:
    """`race compare`'s table: the exact count per pass, then each counter's figure, ratio and terms."""
    lines = [case.describe(), "", "exact FLOPs per pass (the suite's pricing, causal attention):"]
    for p in EXACT_PASSES:
        tot = sum(passes[p].values())
        lines.append(f"  {p:<22} {sci(tot) if tot else '(does not run)'}")
    lines.append(f"  {'total':<22} {sci(sum(sum(v.values()) for v in passes.values()))}")
    for v in verdicts:
        c = v.counter
        lines += ["", f"{c.title} [{v.figure.ran or c.origin}] — {c.source}"]
        if v.figure.error:
            lines.append(f"  its code raises {v.figure.error}")
        for g in v.exact:
            lines.append(f"  {g:<22} engine {sci(v.figure.total(g)):>10}   exact {sci(v.exact[g]):>10}   "
                         f"{_ratio(v.ratio_of(g))}")
        if v.ratio is not None:
            lines.append(f"  {'metered passes':<22} engine {sci(v.engine_total):>10}   exact {sci(v.exact_total):>10}   "
                         f"{_ratio(v.ratio)}{'  (off by more than 5%)' if abs(v.ratio - 1) > RED else ''}")
        for t in sorted(v.terms, key=lambda t: -abs(t.flops)):
            lines.append(f"    {t.group:<20} {t.part:<22} {t.flops:+.3e}  {t.why}")
    return "\n".join(lines)


def to_json(case: Case, passes: dict, verdicts: list[Verdict]) -> dict:
    """`race compare --format json`."""
    return {"case": case.describe(), "profile": case.profile,
            "exact": {p: {"flops": sum(v.values()), "parts": v} for p, v in passes.items()},
            "engines": [{"name": v.counter.name, "title": v.counter.title, "origin": v.figure.ran or v.counter.origin,
                         "source": v.counter.source, "error": v.figure.error or None,
                         "passes": {g: {"engine": v.figure.total(g), "exact": v.exact[g], "ratio": v.ratio_of(g)}
                                    for g in v.exact},
                         "ratio": v.ratio, "terms": [{"group": t.group, "part": t.part, "flops": t.flops, "why": t.why}
                                                     for t in v.terms]} for v in verdicts]}


__all__ = ["EXACT_PASSES", "RED", "Term", "Verdict", "exact_passes", "exact_groups", "judge", "judge_all", "render",
           "to_json"]
