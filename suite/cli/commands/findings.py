"""`race findings DIR`: the findings table of a study folder (or an exported one), recomputed from
its reports and per-sample logs: claims (a)-(f) with verdicts, intervals, RACE on a held-out budget."""

from __future__ import annotations

from suite.cli import command
from suite.cli.args import add_format, add_out, add_side_output
from suite.errors import RaceError


@command("findings", help="the findings of a study, from the reports and per-sample logs under DIR: every "
                          "allocation with bootstrap 95%% intervals, the best allocation per condition with the "
                          "probability it is best, RACE validated on the held-out budget, and the paper's claims "
                          "(a)-(f) marked reproduced / not reproduced / inconclusive")
def configure(p):
    p.epilog = ("Writes findings.json (the data), findings.md (its presentation) and frontier_intervals.png/.svg; "
                "`race leaderboard build --findings OUT/findings.json --out SITE` puts them on the site. Settings "
                "come from DIR/study.json when there is one; the flags override them. Same files, same settings: the "
                "same bytes. How to read them: docs/findings.md.")
    p.add_argument("directory", metavar="DIR", nargs="*",
                   help="a study folder (race study --out) or an exported one (--export); with --headline, any "
                        "number of exports (default: those under the checkout's docs/)")
    p.add_argument("--headline", action="store_true",
                   help="print the current verdict of each claim (a)-(f): the latest export whose design names the "
                        "claim decides it, with the number behind it, its interval and the rule; the other exports' "
                        "verdicts beside it (the first table of docs/findings.md)")
    add_format(p, ("text", "markdown"),
               help="with --headline: text (default) or the Markdown table docs/findings.md holds")
    add_out(p, metavar="OUT", help="where the findings go (default: DIR)")
    add_side_output(p, "--export", metavar="DEST",
                    help="first keep DIR's reports and trimmed per-sample logs (scores only) in DEST/runs.jsonl.xz, one "
                         "compressed file, with study.json — a folder small enough to commit — then write the findings "
                         "there")
    p.add_argument("--trimmed", action="store_true",
                   help="with --export: the reports and trimmed logs as run folders instead of one compressed file")
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


def _overrides(args) -> dict:
    """The analysis settings given as flags (None: not given), each checked."""
    out = {}
    for flag in ("replicates", "race_replicates", "seed", "pilot", "validation"):
        v = getattr(args, flag)
        if v is not None:
            if v < 0 or (v < 1 and flag != "seed"):
                raise RaceError(f"--{flag.replace('_', '-')} must be " + ("non-negative" if flag == "seed" else
                                                                          "positive") + f", got {v:g}")
            out[flag] = int(v)
    return out


def run(args) -> int:
    import shutil
    from pathlib import Path

    from suite.analysis.evidence import export
    from suite.analysis.study import STUDY_FILE
    from suite.pipeline.studyrun import site_command, stale_findings, write_findings
    from suite.site.findings import claims_text

    if args.headline:
        from suite.analysis.headline import exports_under, headline
        from suite.paths import home
        from suite.site.findings import headline_markdown, headline_text

        folders = args.directory or exports_under(home() / "docs")
        rows = headline(folders)
        print(headline_markdown(rows) if args.format == "markdown" else headline_text(rows), end="\n" if
              args.format == "text" else "")
        return 0
    if len(args.directory) != 1:
        raise RaceError(f"race findings takes one DIR, got {len(args.directory)}",
                        "name a study folder (or pass --headline to read several exports)")
    if args.format != "text":
        raise RaceError("--format shapes --headline's table", "add --headline")
    directory = Path(args.directory[0])
    if args.trimmed and not args.export:
        raise RaceError("--trimmed shapes an export", "add --export DEST")
    if args.export:
        dest = Path(args.export)
        export(directory, dest, packed=not args.trimmed)
        if (directory / STUDY_FILE).is_file() and directory.resolve() != dest.resolve():
            shutil.copyfile(directory / STUDY_FILE, dest / STUDY_FILE)
        directory = dest
    out = Path(args.out) if args.out else directory
    if args.check:
        stale = stale_findings(directory, out, **_overrides(args))
        if stale:
            print(f"{', '.join(stale)} in {out} differ from the findings recomputed from {directory}")
            return 1
        print(f"findings in {out} match the runs under {directory}")
        return 0
    doc, paths = write_findings(directory, out, plots=not args.no_plots, **_overrides(args))
    print(claims_text(doc))
    print("Wrote " + ", ".join(str(p) for p in paths))
    print(f"On the leaderboard site: {site_command(out)}")
    return 0
