"""Running a planned pilot grid: every cell trained (suite.train.run), its IsoFLOP band written
into its report, then evaluated (suite.evaluate), through an executor (suite.pipeline.executors:
local worker processes or Ray). Resumable: evaluated cells are skipped, a crashed cell restarts
from its checkpoint.

    from suite.analysis import grid
    from suite.pipeline import gridrun
    gp = grid.plan_grid(grid.load("tasks/grids/quickstart.yaml"))
    result = gridrun.run(gp.cells, "runs/pilot", gp.grid.evaluation, grid=gp.grid)
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Mapping, Sequence

from ..analysis.grid import EvalPlan, Grid, GridCell, PlannedCell
from ..errors import RaceError

#: Where each cell's run folder goes inside the grid's output folder.
CELLS_DIR = "cells"
PLAN_FILE = "grid.json"


def evaluated(report: Path, ev: EvalPlan) -> bool:
    """True when `report` exists and holds pass@1 rows for every target of `ev` at its limit."""
    if not report.is_file():
        return False
    from ..evaluate.targets import result_name, target
    from ..record.report import read_report

    try:
        have = set(read_report(report, check=False).scores())
    except RaceError:
        return False
    for t in ev.targets:
        n = min(ev.limit or target(t).size, target(t).size)
        if (result_name(t, n), "pass@1") not in have:
            return False
    if ev.curve:
        from ..evaluate.curve import curve_done

        return curve_done(report.parent, ev.targets, ev.curve.limit)
    return True


def _declare_band(report: Path, band: tuple[int, int]) -> None:
    """Write the grid's IsoFLOP band into the run's report (budget.band), atomically."""
    from ..record.report import update_report

    update_report(report, lambda doc: doc.setdefault("budget", {}).update(band={"low": band[0], "high": band[1]}))


class _LogTo:
    """Send this process's stdout/stderr (fds 1 and 2, so library and C-level output too) to
    a log file while a cell runs: the grid's progress bar stays readable."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        import sys

        sys.stdout.flush(), sys.stderr.flush()
        self.saved = (os.dup(1), os.dup(2))
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(self.fd, 1), os.dup2(self.fd, 2)
        return self

    def __exit__(self, *exc):
        import sys

        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(self.saved[0], 1), os.dup2(self.saved[1], 2)
        for fd in (*self.saved, self.fd):
            os.close(fd)


def run_and_evaluate(spec, out: str, band: tuple[int, int], ev: EvalPlan, threads: int | None = None,
                     log: bool = True) -> dict:
    """One grid job (module level so worker processes can import it): train the cell into
    `out` (resuming from its checkpoint when a ledger is already there), declare its band in
    the report, then evaluate it. Each stage is skipped when its output exists. Returns the
    report's FLOPs per phase and its steps."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = out / "report.json"
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    import contextlib

    from ..record.timing import timed

    with (_LogTo(out / "log.txt") if log else contextlib.nullcontext()):
        if not report.is_file():
            from ..train.run import run_cell

            resume = (out / "ledger.jsonl").is_file() and (out / "cell.yaml").is_file()
            with timed(out, "train", threads, resumed=resume):   # timing.json: what studies price cells with
                run_cell(spec, out, resume=resume, progress=False, threads=threads)
        _declare_band(report, band)
        if not evaluated(report, replace(ev, curve=None)):
            from ..evaluate.runs import evaluate_run

            with timed(out, "eval", threads):
                evaluate_run(out, targets=ev.targets, limit=ev.limit, batch_size=ev.batch_size, judge=ev.judge)
        if ev.curve and not evaluated(report, ev):
            from ..evaluate.curve import evaluate_curve

            with timed(out, "curve", threads):   # the points along the run, priced apart from the end
                evaluate_curve(out, targets=ev.targets, limit=ev.curve.limit, batch_size=ev.batch_size, judge=ev.judge)
    from ..record.report import read_report

    done = read_report(report)
    return {"flops": done.flops, "steps": done.steps}


@dataclass(frozen=True)
class GridResult:
    """What `run` did."""

    out: Path
    """The grid's output folder."""
    ran: tuple[str, ...]
    """Cells run (or finished) now."""
    skipped: tuple[str, ...]
    """Cells already finished and evaluated before this call."""
    failed: Mapping[str, str] = field(default_factory=dict)
    """Cell id -> first line of its error (the full text in the cell's error.txt)."""
    job_seconds: Mapping[str, float] = field(default_factory=dict)
    """Cell id -> wall seconds its job (train and evaluate) ran in its worker, for cells run now."""
    wall_seconds: float = 0.0
    """Wall seconds of this call."""
    threads: int = 1
    """torch threads per cell."""
    workers: int = 1
    """Cells run at once (local workers; 1 under Ray, which places cells itself)."""


def cell_dir(out: str | os.PathLike, cell: GridCell) -> Path:
    """The run folder of a cell inside the grid's output folder."""
    return Path(out) / CELLS_DIR / cell.id


def _spent(report: Path) -> int:
    from ..record.report import read_report

    try:
        return read_report(report, check=False).total_flops
    except RaceError:
        return 0


def write_plan(planned: Sequence[PlannedCell], out: Path, g: Grid | None = None) -> Path:
    """out/grid.json: the grid's declaration and every planned cell (atomic)."""
    from ..atomic import write_json_atomic

    doc = {"grid": None if g is None else {"name": g.name, "source": g.source, "band": g.band,
                                           "budgets": list(g.budgets), "engine_profile": g.engine_profile,
                                           "eval": {"targets": list(g.evaluation.targets),
                                                    "limit": g.evaluation.limit,
                                                    **({"curve": asdict(g.evaluation.curve)} if g.evaluation.curve
                                                       else {})}},
           "absorbs_budget": "steps",
           "cells": [pc.to_dict() for pc in planned]}
    return write_json_atomic(out / PLAN_FILE, doc)


def run(planned: Sequence[PlannedCell], out: str | os.PathLike, ev: EvalPlan, *, workers: int | str = 1,
        executor: str = "local", threads: int | None = None, progress: bool = True,
        grid: Grid | None = None, address: str | None = None, gpus_per_cell: float = 0.0) -> GridResult:
    """Run and evaluate every planned cell into out/cells/<id>/ through suite.pipeline.executors
    (`workers`: local worker processes, or "auto" for one per `threads` cores (default threads 1;
    suite.pipeline.executors.auto_workers); `address` and `gpus_per_cell`: the ray executor's
    cluster and per-cell GPU reservation).
    Finished cells (a report with evaluations for every target) are skipped; a cell that
    crashed resumes from its checkpoint. A failed cell does not stop the others; failures are
    returned (and their tracebacks written to the cell's error.txt).

    Args: `planned` (plan_grid(...).cells), `out`, `ev` (the grid's evaluation plan,
    Grid.evaluation). Returns the GridResult (ran, skipped, failed, job seconds, wall time).
    """
    import time

    from .executors import Job, Resources, resolve_workers, run_jobs

    t0 = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_plan(planned, out, grid)
    done = [pc for pc in planned if evaluated(cell_dir(out, pc.cell) / "report.json", ev)]
    todo = [pc for pc in planned if pc not in done]
    threads = threads or (1 if workers == "auto" else max(1, (os.cpu_count() or 1) // max(1, workers)))
    workers = resolve_workers(workers, threads, len(todo), executor)
    total_budget = sum(pc.cell.budget for pc in planned)
    spent = sum(_spent(cell_dir(out, pc.cell) / "report.json") for pc in done)
    jobs = [Job(key=pc.cell.id, fn=run_and_evaluate,
                args=(pc.cell.spec, str(cell_dir(out, pc.cell)), pc.cell.band, ev, threads),
                resources=Resources(cpus=threads, gpus=gpus_per_cell)) for pc in todo]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(planned), initial=len(done), unit="cell", desc=f"grid {grid.name if grid else out.name}",
                   dynamic_ncols=True)
        bar.set_postfix_str(f"FLOPs {spent:.3g}/{total_budget:.3g}")
    ran, failed, seconds = [], {}, {}
    try:
        options = {"workers": workers} if executor == "local" else {"address": address}
        for r in (run_jobs(jobs, executor, **options) if jobs else ()):
            folder = out / CELLS_DIR / r.key
            if r.status == "ok":
                seconds[r.key] = r.seconds
            if r.ok:
                ran.append(r.key)
                spent += _spent(folder / "report.json")
                (folder / "error.txt").unlink(missing_ok=True)
            else:
                failed[r.key] = (r.error or "failed").splitlines()[0]
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "error.txt").write_text(r.error or "failed", encoding="utf-8")
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"FLOPs {spent:.3g}/{total_budget:.3g}" + (f", {len(failed)} failed" if failed else ""))
    finally:
        if bar is not None:
            bar.close()
    return GridResult(out, tuple(ran), tuple(pc.cell.id for pc in done), failed, seconds,
                      time.perf_counter() - t0, threads, workers)


def throughput(planned: Sequence[PlannedCell], result: GridResult) -> str:
    """The grid's throughput table (suite.analysis.throughput): achieved FLOP/s per phase and
    cell, utilization of this machine's stored matmul ceiling at the cells' threads (when
    `race bench --calibrate` measured one), and the wall time against the cells' step seconds."""
    from ..accounting.utilization import stored_ceiling
    from ..analysis.throughput import cell_rates, table

    ceiling = stored_ceiling(result.threads)
    rate = ceiling.flops_per_second if ceiling else None
    rows = cell_rates({pc.cell.id: cell_dir(result.out, pc.cell) / "report.json" for pc in planned}, rate,
                      result.job_seconds)
    note = (f"{result.threads} thread{'s' * (result.threads > 1)}, race bench --calibrate {ceiling.measured}, "
            f"load {ceiling.load}") if ceiling else ""
    wall = result.wall_seconds if result.ran and not result.skipped else None
    return table(rows, ceiling=rate, wall=wall, ceiling_note=note, workers=result.workers)
