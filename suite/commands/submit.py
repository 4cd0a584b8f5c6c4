"""`race submit REPORT`: add a report to the leaderboard's submissions behind the validation gate."""

from __future__ import annotations

from pathlib import Path

from ..cli import command

DEFAULT_SUBMISSIONS = "leaderboard/submissions"


@command("submit", help="Validate a report and add it to the leaderboard submissions under a content-hash id "
                        "(refuses error findings and duplicates).")
def configure(p):
    p.add_argument("report", metavar="REPORT", type=Path,
                   help="the compute-allocation report v1 (JSON) to submit; its ledger, when it sits at the "
                        "report's ledger.path with the declared sha256, is stored too so the site can chart it")
    p.add_argument("--submissions", metavar="DIR", type=Path, default=Path(DEFAULT_SUBMISSIONS),
                   help=f"the submissions folder to add it to (default: {DEFAULT_SUBMISSIONS})")
    p.add_argument("--no-ledger", action="store_true",
                   help="store only the report, not its ledger (the site then shows no per-step chart)")
    return run


def run(args) -> int:
    from ..leaderboard import describe, submit

    done = submit(args.report, args.submissions, copy_ledger=not args.no_ledger)
    print(f"submitted {args.report.name} as {done.id} -> {done.path.name}")
    if done.ledger:
        print(f"  ledger stored as {done.ledger.parent.name}/{done.ledger.name}")
    for f in done.findings:
        print(f"  {describe(f)}")
    return 0
