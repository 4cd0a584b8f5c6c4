"""`race study STUDY.yaml --out DIR`: plan, run (resumable) and analyse a study — a fractional design
of IsoFLOP grids that answers the source paper's claims (docs/findings.md)."""

from __future__ import annotations

from suite.cli import command
from suite.cli.commands.grid import add_workers
from suite.errors import RaceError


@command("study", help="run a study: the blocks of STUDY.yaml (IsoFLOP grids that answer the paper's claims), "
                       "trained and evaluated (resumable), then analysed into findings with bootstrap intervals "
                       "and RACE validated on a held-out budget")
def configure(p):
    p.epilog = ("Rerun the same command to resume: evaluated cells are skipped, a killed cell restarts from its "
                "checkpoint; the findings are recomputed from the runs on disk. `race findings DIR` recomputes them "
                "alone; `race leaderboard build --findings DIR/findings.json --out SITE` puts them on the site. "
                "Format and the shipped study: docs/findings.md.")
    p.add_argument("study", metavar="STUDY.yaml", help="study file (tasks/studies/*.yaml)")
    p.add_argument("--out", metavar="DIR", help="output folder: DIR/study.json, DIR/cells/<cell>/, DIR/findings.md ...; "
                                                "required unless --plan")
    p.add_argument("--plan", action="store_true", help="print the plan (blocks, claim -> cells, every cell) and stop")
    p.add_argument("--calibrate", metavar="DIR",
                   help="price the plan with cells measured on this machine (folders with report.json and "
                        "timing.json, e.g. an earlier study or grid output): estimated wall seconds per cell and total")
    add_workers(p)
    p.add_argument("--executor", default="local", metavar="NAME", help="local (default) or ray")
    p.add_argument("--address", metavar="ADDR", help="ray only: an existing Ray cluster ('auto' or HOST:PORT)")
    p.add_argument("--gpus-per-cell", type=float, default=0.0, metavar="G", help="ray only: GPUs each cell reserves")
    p.add_argument("--threads", type=int, metavar="N", help="torch threads per cell (default 1)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plots", action="store_true", help="skip the figures")
    return run


def run(args) -> int:
    from pathlib import Path

    from suite.analysis import study
    from suite.cli.commands.grid import check_runner
    from suite.pipeline import gridrun, studyrun
    from suite.site.findings import claims_text

    check_runner(args, "study")
    sp = study.plan(study.load(args.study))
    rates = study.calibrate(args.calibrate) if args.calibrate else None
    from suite.pipeline.executors import resolve_workers

    print(study.plan_text(sp, rates, resolve_workers(args.workers, args.threads or 1, len(sp.cells), args.executor)))
    if args.plan:
        return 0
    res = studyrun.run(sp, args.out, workers=args.workers, executor=args.executor, threads=args.threads,
                       progress=not args.no_progress, address=args.address, gpus_per_cell=args.gpus_per_cell)
    out = Path(args.out)
    print(f"{len(res.ran)} cells run, {len(res.skipped)} already done, {len(res.failed)} failed; runs in {out / 'cells'}/")
    print(gridrun.throughput(sp.cells, res))
    if res.failed:
        for k, why in res.failed.items():
            print(f"  failed {k}: {why}")
        raise RaceError(f"{len(res.failed)} cell(s) failed: {', '.join(res.failed)}",
                        f"see {out}/cells/<cell>/error.txt and log.txt; rerun the same command to resume")
    doc, paths = studyrun.write_findings(out, plots=not args.no_plots)
    print(claims_text(doc))
    print("Wrote " + ", ".join(str(p) for p in paths))
    print(f"On the leaderboard site: {studyrun.site_command(out)}")
    return 0
