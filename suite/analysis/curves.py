# Over 500 lines: the fit, its bootstrap replicates, the refusals and curves.json read the same series and must agree.
"""Compute-performance curves per allocation: ScaleRL's saturating form fitted to the scores a
run passed through (report `curve`, suite.evaluate.curve), with bootstrap intervals, refusals of
curves that cannot carry a fit, and extrapolation to a named budget.

ScaleRL (Khatri et al., arXiv 2510.13786) fits a recipe's pass rate against RL compute C as

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

R0 the score before training (here: the policy at step 0, scored on the same problems), A the
asymptote, B the efficiency exponent, C_mid the compute at which half the gain A - R0 is reached.

**One allocation's curve** pools its seeds: every point of every seed (the snapshots along the
run and its end, restricted to the problems the points share) is one observation (C, score);
A, B and C_mid are fitted by weighted least squares (scipy.optimize.least_squares, bounded:
A in [0, 1], B in [0.1, 10], C_mid within 100x of the observed compute) with R0 fixed to the
step-0 score (fitted too when no step 0 was scored).

**Intervals** come from suite.analysis.stats's resampler, the one the findings use: replicate b
redraws the problems of the target (shared by every allocation: paired) and the seeds of the
allocation (the findings' draws of that group); each point's score is recomputed with those
weights and the curve refitted, warm-started from the observed fit. Percentile intervals of A,
B, C_mid and of R(budget) over the replicates.

**Refusals** — a curve is refused by name, never fitted into a falsely precise A, when it is
- *too short*: fewer than MIN_POINTS scored points after training began (distinct steps,
  pooled over seeds), or a fit on a bound (C_mid, or A at 0 or 1) — observed, or in most
  bootstrap refits: the rise happened before the first point or has not bent yet within the
  data, and A (or B) is not identified. Fewer such refits leave the fit standing with an
  interval that runs to the bound (the document counts them: `unbent_replicates`);
- *too flat*: the gain — the level the runs reached (the mean of each run's points in the
  second half of its compute, seeds pooled) minus R0 — has an interval that includes 0;
- *unstable*: more than half of the replicate fits fail.

    from suite.analysis import curves, evidence
    doc = curves.document(curves.fit_all(curves.series(evidence.load_runs("runs/study"))), budget=4e12)
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from ..errors import RaceError
from ..record import schemas
from .evidence import Run
from .frontier import Condition
from .stats import LEVEL, Estimate, Resampler, estimate, rounded

FORMAT = "race-curves"
VERSION = 1
FORM = "R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)"
#: Scored points after training began (distinct steps over the seeds) a curve needs: three
#: parameters and at least one point to spare.
MIN_POINTS = 4
#: Bounds of the fit: the asymptote of a [0, 1] score, the exponent, and how far outside the
#: observed compute C_mid may go (a factor); a C_mid on its bound means the data cannot place it.
A_BOUNDS = (0.0, 1.0)
B_BOUNDS = (0.1, 10.0)
C_RANGE = 100.0
#: Share of replicate fits that may fail (or not bend within the data) before a curve is refused.
MAX_FAILED = 0.5
#: Metrics fitted by default (the native reward is each reward system's own scale).
METRICS = ("pass@1", "process_judge")
#: Compute points of a drawn band, log-spaced.
BAND_POINTS = 48


def saturating(c: np.ndarray, r0, a, b, c_mid) -> np.ndarray:
    """ScaleRL's R(C) (FORM), with R(0) = R0; written as a logistic in log C so neither a large
    ratio nor C = 0 overflows."""
    from scipy.special import expit

    c = np.asarray(c, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(c > 0, expit(b * (np.log(np.where(c > 0, c, 1.0)) - np.log(c_mid))), 0.0)
    return r0 + (a - r0) * frac


# ---------------------------------------------------------------- the series


@dataclass(frozen=True)
class Series:
    """One allocation's points in one condition, its seeds pooled, on the problems they share."""

    condition: Condition
    """The condition (target named as in the runs' final evaluation)."""
    label: str
    """Allocation label."""
    lora_rank: int
    """LoRA rank."""
    group: str
    """suite.analysis.evidence.Run.group: names the seed draws (shared with the findings)."""
    runs: tuple[str, ...]
    """The run folders pooled, by seed."""
    seed_of: np.ndarray = field(repr=False)
    """(P,) which run (index into `runs`) each point belongs to."""
    steps: np.ndarray = field(repr=False)
    """(P,) optimizer steps of each point (the run's last step for its end)."""
    flops: np.ndarray = field(repr=False)
    """(P,) cumulative training FLOPs of each point (> 0)."""
    scores: np.ndarray = field(repr=False)
    """(P, n) per-problem scores of each point."""
    base: np.ndarray | None = field(repr=False)
    """(S, n) each run's step-0 scores, None when step 0 was not scored."""
    ends: np.ndarray = field(repr=False)
    """(S,) index of each run's end among the points."""
    phases: Mapping[str, np.ndarray] = field(repr=False, default_factory=dict)
    """Phase (rollout, update, reward) -> (P,) cumulative FLOPs of each point in it (the report's
    curve stamps and totals); suite.analysis.surface fits over them."""

    @property
    def problems(self) -> int:
        """Problems every point is scored on."""
        return self.scores.shape[1]

    def distinct_steps(self) -> list[int]:
        """Steps with a scored point after training began, over every seed."""
        return sorted({int(s) for s in self.steps})


def series(runs: Iterable[Run], metrics: Sequence[str] = METRICS) -> dict[Condition, tuple[Series, ...]]:
    """Every allocation with points along its runs, per condition (model, band, reward, target,
    metric): seeds pooled, each point restricted to the doc ids every point of the condition
    shares (so allocations are compared on the same problems). Runs without a curve are left out."""
    groups: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        if r.curve:
            groups[r.group].append(r)
    raw: dict[Condition, list[tuple[str, list[Run], str, str]]] = defaultdict(list)
    for name in sorted(groups):
        members = sorted(groups[name], key=lambda r: (r.seed, r.path))
        seeds = [r.seed for r in members]
        if len(set(seeds)) != len(seeds):
            raise RaceError(f"runs {', '.join(r.path for r in members)} share allocation, budget and seed",
                            "pass each run once")
        for target, metric in sorted(members[0].scores):
            along = (target.split(":", 1)[0], metric)         # scored along the run too, not only at its end
            if metric in metrics and all(any(along in p.scores for p in r.curve) for r in members):
                raw[members[0].condition(target, metric)].append((name, members, target, metric))
    out: dict[Condition, tuple[Series, ...]] = {}
    for cond, entries in sorted(raw.items()):
        base = cond.target.split(":", 1)[0]
        shared: set[int] | None = None
        for _, members, target, metric in entries:
            for r in members:
                if (target, metric) not in r.scores:
                    raise RaceError(f"{r.path} was evaluated on other targets or metrics than {members[0].path}",
                                    "evaluate every seed of an allocation the same way")
                sets = [set(r.ids[target])] + [set(p.ids.get(base, ())) for p in r.curve if (base, metric) in p.scores]
                for s in sets:
                    shared = s if shared is None else shared & s
        ids = sorted(shared or ())
        if not ids:
            continue
        found = [_one(cond, name, members, target, base, metric, ids) for name, members, target, metric in entries]
        out[cond] = tuple(sorted((s for s in found if s is not None), key=lambda s: (s.label, s.lora_rank)))
    return {c: s for c, s in out.items() if s}


def _pick(scores: np.ndarray, have: Sequence[int], ids: Sequence[int]) -> np.ndarray:
    where = {d: i for i, d in enumerate(have)}
    return scores[[where[d] for d in ids]]


def _one(cond: Condition, group: str, members: list[Run], target: str, base: str, metric: str,
         ids: list[int]) -> Series | None:
    seed_of, steps, flops, rows, base_rows, ends = [], [], [], [], [], []
    phases: dict[str, list[float]] = defaultdict(list)
    names = ("rollout", "update", "reward")
    for i, r in enumerate(members):
        zero = [p for p in r.curve if p.step == 0 and (base, metric) in p.scores]
        if zero:
            base_rows.append(_pick(zero[0].scores[base, metric], zero[0].ids[base], ids))
        points = [(p.step, p.flops, _pick(p.scores[base, metric], p.ids[base], ids), p.phases) for p in r.curve
                  if p.step > 0 and p.flops > 0 and (base, metric) in p.scores]
        ends.append(len(rows) + len(points))
        for step, f, x, ph in [*points, (r.steps, r.flops, _pick(r.scores[target, metric], r.ids[target], ids),
                                         r.phase_flops)]:
            seed_of.append(i)
            steps.append(step)
            flops.append(f)
            rows.append(x)
            for k in names:
                phases[k].append(float(ph.get(k, np.nan)))
    if len(base_rows) not in (0, len(members)):
        raise RaceError(f"{group}: some seeds were scored at step 0 and some not",
                        "score every seed's curve the same way (race eval RUN_DIR --curve)")
    first = members[0]
    return Series(condition=cond, label=first.label, lora_rank=first.lora_rank, group=group,
                  runs=tuple(r.path for r in members), seed_of=np.array(seed_of), steps=np.array(steps),
                  flops=np.array(flops, dtype=np.float64), scores=np.stack(rows),
                  base=np.stack(base_rows) if base_rows else None, ends=np.array(ends),
                  phases={k: np.array(v, dtype=np.float64) for k, v in phases.items()})


# ---------------------------------------------------------------- the fit


@dataclass(frozen=True)
class Params:
    """One fit of the saturating form."""

    r0: float
    """Score before training (fixed from step 0, or fitted)."""
    a: float
    """Asymptote A."""
    b: float
    """Efficiency exponent B."""
    c_mid: float
    """Compute midpoint C_mid (FLOPs)."""
    on_bound: str | None = None
    """Which bound the fit sits on: C_mid's ("low" / "high") or A's ("A"), if any."""

    def at(self, c) -> np.ndarray:
        """R(c)."""
        return saturating(c, self.r0, self.a, self.b, self.c_mid)


def fit(c: np.ndarray, y: np.ndarray, w: np.ndarray | None = None, r0: float | None = None,
        start: Params | None = None) -> Params | None:
    """Weighted least-squares fit of FORM to points (c > 0, y) with weights w (seed draw counts;
    0 drops a point) by scipy.optimize.least_squares; R0 fixed when given. None when the solver
    fails."""
    from scipy.optimize import least_squares

    c, y = np.asarray(c, dtype=np.float64), np.asarray(y, dtype=np.float64)
    w = np.ones_like(y) if w is None else np.asarray(w, dtype=np.float64)
    keep = w > 0
    c, y, sw = c[keep], y[keep], np.sqrt(w[keep])
    if len(c) < (3 if r0 is not None else 4):
        return None
    lc = np.log(c)
    lo_c, hi_c = lc.min() - math.log(C_RANGE), lc.max() + math.log(C_RANGE)
    free_r0 = r0 is None

    def unpack(x):
        return (x[3] if free_r0 else r0), x[0], x[1], x[2]

    from scipy.special import expit

    def resid(x):
        r, a, b, lm = unpack(x)
        return sw * (r + (a - r) * expit(b * (lc - lm)) - y)

    def jac(x):          # analytic: the solver needs no finite differences (about 3x faster)
        r, a, b, lm = unpack(x)
        u = lc - lm
        sg = expit(b * u)
        ds = (a - r) * sg * (1 - sg)
        cols = [sg, ds * u, -ds * b] + ([1 - sg] if free_r0 else [])
        return sw[:, None] * np.stack(cols, axis=1)

    lower, upper = [A_BOUNDS[0], B_BOUNDS[0], lo_c], [A_BOUNDS[1], B_BOUNDS[1], hi_c]
    if free_r0:
        lower.append(A_BOUNDS[0]), upper.append(A_BOUNDS[1])
    starts = [[start.a, start.b, math.log(start.c_mid)] + ([start.r0] if free_r0 else [])] if start else [
        [float(np.clip(y[np.argmax(lc)], 0.0, 1.0)), b0, float(np.median(lc))] + ([float(np.clip(y[np.argmin(lc)], 0, 1))]
                                                                                  if free_r0 else [])
        for b0 in (0.5, 2.0)]
    best = None
    for x0 in starts:
        x0 = np.clip(x0, np.array(lower) + 1e-9, np.array(upper) - 1e-9)
        try:
            res = least_squares(resid, x0, jac=jac, bounds=(lower, upper), method="trf", x_scale="jac", max_nfev=400)
        except (ValueError, np.linalg.LinAlgError):
            continue
        if res.status > 0 and np.all(np.isfinite(res.x)) and (best is None or res.cost < best.cost):
            best = res
    if best is None:
        return None
    r, a, b, lm = unpack(best.x)
    span, width = hi_c - lo_c, A_BOUNDS[1] - A_BOUNDS[0]
    edge = "low" if lm - lo_c < 1e-3 * span else "high" if hi_c - lm < 1e-3 * span else \
        "A" if min(a - A_BOUNDS[0], A_BOUNDS[1] - a) < 1e-3 * width else None
    return Params(float(r), float(a), float(b), float(math.exp(lm)), edge)


@dataclass(frozen=True)
class Curve:
    """One allocation's fitted curve (or its refusal) with bootstrap replicates."""

    series: Series
    """What was fitted."""
    params: Params | None
    """The fit on the observed scores; None when refused."""
    refusal: str | None
    """Why no fit is reported (one line), or None."""
    replicates: np.ndarray = field(repr=False)
    """(B, 4) r0, A, B, C_mid per replicate (NaN where the replicate's fit failed)."""
    gain: Estimate | None = None
    """The level the runs reached (each run's points in the second half of its compute, averaged;
    seeds pooled) minus R0 (or the first point's score), with its interval."""
    r0: Estimate | None = None
    """R0 with its interval (None when R0 was fitted)."""
    unbent: int = 0
    """Replicate refits that did not bend within the data (C_mid beyond it, or A on its bound)."""

    @property
    def fitted(self) -> bool:
        """A fit is reported."""
        return self.params is not None

    def predict(self, c: float, level: float = LEVEL) -> Estimate:
        """R(c) with the percentile interval of the replicates' R_b(c)."""
        if self.params is None:
            raise ValueError("a refused curve predicts nothing")
        reps = self.replicate_values(c)
        return estimate(float(self.params.at(c)), reps[np.isfinite(reps)], level)

    def replicate_values(self, c: float) -> np.ndarray:
        """(B,) R_b(c) (NaN where the replicate's fit failed)."""
        r0, a, b, c_mid = self.replicates.T
        with np.errstate(invalid="ignore"):
            return saturating(c, r0, a, b, c_mid)          # NaN rows stay NaN


def _replicate_data(s: Series, rs: Resampler, replicates: int):
    """Observed and replicate scores of every point, the seed weights, and R0 / the gain."""
    n = s.problems
    target = s.condition.target.split(":", 1)[0]
    cp = rs.problem_counts(target, n)[:replicates]                       # (B, n)
    cs = rs.seed_counts(s.group, len(s.runs))[:replicates]               # (B, S)
    y_obs = s.scores.mean(axis=1)
    y_rep = (s.scores @ cp.T / n).T                                      # (B, P)
    w_rep = cs[:, s.seed_of]                                             # (B, P)
    # The level a run reached: its points in the second half of its training compute, averaged
    # (a plateau's level; at the end of a rise a little below its last point, with less noise).
    late = np.zeros((len(s.runs), len(s.flops)))
    for i, e in enumerate(s.ends):
        mine = s.seed_of == i
        late[i] = mine & (s.flops >= s.flops[e] / 2)
    late /= late.sum(axis=1, keepdims=True)
    ends_obs = late @ y_obs                                              # (S,)
    ends_rep = y_rep @ late.T                                            # (B, S)
    seeds = cs.sum(axis=1)
    if s.base is not None:
        r0_obs = float(s.base.mean())
        r0_rep = (cs * (s.base @ cp.T / n).T).sum(axis=1) / seeds
    else:
        first = [int(np.flatnonzero(s.seed_of == i)[0]) for i in range(len(s.runs))]
        r0_obs, r0_rep = float(y_obs[first].mean()), (cs * y_rep[:, first]).sum(axis=1) / seeds
    gain_obs = float(ends_obs.mean()) - r0_obs
    gain_rep = (cs * ends_rep).sum(axis=1) / seeds - r0_rep
    return y_obs, y_rep, w_rep, r0_obs, r0_rep, gain_obs, gain_rep


def fit_series(s: Series, rs: Resampler, replicates: int | None = None, level: float = LEVEL) -> Curve:
    """Fit one allocation's curve and its replicates, or refuse it (see the module docstring)."""
    b_count = min(replicates or rs.replicates, rs.replicates)
    y_obs, y_rep, w_rep, r0_obs, r0_rep, gain_obs, gain_rep = _replicate_data(s, rs, b_count)
    nan = np.full((b_count, 4), np.nan)
    gain = estimate(gain_obs, gain_rep, level)
    has_r0 = s.base is not None
    r0 = estimate(r0_obs, r0_rep, level) if has_r0 else None
    steps = s.distinct_steps()
    need = MIN_POINTS + (not has_r0)
    what = f"{s.label}"
    if len(steps) < need:
        return Curve(s, None, f"{what}: too short to fit: {len(steps)} scored point(s) after step 0 "
                              f"(steps {', '.join(map(str, steps))}); the saturating form needs {need}: snapshot "
                              f"more often (engine.snapshot_every, eval.curve.every)", nan, gain, r0)
    if not gain.excludes(0.0):
        return Curve(s, None, f"{what}: too flat to fit: gain {gain.value:+.3f} [{gain.low:+.3f}, {gain.high:+.3f}] "
                              f"from {'step 0' if has_r0 else 'the first point'} to the second half of the run "
                              f"includes 0, so an asymptote would be noise", nan, gain, r0)
    obs = fit(s.flops, y_obs, None, r0_obs if has_r0 else None)
    if obs is None:
        return Curve(s, None, f"{what}: the fit did not converge", nan, gain, r0)
    if obs.on_bound:
        why = {"low": "the rise happened before its first point (C_mid below the data): B and C_mid are not "
                      "identified; snapshot more often",
               "high": "the curve has not bent within the data (C_mid beyond it): A is not identified; train longer",
               "A": f"the curve has not bent within the data (A on its bound {obs.a:.2f}): A is not identified; "
                    f"train longer"}[obs.on_bound]
        return Curve(s, None, f"{what}: too short to fit: {why}", nan, gain, r0)
    reps = np.full((b_count, 4), np.nan)
    edges = 0
    for b in range(b_count):
        p = fit(s.flops, y_rep[b], w_rep[b], float(r0_rep[b]) if has_r0 else None, start=obs)
        if p is not None:
            reps[b] = (p.r0, p.a, p.b, p.c_mid)
            edges += p.on_bound in ("high", "A")
    failed = int(np.isnan(reps[:, 0]).sum())
    if failed > MAX_FAILED * b_count:
        return Curve(s, None, f"{what}: unstable: {failed} of {b_count} bootstrap refits failed", reps, gain, r0)
    if edges > MAX_FAILED * (b_count - failed):   # most resampled curves show no bend: A would be the bound's
        return Curve(s, None, f"{what}: too short to fit: in {edges} of {b_count - failed} bootstrap refits the curve "
                              f"has not bent within the data (C_mid beyond it or A on its bound): A is not "
                              f"identified; train longer", reps, gain, r0, edges)
    return Curve(s, obs, None, reps, gain, r0, edges)


def fit_all(by_condition: Mapping[Condition, Sequence[Series]], *, replicates: int = 1000, seed: int = 2607,
            level: float = LEVEL) -> dict[Condition, tuple[Curve, ...]]:
    """Every series fitted with one resampling plan (suite.analysis.stats, `seed`)."""
    rs = Resampler(replicates, seed)
    return {c: tuple(fit_series(s, rs, replicates, level) for s in ss) for c, ss in by_condition.items()}


# ---------------------------------------------------------------- the document


def _sig(x: float) -> float:
    """FLOPs to 6 significant digits (a JSON number every machine writes alike)."""
    return float(f"{x:.6g}")


def _est(reps: np.ndarray, value: float, level: float, digits: int | None = 4) -> dict:
    """The estimate over the replicates that converged; digits None: FLOPs (6 significant)."""
    ok = reps[np.isfinite(reps)]
    e = estimate(value, ok if ok.size else np.array([value]), level)
    return e.to_dict(digits) if digits is not None else \
        {"value": _sig(e.value), "low": _sig(e.low), "high": _sig(e.high), "level": e.level}


def _leader(curves: Sequence[Curve], column: int, level: float) -> dict | None:
    """The fitted allocation with the largest parameter `column` (1: A, 2: B) and the share of
    replicates in which it is the largest among the fitted ones."""
    fitted = [c for c in curves if c.fitted]
    if not fitted:
        return None
    obs = [(c.params.a, c.params.b)[column - 1] for c in fitted]
    top = int(np.argmax(obs))
    if len(fitted) == 1:
        return {"label": fitted[0].series.label, "prob": 1.0, "of": 1}
    m = np.stack([np.where(np.isfinite(c.replicates[:, column]), c.replicates[:, column], -np.inf) for c in fitted])
    prob = float(np.mean(np.argmax(m, axis=0) == top))
    return {"label": fitted[top].series.label, "prob": rounded(prob), "of": len(fitted)}


def _band(c: Curve, budget: float | None, level: float) -> dict:
    s = c.series
    hi = max(float(s.flops.max()), budget or 0.0)
    xs = np.geomspace(float(s.flops.min()) / 2, hi, BAND_POINTS)
    tail = (1 - level) / 2
    vals = np.stack([c.replicate_values(x) for x in xs], axis=1)          # (B, X)
    ok = vals[np.all(np.isfinite(vals), axis=1)]
    lo, up = np.quantile(ok, [tail, 1 - tail], axis=0) if len(ok) else (c.params.at(xs), c.params.at(xs))
    return {"flops": [_sig(x) for x in xs], "value": [rounded(v) for v in c.params.at(xs)],
            "low": [rounded(v) for v in lo], "high": [rounded(v) for v in up]}


def _allocation(c: Curve, budget: float | None, level: float) -> dict:
    s = c.series
    seeds = len(s.runs)
    y = s.scores.mean(axis=1)
    out = {"label": s.label, "lora_rank": s.lora_rank, "seeds": seeds, "runs": list(s.runs),
           "steps": s.distinct_steps(), "points": [[_sig(f), rounded(v)] for f, v in zip(s.flops, y)],
           "r0": c.r0.to_dict() if c.r0 else None, "gain": c.gain.to_dict() if c.gain else None,
           "status": "fitted" if c.fitted else "refused", "reason": c.refusal,
           "A": None, "B": None, "C_mid": None, "failed_replicates": 0, "unbent_replicates": c.unbent,
           "at_budget": None, "band": None}
    if c.fitted:
        r = c.replicates
        out.update(A=_est(r[:, 1], c.params.a, level), B=_est(r[:, 2], c.params.b, level, 3),
                   C_mid=_est(r[:, 3], c.params.c_mid, level, None), failed_replicates=int(np.isnan(r[:, 0]).sum()),
                   band=_band(c, budget, level))
        if c.r0 is None:
            out["r0"] = _est(r[:, 0], c.params.r0, level)
        if budget:
            out["at_budget"] = c.predict(budget, level).to_dict()
    return out


def document(fitted: Mapping[Condition, Sequence[Curve]], *, budget: float | None = None, replicates: int = 1000,
             seed: int = 2607, level: float = LEVEL, source: Mapping | None = None) -> dict:
    """curves.json (schemas/curves-v1.schema.json): per condition, every allocation's fit (A, B,
    C_mid with intervals, R(budget) when a budget is named) or its refusal, and which allocation
    has the highest asymptote and the best efficiency (with the share of replicates that agree)."""
    conditions = []
    for cond, curves in fitted.items():
        conditions.append({"name": cond.name(), "condition": cond.to_dict(),
                           "problems": int(curves[0].series.problems) if curves else 0,
                           "allocations": [_allocation(c, budget, level) for c in curves],
                           "highest_asymptote": _leader(curves, 1, level), "best_efficiency": _leader(curves, 2, level)})
    return {"format": FORMAT, "version": VERSION, "form": FORM,
            "settings": {"replicates": replicates, "seed": seed, "level": level, "budget": budget,
                         "min_points": MIN_POINTS, "bounds": {"A": list(A_BOUNDS), "B": list(B_BOUNDS),
                                                              "C_mid_range": C_RANGE}},
            "source": dict(source or {}), "conditions": conditions}


def curves_of(runs: Sequence[Run], *, budget: float | None = None, replicates: int = 1000, seed: int = 2607,
              level: float = LEVEL, metrics: Sequence[str] = METRICS, source: Mapping | None = None) -> dict:
    """The curves document of some runs; RaceError when none of them has points along the run."""
    by = series(runs, metrics)
    if not by:
        raise RaceError("none of these runs was scored along the way (no report has `curve` points)",
                        "train with engine.snapshot_every (race grid/study: eval.curve) and score them with "
                        "race eval RUN_DIR --curve")
    doc = document(fit_all(by, replicates=replicates, seed=seed, level=level), budget=budget, replicates=replicates,
                   seed=seed, level=level, source={"runs": len({r for ss in by.values() for s in ss for r in s.runs}),
                                                   **dict(source or {})})
    check(doc)
    return doc


def refusals(doc: dict) -> list[str]:
    """Every refused allocation as one line: its condition and why."""
    return [f"{c['name']} · {a['reason']}" for c in doc["conditions"] for a in c["allocations"] if a["reason"]]


def check(doc: dict) -> None:
    """Validate a curves document against schemas/curves-v1 (a failure is a bug here)."""
    schemas.check_output(doc, schemas.CURVES, "curves.json", "this is a bug in the curve fits; please report it with the runs")


def to_json(doc: dict) -> str:
    """curves.json as text."""
    import json

    return json.dumps(doc, indent=1, allow_nan=False) + "\n"
