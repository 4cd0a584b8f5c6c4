"""Report timings: building a report from a 10,000-step ledger, as a ratio to parsing the
ledger's lines in the same run (benchmarks/ratio.py; CPU time: the machine is shared).
Run: .venv/bin/python -m pytest benchmarks/test_report_bench.py -s"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.ratio import Limit, check, interleaved
from suite import paths
from suite.record.build import Provenance, build_report

VALID = paths.schemas() / "examples" / "valid"
MEASURED = Provenance("measured", recorder="race report (a per-step ledger)")
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


#: Measured 2026-12-01 (2 cores, load ~3): 1.2x.
BUILD_10K = Limit(3.0, "every line parsed (the reference: json.loads of each line), summed per phase, the file "
                       "hashed and the report checked against its schema: about 1.2x; 3x means a second "
                       "pass over the ledger or per-record schema validation")


def _parse_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if json.loads(line))


def test_build_report_10k_steps(benchmark, ledger_10k):
    timing = interleaved(benchmark, lambda: build_report(ledger_10k, SPEC, created="2026-11-29T20:00:00Z", provenance=MEASURED),
                         lambda: _parse_lines(ledger_10k), rounds=3)
    doc = timing.result
    assert doc["totals"]["steps"] == 10_000 and doc["ledger"]["records"] == 10_000
    check(benchmark, timing, BUILD_10K)
