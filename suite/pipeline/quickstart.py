"""`race quickstart`: the suite end to end on the embedded tiny models, in minutes on a laptop.

    from suite.pipeline.quickstart import quickstart, summary_text
    qs = quickstart("runs/quickstart")      # grid -> frontiers -> RACE -> leaderboard site
    print(summary_text(qs))

Runs the pilot grid tasks/grids/quickstart.yaml (two model sizes, three allocations, the sparse
rule reward and the PRM, one budget band) through suite.analysis.grid, evaluates every cell on both
embedded targets, draws the conditional frontiers (suite.analysis.frontier), runs the RACE diagnosis
(suite.analysis.race) and renders the leaderboard site from the grid's reports (suite.site.leaderboard). The
summary puts side by side what the source paper says should be visible: rule rewards cost ~0
FLOPs while the PRM takes a visible share, the larger model buys fewer steps at equal budget,
and whether pass@1 and the process judge prefer the same allocation — reported either way,
never asserted. docs/quickstart.md explains every output.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..errors import RaceError

PASS1, JUDGE = "pass@1", "process_judge"


def default_grid() -> Path:
    """tasks/grids/quickstart.yaml."""
    from ..paths import tasks

    return tasks() / "grids" / "quickstart.yaml"


@dataclass(frozen=True)
class Row:
    """One cell of the summary table, read from its report.json."""

    cell: str
    """Cell id."""
    model: str
    """Model name of the grid."""
    reward: str
    """Reward name of the grid."""
    allocation: str
    """Allocation label."""
    p: float
    """Update share (totals.update_share)."""
    reward_share: float
    """Reward FLOP share (totals.shares.reward)."""
    steps: int
    """Optimizer steps the budget bought (totals.steps)."""
    flops: int
    """Training FLOPs spent (totals.flops.total)."""
    scores: dict = field(default_factory=dict)
    """(metric, target) -> value."""


@dataclass(frozen=True)
class Preference:
    """The best allocation under pass@1 and under the process judge for one condition."""

    condition: str
    """model · band · reward system · target."""
    pass1: str
    """Best allocation label by pass@1."""
    judge: str
    """Best allocation label by the process judge."""

    @property
    def same(self) -> bool:
        """Both metrics prefer the same allocation."""
        return self.pass1 == self.judge


@dataclass(frozen=True)
class Quickstart:
    """What `quickstart` produced."""

    out: Path
    """The output folder."""
    rows: tuple[Row, ...]
    """The summary table, in grid order."""
    targets: tuple[str, ...]
    """Evaluation target names as written in the reports (TARGET or TARGET:first-N)."""
    preferences: tuple[Preference, ...]
    """pass@1 vs process-judge preferred allocation per condition."""
    paths: dict
    """What it wrote: name -> path."""
    notes: tuple[str, ...] = ()
    """Things worth telling (e.g. reports the site skipped)."""
    ran: int = 0
    """Cells run by this call."""
    skipped: int = 0
    """Cells already evaluated before this call (resumed runs skip them)."""
    throughput: str = ""
    """The grid's throughput table (suite.pipeline.gridrun.throughput): FLOP/s and utilization per phase."""


def _rows(planned, out: Path) -> list[Row]:
    from .gridrun import cell_dir
    from ..record.report import read_report

    rows = []
    for pc in planned:
        r = read_report(cell_dir(out, pc.cell) / "report.json")
        scores = {(metric, target): v for (target, metric), v in r.scores().items()}
        rows.append(Row(pc.cell.id, pc.cell.model, pc.cell.reward, pc.cell.allocation, r.update_share,
                        r.reward_share, r.steps, r.total_flops, scores))
    return rows


def preferences(frontier_rows) -> list[Preference]:
    """For each condition scored by both metrics: the best allocation under each (suite.analysis.frontier)."""
    best: dict[tuple, dict[str, str]] = defaultdict(dict)
    for r in frontier_rows:
        c = r.condition
        if c.metric in (PASS1, JUDGE):
            best[(c.params_total, c.model, c.band, c.reward_system, c.target)][c.metric] = r.best.label
    return [Preference(f"{k[1]} · {k[2]} FLOPs · {k[3]} · {k[4]}", v[PASS1], v[JUDGE])
            for k, v in sorted(best.items()) if PASS1 in v and JUDGE in v]


def _site(reports: Sequence[Path], out: Path) -> tuple[Path, list[str]]:
    """Submit every report to out/submissions (duplicates from an earlier run are fine) and
    build the static site in out/site."""
    import shutil

    from ..record.report import read_report, write_report
    from ..site import leaderboard

    folder, staging = out / "submissions", out / "submissions-staged"
    folder.mkdir(parents=True, exist_ok=True)
    notes = []
    for r in reports:
        # Every run's ledger is called ledger.jsonl; the submissions folder stores a ledger at the
        # report's relative ledger.path, so each report is staged with a ledger path of its own.
        report = read_report(r)
        stage = staging / r.parent.name
        rel = f"ledgers/{r.parent.name}.jsonl"
        (stage / "ledgers").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(r.parent / report.ledger_path, stage / rel)
        write_report(stage / "report.json", report.with_ledger_path(rel))
        try:
            leaderboard.submit(stage / "report.json", folder)
        except leaderboard.SubmissionRefused as e:
            if "duplicate" not in e.message:
                notes.append(f"site: {r.parent.name} refused: {e.message.splitlines()[0]}")
    summary = leaderboard.build(folder, out / "site")
    notes += [f"site skipped {name}: {why}" for name, why in summary["skipped_files"]]
    return out / "site" / "index.html", notes


def quickstart(out: str | os.PathLike, *, grid_file: str | os.PathLike | None = None, limit: int | None = None,
               workers: int | str = 1, threads: int | None = None, progress: bool = True, site: bool = True,
               plots: bool = True) -> Quickstart:
    """Run the quickstart pilot grid into `out` and everything downstream of it (see module doc).
    Rerunning resumes: evaluated cells are skipped.

    Returns the Quickstart (the grid's result, the diagnosis, the files written).
    """
    from dataclasses import replace

    from ..analysis import frontier, grid, race
    from . import gridrun

    out = Path(out)
    g = grid.load(grid_file or default_grid())
    ev = g.evaluation if limit is None else replace(g.evaluation, limit=limit)
    gp = grid.plan_grid(g)
    g, planned = gp.grid, gp.cells
    for note in gp.notes:
        print(f"race quickstart: {note}", flush=True)
    # One torch thread per cell: the tiny models gain nothing from a second thread, and two
    # threads per process oversubscribe a busy 2-core machine (rollouts measured ~10x slower).
    res = gridrun.run(planned, out, ev, workers=workers, threads=threads or 1, progress=progress, grid=g)
    if res.failed:
        k, why = next(iter(res.failed.items()))
        raise RaceError(f"{len(res.failed)} quickstart cell(s) failed, first {k}: {why}",
                        f"see {out / gridrun.CELLS_DIR / k}/error.txt and log.txt; rerun to resume")
    paths = {"plan": out / gridrun.PLAN_FILE, "runs": out / gridrun.CELLS_DIR}
    pilot = frontier.load(out / gridrun.CELLS_DIR)
    cells_ = list(pilot.cells)
    for p in frontier.write(cells_, out / "frontier", plots=plots):
        paths[f"frontier/{p.name}"] = p
    doc = race.diagnose(cells_, source={"directory": str(out / gridrun.CELLS_DIR), "reports": pilot.reports,
                                         "cells": len(cells_), "grid": g.source})
    for p in race.write(doc, out).values():
        paths[p.name] = p
    notes = list(gp.notes)
    if site:
        index, site_notes = _site([gridrun.cell_dir(out, pc.cell) / "report.json" for pc in planned], out)
        paths["site"] = index
        notes += site_notes
    rows = _rows(planned, out)
    targets = tuple(sorted({t for r in rows for (m, t) in r.scores if m == PASS1}))
    prefs = preferences(frontier.frontier(cells_))
    return Quickstart(out, tuple(rows), targets, tuple(prefs), paths, tuple(notes), len(res.ran), len(res.skipped),
                      gridrun.throughput(planned, res))


# ---------------------------------------------------------------- presentation


def _short(target: str) -> str:
    """arith-easy-250:first-32 -> easy (the limit is stated once, under the table)."""
    return target.split(":")[0].replace("-250", "").replace("arith-", "")


def table(qs: Quickstart) -> str:
    """The summary table: cell, model, reward, p, reward share, steps, pass@1 and judge per target."""
    score_cols = [(m, t) for m in (PASS1, JUDGE) for t in qs.targets]
    head = ["cell", "model", "reward", "p", "reward share", "steps"] + [
        ("pass@1 " if m == PASS1 else "judge ") + _short(t) for m, t in score_cols]
    body = [[r.cell, r.model, r.reward, f"{r.p:.3f}", f"{r.reward_share:.3f}", str(r.steps)]
            + [f"{r.scores[k]:.3f}" if k in r.scores else "-" for k in score_cols] for r in qs.rows]
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    left = 3  # cell, model, reward are text; the rest are numbers

    def line(vals):
        return "  ".join(v.ljust(w) if i < left else v.rjust(w) for i, (v, w) in enumerate(zip(vals, widths)))

    return "\n".join([line(head), "  ".join("-" * w for w in widths)] + [line(b) for b in body])


def findings(qs: Quickstart) -> list[str]:
    """The paper's qualitative facts as this run shows them (reported, not asserted)."""
    out = []
    by_reward = defaultdict(list)
    for r in qs.rows:
        by_reward[r.reward].append(r.reward_share)
    out.append("reward FLOP share by reward system: " + ", ".join(
        f"{k} {sum(v) / len(v):.3f}" for k, v in by_reward.items()))
    steps = defaultdict(list)
    for r in qs.rows:
        steps[r.model].append(r.steps)
    out.append("mean optimizer steps at equal budget: " + ", ".join(
        f"{k} {sum(v) / len(v):.1f}" for k, v in steps.items()))
    for pref in qs.preferences:
        verdict = "same allocation" if pref.same else "DIFFERENT allocations"
        out.append(f"{pref.condition}: pass@1 prefers {pref.pass1}, process judge prefers {pref.judge} ({verdict})")
    n_diff = sum(not p.same for p in qs.preferences)
    if qs.preferences:
        out.append(f"pass@1 and the process judge disagree on the best allocation in {n_diff} of "
                   f"{len(qs.preferences)} conditions")
    return out


def summary_text(qs: Quickstart) -> str:
    """Everything the command prints at the end: table, findings, files written.

    Args: `qs`, what quickstart returned. Returns the text.
    """
    limited = sorted({t.split(":", 1)[1] for t in qs.targets if ":" in t})
    lines = ["", f"{len(qs.rows)} cells: {qs.ran} run now, {qs.skipped} already evaluated", "", table(qs)]
    if limited:
        lines.append(f"scores on the {', '.join(limited)} problems of each target (eval.limit)")
    lines += ["p: update share; reward share: reward FLOPs / total; steps: optimizer steps the budget bought; "
              "judge: process judge (min step reward)", "", "What the pilot grid shows (read, not asserted):"]
    lines += [f"  - {x}" for x in findings(qs)]
    lines += [f"  - note: {n}" for n in qs.notes]
    if qs.throughput:
        lines += ["", "Throughput (achieved FLOP/s per phase; step s: seconds inside optimizer steps; job s: train "
                      "and evaluate):", qs.throughput]
    lines += ["", "Wrote:"]
    width = max(len(k) for k in qs.paths)
    lines += [f"  {k:<{width}}  {v}" for k, v in qs.paths.items()]
    lines += ["", "RACE is a diagnostic, not an optimizer: see race.md for its regimes and limits; "
                  "docs/quickstart.md explains each file."]
    return "\n".join(lines)
