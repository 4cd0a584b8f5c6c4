"""Geometry of the site's charts (SVG drawn by the templates): the stacked per-step phase chart
of a ledger, and the compute-frontier plots (suite.analysis.frontier.compute_frontier). Numbers
in, coordinates and labels out; nothing is computed about the runs here."""

from __future__ import annotations

import math
import sys
from typing import Sequence

from ..accounting import PHASES
from .formatting import all_score_keys, fixed, sci, score

PHASE_COLORS = {"rollout": "#4e79a7", "update": "#f28e2b", "reward": "#59a14f"}
# Condition colours of the frontier plot (Tableau 10, colour-blind friendly enough for 10 series).
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
           "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About `n` round tick values between lo and hi. Any finite pair gives an answer: the span
    is taken as hi/n - lo/n (hi - lo overflows for scores near +-1.8e308), and where no round
    step exists in floating point (a span below the smallest normal number, or one that rounds
    to nothing) the ends themselves are the ticks."""
    if not hi > lo:
        return [lo]
    raw = hi / n - lo / n
    try:
        mag = 10.0 ** math.floor(math.log10(raw))
        step = next((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), 0.0)
        if not (0 < step < math.inf):
            return [lo, hi]
        first = math.ceil(lo / step) * step
        count = int(hi / step - first / step + 1e-9) + 1
    except (OverflowError, ValueError):
        return [lo, hi]
    ticks = [first + i * step for i in range(min(count, 2 * n + 1))]
    return [t for t in ticks if math.isfinite(t)] or [lo, hi]


PHASE_SHORT = {"rollout": "R", "update": "U", "reward": "W"}
"""One-letter labels of the phases, printed beside the bars (they read without colour)."""


def split_bar(shares: dict[str, float]) -> list[dict]:
    """Segments of a row's stacked rollout / update / reward bar, left to right on a 0..100
    scale: {phase, short, share, x, width}. Each phase also has its own fill pattern in the
    templates, so the split reads without colour."""
    out, x = [], 0.0
    for ph in PHASES:
        share = max(0.0, float(shares.get(ph, 0.0)))
        width = round(100.0 * share, 2)
        out.append({"phase": ph, "short": PHASE_SHORT[ph], "share": share, "x": round(x, 2), "width": width})
        x += width
    return out


def phase_chart(steps: Sequence[int], per_step: Sequence[dict[str, int]], max_points: int = 400) -> dict:
    """Geometry of the stacked phase chart: FLOPs per optimizer step, rollout at the bottom, then
    update, then reward. Long ledgers are averaged into at most `max_points` bins."""
    width, height, left, right, top, bottom = 720, 260, 70, 700, 30, 220
    n = len(steps)
    bin_ = max(1, math.ceil(n / max_points))
    xs, stacks = [], []
    for i in range(0, n, bin_):
        chunk = per_step[i:i + bin_]
        xs.append(sum(steps[i:i + bin_]) / len(chunk))
        stacks.append([sum(r[ph] for r in chunk) / len(chunk) for ph in PHASES])
    ymax = max((sum(s) for s in stacks), default=0) or 1
    x0, x1 = (xs[0], xs[-1]) if xs else (0, 1)
    sx, sy = (right - left) / ((x1 - x0) or 1), (bottom - top) / ymax

    def X(x):
        return round(left + (x - x0) * sx, 1)

    def Y(y):
        return round(bottom - y * sy, 1)

    # x positions are shared by every layer: format them once (long ledgers make many charts).
    px = [f"{X(x):g}" for x in xs] if n > 1 else [f"{left}", f"{right}"]
    layers, base = [], [0.0] * len(stacks)
    for j, ph in enumerate(PHASES):
        topline = [b + st[j] for b, st in zip(base, stacks)]
        if n == 1:  # one step: a bar, not a line
            topline, base = topline * 2, base * 2
        upper = [f"{a},{Y(t):g}" for a, t in zip(px, topline)]
        lower = [f"{a},{Y(b):g}" for a, b in zip(px, base)]
        layers.append({"phase": ph, "color": PHASE_COLORS[ph], "total": sum(r[ph] for r in per_step),
                       "points": " ".join(upper + lower[::-1])})
        base = topline[:len(stacks)]
    yticks = [{"pos": Y(v), "label": sci(v, 2)} for v in _ticks(0, ymax)]
    xticks = [{"pos": X(v), "label": f"{v:g}"} for v in _ticks(x0, x1)] if n > 1 else \
        [{"pos": (left + right) / 2, "label": str(steps[0])}]
    return {"width": width, "height": height, "left": left, "right": right, "top": top, "bottom": bottom,
            "layers": layers, "yticks": yticks, "xticks": xticks, "steps": n, "bin": bin_, "binned": bin_ > 1}


def y_range(ys: Sequence[float]) -> tuple[float, float]:
    """The score axis of a frontier plot: [0, 1] when every score lies in it, else the scores'
    own range (widened by one either side when they are all equal, kept finite at the ends of
    the floating-point range)."""
    ylo, yhi = min(ys), max(ys)
    if 0 <= ylo and yhi <= 1:
        return 0.0, 1.0                  # scores in [0, 1] get the whole unit range
    if yhi == ylo:
        ylo, yhi = ylo - max(1.0, abs(ylo) * 1e-9), yhi + max(1.0, abs(yhi) * 1e-9)
        ylo, yhi = max(ylo, -sys.float_info.max), min(yhi, sys.float_info.max)
    return ylo, yhi


def _fraction(v: float, lo: float, hi: float) -> float:
    """Where v sits between lo and hi, in [0, 1]: halved first, so that hi - lo cannot overflow
    for scores near +-1.8e308."""
    span = hi / 2 - lo / 2
    return 0.5 if not span > 0 else min(1.0, max(0.0, (v / 2 - lo / 2) / span))


def frontier_charts(rows: Sequence, keys: Sequence[str] | None = None) -> list[dict]:
    """Geometry of the frontier plots: per evaluation target, score against total FLOPs (log x)
    with one series per model size and reward system; a series' frontier joins the runs no
    cheaper run of the series beats (suite.analysis.frontier.compute_frontier)."""
    from ..analysis.frontier import compute_frontier

    charts = []
    for key in (all_score_keys(rows) if keys is None else keys):
        pts = [r for r in rows if key in r.scores and r.total_flops > 0]
        if not pts:
            continue
        width, height, left, right, top, bottom = 900, 340, 60, 660, 20, 290
        lx = [math.log10(r.total_flops) for r in pts]
        lo, hi = math.floor(min(lx) - 0.05), math.ceil(max(lx) + 0.05)   # keep points off the frame
        if hi == lo:
            hi = lo + 1
        ylo, yhi = y_range([r.scores[key] for r in pts])

        def X(v):
            return round(left + (math.log10(v) - lo) / (hi - lo) * (right - left), 2)

        def Y(v):
            return round(bottom - _fraction(v, ylo, yhi) * (bottom - top), 2)

        series = []
        names = sorted({r.series for r in pts}, key=lambda c: (c.split(" · ")[0], c))
        for i, name in enumerate(names):
            mine = [r for r in pts if r.series == name]
            frontier, marks = [], []
            for j, is_best in compute_frontier([(r.total_flops, r.scores[key]) for r in mine]):
                r = mine[j]
                if is_best:
                    frontier.append(f"{X(r.total_flops)},{Y(r.scores[key])}")
                marks.append({"x": X(r.total_flops), "y": Y(r.scores[key]), "best": is_best, "page": r.page,
                              "label": f"{r.run_name}: {score(r.scores[key])} at {sci(r.total_flops)} FLOPs, "
                                       f"p = {fixed(r.update_share, 3)}"})
            series.append({"name": name, "color": PALETTE[i % len(PALETTE)], "points": marks,
                           "frontier": " ".join(frontier) if len(frontier) > 1 else ""})
        target, _, metric = key.partition(" · ")
        charts.append({"target": target, "metric": metric, "n": len(pts), "series": series,
                       "width": width, "height": height, "left": left, "right": right, "top": top,
                       "bottom": bottom,
                       "xticks": [{"pos": X(10 ** e), "label": f"1e{e}"} for e in range(lo, hi + 1)],
                       "yticks": [{"pos": Y(v), "label": f"{v:.3g}"} for v in _ticks(ylo, yhi)]})
    return charts
