"""Provenance rules: a report says how its numbers were obtained (provenance.method measured,
imported or estimated), and the numbers must be what that method yields -- a run that trained
at least one step, a ledger that accounts for every step the run declares, and no estimate
from means presented as a per-step measurement."""

from __future__ import annotations

from typing import Iterable

from ..numbers import json_count
from .registry import Issue, rule

MIN_IDENTICAL = 3
"""Identical records from this many on are means, not measurements (a real step's lengths vary)."""


def _method(doc: dict) -> str | None:
    prov = doc.get("provenance")
    return prov.get("method") if isinstance(prov, dict) else None


def _declared(doc: dict) -> int | None:
    """provenance.steps when it is a count (SCHEMA reports anything else)."""
    prov = doc.get("provenance")
    return json_count(prov.get("steps")) if isinstance(prov, dict) else None


def _ledger(ctx):
    s = ctx.ledger
    return s if s is not None and s.error is None else None


@rule("PROV-001", title="the report accounts for no training step", requires=("totals",))
def empty(ctx) -> Iterable[Issue]:
    """A report describes a run that trained: a ledger with no records (or `totals.steps` = 0)
    says nothing about where compute went, yet its zero FLOPs would pass every arithmetic rule.
    An empty ledger usually means the report was built before the run wrote its first step, or
    from the wrong file."""
    doc = ctx.doc
    s = _ledger(ctx)
    records = s.records if s is not None else doc["ledger"]["records"] if ctx.section_ok("ledger") else None
    if records == 0:
        yield Issue("$.ledger.records", f"the ledger {doc['ledger']['path']!r} holds no step records: the report "
                    "accounts for no training step",
                    "build the report from the run's ledger after it trained (race report LEDGER --spec SPEC); with "
                    "aggregate numbers only, use race report --estimate SPEC")
    elif doc["totals"]["steps"] == 0:
        yield Issue("$.totals.steps", "totals.steps is 0: the report accounts for no training step",
                    "a report describes a run that trained at least one optimizer step")


@rule("PROV-002", title="the ledger does not account for the declared steps", requires=("totals",))
def declared_steps(ctx) -> Iterable[Issue]:
    """Every optimizer step the run took must be in its numbers. `provenance.steps` declares
    them (the engine's step count); without it, a measured ledger's own step numbers do.
    *measured* (and a report without provenance, schema 1.0, whose ledger is measured): one record
    per optimizer step, so the record count equals the declared steps (steps 1..N, none missing). *imported*: a log entry may cover several steps, so the last
    logged step must be the declared one. *estimated*: `totals.steps` must be the declared
    steps. A 300-step run with a one-record ledger (or a report claiming fewer steps than it
    took) is refused."""
    doc, method, declared = ctx.doc, _method(ctx.doc), _declared(ctx.doc)
    hint = "build the report from the run's whole ledger, or declare the steps the run really took"
    if method == "estimated":
        if declared is not None and doc["totals"]["steps"] != declared:
            yield Issue("$.totals.steps", f"totals.steps {doc['totals']['steps']:,} but provenance.steps declares "
                        f"{declared:,}", "price every declared step (race report --estimate)")
        return
    if "ledger" not in doc or not ctx.section_ok("ledger"):
        return
    s = _ledger(ctx)
    records = s.records if s is not None else doc["ledger"]["records"]
    if not records or (s is not None and s.n_step_problems):
        return  # PROV-001; ARITH-005 (steps out of order)
    if method == "imported":
        if declared is not None and s is not None and s.last_step != declared:
            yield Issue("$.provenance.steps", f"the imported log ends at step {s.last_step:,} but the run declares "
                        f"{declared:,} optimizer steps", "import the run's whole log")
        return
    if method not in (None, "measured"):
        return
    # every schema version: a 1.0 report (no provenance) is a measured ledger too, one record a step
    if s is not None and s.last_step != records:
        yield Issue("$.ledger.records", f"the ledger holds {records:,} step record(s) but its steps run to step "
                    f"{s.last_step:,}: a measured ledger has one record per optimizer step, none missing", hint)
    elif declared is not None and records != declared:
        yield Issue("$.ledger.records", f"the ledger holds {records:,} step record(s) but the run declares "
                    f"{declared:,} optimizer steps (provenance.steps)", hint)


@rule("PROV-003", title="an estimate from means is presented as a measurement", requires=("totals", "ledger"))
def dressed_estimate(ctx) -> Iterable[Issue]:
    """A measured (or imported) ledger records what each step really did, and real steps differ:
    completion lengths vary from batch to batch. A ledger in which one record (the same tokens
    and work) recurs in more than half of the records that generated, three times at least, was
    written from mean lengths -- an estimate dressed as a measurement, whether or not a record
    or two were nudged by a token. (Records that only reuse a batch, mu > 1, repeat their
    batch's numbers by nature and are not counted.) Label it as one: `race report --estimate`
    marks it `provenance.method = estimated` and needs no ledger."""
    if _method(ctx.doc) == "estimated":
        return
    s = _ledger(ctx)
    if s is None or s.records < MIN_IDENTICAL or s.problems or s.torn is not None:
        return
    n, top = s.generations, s.top_repeat
    if top >= MIN_IDENTICAL and 2 * top > n:
        what = f"all {n:,}" if top == n else f"{top:,} of the {n:,}"
        yield Issue("$.ledger.path", f"{what} ledger records that generated are identical (the same tokens and work "
                    f"in each step): these numbers come from means, not a per-step measurement",
                    "mark it as what it is: race report --estimate SPEC (provenance.method estimated, no ledger)")
