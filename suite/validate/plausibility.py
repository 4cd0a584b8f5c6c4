"""Plausibility rules: claims that are possible but usually a mistake (warnings; --strict makes
them errors)."""

from __future__ import annotations

import re
from typing import Iterable

from .registry import Issue, rule

# Evaluation sets whose full size is known; a "-N" suffix (gsm8k-250) names a subset of N.
KNOWN_TARGET_SIZES = {"gsm8k": 1319, "math500": 500, "math-500": 500}
_SUFFIX = re.compile(r"-(\d+)$")


def target_size(target: str) -> int | None:
    """The number of problems a target name implies (gsm8k-250 -> 250, math500 -> 500), or None."""
    m = _SUFFIX.search(target)
    if m:
        return int(m.group(1))
    return KNOWN_TARGET_SIZES.get(target.lower())


@rule("PLAUS-001", title="total FLOPs outside the declared budget band", severity="warning",
      requires=("budget", "totals"))
def budget_band(ctx) -> Iterable[Issue]:
    """With `budget.band` = {low, high}, the run's total must land in [low, high] to belong to
    that IsoFLOP band; without a band, a total more than 10% over `budget.flops` is flagged."""
    b, total = ctx.doc["budget"], ctx.doc["totals"]["flops"]["total"]
    band = b.get("band")
    if band:
        lo, hi = band["low"], band["high"]
        if lo > hi:
            yield Issue("$.budget.band", f"band low {lo:,} is above high {hi:,}", "swap low and high")
        elif not lo <= total <= hi:
            yield Issue("$.totals.flops.total", f"total {total:,} FLOPs is outside the declared band [{lo:,}, {hi:,}]",
                        "move the run to the band it landed in, or adjust steps/rank to land in this one")
    elif b.get("flops") and total > 1.1 * b["flops"]:
        yield Issue("$.totals.flops.total", f"total {total:,} FLOPs is {total / b['flops']:.2f}x the declared budget {b['flops']:,}",
                    "declare the budget the run actually used, or a band")


@rule("PLAUS-002", title="GRPO group size below 2", severity="warning", requires=("grpo",))
def group_size(ctx) -> Iterable[Issue]:
    """GRPO normalises rewards within a group of K completions per prompt; with K = 1 every
    advantage is zero and the policy does not learn."""
    k = ctx.doc["grpo"]["group_size"]
    if k < 2:
        yield Issue("$.grpo.group_size", f"group size K = {k}: group-relative advantages are all zero",
                    "use K >= 2 completions per prompt (the source paper uses K = 2)")


@rule("PLAUS-003", title="evaluation n disagrees with its target", severity="warning", requires=("evaluations",))
def evaluation_n(ctx) -> Iterable[Issue]:
    """A target that names its size (gsm8k-250 has 250 problems; math500 has 500) must be
    reported with that n: a smaller n means problems were dropped, a larger one a different set."""
    for i, ev in enumerate(ctx.doc["evaluations"]):
        want = target_size(ev["target"])
        if want is not None and ev["n"] != want:
            yield Issue(f"$.evaluations[{i}].n", f"target {ev['target']!r} has {want} problems but n = {ev['n']}",
                        "report every problem of the target, or name the subset you used")


@rule("PLAUS-004", title="update share p is exactly 0 or 1", severity="warning", requires=("totals",))
def extreme_update_share(ctx) -> Iterable[Issue]:
    """A GRPO run always generates rollouts and updates the policy, so p = C_update / C_total of
    exactly 0 or 1 means a phase was left out of the accounting."""
    t = ctx.doc["totals"]
    if t["flops"]["total"] > 0 and t["flops"]["update"] in (0, t["flops"]["total"]):
        which = "update" if t["flops"]["update"] == 0 else "rollout and reward"
        yield Issue("$.totals.update_share", f"update share p = {t['update_share']}: no {which} FLOPs are counted",
                    "count every phase (rollout generation, policy update, reward)")


UTILIZATION_WARN = 0.7
"""Implied utilization above which a claim is flagged: GRPO runs, with generation bound by
memory bandwidth, rarely sustain even half of peak."""


@rule("PLAUS-005", title="implied hardware utilization above 70%", severity="warning", requires=("totals", "hardware"))
def high_utilization(ctx) -> Iterable[Issue]:
    """The claimed FLOPs imply more than 70% of the declared accelerators' peak over the time
    they were held. Possible for a pure training kernel, but a GRPO step spends most of its time
    generating (memory-bound decoding): such a utilization usually means the FLOPs or the
    hardware numbers are mis-scaled. Above 100%, PHYS-009 makes it an error."""
    from .physics import hardware_check

    util, how = hardware_check(ctx.doc)
    if UTILIZATION_WARN < util <= 1:
        yield Issue("$.hardware", f"implied utilization {util:.1%} of peak is unusually high for GRPO: {how}",
                    "check the FLOP counts and the hardware numbers; GRPO runs rarely sustain half of peak")


@rule("PLAUS-006", title="implied hardware utilization below 0.1%", severity="warning", requires=("totals", "hardware"))
def low_utilization(ctx) -> Iterable[Issue]:
    """The utilization floor's warning (PHYS-012 is its error): the claimed FLOPs imply less than
    UTILIZATION_FLOOR_WARN (0.1%) of the declared accelerators' peak over the time they were held,
    for the whole run or for its update phase (the ledger's seconds). GRPO training passes run
    compute-bound; a run below 0.1% of peak (the MLPerf reference run sits at 0.45%) usually has FLOPs understated (completions or
    passes left out of a regenerated ledger while its real seconds stayed) or mis-scaled
    hardware numbers. --strict refuses it."""
    from .evidence import UTILIZATION_FLOOR_ERROR, UTILIZATION_FLOOR_WARN, utilization_floor

    for path, util, how in utilization_floor(ctx.doc):
        if UTILIZATION_FLOOR_ERROR <= util < UTILIZATION_FLOOR_WARN:
            yield Issue(path, f"implied utilization {util:.3g} ({util:.2%} of peak) is unusually low: {how}",
                        "check that the ledger holds every token and pass the run made, and the hardware numbers")
