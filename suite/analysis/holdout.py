"""RACE validated on a held-out budget, as the source paper validates it: the pilot grid's
diagnosis (suite.analysis.race) is checked against runs of the same conditions at a larger budget.

Per condition (model, reward system, evaluation) the pilot budget's allocations go through
`race.diagnose_points`: a regime (high-update / low-update / feedback-heavy, with its update
side) and a recommended allocation (`race.pick`). The validation budget's allocations of the
same condition are the truth: their best allocation's regime and side (`race.oracle`, measured
from the pilot grid's centre), and the regret of RACE's pick — best validation score minus the
validation score of the allocation RACE recommended. The global native-reward baseline (the one
allocation whose pilot runs have the best native reward pooled over every condition, one recipe
for everything) gets the same regret.

Where the pilot runs were scored along the way (report `curve`), a third predictor stands beside
them: each pilot allocation's compute-performance curve (suite.analysis.curves, ScaleRL's form)
extrapolated to the training FLOPs its validation runs spent; the allocation with the highest
predicted score is its pick. An allocation whose curve is refused (too short, too flat) is
predicted at its pilot score. For all three the *pick hit rate* is the share of conditions in
which the pick scores as the validation budget's best allocation (a tie counts), with the regret
beside it.

Where asked (`surface=True`, `race curves --surface`), a fourth: one surface over update and
rollout FLOPs fitted to every pilot allocation's points at once (suite.analysis.surface),
evaluated at each validation allocation's mean update and rollout FLOPs; a refused surface
predicts every allocation at its pilot score. findings.json leaves it out (its bytes stay).

Uncertainty: the whole replay — diagnosis, truth, picks, baseline — is repeated on every
bootstrap replicate of the scores (suite.analysis.stats: problems and seeds resampled, shared with every
other statistic of the study), so the hit rate and the regrets get percentile intervals.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from .frontier import Allocation, Condition, best
from .race import FEEDBACK_THRESHOLD, MIN_POINTS, Baseline, diagnose_points, oracle, pick
from .stats import Estimate, Resampler, estimate, rounded

#: Metrics RACE is validated on: the evaluation targets of the paper (the native reward is the
#: baseline's criterion, not a target).
METRICS = ("pass@1", "process_judge")
#: Hit rate of a diagnostic that calls the update side at random.
CHANCE = 0.5


def _allocation(x, b: int | None) -> Allocation:
    """suite.analysis.frontier's Allocation of a point (suite.analysis.findings.Point: label, lora_rank, p,
    reward_share, total_flops, n, score, replicates) with its observed score (b None) or
    replicate b's."""
    s = x.score if b is None else float(x.replicates[b])
    return Allocation(label=x.label, lora_rank=x.lora_rank, p=x.p, score=s, score_sd=0.0,
                      reward_share=x.reward_share, total_flops=x.total_flops, n=x.n)


@dataclass(frozen=True)
class Replay:
    """One condition replayed once (observed scores or one replicate)."""

    regime: str
    """Regime RACE names from the pilot allocations."""
    side: str
    """Its update side (high / low)."""
    truth: str
    """Regime of the best validation allocation."""
    truth_side: str
    """Its update side."""
    chosen: str
    """Label RACE recommends validating."""
    best: str
    """Best validation allocation."""
    baseline: str | None
    """Label the global native-reward baseline picks (None without native rewards)."""
    regret: float
    """Best validation score minus that of RACE's pick."""
    baseline_regret: float | None
    """The same for the baseline's pick."""
    fallback: str | None
    """Why RACE fell back to the best pilot cell, if it did."""
    curve_pick: str | None = None
    """Label the pilot curves predict best at the validation compute (None without curves)."""
    curve_predicted: float | None = None
    """Its predicted validation score."""
    curve_regret: float | None = None
    """Best validation score minus that of the curves' pick."""
    surface_pick: str | None = None
    """Label the pilot surface predicts best (None without a surface)."""
    surface_predicted: float | None = None
    """Its predicted validation score."""
    surface_regret: float | None = None
    """Best validation score minus that of the surface's pick."""

    @property
    def hit(self) -> bool:
        """Same regime and update side as the validation budget's best allocation."""
        return (self.regime, self.side) == (self.truth, self.truth_side)


def _replay(pilot: Sequence, val: Sequence, b: int | None, base: Baseline | None,
            threshold: float, predicted: Mapping[str, tuple[float, np.ndarray]] | None = None,
            surfaced: Mapping[str, tuple[float, np.ndarray]] | None = None) -> Replay:
    d = diagnose_points([_allocation(x, b) for x in pilot], feedback_threshold=threshold)
    judged = [_allocation(x, b) for x in val]
    truth, side = oracle(judged, d.centre, threshold)
    top, chosen = best(judged), pick(d, judged)
    base_pick = base.pick(judged) if base is not None else None
    curve = {}
    for prefix, pred in (("curve", predicted), ("surface", surfaced)):
        if pred is not None:        # a predictor's pick: best predicted score, ties as `best` breaks them
            guess = best([replace(a, score=pred[a.label][0] if b is None else float(pred[a.label][1][b]))
                          for a in judged])
            got = next(a for a in judged if a.label == guess.label)
            curve.update({f"{prefix}_pick": guess.label, f"{prefix}_predicted": guess.score,
                          f"{prefix}_regret": top.score - got.score})
    return Replay(regime=d.regime, side=d.update_side, truth=truth, truth_side=side, chosen=chosen.label,
                  best=top.label, baseline=None if base_pick is None else base_pick.label,
                  regret=top.score - chosen.score,
                  baseline_regret=None if base_pick is None else top.score - base_pick.score, fallback=d.fallback,
                  **curve)


def _predictions(pilot: Sequence, val: Sequence, series: Sequence | None, rs: Resampler | None, replicates: int,
                 level: float) -> tuple[dict[str, tuple[float, np.ndarray]], list[str], list[str]] | None:
    """label -> (predicted validation score, its (B,) replicates) from the pilot allocations'
    curves extrapolated to each validation allocation's mean training FLOPs; with the labels
    fitted and those predicted at their pilot score (refused curves). None when some pilot
    allocation has no curve."""
    from .curves import fit_series

    by = {s.label: s for s in series or ()}
    if rs is None or any(x.label not in by for x in pilot):
        return None
    out, fitted, fallbacks = {}, [], []
    compute = {x.label: x.total_flops for x in val}
    for x in pilot:
        c = fit_series(by[x.label], rs, replicates, level)
        floor = np.asarray(x.replicates[:replicates], dtype=np.float64)
        if c.fitted:
            reps = c.replicate_values(compute[x.label])
            out[x.label] = (float(c.params.at(compute[x.label])), np.where(np.isfinite(reps), reps, floor))
            fitted.append(x.label)
        else:
            out[x.label] = (x.score, floor)
            fallbacks.append(x.label)
    return out, fitted, fallbacks


def _baseline(native: Mapping[str, Sequence], b: int | None) -> Baseline | None:
    """The global native-reward baseline from the pilot runs' native rewards (observed or
    replicate b): label -> its points over every model, reward system and target, pooled."""
    if not native:
        return None
    pooled = {label: (float(np.mean([x.score if b is None else x.replicates[b] for x in pts])),
                      float(np.mean([x.p for x in pts])), sum(x.n for x in pts))
              for label, pts in native.items()}
    label = max(pooled, key=lambda k: (pooled[k][0], k))
    reward, p, runs = pooled[label]
    return Baseline(label=label, p=p, native_reward=reward, runs=runs)


def validate(points: Mapping[Condition, Sequence], pilot: int, validation: int, *,
             replicates: int, level: float = 0.95, threshold: float = FEEDBACK_THRESHOLD,
             metrics: Sequence[str] = METRICS, curves: Mapping[Condition, Sequence] | None = None,
             resampler: Resampler | None = None, surface: bool = False) -> dict:
    """RACE's held-out validation over every condition (points: suite.analysis.findings.Point per
    allocation) that has at least MIN_POINTS common
    allocations at the `pilot` and the `validation` budget (band upper ends). Uses the first
    `replicates` bootstrap replicates of each point. Returns a JSON-ready dict: settings, one
    trial per condition (observed replay, regret interval, replicate hit share) and the summary
    (hit rate, mean regret, the baseline's mean regret and the difference, each with interval).
    `curves` (suite.analysis.curves.series of the runs) and `resampler` (the findings' plan) add
    the curve predictor to every trial whose pilot allocations all have curves; `surface` the
    pilot surface's (suite.analysis.surface) too, under `surface` keys that appear only then."""
    pairs = []
    native: dict[str, list] = defaultdict(list)
    for cond, pts in points.items():
        if validation <= pilot:   # one budget only: nothing is held out
            break
        if cond.band_high == pilot and cond.metric == "native_reward":
            for x in pts:
                native[x.label].append(x)
        if cond.band_high != pilot or cond.metric not in metrics:
            continue
        twin = next((c for c in points if c.band_high == validation and
                     (c.model, c.params_total, c.reward_system, c.target, c.metric, c.judge) ==
                     (cond.model, cond.params_total, cond.reward_system, cond.target, cond.metric, cond.judge)), None)
        if twin is None:
            continue
        common = sorted({x.label for x in pts} & {x.label for x in points[twin]})
        if len(common) < MIN_POINTS:
            continue
        pairs.append((cond, [x for x in pts if x.label in common], [x for x in points[twin] if x.label in common]))
    settings = {"pilot_budget": pilot, "validation_budget": validation, "metrics": list(metrics),
                "feedback_threshold": threshold, "replicates": replicates, "level": level,
                "chance_hit_rate": CHANCE, "baseline": "the pilot runs' best allocation by native reward, pooled "
                                                       "over every model, reward system and target"}
    if not pairs:
        return {"settings": settings, "trials": [], "summary": None}
    preds = [_predictions(p, v, (curves or {}).get(cond), resampler, replicates, level) for cond, p, v in pairs]
    if any(x is None for x in preds):
        preds = [None] * len(pairs)         # the predictors are compared on the same conditions
    surf = [None] * len(pairs)
    if surface:
        from .surface import predictions

        surf = [predictions((curves or {}).get(cond), p, v, resampler, replicates, cond) for cond, p, v in pairs]
        if any(x is None for x in surf):
            surf = [None] * len(pairs)
    observed = [_replay(p, v, None, _baseline(native, None), threshold, pr and pr[0], sf and sf[0])
                for (_, p, v), pr, sf in zip(pairs, preds, surf)]
    reps = [[_replay(p, v, b, base, threshold, pr and pr[0], sf and sf[0])
             for (_, p, v), pr, sf in zip(pairs, preds, surf)]
            for b in range(replicates) for base in [_baseline(native, b)]]
    trials = []
    for i, (cond, p, v) in enumerate(pairs):
        o = observed[i]
        regret = estimate(o.regret, np.array([r[i].regret for r in reps]), level)
        trial = {"condition": cond.to_dict(), "name": cond.name(), "allocations": [x.label for x in p],
                 "regime": o.regime, "side": o.side, "truth": o.truth, "truth_side": o.truth_side, "hit": o.hit,
                 "hit_share": rounded(np.mean([r[i].hit for r in reps])), "fallback": o.fallback,
                 "chosen": o.chosen, "best": o.best, "regret": regret.to_dict(), "baseline": o.baseline,
                 "baseline_regret": None}
        if o.baseline_regret is not None:
            trial["baseline_regret"] = estimate(o.baseline_regret, np.array([r[i].baseline_regret for r in reps]),
                                                level).to_dict()
        trial["curves"] = None
        if preds[i] is not None:
            trial["curves"] = {
                "chosen": o.curve_pick, "hit": _best_picked(o.curve_regret),
                "hit_share": rounded(np.mean([_best_picked(r[i].curve_regret) for r in reps])),
                "predicted": estimate(o.curve_predicted, np.array([r[i].curve_predicted for r in reps]), level).to_dict(),
                "regret": estimate(o.curve_regret, np.array([r[i].curve_regret for r in reps]), level).to_dict(),
                "fitted": preds[i][1], "at_pilot_score": preds[i][2]}
        if surface:
            trial["surface"] = None if surf[i] is None else {
                "chosen": o.surface_pick, "hit": _best_picked(o.surface_regret),
                "hit_share": rounded(np.mean([_best_picked(r[i].surface_regret) for r in reps])),
                "predicted": estimate(o.surface_predicted, np.array([r[i].surface_predicted for r in reps]),
                                      level).to_dict(),
                "regret": estimate(o.surface_regret, np.array([r[i].surface_regret for r in reps]), level).to_dict(),
                "fitted": surf[i][1], "at_pilot_score": surf[i][2], "refusal": surf[i][3]}
        trials.append(trial)
    runs = len({r for _, p, v in pairs for x in (*p, *v) for r in x.runs})
    return {"settings": settings, "trials": trials,
            "summary": {"runs": runs, **_summary(observed, reps, level, surface)}}


def _best_picked(regret: float) -> bool:
    """The pick scores as the validation budget's best allocation (a tie with it counts)."""
    return regret <= 1e-9


def _summary(observed: list[Replay], reps: list[list[Replay]], level: float, surface: bool = False) -> dict:
    def stat(fn) -> Estimate:
        return estimate(fn(observed), np.array([fn(r) for r in reps]), level)

    hit = stat(lambda rs: float(np.mean([r.hit for r in rs])))
    regret = stat(lambda rs: float(np.mean([r.regret for r in rs])))
    out = {"trials": len(observed), "hits": sum(r.hit for r in observed), "hit_rate": hit.to_dict(),
           "mean_regret": regret.to_dict(), "baseline_mean_regret": None, "race_minus_baseline": None,
           "fallbacks": sum(r.fallback is not None for r in observed)}
    if all(r.baseline_regret is not None for r in observed):
        out["baseline_mean_regret"] = stat(lambda rs: float(np.mean([r.baseline_regret for r in rs]))).to_dict()
        out["race_minus_baseline"] = stat(
            lambda rs: float(np.mean([r.regret - r.baseline_regret for r in rs]))).to_dict()

    def predictor(regret) -> dict:
        return {"pick_hit_rate": stat(lambda rs: float(np.mean([_best_picked(regret(r)) for r in rs]))).to_dict(),
                "mean_regret": stat(lambda rs: float(np.mean([regret(r) for r in rs]))).to_dict()}

    # The three predictors side by side on the same trials: does the pick score as the validation best?
    out["predictors"] = {
        "race": predictor(lambda r: r.regret),
        "baseline": predictor(lambda r: r.baseline_regret) if out["baseline_mean_regret"] else None,
        "curves": predictor(lambda r: r.curve_regret) if all(r.curve_pick is not None for r in observed) else None}
    if surface:
        out["predictors"]["surface"] = predictor(lambda r: r.surface_regret) \
            if all(r.surface_pick is not None for r in observed) else None
    return out

