"""`race leaderboard build`: the static leaderboard site from a submissions folder."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import command
from ..args import add_out
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
    add_out(b, metavar="SITE", type=Path, required=True,
            help="folder to write the site into (created if missing; open SITE/index.html in a browser)")
    b.add_argument("--no-validate", action="store_true",
                   help="list files without running the validator (only schema-readable files are shown); "
                        "for previews, never for publishing")
    b.add_argument("--findings", metavar="FILE", type=Path,
                   help="a findings.json written by `race findings` or `race study`: adds the findings page (the "
                        "paper's claims with verdicts and 95%% intervals, RACE on the held-out budget), linked from "
                        "every page, and links frontier_intervals.png when it lies beside FILE. A file that fails "
                        "schemas/findings-v1 is refused (exit 2) and nothing is built")
    b.add_argument("--published", metavar="DIR", type=Path,
                   help="the maintained run descriptions of the field's published runs (default: the `published` "
                        "folder beside --submissions); only their rebuilds are listed as published runs (BOARD-002)")
    c = sub.add_parser("comment", help="the comparison comment of a pull request: each new report beside its "
                                       "neighbours at similar total FLOPs and the published runs (Markdown)",
                       description="Write the comparison comment the project's workflow posts on a pull request: "
                                   "each report the change adds that passes `race submit --check`, with the listed "
                                   "runs nearest in total FLOPs and the maintained published runs: allocation bars "
                                   "as text, p, FLOPs per trained token, implied utilization.")
    c.add_argument("--submissions", metavar="DIR", type=Path, default=Path(DEFAULT_SUBMISSIONS),
                   help=f"the submissions folder (default: {DEFAULT_SUBMISSIONS})")
    c.add_argument("--base", metavar="REF", help="the git ref the change is measured against (`git diff BASE...HEAD`)")
    c.add_argument("--changed", metavar="FILE", type=Path,
                   help="the changed files instead of git: 'STATUS<TAB>PATH' lines ('-' reads standard input)")
    c.add_argument("--repo", metavar="DIR", type=Path, default=Path("."),
                   help="the repository root the paths are relative to (default: the current folder)")
    c.add_argument("--published", metavar="DIR", default="leaderboard/published",
                   help="the maintained run descriptions, relative to --repo (default: leaderboard/published)")
    c.add_argument("--neighbours", metavar="N", type=int, default=3, help="listed runs shown beside each (default 3)")
    add_out(c, metavar="FILE", type=Path, help="write the comment to FILE (default: standard output)")
    return run


def _comment(args) -> int:
    from .submit import _relative, changes
    from ...site import pullrequest as pr

    if not 0 <= args.neighbours <= 50:
        raise RaceError(f"--neighbours {args.neighbours} is out of range", "give 0 to 50")
    verdict = pr.check(changes(args), args.repo, _relative(args.submissions, args.repo), args.published)
    text = pr.comment(verdict.accepted, args.submissions, neighbours=args.neighbours,
                      published=Path(args.repo) / args.published)
    if args.out:
        from ...outputs import output_file

        output_file(args.out, inputs=[args.submissions], what="--out")
        pr.write_comment(text, args.out)
        print(f"wrote {args.out}: {len(verdict.accepted)} report(s) compared")
    else:
        sys.stdout.write(text)
    return 0


def run(args) -> int:
    if args.action == "comment":
        return _comment(args)
    if args.action != "build":
        raise RaceError("missing action", "use `race leaderboard build --out SITE` or `race leaderboard comment`")
    from ...outputs import output_dir
    from ...site.leaderboard import build
    from ...site.render import SITE_MARKER

    output_dir(args.out, what="--out", marker=SITE_MARKER, owner="site built by race", replaces=True, inputs=[args.submissions, args.findings])

    summary = build(args.submissions, args.out, check=not args.no_validate, findings=args.findings,
                    published=args.published)
    print(f"built {args.out}/index.html: {summary['listed']} submission(s) listed, "
          f"{summary['skipped']} skipped, {summary['pages']} pages, main page {summary['index_bytes']:,} bytes")
    if args.findings:
        print(f"findings of {args.findings} on {args.out}/findings.html")
    from ...textsafe import clean

    for name, reason in summary["skipped_files"]:     # a submission's text: no escape sequence reaches the terminal
        print(clean(f"  skipped {name}: {reason}", newlines=False), file=sys.stderr)
    return 0
