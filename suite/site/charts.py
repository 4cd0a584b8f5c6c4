"""Geometry of the site's charts (SVG drawn by the templates): the stacked per-step phase chart
of a ledger, and the compute-frontier plots (suite.analysis.frontier.compute_frontier). Numbers
in, coordinates and labels out; nothing is computed about the runs here."""

from __future__ import annotations

import math
from typing import Sequence

from ..accounting import PHASES
from .formatting import all_score_keys, fixed, sci

PHASE_COLORS = {"rollout": "#4e79a7", "update": "#f28e2b", "reward": "#59a14f"}
# Condition colours of the frontier plot (Tableau 10, colour-blind friendly enough for 10 series).
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
           "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


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


def frontier_charts(rows: Sequence) -> list[dict]:
    """Geometry of the frontier plots: per evaluation target, score against total FLOPs (log x)
    with one series per model size and reward system; a series' frontier joins the runs no
    cheaper run of the series beats (suite.analysis.frontier.compute_frontier)."""
    from ..analysis.frontier import compute_frontier

    charts = []
    for key in all_score_keys(rows):
        pts = [r for r in rows if key in r.scores and r.total_flops > 0]
        if not pts:
            continue
        width, height, left, right, top, bottom = 900, 340, 60, 660, 20, 290
        lx = [math.log10(r.total_flops) for r in pts]
        lo, hi = math.floor(min(lx) - 0.05), math.ceil(max(lx) + 0.05)   # keep points off the frame
        if hi == lo:
            hi = lo + 1
        ys = [r.scores[key] for r in pts]
        ylo, yhi = min(ys), max(ys)
        if 0 <= ylo and yhi <= 1:
            ylo, yhi = 0.0, 1.0          # scores in [0, 1] get the whole unit range
        elif yhi == ylo:
            ylo, yhi = ylo - 1, yhi + 1

        def X(v):
            return round(left + (math.log10(v) - lo) / (hi - lo) * (right - left), 2)

        def Y(v):
            return round(bottom - (v - ylo) / (yhi - ylo) * (bottom - top), 2)

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
                              "label": f"{r.run_name}: {fixed(r.scores[key], 3)} at {sci(r.total_flops)} FLOPs, "
                                       f"p = {fixed(r.update_share, 3)}"})
            series.append({"name": name, "color": PALETTE[i % len(PALETTE)], "points": marks,
                           "frontier": " ".join(frontier) if len(frontier) > 1 else ""})
        target, _, metric = key.partition(" · ")
        charts.append({"target": target, "metric": metric, "n": len(pts), "series": series,
                       "width": width, "height": height, "left": left, "right": right, "top": top,
                       "bottom": bottom,
                       "xticks": [{"pos": X(10 ** e), "label": f"1e{e}"} for e in range(lo, hi + 1)],
                       "yticks": [{"pos": Y(v), "label": f"{v:g}"} for v in _ticks(ylo, yhi)]})
    return charts
