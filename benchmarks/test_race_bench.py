"""RACE timings: diagnosing 1,000 evaluated cells in under 2 s, and building their frontiers
(tables and PNG/SVG plots) in under 2 s — reading the report folders included.
Run: .venv/bin/python -m pytest benchmarks/test_race_bench.py"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest


from race_helpers import make_report, write_reports

from suite.analysis import frontier, race

LIMIT_S = 2.0


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
    return root, len(cells)


def test_diagnose_1000_cells(benchmark, grid, tmp_path):
    root, n = grid

    def diagnose():
        doc = race.diagnose(frontier.load_cells(root))
        race.write(doc, tmp_path)
        return doc

    doc = benchmark.pedantic(diagnose, rounds=3, iterations=1)
    assert doc["validation"]["in_grid"]["trials"] > 0
    benchmark.extra_info["cells"] = n
    assert benchmark.stats.stats.median < LIMIT_S


def test_frontier_1000_cells(benchmark, grid, tmp_path):
    root, n = grid

    def build():
        cells = frontier.load_cells(root)
        rows = frontier.frontier(cells)
        text = frontier.table(rows) + frontier.moves_table(frontier.moves(rows))
        return rows, text, frontier.plot(rows, cells, tmp_path)

    rows, text, files = benchmark.pedantic(build, rounds=3, iterations=1)
    assert len(files) == 4 and rows
    benchmark.extra_info["cells"] = n
    assert benchmark.stats.stats.median < LIMIT_S
