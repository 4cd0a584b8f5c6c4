"""The reference cells as regression benchmarks (issue 8): each cell of REFERENCE_CELLS of benchmarks/gate.py
is trained for a few steps (the timed unit: model loading, trainer build and training, one round),
then its figures go into pytest-benchmark's extra_info: FLOPs and tokens per phase, steps, the
last step's training reward, achieved FLOP/s and utilization per phase, a probe evaluation
(pass@1, process judge, native reward on the first N problems of arith-easy-250) and the library
versions. Around each cell the matmul ceiling is measured (issue 21): the cell's utilization and
its time in reference units (what the gate judges) come from the same run, not from a number
stored on another machine.

    race bench                          # run, compare with benchmarks/baselines/<kind>.json, table
    pytest benchmarks/test_reference_cells.py --race-gate      # the same gate from pytest
    pytest benchmarks/test_reference_cells.py -m race_fast --race-gate   # the fast lane only

See docs/benchmarks.md.
"""

from __future__ import annotations

import pytest

from benchmarks import gate as bench

CELLS = [pytest.param(c.name, marks=[pytest.mark.race_fast] if c.fast else [], id=c.name)
         for c in bench.REFERENCE_CELLS.values()]


@pytest.mark.parametrize("name", CELLS)
def test_reference_cell(benchmark, name, tmp_path):
    import torch
    from trl import GRPOTrainer  # noqa: F401 -- one-time imports stay outside the first cell's timing

    import suite.train.run  # noqa: F401
    from suite.accounting.utilization import probe

    torch.set_num_threads(bench.BENCH_THREADS)
    bc = bench.REFERENCE_CELLS[name]
    out = tmp_path / "run"
    before = probe(bench.BENCH_THREADS)
    result = benchmark.pedantic(bench.train, args=(bc, out), rounds=1, iterations=1)
    cal = bench.calibration(before, probe(bench.BENCH_THREADS))
    benchmark.extra_info.update(bench.figures(bc, out, ceiling=cal["flops_per_second"]))
    benchmark.extra_info.update(calibration=cal, time=bench.time_figures(benchmark.stats.stats.median, cal))
    info = benchmark.extra_info
    assert result.steps == bc.steps == info["steps"], "the cell's budget ended it before its step cap"
    assert info["flops"]["rollout"] > 0 and info["flops"]["update"] > 0
    # Rule rewards are free; the PRM is charged by its own forward passes.
    assert (info["flops"]["reward"] > 0) == (bc.spec().reward.system in ("prm", "proxy_prm"))
    assert 0.0 <= info["probe"]["pass@1"] <= 1.0
