"""What rules look at: a parsed report with its schema results and a lazily streamed summary
of its ledger; or a ledger on its own."""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..record.summary import LedgerSummary

_SHARED: dict[Path, LedgerSummary] | None = None


@contextmanager
def shared_ledgers():
    """Within this block each ledger file is scanned once, however many reports name it, and
    its per-step FLOPs are kept (LedgerSummary.series): for a leaderboard build, which charts
    every ledger it validates. Yields {resolved path: summary}. Files must not change inside."""
    global _SHARED
    outer = _SHARED
    _SHARED = {} if outer is None else outer
    try:
        yield _SHARED
    finally:
        _SHARED = outer


def shared_scan(path: Path) -> LedgerSummary | None:
    """The summary of `path` made inside the current shared_ledgers() block, if any."""
    return None if _SHARED is None else _SHARED.get(path)


def scan_ledger(path: Path) -> LedgerSummary:
    """LedgerSummary.scan(path), or the summary already made inside shared_ledgers()."""
    if _SHARED is None:
        return LedgerSummary.scan(path)
    s = _SHARED.get(path)
    if s is None:
        s = _SHARED[path] = LedgerSummary.scan(path, series=True)
    return s


@dataclass
class ReportContext:
    """A parsed report under validation."""

    doc: Any
    file: str
    base_dir: Path | None
    schema_bad: set[str] = field(default_factory=set)  # top-level sections with schema errors

    def section_ok(self, *names: str) -> bool:
        """True when the document is an object and each of `names` is present without schema
        errors (optional sections -- ledger of an estimate, hardware -- may be absent)."""
        return isinstance(self.doc, dict) and "$" not in self.schema_bad and not (set(names) & self.schema_bad) \
            and all(n in self.doc for n in names)

    @cached_property
    def ledger_path(self) -> Path | None:
        """The ledger file this report references, resolved against base_dir (None if unknown)."""
        if self.base_dir is None or not self.section_ok("ledger"):
            return None
        return (self.base_dir / self.doc["ledger"]["path"]).resolve()

    @cached_property
    def ledger_escapes(self) -> bool:
        """True when the ledger path resolves outside the report's folder (never read then)."""
        p = self.ledger_path
        if p is None:
            return False
        base = self.base_dir.resolve()
        return os.path.commonpath([base, p]) != str(base)

    @cached_property
    def ledger(self) -> LedgerSummary | None:
        """Streamed summary of the referenced ledger (None when it cannot be located)."""
        p = self.ledger_path
        return None if p is None or self.ledger_escapes else scan_ledger(p)

    @cached_property
    def ledger_series(self) -> tuple[list[int], list[dict[str, int]]] | None:
        """Every record's step and FLOPs of the referenced ledger, in file order (None when it
        cannot be read): streamed again only for rules that need steps, not sums."""
        s = self.ledger
        if s is None or s.error is not None:
            return None
        return s.series if s.series is not None else LedgerSummary.scan(s.path, series=True).series

    @cached_property
    def models(self) -> dict:
        """{JSON path of a model block: suite.validate.physics.ModelRead} for the policy, the reward
        model and every judge of schema-valid sections: each spec read once (a traced one traced
        once, at most limits.MAX_TRACED_MODELS distinct configs)."""
        from .physics import read_models

        return read_models(self.doc, self.section_ok)

    @cached_property
    def recompute(self):
        """suite.validate.physics.Recomputation of this report's FLOPs (or its failure reason)."""
        from .physics import recompute

        return recompute(self.doc, self.models)


@dataclass
class LedgerContext:
    """A ledger under validation (standalone or referenced by a report)."""

    file: str
    summary: LedgerSummary
