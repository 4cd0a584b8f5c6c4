"""`race study STUDY.yaml --out DIR`: plan, run (resumable) and analyse a study — a fractional design
of IsoFLOP grids that answers the source paper's claims (docs/findings.md)."""

from __future__ import annotations

from suite.cli import command
from suite.cli.args import add_out
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
    add_out(p, metavar="DIR",
            help="output folder: DIR/study.json, DIR/cells/<cell>/, DIR/findings.md ...; "
                 "required unless --plan")
    p.add_argument("--from", dest="source", metavar="EXPORT",
                   help="start from a committed export (e.g. docs/decisive): its cells of this plan are unpacked into "
                        "--out first (those already there are kept), with its study.json, so only the rest run; rerun "
                        "the same command to resume")
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


def seed_from(sp, source, out) -> str:
    """Unpack the planned cells an export holds (suite.analysis.evidence.PACKED, or run folders)
    into out/cells/ when absent there, and its study.json when out has none; one line says what."""
    import shutil

    from suite.analysis.evidence import PACKED, unpack
    from suite.analysis.study import STUDY_FILE
    from suite.pipeline.gridrun import CELLS_DIR

    if not source.is_dir():
        raise RaceError(f"--from {source}: no such folder", "name an exported study (race findings --export)")
    wanted = {f"{CELLS_DIR}/{pc.cell.id}" for pc in sp.cells}
    if (source / PACKED).is_file():
        before = {p.parent for p in (out / CELLS_DIR).glob("*/report.json")}
        unpack(source / PACKED, out, only=wanted.__contains__)
        got = {p.parent for p in (out / CELLS_DIR).glob("*/report.json")} - before
    else:
        got = set()
        for rel in sorted(wanted):
            if (source / rel / "report.json").is_file() and not (out / rel / "report.json").exists():
                shutil.copytree(source / rel, out / rel, dirs_exist_ok=True)
                got.add(out / rel)
    if (source / STUDY_FILE).is_file() and not (out / STUDY_FILE).exists():
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / STUDY_FILE, out / STUDY_FILE)
    return f"from {source}: {len(got)} of the plan's {len(wanted)} cells unpacked into {out / CELLS_DIR}/"


def run(args) -> int:
    from pathlib import Path

    from suite.analysis import study
    from suite.cli.commands.grid import check_runner
    from suite.pipeline import gridrun, studyrun
    from suite.site.findings import claims_text

    check_runner(args, "study")
    if args.source and not Path(args.source).is_dir():
        raise RaceError(f"--from {args.source}: no such folder", "name an exported study (race findings --export)")
    sp = study.plan(study.load(args.study))
    rates = study.calibrate(args.calibrate) if args.calibrate else None
    from suite.pipeline.executors import resolve_workers

    print(study.plan_text(sp, rates, resolve_workers(args.workers, args.threads or 1, len(sp.cells), args.executor)))
    if args.plan:
        return 0
    if args.source:
        print(seed_from(sp, Path(args.source), Path(args.out)))
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
