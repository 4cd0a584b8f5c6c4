"""`race frontier DIR`: the best observed allocation per condition, how p* moves, and plots."""

from __future__ import annotations

import json

from suite.cli import command
from suite.cli.args import add_format, add_out


@command("frontier", help="Conditional allocation frontiers of a directory of evaluated runs: the best "
                          "observed allocation per model size, budget band, reward system and evaluation "
                          "(never pooled across model sizes), how p* moves, tables and PNG/SVG plots.")
def configure(p):
    p.add_argument("directory", metavar="DIR",
                   help="folder searched recursively for run folders holding a report.json (report v1) "
                        "with evaluations")
    add_out(p, metavar="OUT", default=None,
            help="where to write frontier.md and the plots (default: DIR/frontier)")
    p.add_argument("--no-plots", action="store_true",
                   help="write the tables only (skips matplotlib, which takes about a second)")
    add_format(p, ("text", "json"),
               help="text: the tables (default); json: the frontier as JSON on standard output (files are "
                    "still written either way)")
    return run


def run(args) -> int:
    from pathlib import Path

    from suite.analysis import frontier as fr
    from suite.errors import RaceError

    pilot = fr.load(args.directory)
    if not pilot.cells:
        raise RaceError(f"{args.directory}: no evaluated cells ({pilot.reports} report.json file(s), "
                        f"{len(pilot.unevaluated)} without evaluations)",
                        "evaluate the runs first (`race eval RUN_DIR`)")
    rows = fr.frontier(pilot.cells)
    ms = fr.moves(rows)
    out = Path(args.out) if args.out else Path(args.directory) / "frontier"
    written = fr.write(list(pilot.cells), out, plots=not args.no_plots)
    if args.format == "json":
        print(json.dumps({
            "conditions": [{"condition": r.condition.to_dict(), "cells": r.cells,
                            "allocations": len(r.allocations), "best": {
                                "label": r.best.label, "p": r.best.p, "score": r.best.score,
                                "score_sd": r.best.score_sd, "n": r.best.n, "lora_rank": r.best.lora_rank}}
                           for r in rows],
            "moves": [{"factor": m.factor, "held": m.held, "from": m.frm, "to": m.to,
                       "p_from": m.p_from, "p_to": m.p_to, "delta": m.delta,
                       "same_allocation": m.same_allocation} for m in ms],
            "files": [str(w) for w in written]}, indent=2))
    else:
        print(fr.document(rows, ms))
        skipped = f"; {len(pilot.unevaluated)} unevaluated report(s) skipped" if pilot.unevaluated else ""
        print(f"{len(pilot.cells)} cells from {pilot.reports} report(s){skipped}. Wrote:")
        for w in written:
            print(f"  {w}")
    return 0
