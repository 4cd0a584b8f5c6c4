"""`race bench [--fast] [--update-baseline] [--machine KIND] [--calibrate]`: run the reference
cells through pytest-benchmark, compare with the stored baseline of this machine kind, print what
moved and what each cell achieved (FLOP/s and utilization per phase); or only measure and store
this machine's matmul ceiling (--calibrate)."""

from __future__ import annotations

import sys

from .. import command
from ..args import add_out
from ...errors import RaceError


@command("bench", help="run the reference cells as regression benchmarks and gate them against the stored "
                       "baseline (FLOPs/tokens exact, rewards and pass@1 within tolerance, time against a same-run "
                       "calibration)")
def configure(p):
    p.add_argument("--calibrate", action="store_true",
                   help="only measure this machine's fp32 matmul ceiling (1 torch thread and all cores) and store "
                        "it in the calibration file (~/.cache/race/calibration.json, or $RACE_CALIBRATION): "
                        "`race grid` reports utilization against it")
    p.add_argument("--fast", action="store_true",
                   help="only the fast lane (the smallest policy, a rule reward, 2 steps; under a minute) "
                        "instead of every reference cell (a few minutes on 2 cores)")
    p.add_argument("--update-baseline", action="store_true",
                   help="after the run, write its results as the baseline (atomically); with --fast only the "
                        "fast cells' entries are replaced. Use it deliberately, after checking the table")
    p.add_argument("--machine", metavar="KIND", default=None,
                   help="machine kind whose baseline to use: benchmarks/baselines/KIND.json (default: this "
                        "machine's kind, python-<cores>core-<cpu|gpu>, e.g. python-2core-cpu)")
    p.add_argument("--baseline", metavar="FILE", default=None,
                   help="compare with (or, with --update-baseline, write) this file instead of "
                        "benchmarks/baselines/KIND.json")
    p.add_argument("--compare", metavar="JSON", default=None,
                   help="do not run: judge this pytest-benchmark JSON (written by `pytest "
                        "benchmarks/test_reference_cells.py --benchmark-json=JSON`)")
    p.add_argument("--slower-pct", metavar="PCT", type=int, default=None,
                   help="time check: fail when a cell's time in reference units (its seconds over those of a "
                        "fixed matmul workload timed around it) is more than PCT percent above the baseline's "
                        "(default: the gate's, 100, i.e. twice as slow; speed-ups never fail)")
    p.add_argument("--no-time", action="store_true",
                   help="skip the time check (judge FLOPs, tokens, steps, rewards and pass@1 only)")
    add_out(p, default=None, help="also keep the run's pytest-benchmark JSON in FILE")
    return run


def calibrate() -> int:
    """Measure the matmul ceiling at 1 thread and at all cores, store both, print them."""
    import os

    from ...accounting.utilization import calibration_path, probe, save_ceiling

    for threads in sorted({1, os.cpu_count() or 1}):
        c = probe(threads, seconds=2.0)
        save_ceiling(c)
        print(f"{c.machine}, {threads} thread{'s' * (threads > 1)}: {c.flops_per_second / 1e9:.1f} GFLOP/s "
              f"(fp32 matmul {c.size}x{c.size}, load {c.load})")
    print(f"stored in {calibration_path()}")
    return 0


def run(args) -> int:
    if args.calibrate:  # needs no checkout: the ceiling is the machine's
        return calibrate()
    import os
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    from importlib.util import find_spec

    from ...paths import checkout_module, home

    bench = checkout_module("benchmarks/gate.py", "race bench")
    if find_spec("pytest_benchmark") is None:
        raise RaceError("race bench needs pytest-benchmark, which is not installed",
                        "install the test extra in the checkout: pip install -e '.[test]'")
    if args.slower_pct is None:
        args.slower_pct = bench.DEFAULT_SLOWER_PCT
    if args.slower_pct < 0:
        raise RaceError(f"--slower-pct must be >= 0, got {args.slower_pct}")
    if args.compare and args.update_baseline:
        raise RaceError("--compare judges an existing run; it cannot refresh the baseline",
                        "run `race bench --update-baseline` to refresh from a fresh run")
    kind = args.machine or bench.machine_kind()
    path = Path(args.baseline) if args.baseline else bench.baseline_path(kind)
    # Check the baseline before minutes of training, not after.
    baseline = None
    if not args.update_baseline:
        baseline = bench.load_baseline(path, kind)
    elif path.exists():
        try:
            baseline = bench.load_baseline(path, kind)
        except RaceError:
            baseline = None  # a corrupt baseline is simply replaced

    if args.compare:
        now = bench.load_run_json(args.compare)
    else:
        root = home()
        with tempfile.TemporaryDirectory(prefix="race-bench-") as tmp:
            out = Path(tmp) / "bench.json"
            cmd = [sys.executable, "-m", "pytest", str(root / "benchmarks" / "test_reference_cells.py"),
                   "-q", "-p", "no:cacheprovider", f"--rootdir={root}", f"--benchmark-json={out}",
                   "--benchmark-columns=median,rounds", f"--basetemp={Path(tmp) / 'runs'}"]
            if args.fast:
                cmd += ["-m", "race_fast"]
            # Same hash seed in every run; torch threads are fixed by the cells themselves.
            env = dict(os.environ, PYTHONHASHSEED="0", PYTHONWARNINGS="ignore")
            print(f"race bench: running {len(bench.selected(args.fast))} reference cells "
                  f"({'fast lane' if args.fast else 'full suite'}) ...", file=sys.stderr, flush=True)
            rc = subprocess.run(cmd, cwd=root, env=env).returncode
            if rc != 0 or not out.is_file():
                print(f"race bench: the reference suite failed (pytest exit {rc}); see its output above",
                      file=sys.stderr)
                return 1
            if args.out:
                shutil.copyfile(out, args.out)
            now = bench.load_run_json(out)

    rates = ("\nachieved (ceiling: fp32 matmuls at the cells' threads, measured around each cell):\n"
             + bench.format_rates(now))
    if args.update_baseline:
        if baseline is not None:
            print(bench.format_table(bench.compare(baseline, now, slower_pct=None if args.no_time else args.slower_pct)))
        print(rates)
        written = bench.write_baseline(path, bench.merged(baseline, now))
        print(f"baseline updated: {written} ({len(bench.merged(baseline, now)['benchmarks'])} cells)")
        return 0
    result = bench.compare(baseline, now, slower_pct=None if args.no_time else args.slower_pct)
    print(f"baseline: {path}")
    print(bench.format_table(result))
    print(rates)
    return 1 if result.failed else 0
