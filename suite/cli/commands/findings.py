"""`race findings DIR`: the findings table of a study folder (or an exported one), recomputed from
its reports and per-sample logs: claims (a)-(f) with verdicts, intervals, RACE on a held-out budget."""

from __future__ import annotations

from suite.cli import command
from suite.errors import RaceError


@command("findings", help="the findings of a study, from the reports and per-sample logs under DIR: every "
                          "allocation with bootstrap 95%% intervals, the best allocation per condition with the "
                          "probability it is best, RACE validated on the held-out budget, and the paper's claims "
                          "(a)-(f) marked reproduced / not reproduced / inconclusive")
def configure(p):
    p.epilog = ("Writes findings.json (the data), findings.md and findings.html (its presentation) and "
                "frontier_intervals.png/.svg. Settings come from DIR/study.json when there is one; the flags "
                "override them. Same files, same settings: the same bytes. How to read them: docs/findings.md.")
    p.add_argument("directory", metavar="DIR", help="a study folder (race study --out) or an exported one (--export)")
    p.add_argument("--out", metavar="OUT", help="where the findings go (default: DIR)")
    p.add_argument("--export", metavar="DEST",
                   help="first copy DIR's reports, trimmed per-sample logs (scores only) and study.json to DEST — a "
                        "folder small enough to commit — then write the findings there")
    p.add_argument("--check", action="store_true",
                   help="recompute and compare with the findings.json and findings.md already in OUT; exit 1 when "
                        "they differ (nothing is written)")
    p.add_argument("--replicates", type=int, metavar="N", help="bootstrap replicates (default 2000)")
    p.add_argument("--race-replicates", type=int, metavar="N", help="replicates of the RACE replay (default 500)")
    p.add_argument("--seed", type=int, metavar="N", help="seed of the resampling plan (default 2607)")
    p.add_argument("--pilot", type=float, metavar="FLOPS", help="pilot budget (default: the study's, else the smallest)")
    p.add_argument("--validation", type=float, metavar="FLOPS",
                   help="held-out validation budget (default: the study's, else the largest)")
    p.add_argument("--no-plots", action="store_true", help="skip the figures")
    return run


def settings_for(directory, args=None):
    """suite.findings.Settings: defaults < DIR/study.json < command-line flags."""
    from suite.findings import Settings
    from suite.study import read_study_json

    kw = {}
    doc = read_study_json(directory)
    if doc:
        kw.update(doc["study"].get("analysis") or {})
        kw.update(pilot=doc["study"]["race"]["pilot"], validation=doc["study"]["race"]["validation"])
    for flag, key in (("replicates", "replicates"), ("race_replicates", "race_replicates"), ("seed", "seed"),
                      ("pilot", "pilot"), ("validation", "validation")):
        v = getattr(args, flag, None) if args is not None else None
        if v is not None:
            if (key != "seed" and v < 1) or v < 0:
                raise RaceError(f"--{flag.replace('_', '-')} must be positive, got {v:g}")
            kw[key] = int(v)
    return Settings(**kw), doc


def analyse_folder(directory, out, args=None, *, plots: bool = True, check: bool = False) -> int:
    """Compute and write (or check) the findings of the runs under `directory` into `out`."""
    from pathlib import Path

    from suite import findings
    from suite.evidence import load_runs

    settings, study_doc = settings_for(directory, args)
    source = {"study": study_doc["study"]["name"]} if study_doc else {}
    doc = findings.findings(findings.analyse(load_runs(directory), settings), source)
    out = Path(out)
    if check:
        want = {"findings.json": findings.to_json(doc), "findings.md": findings.markdown(doc)}
        stale = [n for n, text in want.items()
                 if not (out / n).is_file() or (out / n).read_text(encoding="utf-8") != text]
        if stale:
            print(f"{', '.join(stale)} in {out} differ from the findings recomputed from {directory}")
            return 1
        print(f"findings in {out} match the runs under {directory}")
        return 0
    paths = findings.write(doc, out, plots=plots)
    print(findings.claims_text(doc))
    print("Wrote " + ", ".join(str(p) for p in paths))
    return 0


def run(args) -> int:
    import shutil
    from pathlib import Path

    from suite.evidence import export
    from suite.study import STUDY_FILE

    directory = Path(args.directory)
    if args.export:
        dest = Path(args.export)
        export(directory, dest)
        if (directory / STUDY_FILE).is_file():
            shutil.copyfile(directory / STUDY_FILE, dest / STUDY_FILE)
        directory = dest
    return analyse_folder(directory, Path(args.out) if args.out else directory, args, plots=not args.no_plots,
                          check=args.check)
