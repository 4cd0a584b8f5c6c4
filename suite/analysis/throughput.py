"""Throughput of a grid's cells: the FLOP/s each phase achieved (FLOPs over step seconds, from
each report's totals), its utilization of the machine's matmul ceiling when one is known, and
the grid's wall time against the sum of its cells' step seconds (what start-up, checkpoints and
evaluation cost on top of training).

    from suite.analysis.throughput import cell_rates, table
    rows = cell_rates({"cell-a": Path("runs/grid/cells/cell-a/report.json")}, ceiling=60e9)
    print(table(rows, ceiling=60e9, wall=95.0))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..accounting import PHASES
from ..accounting.utilization import achieved, utilization


@dataclass(frozen=True)
class CellRate:
    """One cell's throughput, read from its report."""

    cell: str
    """Cell id."""
    steps: int
    """Optimizer steps (totals.steps)."""
    step_seconds: float
    """Wall seconds inside its optimizer steps (the phases of totals.seconds)."""
    rates: dict[str, float | None]
    """Achieved FLOP/s per phase and "total" (None: no FLOPs or no seconds in that phase)."""
    utilization: dict[str, float | None] = field(default_factory=dict)
    """rates over the ceiling (empty without a ceiling)."""
    job_seconds: float | None = None
    """Wall seconds of the cell's job in the grid run (train and evaluate), when it ran now."""


def cell_rates(reports: Mapping[str, Path], ceiling: float | None = None,
               job_seconds: Mapping[str, float] | None = None) -> list[CellRate]:
    """CellRate of every readable report, in the mapping's order (cell id -> report.json)."""
    from ..errors import RaceError
    from ..record.report import read_report

    out = []
    for cell, path in reports.items():
        try:
            r = read_report(path, check=False)
        except RaceError:
            continue
        seconds = r.seconds
        rates = achieved(r.flops, seconds)
        out.append(CellRate(cell, r.steps, sum(seconds.get(ph, 0.0) for ph in PHASES), rates,
                            utilization(rates, ceiling) if ceiling else {},
                            (job_seconds or {}).get(cell)))
    return out


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e9:.2f}"


def _p(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def table(rows: list[CellRate], *, ceiling: float | None = None, wall: float | None = None,
          ceiling_note: str = "", workers: int = 1) -> str:
    """The rows as a text table (GFLOP/s per phase, utilization when a ceiling is known, step
    and job seconds), then the grid's wall time (`workers` cells at once) against the sum of
    step seconds."""
    head = ["cell", "steps", "step s", "job s", "rollout GFLOP/s", "update GFLOP/s", "reward GFLOP/s"]
    if ceiling:
        head += ["util rollout", "util update", "util total"]
    body = []
    for r in rows:
        line = [r.cell, str(r.steps), f"{r.step_seconds:.1f}", "-" if r.job_seconds is None else f"{r.job_seconds:.1f}",
                _g(r.rates.get("rollout")), _g(r.rates.get("update")), _g(r.rates.get("reward"))]
        if ceiling:
            line += [_p(r.utilization.get("rollout")), _p(r.utilization.get("update")), _p(r.utilization.get("total"))]
        body.append(line)
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]

    def fmt(cols):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cols, widths)))

    lines = [fmt(head), fmt(["-" * w for w in widths]), *map(fmt, body)]
    if ceiling:
        lines.append(f"utilization: achieved FLOP/s over the fp32 matmul ceiling, {ceiling / 1e9:.1f} GFLOP/s"
                     + (f" ({ceiling_note})" if ceiling_note else ""))
    else:
        lines.append("utilization: no ceiling known for this machine and thread count (measure it: race bench "
                     "--calibrate)")
    steps = sum(r.step_seconds for r in rows)
    if wall is not None and steps:
        jobs = [r.job_seconds for r in rows if r.job_seconds is not None]
        lines.append(f"grid wall {wall:.1f} s ({workers} worker{'s' * (workers > 1)}) = {wall / steps:.2f}x the "
                     f"cells' step seconds ({steps:.1f} s)"
                     + (f"; jobs (train and evaluate) {sum(jobs):.1f} s" if jobs else ""))
    return "\n".join(lines)
