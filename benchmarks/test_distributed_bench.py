"""Import and export timings: a 1,000-step verl log becomes a ledger + report (every step priced
by suite.accounting, the report validated against the schema) in under 10 s, and composing a
cell's overrides against verl's packaged config takes under 2 s (about 0.5 s idle).
Run: .venv/bin/python -m pytest benchmarks/test_distributed_bench.py"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from suite.integrations import importers, verl
from suite.train.cell import load_cell

FIX = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "verl"
CELL = FIX / "cell-qwen1.5b-r64.yaml"


def _long_log(path: Path, steps: int) -> Path:
    first = [json.loads(x) for x in (FIX / "metrics-qwen1.5b-r64.jsonl").read_text().splitlines()][1]
    with open(path, "w") as f:
        for s in range(1, steps + 1):
            f.write(json.dumps({"step": s, "data": first["data"]}) + "\n")
    return path


def test_import_1000_verl_steps(benchmark, tmp_path):
    log = _long_log(tmp_path / "metrics.jsonl", 1000)
    cell = load_cell(CELL, check_paths=False)
    res = benchmark.pedantic(lambda: importers.import_verl(log, cell, tmp_path / "out", force=True),
                             rounds=3, iterations=1)
    assert res.doc["totals"]["steps"] == 1000
    assert benchmark.stats.stats.max < 10.0


@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl extra not installed")
def test_compose_reference_cell(benchmark):
    overrides = verl.launch_overrides(load_cell(CELL, check_paths=False))
    cfg = benchmark(verl.compose, overrides)
    assert cfg["algorithm"]["adv_estimator"] == "grpo"
    assert benchmark.stats.stats.mean < 2.0
