"""`race grid GRID.yaml --out DIR`: expand a pilot grid, plan every cell into its IsoFLOP band,
run and evaluate the cells (resumable), with a progress bar across the grid."""

from __future__ import annotations

import argparse

from suite.cli import command
from suite.cli.args import add_out
from suite.errors import RaceError


@command("grid", help="run an IsoFLOP pilot grid: expand GRID.yaml into cells, plan each into its budget band, "
                      "train and evaluate them (resumable)")
def configure(p):
    p.epilog = ("Steps absorb the budget: every cell trains until its FLOP budget is spent, so cells of one "
                "budget land in one IsoFLOP band and differ in steps and update share. A grid whose cells cannot "
                "be sure to reach their band is refused before anything runs. Rerun the same command to resume: "
                "evaluated cells are skipped, a crashed cell restarts from its checkpoint. "
                "File format: docs/quickstart.md; examples: tasks/grids/.")
    p.add_argument("grid", metavar="GRID.yaml", help="grid file (models, budgets, band, allocations, rewards, seeds, "
                                                     "cell, eval)")
    add_out(p, metavar="DIR",
            help="output folder: DIR/grid.json (the plan) and DIR/cells/<cell>/ "
                 "(ledger.jsonl, report.json, adapter/, log.txt); required unless --plan")
    p.add_argument("--plan", action="store_true",
                   help="print the plan (steps, FLOPs per step, planned update share per cell) and stop")
    add_workers(p)
    p.add_argument("--executor", default="local", metavar="NAME",
                   help="where cells run: local (worker processes, default) or ray (needs the ray extra)")
    p.add_argument("--address", metavar="ADDR",
                   help="ray only: an existing Ray cluster ('auto' or HOST:PORT); default: a local Ray instance "
                        "started for this grid and shut down after it")
    p.add_argument("--gpus-per-cell", type=float, default=0.0, metavar="G",
                   help="ray only: GPUs each cell reserves (fractions share a GPU; default 0: CPU cells)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="torch threads per cell, and the CPUs each Ray task reserves (default 1, as race quickstart "
                        "and race study: the embedded tiny models gain nothing from more, and on a shared 2-core "
                        "machine 2 threads ran the quickstart grid in 11.6 min vs 5.5 min; raise it for larger "
                        "models)")
    p.add_argument("--limit", type=int, metavar="N",
                   help="evaluate only the first N problems of each target (overrides the grid's eval.limit)")
    p.add_argument("--targets", nargs="+", metavar="TARGET",
                   help="evaluation targets (overrides the grid's eval.targets)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return run


def _workers(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or auto, got {text!r}")
    return n


def add_workers(p) -> None:
    """The --workers option `race grid`, `race study` and `race quickstart` share."""
    p.add_argument("--workers", type=_workers, default="auto", metavar="N|auto",
                   help="cells run at once by local workers (default auto: one per core at --threads 1, at most "
                        "4, one when a GPU is visible; on 2 cores the quickstart grid ran in 42-45 s on two "
                        "workers against 75-77 s on one, each cell as fast)")


def grid_eval(g, limit=None, targets=None):
    """The grid's EvalPlan with command-line overrides."""
    from dataclasses import replace

    from suite.evaluate.targets import target

    ev = g.evaluation
    if limit is not None:
        if limit < 1:
            raise RaceError(f"--limit must be a positive integer, got {limit}")
        ev = replace(ev, limit=limit)
    if targets:
        for t in targets:
            target(t)
        ev = replace(ev, targets=tuple(targets))
    return ev


def check_runner(args, what: str = "grid") -> None:
    """The runner options (--workers, --threads, the ray executor's) and --out, checked; `race
    study` shares them."""
    if args.threads is not None and args.threads < 1:
        raise RaceError(f"--threads must be >= 1, got {args.threads}")
    if args.executor != "ray" and (args.address or args.gpus_per_cell):
        raise RaceError("--address and --gpus-per-cell are options of the ray executor",
                        "add --executor ray, or drop them to run cells on this machine")
    if args.gpus_per_cell < 0:
        raise RaceError(f"--gpus-per-cell must be >= 0, got {args.gpus_per_cell:g}")
    if not args.plan and not args.out:
        raise RaceError(f"--out DIR is required to run a {what}", "or pass --plan to only print the plan")


def run(args) -> int:
    from suite.analysis import grid
    from suite.pipeline import gridrun

    check_runner(args)
    g = grid.load(args.grid)
    ev = grid_eval(g, args.limit, args.targets)
    gp = grid.plan_grid(g)
    g, planned = gp.grid, gp.cells
    for note in gp.notes:
        print(f"note: {note}")
    print(f"grid {g.name}: {len(planned)} cells ({len(g.models)} models x {len(g.budgets)} budgets x "
          f"{len(g.rewards)} rewards x {len(g.allocations)} allocations x {len(g.seeds)} seeds), band "
          f"[{1 - g.band:g} B, B]")
    print(grid.plan_table(planned))
    if args.plan:
        return 0
    res = gridrun.run(planned, args.out, ev, workers=args.workers, executor=args.executor, threads=args.threads,
                   progress=not args.no_progress, grid=g, address=args.address, gpus_per_cell=args.gpus_per_cell)
    print(f"{len(res.ran)} cells run, {len(res.skipped)} already done, {len(res.failed)} failed; "
          f"plan in {res.out / gridrun.PLAN_FILE}, runs in {res.out / gridrun.CELLS_DIR}/")
    print(gridrun.throughput(planned, res))
    if res.failed:
        for k, why in res.failed.items():
            print(f"  failed {k}: {why}")
        raise RaceError(f"{len(res.failed)} cell(s) failed: {', '.join(res.failed)}",
                        f"see {res.out / gridrun.CELLS_DIR}/<cell>/error.txt and log.txt; rerun the same command "
                        f"to resume (finished cells are skipped)")
    return 0
