"""`race submit REPORT`: add a report to the leaderboard's submissions behind the validation gate;
`race submit --check --base REF`: the pull-request gate of the project's workflow."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import command
from ..args import add_side_output
from ...errors import RaceError

DEFAULT_SUBMISSIONS = "leaderboard/submissions"
DEFAULT_PUBLISHED = "leaderboard/published"


@command("submit", help="Validate a report and add it to the leaderboard submissions under a content-hash id "
                        "(refuses error findings and duplicates); --check judges a pull request's change.")
def configure(p):
    p.add_argument("report", metavar="REPORT", type=Path, nargs="?",
                   help="the compute-allocation report v1 (JSON) to submit; its ledger must sit at the report's "
                        "ledger.path (relative to the report); it is stored in the submissions folder under a name "
                        "of its own (ledger-<sha256 prefix>.jsonl) and the stored report points at it")
    p.add_argument("--submissions", metavar="DIR", type=Path, default=Path(DEFAULT_SUBMISSIONS),
                   help=f"the submissions folder to add it to (default: {DEFAULT_SUBMISSIONS})")
    g = p.add_argument_group("the pull-request gate (what .github/workflows/leaderboard.yml runs)")
    g.add_argument("--check", action="store_true",
                   help="judge a change instead of submitting: only new files in the submissions folder are "
                        "accepted (BOARD-003 an edited or removed submission, BOARD-004 a changed run description, "
                        "BOARD-005 a stray file), each added report validated with its ledger under --strict and "
                        "the board's rules (BOARD-001 run id taken, BOARD-002 a published run not maintained); "
                        "exit 0 accepted, 1 refused, 2 unreadable input")
    g.add_argument("--base", metavar="REF",
                   help="with --check: the git ref the change is measured against (`git diff BASE...HEAD`), e.g. "
                        "origin/main or the pull request's base sha")
    g.add_argument("--changed", metavar="FILE", type=Path,
                   help="with --check: the changed files instead of git, one 'STATUS<TAB>PATH' a line as "
                        "`git diff --name-status --no-renames` prints them ('-' reads standard input)")
    g.add_argument("--repo", metavar="DIR", type=Path, default=Path("."),
                   help="with --check: the repository root the paths are relative to (default: the current folder)")
    g.add_argument("--published", metavar="DIR", default=DEFAULT_PUBLISHED,
                   help=f"with --check: the maintained run descriptions, relative to --repo (default: {DEFAULT_PUBLISHED})")
    add_side_output(g, "--sarif", metavar="FILE", type=Path,
                    help="with --check: also write the findings as SARIF 2.1.0 (for code-scanning annotations)")
    p.epilog = ("exit status: 0 submitted (or, with --check, accepted), 1 refused, 2 unreadable input or usage error. "
                "A first submission end to end: docs/leaderboard.md")
    return run


def _relative(path: Path, repo: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(repo).resolve()).as_posix()
    except ValueError:
        raise RaceError(f"--submissions {path} is not inside --repo {repo}",
                        "run from the repository root, or pass --repo") from None


def changes(args):
    """The change --check judges: from --changed, else from git against --base."""
    from ...site import pullrequest as pr

    if args.changed is not None:
        if str(args.changed) == "-":
            return pr.changes_from_list(sys.stdin.read(), "standard input")
        from ...inputs import regular

        regular(args.changed, "--changed")
        try:
            text = args.changed.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise RaceError(f"--changed {args.changed}: cannot read it ({e})", "give a UTF-8 text file") from None
        return pr.changes_from_list(text, str(args.changed))
    if not args.base:
        raise RaceError("--check needs the change: --base REF (git) or --changed FILE",
                        "in a pull request's workflow: --base ${{ github.event.pull_request.base.sha }}")
    return pr.changes_from_git(args.repo, args.base)


def _check(args) -> int:
    from ...site import pullrequest as pr
    from ...textsafe import clean
    from ...validate.output import summary_line, to_sarif, to_text

    verdict = pr.check(changes(args), args.repo, _relative(args.submissions, args.repo), args.published)
    if args.sarif:
        from ...atomic import write_text_atomic

        write_text_atomic(args.sarif, to_sarif(verdict.findings, files=max(1, verdict.reports)))
    for a in verdict.accepted:
        print(clean(f"accepted {a.path.name} (submission {a.id}): {a.doc['run']['id']}", newlines=False))
    if verdict.findings:
        sys.stdout.write(to_text(verdict.findings, files=max(1, verdict.reports)))
        print("refused: fix every finding above and push again (docs/leaderboard.md)")
        return 1
    if not verdict.accepted:
        print(f"no report added under {args.submissions}: nothing to check ({summary_line([], 0)})")
    return 0


def run(args) -> int:
    if args.check:
        if args.report is not None:
            raise RaceError("--check judges a change, not a REPORT", "drop REPORT, or drop --check to submit it")
        return _check(args)
    if args.report is None:
        raise RaceError("missing REPORT", "race submit report.json (or --check --base REF for a pull request)")
    from ...site.leaderboard import describe, submit
    from ...site.pullrequest import next_steps
    from ...textsafe import clean

    done = submit(args.report, args.submissions)
    print(f"submitted {args.report.name} as {done.id} -> {done.path.name}")
    if done.ledger:
        print(f"  ledger stored as {done.ledger.name}")
    for f in done.findings:
        print(clean(f"  {describe(f)}", newlines=False))
    print(clean(next_steps(done.path, done.ledger, args.submissions)))
    return 0
