"""Benchmark limits as ratios to a reference measured in the same run.

Absolute seconds do not transfer between machines, nor between two moments of one shared
machine: the same code gave 1.5 s and 2.4 s on two 2-core machines of one kind. A reference
that does the irreducible part of the same work (parse the same lines, render the same rows
through one plain template, fit the same points by least squares), timed in the same process
and interleaved with the measured code, slows down with it; the limit is on the quotient, and
each limit says why it is that number. Absolute figures go into `extra_info` as information.

    from benchmarks.ratio import Limit, check, interleaved
    LIMIT = Limit(6.0, "validation parses each line (the reference) and then checks it")
    timing = interleaved(benchmark, lambda: validate_path(led), lambda: parse_lines(led), rounds=2)
    check(benchmark, timing, LIMIT)
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable

CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


@dataclass(frozen=True)
class Limit:
    """The most the measured code may cost, in multiples of its reference."""

    ratio: float
    """measured / reference must stay at or below this."""
    why: str
    """Why this number: what the measured code does beyond the reference, and the margin."""


@dataclass
class Timing:
    """The best (minimum) seconds of the measured code and of its reference over the rounds."""

    measured: float
    reference: float
    result: Any = None
    """The measured code's last return value."""

    @property
    def ratio(self) -> float:
        return self.measured / self.reference


def interleaved(benchmark, measured: Callable[[], Any], reference: Callable[[], Any], *, rounds: int = 3,
                clock: str = "cpu", setup: Callable[[], Any] | None = None) -> Timing:
    """Run `measured` through pytest-benchmark (`benchmark.pedantic`, so its statistics are
    kept) `rounds` times, each round preceded by one run of `reference` and then `setup`
    (both untimed by pytest-benchmark). Both are timed with `clock` ("cpu": this process's CPU
    time, for single-threaded Python on a shared machine; "wall": for work in threads or
    subprocesses), and the minimum of each is kept: other processes' load only ever adds time."""
    tick = CLOCKS[clock]
    ref_times: list[float] = []
    times: list[float] = []

    def before():
        t = tick()
        reference()
        ref_times.append(tick() - t)
        if setup is not None:
            setup()

    def timed():
        t = tick()
        try:
            return measured()
        finally:
            times.append(tick() - t)

    result = benchmark.pedantic(timed, setup=before, rounds=rounds, iterations=1)
    return Timing(min(times), min(ref_times), result)


def check(benchmark, timing: Timing, limit: Limit, **extra) -> None:
    """Record the absolute figures and the ratio in the benchmark's extra_info, then assert the
    ratio is within the limit (the message names the limit's reason)."""
    load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    benchmark.extra_info.update(seconds=round(timing.measured, 4), reference_seconds=round(timing.reference, 4),
                                ratio=round(timing.ratio, 3), limit=limit.ratio, why=limit.why, load_avg_1m=load,
                                **extra)
    print(f"\n{benchmark.name}: {timing.measured:.3f} s = {timing.ratio:.2f}x the reference "
          f"({timing.reference:.3f} s; limit {limit.ratio:g}x), load {load}")
    assert timing.ratio <= limit.ratio, (f"{timing.ratio:.2f}x the reference ({timing.measured:.3f} s against "
                                         f"{timing.reference:.3f} s); limit {limit.ratio:g}x: {limit.why}")
