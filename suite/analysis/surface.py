"""The joint surface over update and rollout compute: one saturating power law in both budgets,
fitted to every scored point of every allocation of a condition, with bootstrap intervals, a
prediction per allocation at a held-out budget, and refusals by name where the data cannot
identify it.

    R(C_u, C_r) = R_inf - A / (C_u / C_REF)^alpha - B / (C_r / C_REF)^beta

C_u is the cumulative update FLOPs, C_r the rollout FLOPs (report `curve.points[].flops` along
a run, `totals.flops` at its end); C_REF = 1e12 FLOPs, so A and B are the score each phase's
shortfall costs at 1e12 FLOPs of it. Where ScaleRL (suite.analysis.curves) fits one curve per
allocation, this fits one surface per condition (model, reward system, target, metric): every
allocation is a ray through it (its update share fixes C_u / C_r), so how much a unit of rollout
compute buys against a unit of update compute is read off one set of parameters.

**The fit**: Huber loss (delta HUBER on the score scale: a point is a mean over a few hundred
problems, so a residual beyond ~1.5 standard errors counts linearly), weighted by the seed
draws, minimised by scipy.optimize.minimize (L-BFGS-B, analytic gradient) from a grid of starts
(RESTARTS; a bootstrap refit from the observed fit, then one fresh start if that
lands on a bound); R_inf in [0, 1], log A and log B in LOG_COEF, alpha and beta in EXPONENT.

**Intervals**: suite.analysis.stats's resampler, the findings' plan: replicate b redraws the
target's problems (shared by every allocation) and each allocation's seeds (the findings' draws
of that group); each point's score is recomputed with those weights and the surface refitted,
warm-started from the observed fit and from one fresh start.

**Refusals**, one line each, by name, never a falsely precise surface: *too few allocations*
(fewer than MIN_RAYS update shares: along one ray C_u and C_r grow together and the two terms
cannot be told apart); *too few points* (fewer than MIN_POINTS distinct (C_u, C_r) points);
*not identified* (the observed fit on a bound: an exponent at its end, or a term's coefficient at
its floor — that phase's term does not show in the data); *unstable* (more than MAX_FAILED of
the refits fail or land on a bound).

    from suite.analysis import curves, surface
    fits = surface.fit_all(surface.pool(curves.series(runs)), replicates=500)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .frontier import Condition
from .stats import LEVEL, Resampler, estimate, rounded

FORM = "R(C_u, C_r) = R_inf - A / (C_u / 1e12)^alpha - B / (C_r / 1e12)^beta"
#: FLOPs the coefficients are stated at.
C_REF = 1e12
#: Bounds: the asymptote of a [0, 1] score, the exponents, the log coefficients.
R_BOUNDS = (0.0, 1.0)
EXPONENT = (0.02, 3.0)
LOG_COEF = (math.log(1e-6), math.log(10.0))
#: Huber's delta on the score scale.
HUBER = 0.05
#: Distinct update shares (rays) and distinct points a surface needs.
MIN_RAYS = 2
MIN_POINTS = 6
#: Share of refits that may fail or land on a bound before the surface is refused.
MAX_FAILED = 0.5
#: Starts of the observed fit: every (alpha, beta) pair, R_inf just above the best point.
RESTARTS = ((0.2, 0.2), (0.2, 1.0), (1.0, 0.2), (0.6, 0.6), (1.5, 1.5))
#: What a bound means, for the refusal line.
_BOUND_NAMES = {"alpha": "the update exponent alpha is on its bound", "beta": "the rollout exponent beta is on its bound",
                "A": "the update term's coefficient A is on its bound (at its floor: the update term does not show "
                     "in the data)",
                "B": "the rollout term's coefficient B is on its bound (at its floor: the rollout term does not show "
                     "in the data)",
                "R_inf": "the asymptote R_inf is on its bound (the surface has not bent within the data)"}


# ---------------------------------------------------------------- the data


@dataclass(frozen=True)
class Data:
    """Every scored point of one condition's allocations, on the problems they share."""

    condition: Condition
    """The condition (the pilot's when budgets are pooled)."""
    labels: tuple[str, ...]
    """The allocations pooled."""
    series: tuple = field(repr=False)
    """suite.analysis.curves.Series of each allocation (each with its group and seeds)."""
    update: np.ndarray = field(repr=False)
    """(P,) cumulative update FLOPs of each point."""
    rollout: np.ndarray = field(repr=False)
    """(P,) cumulative rollout FLOPs of each point."""

    @property
    def rays(self) -> int:
        """Distinct update shares (rounded to 0.01)."""
        share = self.update / (self.update + self.rollout)
        return len({round(float(x), 2) for x in share})


def data(cond: Condition, series: Sequence) -> Data | str:
    """The points of `series` (suite.analysis.curves.Series of one condition, possibly several
    budgets) with both phases' FLOPs > 0; or why there are none."""
    keep = []
    for s in series:
        u, r = s.phases.get("update"), s.phases.get("rollout")
        if u is None or r is None or not np.all(np.isfinite(u)) or not np.all(np.isfinite(r)):
            return f"{s.label}: its points carry no FLOPs per phase (report curve stamps before schema 1.2)"
        keep.append(s)
    ns = {s.problems for s in keep}
    if len(ns) > 1:
        return "the allocations are scored on different problems"
    return Data(condition=cond, labels=tuple(s.label for s in keep), series=tuple(keep),
                update=np.concatenate([s.phases["update"] for s in keep]),
                rollout=np.concatenate([s.phases["rollout"] for s in keep]))


def pool(by_condition: Mapping[Condition, Sequence]) -> dict[Condition, list]:
    """Series of the same condition at several budgets pooled under the first one's condition:
    `race curves --surface` fits one surface over every budget it is given."""
    out: dict[tuple, tuple[Condition, list]] = {}
    for cond, ss in sorted(by_condition.items()):
        out.setdefault(_key(cond), (cond, []))[1].extend(ss)
    return {c: ss for c, ss in out.values()}


def _key(cond: Condition) -> tuple:
    """A condition without its budget."""
    return (cond.params_total, cond.model, cond.reward_system, cond.target, cond.metric, cond.judge)


# ---------------------------------------------------------------- the fit


@dataclass(frozen=True)
class Params:
    """One fit of FORM."""

    r_inf: float
    """Asymptote R_inf."""
    a: float
    """Update coefficient A (score at C_u = C_REF)."""
    alpha: float
    """Update exponent."""
    b: float
    """Rollout coefficient B."""
    beta: float
    """Rollout exponent."""
    on_bound: str | None = None
    """Which parameters sit on their bounds (A, B, alpha, beta, R_inf, comma-separated), if any."""

    def at(self, update, rollout) -> np.ndarray:
        """R(C_u, C_r)."""
        return _value(np.array([self.r_inf, math.log(self.a), self.alpha, math.log(self.b), self.beta]),
                      np.log(np.asarray(update, dtype=np.float64) / C_REF),
                      np.log(np.asarray(rollout, dtype=np.float64) / C_REF))


def _value(x: np.ndarray, lu: np.ndarray, lr: np.ndarray) -> np.ndarray:
    return x[0] - np.exp(x[1] - x[2] * lu) - np.exp(x[3] - x[4] * lr)


_LOWER = np.array([R_BOUNDS[0], LOG_COEF[0], EXPONENT[0], LOG_COEF[0], EXPONENT[0]])
_UPPER = np.array([R_BOUNDS[1], LOG_COEF[1], EXPONENT[1], LOG_COEF[1], EXPONENT[1]])


def fit(update: np.ndarray, rollout: np.ndarray, y: np.ndarray, w: np.ndarray | None = None,
        start: Params | None = None) -> Params | None:
    """Huber fit of FORM to points (C_u, C_r > 0, y) weighted by w (seed draw counts; 0 drops a
    point) by L-BFGS-B from RESTARTS (or from `start` and one fresh start); None when no start
    converges."""
    from scipy.optimize import minimize

    y = np.asarray(y, dtype=np.float64)
    w = np.ones_like(y) if w is None else np.asarray(w, dtype=np.float64)
    keep = w > 0
    lu, lr = np.log(np.asarray(update)[keep] / C_REF), np.log(np.asarray(rollout)[keep] / C_REF)
    y, w = y[keep], w[keep] / w[keep].sum()
    if len(y) < MIN_POINTS:
        return None

    def loss(x):
        e1, e2 = np.exp(x[1] - x[2] * lu), np.exp(x[3] - x[4] * lr)
        r = x[0] - e1 - e2 - y
        small = np.abs(r) <= HUBER
        rho = np.where(small, 0.5 * r * r, HUBER * (np.abs(r) - 0.5 * HUBER))
        psi = w * np.clip(r, -HUBER, HUBER)
        grad = np.array([psi.sum(), -(psi * e1).sum(), (psi * e1 * lu).sum(), -(psi * e2).sum(), (psi * e2 * lr).sum()])
        return float((w * rho).sum()), grad

    top = float(np.clip(y.max() + 0.02, *R_BOUNDS))
    gap = max(top - float(y.min()), 1e-3) / 2          # each term starts with half the rise

    def fresh(alpha, beta):
        return np.array([top, math.log(gap) + alpha * float(lu.min()), alpha, math.log(gap) + beta * float(lr.min()), beta])

    # a refit starts from the observed fit, and from a fresh start only when that fails or sits on
    # a bound (half the cost of always restarting; the observed fit itself tries every RESTARTS)
    starts = [np.array([start.r_inf, math.log(start.a), start.alpha, math.log(start.b), start.beta]), fresh(0.6, 0.6)] \
        if start else [fresh(a, b) for a, b in RESTARTS]
    best = None
    for i, x0 in enumerate(starts):
        if start and best is not None and not _edges(best.x):
            break
        x0 = np.clip(x0, _LOWER + 1e-9, _UPPER - 1e-9)
        with np.errstate(over="ignore", invalid="ignore"):
            res = minimize(loss, x0, jac=True, method="L-BFGS-B", bounds=list(zip(_LOWER, _UPPER)),
                           options={"maxiter": 500})
        if np.all(np.isfinite(res.x)) and np.isfinite(res.fun) and (best is None or res.fun < best.fun):
            best = res
    if best is None:
        return None
    x = best.x
    return Params(float(x[0]), float(math.exp(x[1])), float(x[2]), float(math.exp(x[3])), float(x[4]), _edges(x))


def _edges(x: np.ndarray) -> str | None:
    """The parameters of x on their bounds: a coefficient at its floor means that phase's term is
    absent, an exponent at either end is not identified, R_inf at 1 means no bend within the data."""
    span = _UPPER - _LOWER
    near = (x - _LOWER < 1e-3 * span) | (_UPPER - x < 1e-3 * span)
    names = ("R_inf", "A", "alpha", "B", "beta")
    return ",".join(names[i] for i in (1, 3, 2, 4, 0) if near[i]) or None


@dataclass(frozen=True)
class Surface:
    """One condition's fitted surface (or its refusal) with bootstrap replicates."""

    condition: Condition
    """The condition."""
    labels: tuple[str, ...]
    """The allocations pooled."""
    params: Params | None
    """The fit on the observed scores; None when refused."""
    refusal: str | None
    """Why no surface is reported (one line), or None."""
    replicates: np.ndarray = field(repr=False)
    """(B, 5) R_inf, A, alpha, B, beta per replicate (NaN where the refit failed or sat on a bound)."""
    points: int = 0
    """Scored points fitted."""
    rays: int = 0
    """Distinct update shares among them."""
    budgets: tuple[int, ...] = ()
    """Budgets (band upper ends) pooled."""

    @property
    def fitted(self) -> bool:
        """A surface is reported."""
        return self.params is not None

    def replicate_values(self, update: float, rollout: float) -> np.ndarray:
        """(B,) R_b(C_u, C_r) (NaN where the refit failed)."""
        r, a, al, b, be = self.replicates.T
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return r - a * (update / C_REF) ** (-al) - b * (rollout / C_REF) ** (-be)


def _replicate_data(d: Data, rs: Resampler, replicates: int):
    """Observed scores of every point, and their (B, P) replicate scores and seed weights."""
    target = d.condition.target.split(":", 1)[0]
    y_obs, y_rep, w_rep = [], [], []
    for s in d.series:
        cp = rs.problem_counts(target, s.problems)[:replicates]
        cs = rs.seed_counts(s.group, len(s.runs))[:replicates]
        y_obs.append(s.scores.mean(axis=1))
        y_rep.append((s.scores @ cp.T / s.problems).T)
        w_rep.append(cs[:, s.seed_of])
    return np.concatenate(y_obs), np.concatenate(y_rep, axis=1), np.concatenate(w_rep, axis=1)


def fit_surface(cond: Condition, series: Sequence, rs: Resampler, replicates: int | None = None) -> Surface:
    """Fit one condition's surface and its replicates, or refuse it (see the module docstring)."""
    b_count = min(replicates or rs.replicates, rs.replicates)
    nan = np.full((b_count, 5), np.nan)
    budgets = tuple(sorted({s.condition.band_high for s in series}))
    what = f"surface of {', '.join(dict.fromkeys(s.label for s in series))}" + \
        (f" at {', '.join(f'{b:.3g}' for b in budgets)} FLOPs" if len(budgets) > 1 else "")
    d = data(cond, series)
    if isinstance(d, str):
        return Surface(cond, tuple(s.label for s in series), None, f"{what}: not fitted: {d}", nan, budgets=budgets)
    pts = len({(float(u), float(r)) for u, r in zip(d.update, d.rollout)})
    base = dict(points=pts, rays=d.rays, budgets=budgets)
    if d.rays < MIN_RAYS:
        return Surface(cond, d.labels, None, f"{what}: too few allocations: {d.rays} update share(s); along one "
                                             f"the update and rollout terms cannot be told apart (run {MIN_RAYS} or "
                                             f"more allocations)", nan, **base)
    if pts < MIN_POINTS:
        return Surface(cond, d.labels, None, f"{what}: too few points: {pts} scored points; the surface has 5 "
                                             f"parameters and needs {MIN_POINTS}", nan, **base)
    y_obs, y_rep, w_rep = _replicate_data(d, rs, b_count)
    obs = fit(d.update, d.rollout, y_obs)
    if obs is None:
        return Surface(cond, d.labels, None, f"{what}: unstable: the fit did not converge from any start", nan, **base)
    if obs.on_bound:
        return Surface(cond, d.labels, None, f"{what}: not identified: "
                                             f"{'; '.join(_BOUND_NAMES[n] for n in obs.on_bound.split(','))} "
                                             f"(alpha {obs.alpha:.2f}, beta {obs.beta:.2f}, A {obs.a:.2g}, "
                                             f"B {obs.b:.2g}, R_inf {obs.r_inf:.3f})", nan, **base)
    reps = np.full((b_count, 5), np.nan)
    for b in range(b_count):
        p = fit(d.update, d.rollout, y_rep[b], w_rep[b], start=obs)
        if p is not None and not p.on_bound:
            reps[b] = (p.r_inf, p.a, p.alpha, p.b, p.beta)
    failed = int(np.isnan(reps[:, 0]).sum())
    if failed > MAX_FAILED * b_count:
        return Surface(cond, d.labels, None, f"{what}: unstable: {failed} of {b_count} bootstrap refits failed or "
                                             f"landed on a bound", reps, **base)
    return Surface(cond, d.labels, obs, None, reps, **base)


def refusals(section: Mapping) -> list[str]:
    """Every refused surface of curves.json's `surface` section as one line: condition and why."""
    return [f"{c['name']} · {c['reason']}" for c in section["conditions"] if c["reason"]]


def fit_all(by_condition: Mapping[Condition, Sequence], *, replicates: int = 500, seed: int = 2607,
            resampler: Resampler | None = None) -> dict[Condition, Surface]:
    """Every condition's surface with one resampling plan (suite.analysis.stats, `seed`)."""
    rs = resampler or Resampler(replicates, seed)
    return {c: fit_surface(c, ss, rs, replicates) for c, ss in by_condition.items()}


# ---------------------------------------------------------------- the held-out prediction


def predictions(series: Sequence | None, pilot: Sequence, val: Sequence, rs: Resampler | None, replicates: int,
                cond: Condition | None = None) -> tuple[dict[str, tuple[float, np.ndarray]], list[str], list[str], str | None] | None:
    """label -> (predicted validation score, its (B,) replicates) from the pilot's surface
    (suite.analysis.curves.Series of the pilot allocations) at each validation allocation's mean
    update and rollout FLOPs (suite.analysis.findings.Point.phase_flops); with the labels
    predicted by the surface and those at their pilot score (a refused surface predicts every
    allocation at its pilot score), and the refusal. None without series or resampler."""
    by = {s.label: s for s in series or ()}
    if rs is None or any(x.label not in by for x in pilot):
        return None
    cond = cond or next(iter(by.values())).condition
    sf = fit_surface(cond, [by[x.label] for x in pilot], rs, replicates)
    out, fitted, fallbacks = {}, [], []
    at = {v.label: v for v in val}
    for x in pilot:
        v = at[x.label]
        floor = np.asarray(x.replicates[:replicates], dtype=np.float64)
        u, r = v.phase_flops.get("update", 0.0), v.phase_flops.get("rollout", 0.0)
        if sf.fitted and u > 0 and r > 0:
            reps = sf.replicate_values(u, r)
            out[x.label] = (float(sf.params.at(u, r)), np.where(np.isfinite(reps), reps, floor))
            fitted.append(x.label)
        else:
            out[x.label] = (x.score, floor)
            fallbacks.append(x.label)
    return out, fitted, fallbacks, sf.refusal


# ---------------------------------------------------------------- the document


def _sig(x: float) -> float:
    return float(f"{x:.6g}")


def _est(reps: np.ndarray, value: float, level: float, digits: int = 4) -> dict:
    ok = reps[np.isfinite(reps)]
    return estimate(value, ok if ok.size else np.array([value]), level).to_dict(digits)


def to_dict(sf: Surface, level: float = LEVEL, at: Mapping[str, tuple[float, float]] | None = None) -> dict:
    """One surface as curves.json's `surface.conditions[]` holds it: parameters with intervals or
    the refusal; `at`: label -> (C_u, C_r) where to predict, with intervals."""
    out = {"name": sf.condition.name(), "condition": sf.condition.to_dict(), "allocations": list(sf.labels),
           "budgets": list(sf.budgets), "points": sf.points, "rays": sf.rays,
           "status": "fitted" if sf.fitted else "refused", "reason": sf.refusal,
           "R_inf": None, "A": None, "alpha": None, "B": None, "beta": None, "failed_replicates": 0,
           "predictions": []}
    if sf.fitted:
        r, p = sf.replicates, sf.params
        out.update(R_inf=_est(r[:, 0], p.r_inf, level), A=_est(r[:, 1], p.a, level, 6), alpha=_est(r[:, 2], p.alpha, level, 3),
                   B=_est(r[:, 3], p.b, level, 6), beta=_est(r[:, 4], p.beta, level, 3),
                   failed_replicates=int(np.isnan(r[:, 0]).sum()))
        for label, (u, ro) in sorted((at or {}).items()):
            out["predictions"].append({"label": label, "update_flops": _sig(u), "rollout_flops": _sig(ro),
                                       "value": _est(sf.replicate_values(u, ro), float(p.at(u, ro)), level),
                                       "rollout_flop_in_update_flops": exchange_rate(sf, u, ro)})
    return out


def exchange_rate(sf: Surface, update: float, rollout: float) -> float | None:
    """dR/dC_r over dR/dC_u at (C_u, C_r): how many update FLOPs one rollout FLOP is worth there."""
    if not sf.fitted:
        return None
    p = sf.params
    du = p.a * p.alpha * (update / C_REF) ** (-p.alpha) / update
    dr = p.b * p.beta * (rollout / C_REF) ** (-p.beta) / rollout
    return _sig(dr / du) if du > 0 else None


def predictor_rows(holdout: Mapping) -> list[dict]:
    """The held-out predictors side by side (suite.analysis.holdout's summary): name, pick hit rate
    and mean regret with intervals."""
    pr = (holdout.get("summary") or {}).get("predictors") or {}
    names = {"race": "RACE (pilot fit over p)", "baseline": "global native-reward baseline",
             "curves": "pilot curves extrapolated (ScaleRL's form)", "surface": "pilot surface R(C_u, C_r)"}
    return [{"predictor": k, "what": names[k], **v} for k, v in pr.items() if v and k in names]


def document(runs: Sequence, *, replicates: int = 500, seed: int = 2607, metrics: Sequence[str] | None = None,
             holdout: Mapping | None = None, level: float = LEVEL) -> dict:
    """curves.json's `surface` section: every condition's surface over all the budgets given (with
    its predictions at each budget's allocations), and, from `holdout` (suite.analysis.holdout.validate
    with surface=True, the findings' settings), the held-out predictors side by side — RACE, the
    global baseline, the pilot curves and the pilot surface — with intervals."""
    from . import curves

    by = curves.series(runs, tuple(metrics or curves.METRICS))
    fits = fit_all(pool(by), replicates=replicates, seed=seed)
    conditions = []
    for cond, sf in fits.items():
        at = {}         # each allocation's runs' ends at each budget: where the surface is read
        for s in (s for c, ss in by.items() if _key(c) == _key(cond) for s in ss):
            if "update" in s.phases and "rollout" in s.phases:
                at[f"{s.label}@{s.condition.band_high:.3g}"] = (float(np.mean(s.phases["update"][s.ends])),
                                                                float(np.mean(s.phases["rollout"][s.ends])))
        conditions.append(to_dict(sf, level, at))
    table = None
    if holdout and holdout.get("summary") is not None:
        table = {"settings": {k: holdout["settings"][k] for k in ("pilot_budget", "validation_budget", "replicates",
                                                                  "level")},
                 "predictors": predictor_rows(holdout),
                 "trials": [{"name": t["name"], "best": t["best"], "race": t["chosen"], "baseline": t["baseline"],
                             "curves": (t["curves"] or {}).get("chosen"),
                             "surface": (t.get("surface") or {}).get("chosen"),
                             "surface_refusal": (t.get("surface") or {}).get("refusal"),
                             "surface_predicted": (t.get("surface") or {}).get("predicted")}
                            for t in holdout["trials"]]}
    return {"form": FORM, "settings": {"replicates": replicates, "seed": seed, "level": level, "c_ref": C_REF,
                                       "huber_delta": HUBER, "min_rays": MIN_RAYS, "min_points": MIN_POINTS,
                                       "bounds": {"R_inf": list(R_BOUNDS), "exponents": list(EXPONENT),
                                                  "log_coefficients": [round(x, 6) for x in LOG_COEF]}},
            "conditions": conditions, "holdout": table}
