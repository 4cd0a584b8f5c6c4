"""Validator timings, each a ratio to a reference measured in the same run (benchmarks/ratio.py):
one report against the schema check alone, a 100,000-step ledger against parsing its lines,
and its memory against the file's size; and the heavy fuzz lane (RACE_FUZZ_SCALE, default 10).
Run: .venv/bin/python -m pytest benchmarks/test_validate_bench.py -s"""

from __future__ import annotations

import json
import os
import sys
import tracemalloc
from pathlib import Path

from test_report_bench import write_big_ledger

from benchmarks.ratio import Limit, check, interleaved
from suite import paths
from suite.record.schemas import report_validator
from suite.validate import validate_path, validate_report

VALID = paths.schemas() / "examples" / "valid"

#: Measured 2026-12-01 (2 cores, load 2.4): 1.5x.
ONE_REPORT = Limit(4.0, "the schema check (the reference) plus the arithmetic and physics rules, which price "
                        "every phase again from the model specs: about 1.5x; 4x leaves room for another machine's "
                        "ratio of interpreter to jsonschema speed, not for a rule that re-reads specs per finding")
#: Measured 2026-12-01 (load 2.4-3.0): 1.3x.
LEDGER_100K = Limit(3.0, "every line parsed (the reference: json.loads of each line), then each record's shape, "
                         "steps and sums checked; the validator parses batches of lines as one array, which is "
                         "what keeps it near 1.3x; 3x means the per-line path or per-record checks came back")
#: Measured 2026-12-01: 0.12 (11 MB for a 90 MB file).
LEDGER_MEMORY = Limit(0.5, "the ledger is streamed in batches of at most 4 MB: the peak is a few batches, not the "
                           "file; half of the file means something holds the records")


def test_validate_one_report(benchmark):
    doc = json.loads((VALID / "paper-qwen1.5b-lora64-prm.json").read_text())
    validate_report(doc)  # warm: schema compiled, specs loaded
    schema = report_validator()

    def reference():
        for _ in range(20):
            schema.validate(doc)

    def measured():
        for _ in range(20):
            findings = validate_report(doc, base_dir=VALID)
        return findings

    timing = interleaved(benchmark, measured, reference, rounds=5)
    assert timing.result == []
    check(benchmark, timing, ONE_REPORT, reports_per_round=20)


def _parse_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        for line in f:
            json.loads(line)
            n += 1
    return n


def test_validate_100k_step_ledger(benchmark, tmp_path):
    led = write_big_ledger(tmp_path / "ledger.jsonl", 100_000)
    timing = interleaved(benchmark, lambda: validate_path(led), lambda: _parse_lines(led), rounds=2)
    assert timing.result == []
    tracemalloc.start()
    validate_path(led)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    size = led.stat().st_size
    check(benchmark, timing, LEDGER_100K, peak_mb=peak / 2**20, file_mb=size / 2**20, memory_ratio=peak / size)
    assert peak / size <= LEDGER_MEMORY.ratio, f"peak {peak / 2**20:.1f} MB for a {size / 2**20:.0f} MB file: {LEDGER_MEMORY.why}"


def test_fuzz_heavy_lane():
    """The fuzz tests and the mutation suite with RACE_FUZZ_SCALE (default 10: ~25,000 examples and
    ~5,800 consistent forgeries, random seeds and a random forgery pool)."""
    import subprocess

    env = {**os.environ, "RACE_FUZZ_SCALE": os.environ.get("RACE_FUZZ_SCALE", "10")}
    tests = Path(__file__).resolve().parents[1] / "tests"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests / "test_validate_fuzz.py"),
                        str(tests / "test_validate_forgeries.py")],
                       env=env, capture_output=True, text=True, cwd=tests.parent)
    assert r.returncode == 0, r.stdout[-3000:]
