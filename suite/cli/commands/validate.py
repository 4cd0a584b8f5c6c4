"""`race validate`: check reports and ledgers; every finding with its JSON path and a fix hint."""

from __future__ import annotations

import sys

from .. import command
from ..args import add_format, add_out
from ...errors import RaceError


def _positive_int(s: str) -> int:
    import argparse

    try:
        v = int(float(s))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    except OverflowError:
        raise argparse.ArgumentTypeError(f"not a finite number: {s!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    if v > 1 << 40:
        raise argparse.ArgumentTypeError(f"{s} is over the 1 TiB most a report can be")
    return v


@command("validate", help="Check compute-allocation reports and ledgers: schema, arithmetic, physics, plausibility.")
def configure(p):
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="report (.json), ledger (.jsonl), folder (searched recursively for both), or - for a "
                        "report on standard input. A report's ledger is checked too, resolved against the report's folder.")
    add_format(p, ("text", "json", "sarif"),
               help="text: grouped by file and severity (default); json: machine findings with stable keys; "
                        "sarif: SARIF 2.1.0 for code-scanning annotations")
    p.add_argument("--strict", action="store_true", help="treat warnings as errors (exit 1 on any finding)")
    p.add_argument("--list-rules", action="store_true", help="print every rule (ID, severity, title) and exit")
    p.add_argument("--max-bytes", type=_positive_int, default=None, metavar="N",
                   help="refuse reports larger than N bytes before reading them (default 64 MiB); ledgers are streamed")
    add_out(p, default=None, deprecated="--output",
            help="write the findings to FILE (atomically) instead of standard output")
    p.epilog = "exit status: 0 clean, 1 error findings (any finding with --strict), 2 unreadable input or usage error"
    return run


def list_rules() -> str:
    """One line per rule: ID, severity, title."""
    from ...validate.registry import ordered

    rules = ordered()
    w = max(len(r.id) for r in rules)
    return "".join(f"{r.id:<{w}}  {r.severity:<7}  {r.title}\n" for r in rules)


def run(args) -> int:
    from ... import jsonstrict
    from ...validate import exit_code
    from ...validate.output import RENDERERS, apply_strict
    from ...validate.runner import iter_folder, validate_path

    if args.list_rules:
        sys.stdout.write(list_rules())
        return 0
    if not args.paths:
        raise RaceError("no PATH to validate", "give a report, a ledger, a folder or - (race validate --help)")
    if args.paths.count("-") > 1:
        raise RaceError("standard input (-) can be given once")
    if args.out:
        from ...outputs import output_file

        output_file(args.out, inputs=args.paths, what="--out")
    max_bytes = args.max_bytes or jsonstrict.MAX_DOCUMENT_BYTES
    findings, files = [], 0
    from pathlib import Path

    for p in args.paths:
        findings += validate_path(p, max_bytes=max_bytes)
        files += len(iter_folder(Path(p))) if p != "-" and Path(p).is_dir() else 1
    code = exit_code(findings, strict=args.strict)
    if args.strict:
        findings = apply_strict(findings)
    text = RENDERERS[args.format](findings, files=files)
    if args.out:
        from ...atomic import write_text_atomic

        write_text_atomic(args.out, text)
    else:
        sys.stdout.write(text)
    return code
