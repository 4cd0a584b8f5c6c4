"""Validator timings: one report in under 50 ms; a 100,000-step ledger in under 2 s of CPU time
(time.process_time: the machine is shared; wall time and load average are printed) and under
200 MB (tracemalloc peak); and the heavy fuzz lane (RACE_FUZZ_SCALE, default 10 here).
Run: .venv/bin/python -m pytest benchmarks/test_validate_bench.py -s"""

from __future__ import annotations

import json
import os
import sys
import time
import tracemalloc
from pathlib import Path



from test_report_bench import write_big_ledger

from suite import paths
from suite.validate import validate_path, validate_report

VALID = paths.schemas() / "examples" / "valid"


def test_validate_one_report(benchmark):
    doc = json.loads((VALID / "paper-qwen1.5b-lora64-prm.json").read_text())
    validate_report(doc)  # warm: schema compiled, specs loaded
    findings = benchmark(validate_report, doc, base_dir=VALID)
    assert findings == []
    assert benchmark.stats.stats.median < 0.050


def test_validate_100k_step_ledger(benchmark, tmp_path):
    led = write_big_ledger(tmp_path / "ledger.jsonl", 100_000)
    cpu = []

    def run():
        c = time.process_time()
        f = validate_path(led)
        cpu.append(time.process_time() - c)
        return f

    findings = benchmark.pedantic(run, rounds=2, iterations=1)
    assert findings == []
    tracemalloc.start()
    validate_path(led)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    load = os.getloadavg()[0]
    benchmark.extra_info.update(cpu_s_min=min(cpu), peak_mb=peak / 2**20, file_mb=led.stat().st_size / 2**20,
                                load_avg_1m=load)
    print(f"\n100,000-step ledger ({led.stat().st_size / 2**20:.0f} MB): cpu {min(cpu):.2f} s, "
          f"wall {benchmark.stats.stats.min:.2f} s, load {load:.2f}, peak {peak / 2**20:.1f} MB")
    assert peak < 200 * 2**20
    assert min(cpu) < 2.0


def test_fuzz_heavy_lane():
    """The fuzz tests with RACE_FUZZ_SCALE (default 10: ~25,000 examples, random seeds)."""
    import subprocess

    env = {**os.environ, "RACE_FUZZ_SCALE": os.environ.get("RACE_FUZZ_SCALE", "10")}
    tests = Path(__file__).resolve().parents[1] / "tests"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests / "test_validate_fuzz.py")],
                       env=env, capture_output=True, text=True, cwd=tests.parent)
    assert r.returncode == 0, r.stdout[-3000:]
