"""Arithmetic rules: the report's numbers agree with each other and with its ledger."""

from __future__ import annotations

from typing import Iterable

from ..accounting import PHASES, TOKEN_KEYS
from .registry import Issue, rule
from ..record.schemas import json_path

# Shares are floats; hand-filled reports round them. 1e-4 accepts 4-decimal rounding and still
# catches any share that is off by a hundredth of a percent point.
SHARE_TOLERANCE = 1e-4


def _share(part: int, total: int) -> float:
    return part / total if total else 0.0


@rule("ARITH-001", title="phase FLOPs do not sum to the total", requires=("totals",))
def phase_sum(ctx) -> Iterable[Issue]:
    """`totals.flops.total` must equal rollout + update + reward exactly (FLOPs are integers)."""
    f = ctx.doc["totals"]["flops"]
    s = f["rollout"] + f["update"] + f["reward"]
    if s != f["total"]:
        yield Issue("$.totals.flops.total",
                    f"total {f['total']:,} != rollout {f['rollout']:,} + update {f['update']:,} + reward {f['reward']:,} = {s:,}",
                    "C_total = C_rollout + C_update + C_reward: correct the total or the phase that is wrong")


@rule("ARITH-002", title="phase shares disagree with the FLOPs", requires=("totals",))
def shares(ctx) -> Iterable[Issue]:
    """Each `totals.shares.<phase>` must equal that phase's FLOPs divided by the sum of the
    phases, within an absolute 1e-4 (rounding to 4 decimals passes). With zero FLOPs every
    share is 0."""
    t = ctx.doc["totals"]
    f = t["flops"]
    total = sum(f[p] for p in PHASES)
    for p in PHASES:
        want = _share(f[p], total)
        got = t["shares"][p]
        if abs(got - want) > SHARE_TOLERANCE:
            yield Issue(f"$.totals.shares.{p}", f"{p} share {got:.6g} but {f[p]:,} / {total:,} = {want:.6g}",
                        "recompute the shares from the phase FLOPs")


@rule("ARITH-003", title="update share p disagrees with the FLOPs", requires=("totals",))
def update_share(ctx) -> Iterable[Issue]:
    """`totals.update_share` is p = C_update / C_total; it must match the update and total
    FLOPs within an absolute 1e-4."""
    t = ctx.doc["totals"]
    f = t["flops"]
    total = sum(f[p] for p in PHASES)
    want = _share(f["update"], total)
    if abs(t["update_share"] - want) > SHARE_TOLERANCE:
        yield Issue("$.totals.update_share",
                    f"update share p = {t['update_share']:.6g} but C_update / C_total = {f['update']:,} / {total:,} = {want:.6g}",
                    "p = C_update / C_total; recompute it from the FLOPs")


def _ledger_ready(ctx) -> bool:
    s = ctx.ledger
    return s is not None and s.error is None


@rule("ARITH-004", title="ledger records do not sum to the report's totals", requires=("totals", "ledger"))
def ledger_sums(ctx) -> Iterable[Issue]:
    """The per-step ledger records, summed, must equal the report's totals exactly: FLOPs per
    phase, tokens per kind, and every work statistic. Seconds are not checked (optional)."""
    if not _ledger_ready(ctx):
        return
    s, t = ctx.ledger, ctx.doc["totals"]
    hint = "rebuild the report from its ledger (race report LEDGER --spec SPEC)"
    for p in PHASES:
        if s.flops[p] != t["flops"][p]:
            yield Issue(f"$.totals.flops.{p}", f"{p} FLOPs {t['flops'][p]:,} but the ledger's {s.records:,} records sum to {s.flops[p]:,}", hint)
    for k in TOKEN_KEYS:
        if s.tokens[k] != t["tokens"][k]:
            yield Issue(f"$.totals.tokens.{k}", f"{k} tokens {t['tokens'][k]:,} but the ledger sums to {s.tokens[k]:,}", hint)
    work = t["work"]
    for k in sorted(set(work) | set(s.work)):
        a, b = work.get(k, 0), s.work.get(k, 0)
        if a != b:
            yield Issue(json_path(("totals", "work", k)), f"work {k} is {a:,} but the ledger sums to {b:,}", hint)


@rule("ARITH-005", title="ledger steps do not strictly increase", scope="ledger")
def step_order(ctx) -> Iterable[Issue]:
    """Step numbers in a ledger must strictly increase: a repeated step counts compute twice,
    a step going back means two runs were mixed in one file."""
    s = ctx.summary
    for line, msg in s.step_problems:
        yield Issue(f"line {line}", msg, "one record per optimizer step, in order; remove duplicates")
    more = s.n_step_problems - len(s.step_problems)
    if more > 0:
        yield Issue("$", f"... and {more:,} more step-order problems", "")


@rule("ARITH-006", title="ledger sha256 does not match the report", requires=("ledger",))
def ledger_hash(ctx) -> Iterable[Issue]:
    """`ledger.sha256` must be the sha256 of the ledger file's bytes: the report must describe
    exactly the ledger it ships with."""
    if not _ledger_ready(ctx):
        return
    want = ctx.ledger.sha256
    got = ctx.doc["ledger"]["sha256"]
    if got != want:
        yield Issue("$.ledger.sha256", f"sha256 {got} but {ctx.doc['ledger']['path']} hashes to {want}",
                    "the ledger changed after the report was built: rebuild the report, or ship the original ledger")


@rule("ARITH-007", title="record or step count disagrees with the ledger", requires=("ledger", "totals"))
def record_count(ctx) -> Iterable[Issue]:
    """`ledger.records` and `totals.steps` must equal the number of complete records in the
    ledger (a torn last line is not a record)."""
    if not _ledger_ready(ctx):
        return
    n = ctx.ledger.records
    if ctx.doc["ledger"]["records"] != n:
        yield Issue("$.ledger.records", f"records {ctx.doc['ledger']['records']:,} but the ledger holds {n:,} complete records",
                    "rebuild the report from its ledger")
    if ctx.doc["totals"]["steps"] != n:
        yield Issue("$.totals.steps", f"steps {ctx.doc['totals']['steps']:,} but the ledger holds {n:,} step records",
                    "one ledger record per optimizer step; rebuild the report")


@rule("ARITH-008", title="token totals disagree with the work statistics", requires=("totals",))
def tokens_vs_work(ctx) -> Iterable[Issue]:
    """When `totals.work` carries suite.accounting's plain token counts (`count.*`), the
    report's `totals.tokens` must equal them (suite.accounting.tokens_from_work): the tokens a
    reader sees and the tokens the FLOPs were priced from are the same tokens."""
    work = ctx.doc["totals"]["work"]
    if not any(k.startswith("count.") for k in work):
        return
    from ..accounting import tokens_from_work

    want = tokens_from_work(work)
    for k in TOKEN_KEYS:
        got = ctx.doc["totals"]["tokens"][k]
        if got != want[k]:
            yield Issue(f"$.totals.tokens.{k}", f"{k} tokens {got:,} but the work statistics count {want[k]:,}",
                        "take tokens from the same step statistics as the FLOPs (suite.accounting.tokens_from_work)")
