"""Runs the rules: loads files (strictly, size-bounded), builds the context, collects every
finding. Never raises for a bad document: problems become findings."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterable

from .. import jsonstrict
from . import (arithmetic, artefacts, board_rules, curve_rules, energy, equations, evidence, identity,  # noqa: F401
               ledger_rules, physics, plausibility, provenance, published, rollout_rules, schedule_rules,
               schema_rules)  # (register rules)
from .context import LedgerContext, LedgerSummary, ReportContext
from .registry import RULES, Finding, Issue, ordered, rule

REPORT_SUFFIXES = (".json",)
LEDGER_SUFFIXES = (".jsonl",)


@rule("INTERNAL-001", title="a rule failed unexpectedly", scope="input")
def internal(ctx) -> Iterable[Issue]:
    """A rule raised an exception on a document that passed the schema: a bug in the validator,
    reported as a finding (with the rule and the exception) instead of a traceback. Exit 2."""
    return ()


def _run(rules, ctx, file: str) -> list[Finding]:
    out: list[Finding] = []
    for r in rules:
        if r.scope == "report" and r.requires and not ctx.section_ok(*r.requires):
            continue
        if r.scope == "report" and not r.id.startswith("SCHEMA") and not ctx.section_ok():
            continue
        try:
            for issue in r.fn(ctx) or ():
                out.append(Finding(r.id, r.severity, file, issue.path, issue.message, issue.hint))
        except Exception as e:  # a validator bug must not become a traceback for the user
            out.append(Finding("INTERNAL-001", "error", file, "$", f"rule {r.id} failed: {type(e).__name__}: {e}",
                               "please report this with the document that caused it"))
    return out


_ORDER: dict[tuple, list] = {}


def _rules(scope: str):
    # Sorted once per set of registered rules (a leaderboard build validates 1,000s of reports).
    key = (scope, tuple(RULES.values()))
    rules = _ORDER.get(key)
    if rules is None:
        if len(_ORDER) > 16:
            _ORDER.clear()
        rules = _ORDER[key] = ordered(scope)
    return rules


def validate_report(doc, *, base_dir: Path | None = None, file: str = "<report>") -> list[Finding]:
    """All findings for one parsed report; with base_dir its ledger is streamed and checked too
    (ledger-file findings name the ledger's path)."""
    ctx = ReportContext(doc, file, Path(base_dir) if base_dir is not None else None)
    findings = _run(_rules("report"), ctx, file)
    s = ctx.__dict__.get("ledger")  # only if a rule already streamed it
    if s is None and ctx.section_ok("ledger") and ctx.base_dir is not None and not ctx.ledger_escapes:
        s = ctx.ledger
    if s is not None and s.error is None:
        findings += _run(_rules("ledger"), LedgerContext(_display(s.path), s), _display(s.path))
    return findings


def validate_ledger(path, *, file: str | None = None) -> list[Finding]:
    """All findings for a ledger JSONL file on its own (streamed, constant memory)."""
    path = Path(path)
    file = file or _display(path)
    s = LedgerSummary.scan(path)
    if s.error:
        return [Finding("INPUT-001", "error", file, "$", s.error, "check the path")]
    return _run(_rules("ledger"), LedgerContext(file, s), file)


def _input_finding(file: str, e: jsonstrict.JSONInputError) -> Finding:
    rid = schema_rules.INPUT_RULES.get(e.kind, "INPUT-004")
    return Finding(rid, "error", file, "$", e.message, e.hint or "")


def validate_bytes(data: bytes, *, file: str = "-", base_dir: Path | None = None) -> list[Finding]:
    """Validate a report given as bytes (standard input)."""
    try:
        doc = jsonstrict.loads(data)
    except jsonstrict.JSONInputError as e:
        return [_input_finding(file, e)]
    return validate_report(doc, base_dir=base_dir, file=file)


REPORT_KEYS = frozenset({"schema_version", "run", "policy", "totals", "ledger"})


def looks_like_other_document(doc) -> bool:
    """True for a JSON object that is plainly not a report (no report key at all, e.g. a
    comparison.json or race.json beside a run): skipped when walking a folder."""
    return isinstance(doc, dict) and not (doc.keys() & REPORT_KEYS)


def validate_file(path: Path, *, max_bytes: int = jsonstrict.MAX_DOCUMENT_BYTES, in_folder: bool = False) -> list[Finding]:
    """Validate one file: .jsonl as a ledger, anything else as a report. In a folder walk,
    JSON objects without any report key are other documents and skipped."""
    file = _display(path)
    if path.suffix in LEDGER_SUFFIXES:
        return validate_ledger(path, file=file)
    try:
        doc = jsonstrict.load(path, max_bytes=max_bytes)
    except jsonstrict.JSONInputError as e:
        return [_input_finding(file, e)]
    except OSError as e:
        return [Finding("INPUT-001", "error", file, "$", f"cannot read: {e.strerror or e}", "check the path and its permissions")]
    if in_folder and looks_like_other_document(doc):
        return []
    return validate_report(doc, base_dir=path.parent, file=file)


def iter_folder(folder: Path) -> list[Path]:
    """Reports and ledgers under a folder, recursively, sorted; hidden entries and JSON
    Schemas (*.schema.json) are skipped."""
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for f in sorted(files):
            if f.startswith(".") or f.endswith(".schema.json"):
                continue
            if f.endswith(REPORT_SUFFIXES + LEDGER_SUFFIXES) and (Path(root) / f).is_file():
                out.append(Path(root) / f)      # a FIFO or device named x.json would block or never end
    return out


def validate_path(path, *, max_bytes: int = jsonstrict.MAX_DOCUMENT_BYTES, stdin=None) -> list[Finding]:
    """Validate a report (.json), a ledger (.jsonl), a folder (recursive) or "-" (standard
    input, read as a report; its ledger is resolved against the current folder). A broken install
    (the schemas not found) raises one RaceError here instead of an INTERNAL finding per file."""
    from ..paths import home

    home()
    if str(path) == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        chunks, total = [], 0       # in chunks: a read of max_bytes + 1 would allocate that much at once
        while total <= max_bytes and (chunk := stream.read(min(1 << 24, max_bytes + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            return [Finding("INPUT-002", "error", "-", "$", f"standard input is over the {max_bytes:,}-byte limit",
                            "raise the limit with --max-bytes if this report is genuine")]
        return validate_bytes(data, file="-", base_dir=Path.cwd())
    path = Path(path)
    if path.is_dir():
        findings: list[Finding] = []
        for f in iter_folder(path):
            findings += validate_file(f, max_bytes=max_bytes, in_folder=True)
        return list(dict.fromkeys(findings))  # a ledger is seen alone and through its report: once
    if not path.exists():
        return [Finding("INPUT-001", "error", _display(path), "$", "no such file or folder", "check the path")]
    if not path.is_file():
        return [Finding("INPUT-001", "error", _display(path), "$", "not a regular file", "pass a report, a ledger or a folder")]
    return validate_file(path, max_bytes=max_bytes)


def exit_code(findings: Iterable[Finding], *, strict: bool = False) -> int:
    """0 clean, 1 error findings (or warnings when strict), 2 unreadable input or a validator bug."""
    findings = list(findings)
    if any(f.rule_id.startswith(("INPUT-", "INTERNAL-")) for f in findings):
        return 2
    if any(f.severity == "error" or strict for f in findings):
        return 1
    return 0


def _display(path: Path) -> str:
    """Path as the user would write it: relative to the current folder when below it."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)
