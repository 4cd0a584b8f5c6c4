"""CURVE rules: the scores along a run (report `curve`, schema 1.2) are stamped with FLOPs the
run really had spent at their steps, in order, inside the run."""

from __future__ import annotations

from itertools import accumulate
from typing import Iterable

from ..accounting import PHASES
from .registry import Issue, rule

_HINT = "rescore the curve from the run's ledger (race eval RUN_DIR --curve)"


@rule("CURVE-001", title="a curve point's FLOPs are not the ledger's up to its step", requires=("curve", "ledger"))
def stamps_match_ledger(ctx) -> Iterable[Issue]:
    """Each `curve.points[i].flops` must equal, phase by phase, the sum of the ledger's records
    up to and including that point's step (all zeros at step 0), and the step must be one the
    ledger recorded: a point is stamped with the compute its snapshot had really consumed, so a
    curve cannot be slid left (cheaper) or right along the compute axis."""
    series = ctx.ledger_series
    if series is None:
        return
    steps, flops = series
    cum = {s: dict(zip(PHASES, c)) for s, c in zip(steps, accumulate(
        (tuple(f[p] for p in PHASES) for f in flops), lambda a, b: tuple(x + y for x, y in zip(a, b))))}
    cum[0] = dict.fromkeys(PHASES, 0)
    for i, pt in enumerate(ctx.doc["curve"]["points"]):
        want = cum.get(pt["step"])
        if want is None:
            yield Issue(f"$.curve.points[{i}].step", f"step {pt['step']:,} is not a step of the ledger", _HINT)
            continue
        for p in PHASES:
            if pt["flops"][p] != want[p]:
                yield Issue(f"$.curve.points[{i}].flops.{p}", f"{p} FLOPs {pt['flops'][p]:,} at step {pt['step']:,}, "
                            f"but the ledger's records up to it sum to {want[p]:,}", _HINT)


@rule("CURVE-002", title="curve points are out of order or outside the run", requires=("curve", "totals"))
def points_in_order(ctx) -> Iterable[Issue]:
    """Curve points must have strictly increasing steps below the run's last step (the end is the
    report's own `totals` and `evaluations`), FLOPs that sum to their total, never decrease from
    one point to the next and never exceed the run's totals."""
    t = ctx.doc["totals"]
    prev = None
    for i, pt in enumerate(ctx.doc["curve"]["points"]):
        f, where = pt["flops"], f"$.curve.points[{i}]"
        if sum(f[p] for p in PHASES) != f["total"]:
            yield Issue(f"{where}.flops.total", f"total {f['total']:,} != rollout + update + reward "
                        f"{sum(f[p] for p in PHASES):,}", _HINT)
        if pt["step"] >= t["steps"] and t["steps"]:
            yield Issue(f"{where}.step", f"step {pt['step']:,} is not before the run's last step {t['steps']:,}",
                        "the run's end is its totals and evaluations; drop the point")
        over = [p for p in PHASES if f[p] > t["flops"][p]]
        if over:
            yield Issue(f"{where}.flops.{over[0]}", f"{over[0]} FLOPs {f[over[0]]:,} exceed the run's "
                        f"{t['flops'][over[0]]:,}", _HINT)
        if prev is not None:
            back = [p for p in PHASES if f[p] < prev["flops"][p]]
            if pt["step"] <= prev["step"]:
                yield Issue(f"{where}.step", f"step {pt['step']:,} does not follow step {prev['step']:,}",
                            "one point per snapshot, by step")
            elif back:
                yield Issue(f"{where}.flops.{back[0]}", f"{back[0]} FLOPs fall from {prev['flops'][back[0]]:,} to "
                            f"{f[back[0]]:,} between steps {prev['step']:,} and {pt['step']:,}", _HINT)
        prev = pt
