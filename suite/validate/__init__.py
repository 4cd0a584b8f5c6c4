"""`race validate`: check compute-allocation reports and ledgers — schema, arithmetic,
physics and plausibility — collecting every finding with its JSON path and a fix hint.

Public API:
    validate_report(doc, *, base_dir=None, file="<report>") -> list[Finding]
    validate_ledger(path) -> list[Finding]
    validate_path(path) -> list[Finding]      # report JSON, ledger JSONL, folder, or "-"
    RULES, rule, Finding, exit_code(findings, strict=False)
"""

from __future__ import annotations

from .registry import RULES, Finding, Issue, Rule, rule

__all__ = ["RULES", "Finding", "Issue", "Rule", "rule", "validate_report", "validate_ledger",
           "validate_path", "exit_code"]


def validate_report(doc, *, base_dir=None, file: str = "<report>") -> list:
    """Validate a parsed report. `base_dir` is where its ledger path is resolved (None: the
    ledger is not checked).

    Args: `doc`, the parsed report; `base_dir`; `file`, how findings name it. Returns the list of
    Finding, in rule order.
    """
    from .runner import validate_report as _v

    return _v(doc, base_dir=base_dir, file=file)


def validate_ledger(path) -> list:
    """Validate a ledger JSONL file on its own (streamed, constant memory).

    Args: `path`, the ledger. Returns the list of Finding.
    """
    from .runner import validate_ledger as _v

    return _v(path)


def validate_path(path, **kw) -> list:
    """Validate a report (.json), a ledger (.jsonl), a folder (recursive) or "-" (stdin).

    Args: `path`, a file, a folder or "-"; `max_bytes` (keyword), a report size limit. Returns
    the list of Finding, in file order.
    """
    from .runner import validate_path as _v

    return _v(path, **kw)


def exit_code(findings, *, strict: bool = False) -> int:
    """0 clean, 1 error findings (warnings too when strict), 2 unreadable input.

    Args: `findings` (list of Finding), `strict`. Returns the exit code race validate gives.
    """
    from .runner import exit_code as _e

    return _e(findings, strict=strict)
