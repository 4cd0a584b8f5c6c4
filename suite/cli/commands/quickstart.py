"""`race quickstart`: a pilot grid on the embedded tiny models, evaluated, frontiers, RACE and a
leaderboard site, with a summary table at the end."""

from __future__ import annotations

from suite.cli import command
from suite.cli.args import add_out
from suite.cli.commands.grid import add_workers
from suite.errors import RaceError


@command("quickstart", help="run the suite end to end on the embedded tiny models (a few minutes on 2 cores): "
                            "pilot grid, evaluation, frontiers, RACE diagnosis, leaderboard site")
def configure(p):
    p.epilog = ("Runs tasks/grids/quickstart.yaml (two model sizes x three allocations x the sparse rule reward "
                "and the PRM, one IsoFLOP band), evaluates every cell on both embedded targets, then writes "
                "frontier/, race.json + race.md and site/index.html. Rerun to resume: evaluated cells are "
                "skipped. What each output means: docs/quickstart.md.")
    add_out(p, default="runs/quickstart", metavar="DIR",
            help="output folder (default: %(default)s): grid.json, cells/<cell>/, frontier/, race.json, "
                 "race.md, submissions/, site/")
    p.add_argument("--grid", metavar="GRID.yaml",
                   help="run this grid file instead of tasks/grids/quickstart.yaml (same format as `race grid`)")
    p.add_argument("--limit", type=int, metavar="N",
                   help="evaluate only the first N problems of each target (default: the grid's eval.limit)")
    add_workers(p)
    p.add_argument("--threads", type=int, metavar="N",
                   help="torch threads per cell (default 1: the tiny models gain nothing from more, and more "
                        "oversubscribe a busy machine)")
    p.add_argument("--no-site", action="store_true", help="skip the leaderboard site")
    p.add_argument("--no-plots", action="store_true", help="skip the frontier plots (PNG/SVG)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return run


def run(args) -> int:
    from suite.pipeline.quickstart import quickstart, summary_text

    if args.limit is not None and args.limit < 1:
        raise RaceError(f"--limit must be a positive integer, got {args.limit}")
    qs = quickstart(args.out, grid_file=args.grid, limit=args.limit, workers=args.workers, threads=args.threads,
                    progress=not args.no_progress, site=not args.no_site, plots=not args.no_plots)
    print(summary_text(qs))
    return 0
