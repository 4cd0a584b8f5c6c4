"""`race submit REPORT`: add a report to the leaderboard's submissions behind the validation gate."""

from __future__ import annotations

from pathlib import Path

from .. import command

DEFAULT_SUBMISSIONS = "leaderboard/submissions"


@command("submit", help="Validate a report and add it to the leaderboard submissions under a content-hash id "
                        "(refuses error findings and duplicates).")
def configure(p):
    p.add_argument("report", metavar="REPORT", type=Path,
                   help="the compute-allocation report v1 (JSON) to submit; its ledger must sit at the report's "
                        "ledger.path (relative to the report); it is stored in the submissions folder under a name "
                        "of its own (ledger-<sha256 prefix>.jsonl) and the stored report points at it")
    p.add_argument("--submissions", metavar="DIR", type=Path, default=Path(DEFAULT_SUBMISSIONS),
                   help=f"the submissions folder to add it to (default: {DEFAULT_SUBMISSIONS})")
    return run


def run(args) -> int:
    from ...site.leaderboard import describe, submit

    done = submit(args.report, args.submissions)
    print(f"submitted {args.report.name} as {done.id} -> {done.path.name}")
    if done.ledger:
        print(f"  ledger stored as {done.ledger.name}")
    from ...textsafe import clean

    for f in done.findings:
        print(clean(f"  {describe(f)}", newlines=False))
    return 0
