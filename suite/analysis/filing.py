"""The filing view: a model's cumulative training compute from its reports -- the base model's
pretraining plus every post-training stage (rollouts and reward models included) -- with the
thresholds it crosses, and the figures of the compute, time and energy section of the EU model
documentation form, each traceable to a report field.

Thresholds (all indicative, not legal advice):
- 10^23 FLOP: the European Commission's indicative criterion for a general-purpose AI model
  (Guidelines on the scope of the obligations for general-purpose AI models, C(2025) 5045,
  section 2.1);
- 10^25 FLOP: the AI Act's presumption of high-impact capabilities, a general-purpose AI model
  with systemic risk (Regulation (EU) 2024/1689, Article 51(2));
- one third of the original model's training compute: the modification indicator (C(2025)
  5045, points 59-61; suite.accounting.pretraining);
- 10^26 operations: California SB 53's frontier model, counting "any subsequent fine-tuning,
  reinforcement learning, or other material modifications" (Business and Professions Code
  section 22757.11, as added by SB 53, 2025).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import RaceError

THRESHOLDS = (
    ("EU general-purpose AI model (indicative criterion)", 10 ** 23,
     "European Commission, C(2025) 5045, section 2.1: training compute above 10^23 FLOP"),
    ("EU systemic-risk presumption", 10 ** 25,
     "Regulation (EU) 2024/1689 (AI Act), Article 51(2): cumulative training compute above 10^25 FLOP"),
    ("California SB 53 frontier model", 10 ** 26,
     "SB 53 (2025), Business and Professions Code section 22757.11: above 10^26 integer or floating-point "
     "operations, subsequent fine-tuning, reinforcement learning and other material modifications included"),
)
METHOD = ("Counted by the RACE suite's accounting from the model architectures and token counts (not measured "
          "with a profiler): every matrix multiply and attention score/value product of every pass the training "
          "engine runs, at 1 multiply-add = 2 FLOPs -- rollout generation (prefill and one decode step per "
          "generated token over its KV cache), the policy update (forward, backward and activation recompute; "
          "the old-policy and reference forwards where they run), and reward-model forwards; rule rewards cost 0. "
          "Norms, activations, softmax and optimizer arithmetic are not counted. The base model's pretraining "
          "compute is its developer's published figure, else 6 x N x D (N parameters, D pretraining tokens).")


@dataclass(frozen=True)
class Figure:
    """A number of the filing with the report field(s) it comes from."""

    value: float | None
    fields: tuple[str, ...]
    note: str = ""


@dataclass(frozen=True)
class Filing:
    """The compute, time and energy figures of one model's post-training, from its reports."""

    model: str
    base: str
    post_training: Figure
    phases: dict
    stages: list
    pretraining: Figure
    pretraining_method: str
    pretraining_sources: tuple[str, ...]
    cumulative: Figure
    share: Figure
    one_third: Figure
    thresholds: list
    flops_range: Figure | None
    accelerators: str | None
    accelerator_hours: Figure
    wall_days: Figure
    energy: Figure
    energy_reason: str
    provenance: list = field(default_factory=list)


def _sum(reports, key: str) -> int:
    return sum(int(r.flops.get(key, 0)) for r in reports)


def filing(reports: list, *, base_flops: float | None = None, base_source: str | None = None) -> Filing:
    """The filing of one model's post-training from its reports (one report, or one per stage),
    all of the same base model. `base_flops` declares the base model's pretraining compute where
    the reports do not know it (with `base_source`)."""
    if not reports:
        raise RaceError("no reports", "race report --format model-doc REPORT...")
    bases = {r.model for r in reports}
    if len(bases) > 1:
        raise RaceError(f"the reports post-train different base models: {', '.join(sorted(bases))}",
                        "a filing adds up the stages of one model; give its reports only")
    base = reports[0].model
    many = len(reports) > 1
    at = (lambda f: f"{f} (summed over the reports)") if many else (lambda f: f)
    post = _sum(reports, "total")
    phases = {ph: Figure(_sum(reports, ph), (at(f"totals.flops.{ph}"),)) for ph in ("rollout", "update", "reward")}
    stages = []
    for r in reports:
        st = r.doc.get("stages") if isinstance(r.doc.get("stages"), list) else None
        for i, s in enumerate(st or []):
            stages.append((f"{r.run_id} {s['name']}" if many else s["name"], Figure(s["flops"]["total"], (f"stages[{i}].flops.total",))))
        if many and not st:
            stages.append((r.run_id, Figure(r.total_flops, (f"{r.name}: totals.flops.total",))))
    pre = reports[0].doc.get("pretraining") or {}
    if base_flops is not None:
        if not base_source:
            raise RaceError("--base-flops needs --base-source", "say where the base model's pretraining compute is stated")
        pretraining = Figure(float(base_flops), ("--base-flops",), f"declared: {base_source}")
        method, sources = "declared", (base_source,)
    elif pre.get("flops"):
        pretraining = Figure(float(pre["flops"]), ("pretraining.flops",), pre.get("note", ""))
        method, sources = pre.get("method", "?"), tuple(pre.get("sources") or ())
    else:
        pretraining = Figure(None, ("pretraining.flops",), "not in the suite's pretraining facts")
        method, sources = "unknown", ()
    cum = Figure(None if pretraining.value is None else pretraining.value + post,
                 (*pretraining.fields, at("totals.flops.total")))
    share = Figure(None if pretraining.value is None else post / pretraining.value,
                   ("pretraining.ratio",) if pretraining.fields == ("pretraining.flops",) and not many else
                   (at("totals.flops.total"), *pretraining.fields))
    third = (pretraining.value if pretraining.value is not None else 1e23) / 3
    one_third = Figure(third, ("pretraining.eu.threshold_flops",) if pretraining.fields == ("pretraining.flops",)
                       else (*pretraining.fields,), "one third of the base model's training compute" if pretraining.value
                       else "one third of 10^23 FLOP (the base model's compute unknown)")
    total = cum.value if cum.value is not None else float(post)
    thresholds = [{"name": "EU modification indicator (one third of the original compute)", "threshold": third,
                   "compared": "post-training", "value": float(post), "crossed": post > third,
                   "reference": "European Commission, C(2025) 5045, points 59-61"}]
    for name, t, ref in THRESHOLDS:
        thresholds.append({"name": name, "threshold": float(t), "compared": "cumulative" if cum.value is not None
                           else "post-training (base unknown)", "value": total, "crossed": total > t, "reference": ref,
                           "by_post_training": post > t})
    rng = None
    if not many and isinstance(reports[0].doc.get("sources"), dict):
        r = reports[0].doc["sources"].get("range", {}).get("flops")
        if r:
            rng = Figure(r["low"], ("sources.range.flops.low", "sources.range.flops.high"), f"{two_sig(r['low'])} to {two_sig(r['high'])}")
    hws = [r.hardware for r in reports]
    hours = sum(h.accelerator_seconds / 3600.0 for h in hws if h) if all(hws) else None
    acc = "; ".join(sorted({f"{h.count} x {h.accelerator}" for h in hws if h})) or None
    wall = sum(h.accelerator_seconds / h.count / 86400.0 for h in hws if h) if all(hws) else None
    energy, reason = _energy(reports)
    return Filing(model=" + ".join(r.label for r in reports), base=base, post_training=Figure(post, (at("totals.flops.total"),)),
                  phases=phases, stages=stages, pretraining=pretraining, pretraining_method=method,
                  pretraining_sources=sources, cumulative=cum, share=share, one_third=one_third, thresholds=thresholds,
                  flops_range=rng, accelerators=acc,
                  accelerator_hours=Figure(hours, (at("hardware.accelerator_hours"),) if hours is not None else ("hardware",)),
                  wall_days=Figure(wall, (at("hardware.accelerator_hours"), at("hardware.count")) if wall is not None
                                   else ("hardware",)),
                  energy=energy, energy_reason=reason,
                  provenance=sorted({r.provenance_method or "unknown" for r in reports}))


def _energy(reports) -> tuple[Figure, str]:
    """Energy in joules over the reports, or None and why it is not available."""
    total, fields = 0.0, []
    for r in reports:
        e = (r.doc.get("cost") or {}).get("energy") if isinstance(r.doc.get("cost"), dict) else None
        if not e or not e.get("measured"):
            if e and e.get("reason"):
                return Figure(None, ("cost.energy.reason",)), e["reason"]
            if r.provenance_method == "estimated":
                return Figure(None, ("provenance.method",)), ("the report is an estimate from published numbers; "
                                                                "the run's publication states no energy")
            return Figure(None, ("cost.energy",)), "no energy counter was read during the run (the report has no cost.energy)"
        total += sum(e["joules"].values()) if "joules" in e else e["total_joules"]
        fields.append("cost.energy.joules" if "joules" in e else "cost.energy.total_joules")
    return Figure(total, tuple(dict.fromkeys(fields))), ""


def two_sig(x: float) -> str:
    """x to 2 significant figures in scientific notation: 5.2 x 10^20."""
    if x == 0:
        return "0"
    m, e = f"{x:.1e}".split("e")
    return f"{m} x 10^{int(e)}"


__all__ = ["THRESHOLDS", "METHOD", "Figure", "Filing", "filing", "two_sig"]
