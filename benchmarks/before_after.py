"""The before/after table of docs/benchmarks.md, from one run: two checkouts of the suite (say,
main before and after a change) run the same work alternately on this machine, and the table
puts their figures side by side.

For each reference cell asked for (benchmarks/gate.py REFERENCE_CELLS, one torch thread, its
step cap): `race run` in a fresh interpreter, the matmul ceiling measured just before it; then
`race quickstart` once per checkout. Per cell: wall seconds (interpreter start included), step
seconds (its ledger), achieved GFLOP/s and utilization per phase. Per quickstart: wall seconds
and the grid's step seconds.

    python benchmarks/before_after.py --before /tmp/main-export --after . --cells s-sparse m-sparse l-sparse

Each checkout runs with PYTHONPATH pointing at it, so one virtualenv serves both (the editable
install's finder comes after PYTHONPATH). Output: Markdown on stdout, the raw figures as JSON
(--json). Minutes on 2 cores: run it when nothing else of yours is running, and say the load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = ("rollout", "update", "reward")


def _env(checkout: Path) -> dict:
    return dict(os.environ, PYTHONPATH=str(checkout), PYTHONWARNINGS="ignore", PYTHONHASHSEED="0")


def _race(checkout: Path, *args: str, cwd: Path) -> float:
    """Run `race ARGS` with `checkout`'s code; return its wall seconds."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import sys; from suite.cli import main; sys.exit(main())", *args],
                   cwd=cwd, env=_env(checkout), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def _ceiling() -> float:
    from suite.accounting.utilization import probe

    return probe(1, seconds=1.0).flops_per_second


def _ledger(path: Path) -> tuple[dict, dict, int]:
    flops, seconds, steps = dict.fromkeys(PHASES, 0), dict.fromkeys(PHASES, 0.0), 0
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        steps += 1
        for ph in PHASES:
            flops[ph] += rec["flops"][ph]
            seconds[ph] += rec.get("seconds", {}).get(ph, 0.0)
    return flops, seconds, steps


def cell(checkout: Path, name: str, tmp: Path) -> dict:
    """One reference cell run by `checkout`, with the ceiling measured just before it."""
    from benchmarks.gate import REFERENCE_CELLS
    from suite.train.cell import dump_cell

    spec_file = tmp / f"{name}.yaml"
    dump_cell(REFERENCE_CELLS[name].spec(), spec_file)
    out = tmp / f"{name}-{checkout.name}-{time.monotonic_ns()}"
    ceiling = _ceiling()
    wall = _race(checkout, "run", str(spec_file), "--out", str(out), "--no-progress", "--threads", "1",
                 cwd=checkout)
    flops, seconds, steps = _ledger(out / "ledger.jsonl")
    rate = {ph: flops[ph] / seconds[ph] if flops[ph] and seconds[ph] else None for ph in PHASES}
    return {"cell": name, "wall": wall, "steps": steps, "step_seconds": sum(seconds.values()), "flops": flops,
            "seconds": seconds, "rate": rate, "ceiling": ceiling,
            "utilization": {ph: r / ceiling if r else None for ph, r in rate.items()},
            "load": os.getloadavg()[0]}


def quickstart(checkout: Path, tmp: Path) -> dict:
    """`race quickstart` run by `checkout`: wall seconds and the grid's step seconds."""
    out = tmp / f"qs-{checkout.name}-{time.monotonic_ns()}"
    load = os.getloadavg()[0]
    wall = _race(checkout, "quickstart", "--out", str(out), "--no-progress", cwd=checkout)
    step = sum(sum(_ledger(f)[1].values()) for f in (out / "cells").glob("*/ledger.jsonl"))
    return {"wall": wall, "step_seconds": step, "cells": len(list((out / "cells").glob("*/report.json"))),
            "load": load}


def _g(v):
    return "—" if v is None else f"{v / 1e9:.1f}"


def _p(v):
    return "—" if v is None else f"{v:.0%}"


def markdown(runs: dict) -> str:
    rows = ["| cell | version | wall s | step s | wall / step | rollout GFLOP/s (util) | update GFLOP/s (util) | "
            "reward GFLOP/s | ceiling GFLOP/s | load |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in runs["cells"]:
        u = c["utilization"]
        rows.append(f"| {c['cell']} | {c['version']} | {c['wall']:.1f} | {c['step_seconds']:.1f} | "
                    f"{c['wall'] / c['step_seconds']:.2f} | {_g(c['rate']['rollout'])} ({_p(u['rollout'])}) | "
                    f"{_g(c['rate']['update'])} ({_p(u['update'])}) | {_g(c['rate']['reward'])} | "
                    f"{c['ceiling'] / 1e9:.1f} | {c['load']:.1f} |")
    rows += ["", "| quickstart | wall s | grid step s | wall / step | load at start |", "|---|---:|---:|---:|---:|"]
    for q in runs["quickstart"]:
        rows.append(f"| {q['version']} | {q['wall']:.1f} | {q['step_seconds']:.1f} | "
                    f"{q['wall'] / q['step_seconds']:.2f} | {q['load']:.1f} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="checkout of the code before the change")
    ap.add_argument("--after", type=Path, required=True, help="checkout of the code after the change")
    ap.add_argument("--cells", nargs="*", default=["s-sparse", "m-sparse", "l-sparse"])
    ap.add_argument("--rounds", type=int, default=1, help="cell runs per checkout (alternating)")
    ap.add_argument("--no-quickstart", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    args = ap.parse_args()
    versions = {"before": args.before.resolve(), "after": args.after.resolve()}
    runs: dict = {"cells": [], "quickstart": []}
    with tempfile.TemporaryDirectory(prefix="race-before-after-") as d:
        tmp = Path(d)
        for name in args.cells:
            for r in range(args.rounds):
                order = ("before", "after") if r % 2 == 0 else ("after", "before")
                for v in order:
                    runs["cells"].append({"version": v, **cell(versions[v], name, tmp)})
                    print(f"{name} {v}: {runs['cells'][-1]['wall']:.1f} s", file=sys.stderr, flush=True)
        if not args.no_quickstart:
            for v in ("before", "after"):
                runs["quickstart"].append({"version": v, **quickstart(versions[v], tmp)})
                print(f"quickstart {v}: {runs['quickstart'][-1]['wall']:.1f} s", file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))
    print(markdown(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
