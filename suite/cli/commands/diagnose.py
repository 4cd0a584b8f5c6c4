"""`race diagnose DIR`: the RACE diagnosis of a pilot grid, written to race.json and race.md."""

from __future__ import annotations

from suite.cli import command
from suite.cli.args import add_out


@command("diagnose", help="RACE (Reward-Aware Compute Allocation) on a pilot grid: per condition, fit "
                          "score against update share p, name the regime (high-update, low-update, "
                          "feedback-heavy), recommend where to validate or fall back to the best pilot "
                          "cell, and validate the procedure. A diagnostic, not an optimizer.")
def configure(p):
    from suite.analysis.race import FEEDBACK_THRESHOLD

    p.add_argument("directory", metavar="DIR",
                   help="folder searched recursively for run folders holding a report.json (report v1) "
                        "with evaluations")
    add_out(p, metavar="OUT", default=None,
            help="folder for race.json and race.md (default: DIR)")
    p.add_argument("--feedback-threshold", type=float, default=FEEDBACK_THRESHOLD, metavar="SHARE",
                   help="reward FLOP share above which a condition is called feedback-heavy "
                        f"(default {FEEDBACK_THRESHOLD})")
    p.add_argument("--quiet", action="store_true",
                   help="print only the paths written, not the summary")
    return run


def run(args) -> int:
    from pathlib import Path

    from suite.analysis import frontier, race
    from suite.errors import RaceError

    pilot = frontier.load(args.directory)
    if not pilot.cells:
        raise RaceError(f"{args.directory}: no evaluated cells ({pilot.reports} report.json file(s), "
                        f"{len(pilot.unevaluated)} without evaluations); RACE needs at least "
                        f"{race.MIN_POINTS} evaluated allocations in one condition",
                        "evaluate the runs first (`race eval RUN_DIR`)")
    doc = race.diagnose(pilot.cells, feedback_threshold=args.feedback_threshold,
                        source={"directory": str(args.directory), "reports": pilot.reports,
                                "cells": len(pilot.cells), "unevaluated": list(pilot.unevaluated)})
    paths = race.write(doc, Path(args.out) if args.out else Path(args.directory))
    if not args.quiet:
        print(race.summary(doc))
    print(f"Wrote {paths['json']} and {paths['summary']}")
    return 0
