"""`race leaderboard build`: the static leaderboard site from a submissions folder."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import command
from ...errors import RaceError

DEFAULT_SUBMISSIONS = "leaderboard/submissions"


@command("leaderboard", help="Build the static leaderboard site (sortable, filterable, no network needed) "
                             "from the submissions folder.")
def configure(p):
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    b = sub.add_parser("build", help="render the site: main table by total FLOPs and by allocation, a page per "
                                     "submission, the frontier plot (and a study's findings with --findings)",
                       description="Render the static site. Files that cannot be read or fail validation are "
                                   "skipped and listed on the site; the build still succeeds.")
    b.add_argument("--submissions", metavar="DIR", type=Path, default=Path(DEFAULT_SUBMISSIONS),
                   help=f"folder of submitted report files, one *.json per run (default: {DEFAULT_SUBMISSIONS})")
    b.add_argument("--out", metavar="SITE", type=Path, required=True,
                   help="folder to write the site into (created if missing; open SITE/index.html in a browser)")
    b.add_argument("--no-validate", action="store_true",
                   help="list files without running the validator (only schema-readable files are shown); "
                        "for previews, never for publishing")
    b.add_argument("--findings", metavar="FILE", type=Path,
                   help="a findings.json written by `race findings` or `race study`: adds the findings page (the "
                        "paper's claims with verdicts and 95%% intervals, RACE on the held-out budget), linked from "
                        "every page, and links frontier_intervals.png when it lies beside FILE. A file that fails "
                        "schemas/findings-v1 is refused (exit 2) and nothing is built")
    return run


def run(args) -> int:
    if args.action != "build":
        raise RaceError("missing action", "use `race leaderboard build --out SITE`")
    from ...outputs import output_dir
    from ...site.leaderboard import build
    from ...site.render import SITE_MARKER

    output_dir(args.out, what="--out", marker=SITE_MARKER, owner="site built by race", replaces=True, inputs=[args.submissions, args.findings])

    summary = build(args.submissions, args.out, check=not args.no_validate, findings=args.findings)
    print(f"built {args.out}/index.html: {summary['listed']} submission(s) listed, "
          f"{summary['skipped']} skipped, {summary['pages']} pages, main page {summary['index_bytes']:,} bytes")
    if args.findings:
        print(f"findings of {args.findings} on {args.out}/findings.html")
    from ...textsafe import clean

    for name, reason in summary["skipped_files"]:     # a submission's text: no escape sequence reaches the terminal
        print(clean(f"  skipped {name}: {reason}", newlines=False), file=sys.stderr)
    return 0
