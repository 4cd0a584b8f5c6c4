"""Logs that contradict themselves are refused at import, whatever reader produced them.

A reader (verl's file logger, TRL's trainer_state.json, MLPerf's MLLOG, the console readers)
turns a log into `Step`s: the step's mean lengths, the sequences it implies and the metrics it
kept. The numbers a log gives about one step bound each other: a mean lies within its own
[min, max]; a share of completions clipped at the cap puts the mean at least that share x the
cap; a step count is at least what the log's own markers reached. A log edited to claim less
compute (a mean halved below its minimum, per-step stats deleted after step 1) breaks one of
these, and is refused here with one line naming the step and the field -- at the Step and
metrics level, so every reader's output is held to it.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

from ..errors import RaceError

BOUNDS: tuple[tuple[str, str, str, str], ...] = (
    # (mean attribute, metric of the minimum, metric of the maximum, what)
    ("completion_mean", "response_length/min", "response_length/max", "response length"),
    ("prompt_mean", "prompt_length/min", "prompt_length/max", "prompt length"),
    ("completion_mean", "completions/min_length", "completions/max_length", "completion length"),
)
"""Per-step minimum and maximum metrics (verl's compute_data_metrics, TRL's completions/*)."""

CLIP_RATIOS = ("response_length/clip_ratio", "completions/clipped_ratio")
"""Share of completions that hit the cap (verl, TRL): each of them is cap tokens long."""

REL = 1e-6
"""Loggers round (verl to 3 decimals in console output; means of means): a mean may pass its
bound by this share (and half a token) before it contradicts it."""


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _where(where: str, step) -> str:
    return f"{where}: step {step.step}" if where else f"step {step.step}"


def check_step(step, *, cap: int | None = None, where: str = "") -> None:
    """RaceError naming the step and the field when one step of a log contradicts itself: a
    length mean outside its own [min, max], below clip_ratio x the cap, a non-positive sequence
    count or kept count, a metric that is not a finite number."""
    w = _where(where, step)
    for name in ("prompt_mean", "completion_mean"):
        v = getattr(step, name)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            raise RaceError(f"{w}: field {name} = {v!r} is not a non-negative number", "fix or drop the log line")
    if step.sequences is not None:
        s = _num(step.sequences)
        if s is None or not math.isfinite(s) or s <= 0:
            raise RaceError(f"{w}: the log implies {step.sequences!r} sequences a step; a step generates at least one",
                            "check the log's token totals and mean lengths (they give the sequence count)")
    if step.kept is not None:
        k = _num(step.kept)
        if k is None or not math.isfinite(k) or k <= 0:
            raise RaceError(f"{w}: {step.kept!r} sequences kept for the update; a training step keeps at least one",
                            "check the log's valid-sequence count")
    if step.generations < 1:
        raise RaceError(f"{w}: {step.generations} generation batches; an entry covers at least one")
    m: Mapping = step.metrics or {}
    for key, v in m.items():
        if v is not None and (_num(v) is None or not math.isfinite(v)):
            raise RaceError(f"{w}: field {key!r} = {v!r} is not a finite number", "fix or drop the log line")
    for attr, lo_key, hi_key, what in BOUNDS:
        mean = getattr(step, attr)
        lo, hi = _num(m.get(lo_key)), _num(m.get(hi_key))
        slack = REL * max(mean, 1.0) + 0.5
        if lo is not None and hi is not None and lo > hi + slack:
            raise RaceError(f"{w}: field {lo_key!r} = {lo:g} is above {hi_key!r} = {hi:g}",
                            "the log contradicts itself; import the run's own, unedited log")
        if lo is not None and mean < lo - slack:
            raise RaceError(f"{w}: mean {what} {mean:g} is below the step's own minimum {lo_key!r} = {lo:g}",
                            "the log contradicts itself; import the run's own, unedited log")
        if hi is not None and mean > hi + slack:
            raise RaceError(f"{w}: mean {what} {mean:g} is above the step's own maximum {hi_key!r} = {hi:g}",
                            "the log contradicts itself; import the run's own, unedited log")
    if cap:
        for key in CLIP_RATIOS:
            r = _num(m.get(key))
            if r is None:
                continue
            if not 0 <= r <= 1:
                raise RaceError(f"{w}: field {key!r} = {r:g} is not a share in [0, 1]", "fix or drop the log line")
            # the clipped completions are cap tokens each, the others at least one
            floor = r * cap + (1 - r)
            if step.completion_mean < floor - (REL * floor + 0.5):
                raise RaceError(f"{w}: mean completion length {step.completion_mean:g} is below what {key!r} = {r:g} "
                                f"of completions at the cap {cap} imply ({floor:g})",
                                "the log contradicts itself; import the run's own, unedited log (or the cell's "
                                "max_completion_tokens is not the run's)")


def check_steps(steps: Iterable, *, cap: int | None = None, where: str = "") -> None:
    """check_step for every step of a log (RaceError at the first contradiction)."""
    for s in steps:
        check_step(s, cap=cap, where=where)


def check_markers(last_step: int, markers: Mapping[str, int | None], *, where: str = "") -> None:
    """RaceError when the steps a log accounts for stop before a step its own markers reached
    (MLPerf's block_stop after a step: that step ran and trained).

    Args: `last_step`, the last step with per-step stats; `markers`, {marker name: the step it
    reached, or None}."""
    for name, reached in markers.items():
        if isinstance(reached, int) and not isinstance(reached, bool) and reached > last_step:
            raise RaceError(f"{where}: the log's {name} markers reach step {reached}, but its per-step stats stop at "
                            f"step {last_step}: {reached - last_step} trained steps have no stats",
                            "import the whole log; a log whose per-step stats were cut cannot be priced")


__all__ = ["check_step", "check_steps", "check_markers", "BOUNDS", "CLIP_RATIOS"]
