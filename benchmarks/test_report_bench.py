"""Report timings: building a report from a 10,000-step ledger in under 1 s.
Run: .venv/bin/python -m pytest benchmarks/test_report_bench.py

Limits are checked on the median wall time and, because this 2-core machine is shared, also
reported as CPU time (extra_info) so a busy neighbour can be told from a regression."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from suite import paths
from suite.record.report import build_report

VALID = paths.schemas() / "examples" / "valid"
SPEC = {"policy": "Qwen2.5-1.5B-Instruct", "adapter": {"type": "lora", "rank": 64, "alpha": 128},
        "grpo": {"group_size": 2, "prompts_per_step": 16, "max_completion_tokens": 2048},
        "reward": {"system": "prm", "kind": "prm", "model": "Qwen2.5-Math-PRM-7B"},
        "engine": {"name": "trl", "version": "1.16.0"}}


def write_big_ledger(path: Path, steps: int) -> Path:
    """`steps` records shaped like the paper example's PRM ledger (about 940 bytes each)."""
    recs = [json.loads(line) for line in (VALID / "paper-qwen1.5b-lora64-prm.ledger.jsonl").read_text().splitlines()]
    with open(path, "w") as f:
        for s in range(1, steps + 1):
            r = recs[s % len(recs)]
            r["step"] = s
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    return path


@pytest.fixture(scope="module")
def ledger_10k(tmp_path_factory):
    return write_big_ledger(tmp_path_factory.mktemp("l") / "ledger.jsonl", 10_000)


def test_build_report_10k_steps(benchmark, ledger_10k):
    cpu = []

    def build():
        c = time.process_time()
        doc = build_report(ledger_10k, SPEC, created="2026-11-29T20:00:00Z")
        cpu.append(time.process_time() - c)
        return doc

    doc = benchmark.pedantic(build, rounds=3, iterations=1)
    assert doc["totals"]["steps"] == 10_000 and doc["ledger"]["records"] == 10_000
    benchmark.extra_info["cpu_s_min"] = min(cpu)
    assert min(cpu) < 1.0
    assert benchmark.stats.stats.median < 1.0
