"""RACE timings on 1,000 evaluated cells, reading the report folders included, each a ratio to
a reference measured in the same run (benchmarks/ratio.py): the diagnosis against reading the
same reports and fitting each condition's points by plain least squares; the frontiers (tables
and PNG/SVG plots) against reading them and drawing one plain scatter of the same points.
Run: .venv/bin/python -m pytest benchmarks/test_race_bench.py -s"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest


from race_helpers import make_report, write_reports

from benchmarks.ratio import Limit, check, interleaved
from suite.analysis import frontier, race

#: Measured 2026-12-01 (2 cores, load ~2): 13x (seeded), 26x (wide).
DIAGNOSE = {
    "seeded": Limit(30.0, "every report read and checked, then per condition the linear and quadratic fits in p and "
                          "log p, leave-one-out validation of the regime and race.json written, against reading the "
                          "reports and one least-squares fit per condition: about 13x"),
    "wide": Limit(60.0, "as seeded, but 10 conditions of 100 allocations: leave-one-out refits each condition 100 "
                        "times where the reference fits it once: about 26x"),
}
#: Measured 2026-12-01: 7.8-10.4x.
FRONTIER = Limit(20.0, "every report read and checked, the best allocation per condition, two tables and four plot "
                       "files (PNG and SVG of the frontiers and of p against score), against reading the reports "
                       "and one plain scatter saved as PNG and SVG: about 8-10x")


def _read_and_fit(root: Path) -> int:
    """The reference of the diagnosis: read every report, one least-squares quadratic in log p per
    (model, reward, target, metric)."""
    points = defaultdict(list)
    for f in sorted(root.glob("*/report.json")):
        doc = json.loads(f.read_text())
        for e in doc["evaluations"]:
            points[doc["policy"]["name"], doc["reward"]["system"], e["target"], e["metric"]].append(
                (math.log(doc["totals"]["update_share"]), e["value"]))
    for pts in points.values():
        x, y = np.array(pts).T
        np.polyfit(x, y, 2 if len(pts) > 2 else 1)
    return len(points)


def _read_and_plot(root: Path, out: Path) -> None:
    """The reference of the frontiers: read every report, one scatter of p against the first score."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ps, ys = [], []
    for f in sorted(root.glob("*/report.json")):
        doc = json.loads(f.read_text())
        ps.append(doc["totals"]["update_share"])
        ys.append(doc["evaluations"][0]["value"])
    fig, ax = plt.subplots()
    ax.scatter(ps, ys)
    fig.savefig(out / "reference.png")
    fig.savefig(out / "reference.svg")
    plt.close(fig)


def _pilot(root: Path, models, rewards, allocs, seeds, with_native: bool) -> Path:
    """A grid of reports on noisy concave surfaces; each report has pass@1 (and native reward)."""
    rng = np.random.default_rng(0)
    ps = np.geomspace(0.05, 0.7, allocs)
    reps = []
    for m in models:
        for r in rewards:
            peak = rng.uniform(0.1, 0.6)
            for i, p in enumerate(ps):
                for s in range(seeds):
                    score = 0.6 - 0.5 * (math.log(p) - math.log(peak)) ** 2 / 4 + rng.normal(0, 0.02)
                    reps.append(make_report(model_name=m, reward=r, reward_share=0.15 if r == "prm" else 0.0,
                                            rank=[8, 32, 128][i % 3], label=f"a{i}", seed=s, p=float(p),
                                            scores={("arith-easy", "pass@1"): score},
                                            native=float(p) if with_native else None))
    return write_reports(root, reps)


SHAPES = {
    # a realistic pilot: 6 model/reward settings x 10 allocations x 8 seeds, 2 evaluations each (960 cells)
    "seeded": dict(models=["tiny-0.2m", "tiny-1m", "tiny-4m"], rewards=["sparse", "prm"], allocs=10, seeds=8,
                   with_native=True),
    # the worst case for leave-one-out: 10 conditions of 100 allocations, one seed, one evaluation
    "wide": dict(models=["tiny-0.2m", "tiny-1m", "tiny-4m", "m4", "m5"], rewards=["sparse", "prm"], allocs=100,
                 seeds=1, with_native=False),
}


@pytest.fixture(scope="module", params=sorted(SHAPES))
def grid(request, tmp_path_factory):
    root = _pilot(tmp_path_factory.mktemp(request.param), **SHAPES[request.param])
    cells = frontier.load_cells(root)
    assert 950 <= len(cells) <= 1000
    return root, len(cells), request.param


def test_diagnose_1000_cells(benchmark, grid, tmp_path):
    root, n, shape = grid

    def diagnose():
        doc = race.diagnose(frontier.load_cells(root))
        race.write(doc, tmp_path)
        return doc

    timing = interleaved(benchmark, diagnose, lambda: _read_and_fit(root), rounds=3)
    assert timing.result["validation"]["in_grid"]["trials"] > 0
    check(benchmark, timing, DIAGNOSE[shape], cells=n)


def test_frontier_1000_cells(benchmark, grid, tmp_path):
    root, n, _ = grid

    def build():
        cells = frontier.load_cells(root)
        rows = frontier.frontier(cells)
        text = frontier.table(rows) + frontier.moves_table(frontier.moves(rows))
        return rows, text, frontier.plot(rows, cells, tmp_path)

    timing = interleaved(benchmark, build, lambda: _read_and_plot(root, tmp_path), rounds=3)
    rows, text, files = timing.result
    assert len(files) == 4 and rows
    check(benchmark, timing, FRONTIER, cells=n)
