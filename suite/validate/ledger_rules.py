"""Ledger rules: the ledger file itself (bad lines, a torn tail) and whether a report's ledger
can be found."""

from __future__ import annotations

from typing import Iterable

from .registry import Issue, rule


@rule("LEDGER-001", title="ledger ends in a torn record", severity="warning", scope="ledger")
def torn_tail(ctx) -> Iterable[Issue]:
    """The last line has no newline and is not a complete record: the run stopped while
    writing it (a crash or a kill). The ledger reads back up to the record before; that step's
    compute is not in the totals. Not an error, but never silent."""
    t = ctx.summary.torn
    if t is not None:
        yield Issue(f"line {t.line}", str(t),
                    f"if the run is over, truncate the file to {t.offset} bytes and rebuild the report")


@rule("LEDGER-002", title="ledger line is not a valid record", scope="ledger")
def bad_lines(ctx) -> Iterable[Issue]:
    """Every complete line must be one JSON object matching
    `schemas/ledger-record-v1.schema.json` (strict JSON: no NaN, no duplicate keys; at most
    1 MiB per line). Bad lines are skipped, so totals built from this ledger miss them."""
    s = ctx.summary
    for p in s.problems:
        yield Issue(f"line {p.line}", p.message, "fix or remove the line; see schemas/ledger-record-v1.schema.json")
    more = s.n_problems - len(s.problems)
    if more > 0:
        yield Issue("$", f"... and {more:,} more bad lines", "")


@rule("LEDGER-003", title="the report's ledger cannot be found or read", requires=("ledger",))
def ledger_missing(ctx) -> Iterable[Issue]:
    """`ledger.path` (relative to the report's folder) must name a readable ledger inside that
    folder: every ledger rule depends on it, and a path leaving the folder could point a
    shared validator (leaderboard CI) at files it should not read."""
    if ctx.base_dir is None:
        return
    rel = ctx.doc["ledger"]["path"]
    if ctx.ledger_escapes:
        yield Issue("$.ledger.path", f"ledger path {rel!r} leaves the report's folder",
                    "ship the ledger beside the report (or below it) and give a relative path")
        return
    s = ctx.ledger
    if s is not None and s.error:
        yield Issue("$.ledger.path", s.error, "ship the ledger with the report, at the path the report names")
