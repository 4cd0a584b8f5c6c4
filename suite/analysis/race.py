# Over 500 lines: one procedure (diagnose each condition, validate against the baseline, race.json and its summary) sharing the regime vocabulary; its fit models are suite.analysis.fits.
"""RACE (Reward-Aware Compute Allocation): a pilot-grid *diagnostic*, not an optimizer.

Per condition (see suite.analysis.frontier.Condition) the score of each allocation is fitted against
the update share p (or log p) with a few small least-squares models; the model with the lowest
leave-one-out error wins. From the fit RACE names the regime the condition is in — high-update,
low-update, or feedback-heavy when reward-model inference takes a large share of the budget —
and recommends a region of p to validate. When the fit cannot be trusted (too few points, no
model beats a constant, an ill-conditioned design, or the optimum on the grid's edge) it falls
back to the best pilot cell and says so. Validation replays the procedure with one allocation
left out (in-grid) and with one LoRA rank left out, and compares against a global
native-reward baseline. Nothing here promises a held-out gain; the summary says so.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from .. import __version__
from ..errors import RaceError
from ..atomic import write_text_atomic
from ..record import schemas
from .fits import MODELS, Fit, choose, fit
from .frontier import Allocation, Cell, Condition, allocations, best, by_condition


FEEDBACK_THRESHOLD = 0.10
"""Reward FLOP share above which a condition is *feedback-heavy*: once reward-model inference
costs more than a tenth of the budget, the reward system — not the rollout/update split — is
the first lever to examine. Rule rewards cost 0 FLOPs; the source paper's PRM runs spend a
visible share."""

MIN_POINTS = 3
"""Distinct allocations a condition needs for any fit: leave-one-out comparison of a slope with
a constant needs three. An interior optimum (quadratic) needs four."""

MAX_CONDITION = 1e8
"""Condition number of the (standardised) design matrix above which a fit is ill-conditioned."""

DENSE = 1025
"""Points at which a fitted curve is evaluated over the grid's p range to find its optimum."""


# ---------------------------------------------------------------- one condition


@dataclass(frozen=True)
class Diagnosis:
    """RACE's reading of one condition's pilot allocations."""

    points: tuple[Allocation, ...]
    """The allocations fitted (seeds averaged), sorted by p."""
    fits: tuple[Fit, ...]
    """Every model that could be fitted."""
    chosen: Fit | None
    """The model chosen by leave-one-out error (None with too few points)."""
    p_hat: float | None
    """Update share at the chosen model's optimum within the grid (None for a flat fit)."""
    edge: bool
    """The fitted optimum sits on the grid's lowest or highest p."""
    fallback: str | None
    """Why the best pilot cell is recommended instead of the fit; None when the fit is used.
    One of: too-few-points, no-variation, flat, ill-conditioned, edge."""
    detail: str
    """One sentence explaining the recommendation."""
    best: Allocation
    """Best observed allocation."""
    p_rec: float
    """The p the regime is read from: the fitted optimum, or the best pilot cell's p when the
    fit is unstable."""
    p_low: float
    """Lower end of the recommended region of p to validate."""
    p_high: float
    """Upper end of the recommended region of p to validate."""
    reward_share: float
    """Mean reward FLOP share of the condition's allocations."""
    regime: str
    """high-update, low-update or feedback-heavy."""
    update_side: str
    """high or low: where p_rec sits relative to the grid's centre (also for feedback-heavy)."""
    centre: float
    """The grid centre the side is measured from (geometric mean of the lowest and highest p)."""


def grid_centre(ps: Iterable[float]) -> float:
    """Centre of a grid of update shares: the geometric midpoint of its ends (allocation grids
    are usually geometric: ranks 8..256, steps doubling); arithmetic if any p is 0."""
    ps = list(ps)
    lo, hi = min(ps), max(ps)
    return math.sqrt(lo * hi) if lo > 0 else (lo + hi) / 2


def update_side(p: float, centre: float, points: Iterable[Allocation]) -> str:
    """'high' when p is above the grid centre, 'low' below. Exactly at the centre, the side whose
    allocations score better on average wins (high on a tie)."""
    span = 1e-9 * max(abs(centre), 1e-12)
    if p > centre + span:
        return "high"
    if p < centre - span:
        return "low"
    pts = list(points)
    up = [a.score for a in pts if a.p > centre + span]
    down = [a.score for a in pts if a.p < centre - span]
    mean = lambda xs: sum(xs) / len(xs) if xs else -math.inf  # noqa: E731
    return "high" if mean(up) >= mean(down) else "low"


def regime_name(side: str, reward_share: float, threshold: float) -> str:
    """The regime: feedback-heavy above the reward-share threshold, else by update side."""
    return "feedback-heavy" if reward_share > threshold else f"{side}-update"


def diagnose_points(points: Iterable[Allocation], *, feedback_threshold: float = FEEDBACK_THRESHOLD,
                    centre: float | None = None) -> Diagnosis:
    """RACE on one condition's allocations. `centre` overrides the grid centre (validation
    measures sub-grids against the full grid's centre).

    Args: `points`, the condition's allocations (p, score, reward share, ...);
    `feedback_threshold`, the reward share from which the regime is feedback-heavy. Returns the
    Diagnosis: fits, chosen model, p-hat, fallback, regime, region.
    """
    pts = tuple(sorted(points, key=lambda a: (a.p, a.label, a.lora_rank)))
    if not pts:
        raise RaceError("no allocations to diagnose", "pass the cells of one condition")
    top = best(list(pts))
    centre = grid_centre(a.p for a in pts) if centre is None else centre
    share = sum(a.reward_share for a in pts) / len(pts)
    p = np.array([a.p for a in pts], dtype=float)
    y = np.array([a.score for a in pts], dtype=float)
    fits = tuple(f for f in (fit(m, p, y) for m in MODELS.values()) if f is not None)
    distinct = len(set(p.tolist()))

    chosen, p_hat, edge, fallback = None, None, False, None
    p_low = p_high = top.p
    if distinct < MIN_POINTS:
        fallback = "no-variation" if distinct == 1 and len(pts) >= MIN_POINTS else "too-few-points"
        detail = (f"{distinct} distinct update share(s); a fit needs at least {MIN_POINTS}: "
                  f"validate the best pilot cell {top.label} (p={top.p:.3f})")
    else:
        chosen = choose(list(fits))
        if chosen is None or chosen.model.degree == 0:
            fallback = "flat"
            detail = ("no model beats a constant under leave-one-out: the score does not move "
                      f"measurably with p here; validate the best pilot cell {top.label} (p={top.p:.3f})")
        elif chosen.cond > MAX_CONDITION:
            fallback = "ill-conditioned"
            detail = (f"the {chosen.model.name} fit is ill-conditioned (condition number "
                      f"{chosen.cond:.2g} > {MAX_CONDITION:.0e}); validate the best pilot cell {top.label}")
        else:
            dense = np.linspace(0.0, 1.0, DENSE)
            if chosen.model.log:
                grid = np.exp(np.log(p.min()) + dense * (np.log(p.max()) - np.log(p.min())))
            else:
                grid = p.min() + dense * (p.max() - p.min())
            f = chosen.predict(grid)
            i = int(np.argmax(f))
            p_hat = float(grid[i])
            edge = i in (0, DENSE - 1)
            if edge:
                fallback = "edge"
                where = "highest" if i else "lowest"
                detail = (f"the {chosen.model.name} fit peaks at the grid's {where} p ({p_hat:.3f}): the "
                          f"optimum may lie outside the grid; validate the best pilot cell {top.label} "
                          f"(p={top.p:.3f}) or extend the grid {'upward' if i else 'downward'}")
            else:
                # Region: where the fit is within its own held-out error of the peak — differences
                # smaller than that are not resolved by the pilot grid.
                below = np.nonzero(f < f[i] - chosen.loo_rmse)[0]
                lo_i = int(below[below < i].max()) + 1 if np.any(below < i) else 0
                hi_i = int(below[below > i].min()) - 1 if np.any(below > i) else DENSE - 1
                # ...and at least the pilot cells that bracket the optimum: the next runs go there.
                below_hat, above_hat = p[p <= p_hat], p[p >= p_hat]
                p_low = min(float(grid[lo_i]), float(below_hat.max()) if below_hat.size else p_hat)
                p_high = max(float(grid[hi_i]), float(above_hat.min()) if above_hat.size else p_hat)
                detail = (f"the {chosen.model.name} fit (leave-one-out RMSE {chosen.loo_rmse:.3g}) peaks "
                          f"inside the grid at p={p_hat:.3f}; validate p in [{p_low:.3f}, {p_high:.3f}]")
    # The regime follows the fit whenever it located an optimum (edge included: the slope says
    # which way the score rises); otherwise the best pilot cell.
    p_rec = p_hat if p_hat is not None else top.p
    side = update_side(p_rec, centre, pts)
    return Diagnosis(points=pts, fits=fits, chosen=chosen, p_hat=p_hat, edge=edge, fallback=fallback,
                     detail=detail, best=top, p_rec=p_rec, p_low=p_low, p_high=p_high,
                     reward_share=share, regime=regime_name(side, share, feedback_threshold),
                     update_side=side, centre=centre)


def oracle(points: Iterable[Allocation], centre: float, feedback_threshold: float) -> tuple[str, str]:
    """(regime, side) of the best observed allocation: the truth validation compares against."""
    pts = list(points)
    top = best(pts)
    share = sum(a.reward_share for a in pts) / len(pts)
    side = update_side(top.p, centre, pts)
    return regime_name(side, share, feedback_threshold), side


def pick(d: Diagnosis, candidates: list[Allocation]) -> Allocation:
    """The allocation a practitioner following RACE would validate among `candidates`: the one
    nearest (in log p) to the fitted optimum, or to the best pilot cell on fallback."""
    target = d.p_rec if d.fallback is None else d.best.p
    return _nearest(candidates, target)


def _nearest(cands: list[Allocation], p: float) -> Allocation:
    def dist(a: Allocation) -> float:
        return abs(math.log(a.p) - math.log(p)) if a.p > 0 and p > 0 else abs(a.p - p)

    # Ties go to the lower p (cheaper in update compute) — never to the score being judged.
    return min(cands, key=lambda a: (dist(a), a.p, a.label))


# ---------------------------------------------------------------- the baseline


@dataclass(frozen=True)
class Baseline:
    """The global native-reward baseline: the one allocation whose training (native) reward is
    best when pooled over every condition — one recipe for everything."""

    label: str
    """Allocation label with the best pooled mean native reward."""
    p: float
    """Its mean update share over all its runs."""
    native_reward: float
    """Its pooled mean native reward."""
    runs: int
    """Runs pooled for it."""

    def pick(self, candidates: list[Allocation]) -> Allocation:
        """Its choice in one condition: the same label if present, else the nearest p."""
        same = [a for a in candidates if a.label == self.label]
        return max(same, key=lambda a: a.score) if same else _nearest(candidates, self.p)


def baseline(cells: Iterable[Cell]) -> Baseline | None:
    """The global native-reward baseline, from each run once (cells of one report share it).
    None when no run reports a native reward."""
    runs: dict[str, tuple[str, float, float]] = {}
    for c in cells:
        if c.native_reward is not None:
            runs[c.path] = (c.label, c.native_reward, c.p)
    by_label: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for label, reward, p in runs.values():
        by_label[label].append((reward, p))
    if not by_label:
        return None
    label, vals = max(by_label.items(), key=lambda kv: (sum(r for r, _ in kv[1]) / len(kv[1]), kv[0]))
    return Baseline(label=label, p=sum(p for _, p in vals) / len(vals),
                    native_reward=sum(r for r, _ in vals) / len(vals), runs=len(vals))


# ---------------------------------------------------------------- validation


@dataclass(frozen=True)
class Trial:
    """One validation replay: RACE fitted without some allocations, judged on them."""

    condition: int
    """Index of the condition in race.json `conditions`."""
    held_out: str
    """What was held out: an allocation label, or 'rank=R'."""
    predicted: str
    """Regime RACE named from the training allocations."""
    truth: str
    """Regime of the best observed allocation among the judged ones."""
    hit: bool
    """predicted == truth, update side included."""
    chosen: str
    """Label of the allocation RACE's recommendation maps to."""
    regret: float
    """Best judged score minus the chosen allocation's score (the reward loss, >= 0)."""
    baseline_regret: float | None
    """The same for the global native-reward baseline's choice (None without a baseline)."""


def _trial(ci: int, held: str, train: list[Allocation], judged: list[Allocation], centre: float,
           threshold: float, base: Baseline | None) -> Trial:
    d = diagnose_points(train, feedback_threshold=threshold, centre=centre)
    truth, truth_side = oracle(judged, centre, threshold)
    top = best(judged)
    chosen = pick(d, judged)
    return Trial(condition=ci, held_out=held, predicted=d.regime, truth=truth,
                 hit=(d.regime, d.update_side) == (truth, truth_side), chosen=chosen.label,
                 regret=top.score - chosen.score,
                 baseline_regret=None if base is None else top.score - base.pick(judged).score)


def in_grid_trials(ci: int, points: list[Allocation], threshold: float, base: Baseline | None) -> list[Trial]:
    """Leave each allocation out in turn; judge on the full condition (the held-out one
    included, as an allocation the practitioner had not run)."""
    centre = grid_centre(a.p for a in points)
    return [_trial(ci, a.label, [b for b in points if b is not a], points, centre, threshold, base)
            for a in points]


def rank_trials(ci: int, points: list[Allocation], threshold: float, base: Baseline | None) -> list[Trial]:
    """Hold out each LoRA rank in turn: fit on the other ranks, predict the held-out rank's
    regime (the side of its own best allocation). A trial needs >= 2 allocations of the held-out
    rank and MIN_POINTS of the others."""
    centre = grid_centre(a.p for a in points)
    out = []
    for r in sorted({a.lora_rank for a in points}):
        held = [a for a in points if a.lora_rank == r]
        train = [a for a in points if a.lora_rank != r]
        if len(held) >= 2 and len(train) >= MIN_POINTS:
            out.append(_trial(ci, f"rank={r}", train, held, centre, threshold, base))
    return out


def summarize(trials: list[Trial]) -> dict:
    """Hit rate, regret (reward loss) and the comparison with the baseline over trials."""
    n = len(trials)
    if not n:
        return {"trials": 0, "hits": 0, "hit_rate": None, "mean_regret": None, "max_regret": None,
                "baseline": None}
    regrets = [t.regret for t in trials]
    out = {"trials": n, "hits": sum(t.hit for t in trials), "hit_rate": sum(t.hit for t in trials) / n,
           "mean_regret": sum(regrets) / n, "max_regret": max(regrets), "baseline": None}
    based = [t for t in trials if t.baseline_regret is not None]
    if based:
        eps = 1e-12
        out["baseline"] = {
            "trials": len(based),
            "mean_regret": sum(t.baseline_regret for t in based) / len(based),
            "race_better": sum(t.regret < t.baseline_regret - eps for t in based),
            "ties": sum(abs(t.regret - t.baseline_regret) <= eps for t in based),
            "baseline_better": sum(t.regret > t.baseline_regret + eps for t in based),
        }
    return out


# ---------------------------------------------------------------- the whole directory


def _require_enough(groups: dict[Condition, list[Allocation]], n_cells: int) -> None:
    sizes = [len({a.p for a in allocs}) for allocs in groups.values()]
    most = max(sizes, default=0)
    if most < MIN_POINTS:
        raise RaceError(
            f"too few evaluated cells to fit: {n_cells} evaluated cell(s), at most {most} distinct "
            f"allocation(s) in any one condition; RACE needs at least {MIN_POINTS} "
            f"(and 4 to locate an interior optimum) in one condition",
            "run and evaluate more allocations of the same model, budget band and reward system "
            "(`race eval RUN_DIR` adds evaluations to a run)")


def diagnose(cells: Iterable[Cell], *, feedback_threshold: float = FEEDBACK_THRESHOLD,
             source: dict | None = None) -> dict:
    """RACE over every condition of `cells`; returns the race.json document (race-v1).
    Raises RaceError when no condition has enough allocations to fit."""
    cells = list(cells)
    if not 0 <= feedback_threshold <= 1:
        raise RaceError(f"feedback threshold {feedback_threshold} is not a share", "pass a number in [0, 1]")
    groups = {cond: allocations(cs) for cond, cs in by_condition(cells).items()}
    _require_enough(groups, len(cells))
    base = baseline(cells)
    conditions, loo, ranks = [], [], []
    for ci, (cond, points) in enumerate(groups.items()):
        d = diagnose_points(points, feedback_threshold=feedback_threshold)
        # Only conditions RACE can fit at all are validated: a smaller one would only test the fallback.
        fittable = len(points) >= MIN_POINTS
        t_loo = in_grid_trials(ci, points, feedback_threshold, base) if fittable else []
        t_rank = rank_trials(ci, points, feedback_threshold, base) if fittable else []
        loo += t_loo
        ranks += t_rank
        race_pick = pick(d, points)
        base_pick = base.pick(points) if base else None
        conditions.append({
            "condition": cond.to_dict(),
            "name": cond.name(),
            "cells": sum(a.n for a in points),
            "points": [_alloc_dict(a) for a in points],
            "best_observed": _alloc_dict(d.best),
            "fits": [f.to_dict() for f in d.fits],
            "chosen_model": d.chosen.model.name if d.chosen else None,
            "p_hat": d.p_hat,
            "edge": d.edge,
            "fallback": {"used": d.fallback is not None, "reason": d.fallback},
            "reward_share": d.reward_share,
            "regime": d.regime,
            "update_side": d.update_side,
            "grid": {"p_min": d.points[0].p, "p_max": d.points[-1].p, "centre": d.centre},
            "recommendation": {
                "source": "fit" if d.fallback is None else "best-pilot-cell",
                "p": d.p_rec if d.fallback is None else d.best.p,
                "p_low": d.p_low, "p_high": d.p_high,
                "validate": race_pick.label, "detail": d.detail,
            },
            "baseline_pick": None if base_pick is None else
            {"label": base_pick.label, "p": base_pick.p, "score": base_pick.score},
            "validation": {"in_grid": summarize(t_loo), "held_out_rank": summarize(t_rank)},
        })
    return {
        "schema_version": schemas.RACE_VERSION,
        "generated_by": f"race {__version__}",
        "source": source or {"cells": len(cells)},
        "settings": {"feedback_threshold": feedback_threshold, "min_points": MIN_POINTS,
                     "max_condition": MAX_CONDITION, "models": [
                         {"name": m.name, "x": m.x, "degree": m.degree} for m in MODELS.values()],
                     "selection": "lowest leave-one-out RMSE; near-ties to the simpler model"},
        "baseline": None if base is None else {"label": base.label, "p": base.p,
                                               "native_reward": base.native_reward, "runs": base.runs},
        "conditions": conditions,
        "validation": {"in_grid": summarize(loo), "held_out_rank": summarize(ranks)},
        "limits": LIMITS,
    }


def _alloc_dict(a: Allocation) -> dict:
    return {"label": a.label, "lora_rank": a.lora_rank, "p": a.p, "score": a.score, "score_sd": a.score_sd,
            "reward_share": a.reward_share, "total_flops": a.total_flops, "n": a.n}


LIMITS = [
    "RACE is a diagnostic, not an optimizer: it names the allocation regime a pilot grid points to "
    "and the region of update share worth validating. It does not promise that the recommended "
    "allocation beats any other on held-out data.",
    "Fits are local to the grid: RACE never extrapolates beyond the lowest and highest update share "
    "it was given; an optimum on the grid's edge is reported as a fallback, not as a prediction.",
    "Conditions (model size, budget band, reward system, evaluation target, judge) are never pooled; "
    "a recommendation for one says nothing about another.",
    "Regret (reward loss) is measured against the best observed pilot cell, itself a noisy estimate "
    "from a few seeds; a zero regret is not a guarantee.",
    "The global native-reward baseline pools training rewards across reward systems whose scales "
    "differ; it is a reference point, and RACE shows no guaranteed held-out gain over it.",
]


# ---------------------------------------------------------------- writing


def check(doc: dict) -> None:
    """Validate a race.json document against schemas/race-v1 (Draft 2020-12, formats checked);
    a failure is a bug in RACE, reported with the JSON path."""
    schemas.check_output(doc, schemas.RACE, "race.json", "this is a bug in RACE; please report it with the input directory")


def _jsonable(x):
    """Non-finite floats become null (JSON has no NaN)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    return x


def write(doc: dict, out: str | Path) -> dict[str, Path]:
    """Validate `doc` and write out/race.json and out/race.md atomically; returns their paths."""
    doc = _jsonable(doc)
    check(doc)
    out = Path(out)
    paths = {"json": out / "race.json", "summary": out / "race.md"}
    write_text_atomic(paths["json"], json.dumps(doc, indent=2, allow_nan=False) + "\n")
    write_text_atomic(paths["summary"], summary(doc))
    return paths


# ---------------------------------------------------------------- the readable summary


def _f(x, fmt=".3f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _validation_lines(name: str, v: dict) -> list[str]:
    if not v["trials"]:
        return [f"- {name}: no trials (validation needs conditions with at least {MIN_POINTS} allocations; "
                "the held-out-rank mode also needs 2 of the held-out rank and 3 of the others)"]
    lines = [f"- {name}: same-regime hit rate {v['hit_rate']:.2f} ({v['hits']}/{v['trials']}), "
             f"reward loss mean {v['mean_regret']:.4g}, max {v['max_regret']:.4g}"]
    b = v.get("baseline")
    if b:
        lines.append(f"  - against the global native-reward baseline: its reward loss mean "
                     f"{b['mean_regret']:.4g}; RACE better in {b['race_better']}, tied in {b['ties']}, "
                     f"worse in {b['baseline_better']} of {b['trials']} trials")
    return lines


def summary(doc: dict) -> str:
    """The readable summary (Markdown) of a race.json document, limits included.

    Args: `doc`, the race.json document (diagnose). Returns the Markdown text.
    """
    s = doc["settings"]
    lines = ["# RACE diagnosis", "",
             "RACE is a **diagnostic, not an optimizer**: read the regimes below as where to look, "
             "then validate with full-length runs.", "",
             f"Feedback-heavy means a reward FLOP share above {s['feedback_threshold']:.2f}; fits need "
             f"{s['min_points']} allocations per condition (4 for an interior optimum).", "",
             "| condition | allocations | model | regime | recommendation | validate | fallback |",
             "|---|---:|---|---|---|---|---|"]
    for c in doc["conditions"]:
        r = c["recommendation"]
        region = (f"p in [{r['p_low']:.3f}, {r['p_high']:.3f}]" if r["source"] == "fit"
                  else f"best pilot cell (p={r['p']:.3f})")
        lines.append(f"| {c['name']} | {len(c['points'])} | {c['chosen_model'] or '-'} | {c['regime']} | "
                     f"{region} | {r['validate']} | {c['fallback']['reason'] or 'no'} |")
    lines += ["", "## Per condition", ""]
    for c in doc["conditions"]:
        lines.append(f"- **{c['name']}** — {c['regime']}: {c['recommendation']['detail']}.")
    lines += ["", "## Validation", ""]
    v = doc["validation"]
    lines += _validation_lines("in-grid leave-one-out", v["in_grid"])
    lines += _validation_lines("held-out LoRA rank", v["held_out_rank"])
    b = doc["baseline"]
    lines += ["", ("Global native-reward baseline: " + (
        f"allocation {b['label']} (pooled native reward {b['native_reward']:.4g} over {b['runs']} runs, "
        f"mean p={b['p']:.3f})." if b else "none (no run reports a native_reward evaluation)."))]
    lines += ["", "## Limits", ""] + [f"- {x}" for x in doc["limits"]]
    return "\n".join(lines) + "\n"
