"""Frontiers: the best observed allocation per condition, and the observed compute frontier.

A *condition* is everything the source paper says moves the best allocation: model size,
budget band, reward system and evaluation (target, metric, judge). Cells are compared only
inside one condition — model sizes are never pooled into one recipe. The *compute frontier* of
a series of runs (one model and reward system, one evaluation) is the runs no cheaper run of the
series beats: `compute_frontier`, the one computation behind both the figures here and the
leaderboard site's frontier page. Science (records, grouping, best allocation, how p* moves,
the compute frontier) comes first; tables and plots at the end only present what the science
functions return.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..atomic import atomic_path, write_text_atomic
from ..errors import RaceError
from ..record.report import CHECK_HINT, Report, UnreadableReport, read_report

# Metric name (report v1 `evaluations[].metric`) that holds a run's own training reward.
NATIVE_METRIC = "native_reward"


@dataclass(frozen=True, order=True)
class Condition:
    """What a best allocation is conditional on. Field order is the sort order of tables."""

    params_total: int
    """Policy parameters (report `policy.params_total`): orders model sizes."""
    model: str
    """Policy name (`policy.name`)."""
    band_low: int
    """Lower edge of the IsoFLOP band (`budget.band.low`; the declared budget, or 0 if none)."""
    band_high: int
    """Upper edge of the IsoFLOP band (`budget.band.high`; the declared budget, or 0 if none)."""
    reward_system: str
    """Training reward system (`reward.system`)."""
    target: str
    """Evaluation set (`evaluations[].target`)."""
    metric: str
    """Evaluation metric (`evaluations[].metric`)."""
    judge: str = ""
    """Judge model for judged metrics, "" otherwise: scores from different judges never mix."""

    @property
    def band(self) -> str:
        """The budget band as text: "low-high" FLOPs, one number for a bare budget."""
        if not self.band_high:
            return "unbudgeted"
        if self.band_low == self.band_high:
            return f"{self.band_low:.3g}"
        return f"{self.band_low:.3g}-{self.band_high:.3g}"

    @property
    def evaluation(self) -> str:
        """target/metric (and [judge]) as one label."""
        return f"{self.target}/{self.metric}" + (f"[{self.judge}]" if self.judge else "")

    def name(self) -> str:
        """One-line human name of the condition."""
        return f"{self.model} · {self.band} FLOPs · {self.reward_system} · {self.evaluation}"

    def to_dict(self) -> dict:
        """JSON form (race-v1 `condition`)."""
        return {"model": self.model, "params_total": self.params_total,
                "budget_band": {"low": self.band_low, "high": self.band_high, "label": self.band},
                "reward_system": self.reward_system, "target": self.target,
                "metric": self.metric, "judge": self.judge or None}


@dataclass(frozen=True)
class Cell:
    """One evaluated run under one evaluation: a point (p, score) of one condition."""

    path: str
    """The report.json it came from (relative to the loaded directory)."""
    condition: Condition
    """The condition this score belongs to."""
    label: str
    """Allocation label (`run.label`, e.g. a100); derived from rank/K/mu when absent."""
    seed: int | None
    """Run seed (`run.seed`)."""
    lora_rank: int
    """LoRA rank (`adapter.rank`); 0 for full fine-tuning."""
    p: float
    """Update share p = C_update / C_total (`totals.update_share`)."""
    reward_share: float
    """Reward FLOPs / total (`totals.shares.reward`)."""
    total_flops: int
    """Training FLOPs spent (`totals.flops.total`)."""
    score: float
    """The evaluation's value (higher is better)."""
    native_reward: float | None
    """Mean of the run's native-reward evaluations; None when it has none."""


@dataclass(frozen=True)
class Allocation:
    """All seeds of one allocation inside one condition, averaged: one point to fit."""

    label: str
    """Allocation label."""
    lora_rank: int
    """LoRA rank (0 = full fine-tuning)."""
    p: float
    """Mean update share over seeds."""
    score: float
    """Mean score over seeds."""
    score_sd: float
    """Standard deviation of the score over seeds (0 for one seed)."""
    reward_share: float
    """Mean reward FLOP share over seeds."""
    total_flops: float
    """Mean training FLOPs over seeds."""
    n: int
    """Number of cells (seeds) averaged."""


@dataclass(frozen=True)
class Pilot:
    """What was found under a directory."""

    cells: tuple[Cell, ...]
    """Evaluated cells, one per (report, evaluation)."""
    reports: int
    """Number of report.json files read."""
    unevaluated: tuple[str, ...]
    """Reports that carry no evaluation yet (skipped)."""


# ---------------------------------------------------------------- loading


def cells_from_report(doc: dict, path: str = "report.json") -> list[Cell]:
    """The cells of one report v1 document: one per evaluation (none if unevaluated)."""
    return cells_of(Report(doc, path))


def cells_of(report: Report) -> list[Cell]:
    """The cells of one read report: one per evaluation (none if unevaluated)."""
    low, high = report.band or ((report.budget_flops,) * 2 if report.budget_flops is not None else (0, 0))
    evals = report.evaluations
    native = [e.value for e in evals if e.metric == NATIVE_METRIC]
    common = dict(
        path=report.name,
        label=report.allocation,
        seed=report.seed,
        lora_rank=report.lora_rank or 0,
        p=report.update_share,
        reward_share=report.reward_share,
        total_flops=report.total_flops,
        native_reward=sum(native) / len(native) if native else None,
    )
    model, params, system = report.model, report.params_total, report.reward_system
    return [Cell(condition=Condition(params_total=params, model=model, band_low=low, band_high=high,
                                     reward_system=system, target=e.target, metric=e.metric, judge=e.judge),
                 score=e.value, **common) for e in evals]


def _read(file: Path, shown: str) -> Report:
    try:
        return read_report(file, check=False, name=shown)
    except UnreadableReport as e:
        if e.kind == "io":
            raise RaceError(f"{shown}: cannot read ({e.reason})", None) from None
        if e.kind == "size":
            raise RaceError(f"{shown}: {e.reason}", "reports are a few kB") from None
        raise RaceError(f"{shown}: not valid JSON ({e.reason})", CHECK_HINT) from None


def load(directory: str | os.PathLike) -> Pilot:
    """Every report.json under `directory` (recursive), read into cells. Errors name the file.

    Args: `directory`, the folder of run folders. Returns the Pilot (cells, reports, unevaluated).
    """
    root = Path(directory)
    if not root.is_dir():
        raise RaceError(f"{root}: no such directory", "pass the folder that holds the grid's run folders")
    cells: list[Cell] = []
    unevaluated: list[str] = []
    files = sorted(root.rglob("report.json"))
    for f in files:
        shown = f.relative_to(root).as_posix()
        got = cells_of(_read(f, shown))
        cells.extend(got)
        if not got:
            unevaluated.append(shown)
    return Pilot(cells=tuple(cells), reports=len(files), unevaluated=tuple(unevaluated))


def load_cells(directory: str | os.PathLike) -> list[Cell]:
    """The evaluated cells under `directory` (see `load` for counts of what was skipped)."""
    return list(load(directory).cells)


# ---------------------------------------------------------------- science


def by_condition(cells: Iterable[Cell]) -> dict[Condition, list[Cell]]:
    """Cells grouped by condition, conditions in sorted order (model size first)."""
    groups: dict[Condition, list[Cell]] = defaultdict(list)
    for c in cells:
        groups[c.condition].append(c)
    return {k: groups[k] for k in sorted(groups)}


def allocations(cells: Iterable[Cell]) -> list[Allocation]:
    """Seeds of the same allocation (label, LoRA rank) averaged; sorted by update share p.

    Call it on the cells of ONE condition: averaging across conditions would pool what the
    paper says must not be pooled."""
    groups: dict[tuple[str, int], list[Cell]] = defaultdict(list)
    for c in cells:
        groups[(c.label, c.lora_rank)].append(c)
    out = []
    for (label, rank), cs in groups.items():
        n = len(cs)
        mean = sum(c.score for c in cs) / n
        sd = math.sqrt(sum((c.score - mean) ** 2 for c in cs) / (n - 1)) if n > 1 else 0.0
        out.append(Allocation(label=label, lora_rank=rank, p=sum(c.p for c in cs) / n, score=mean,
                              score_sd=sd, reward_share=sum(c.reward_share for c in cs) / n,
                              total_flops=sum(c.total_flops for c in cs) / n, n=n))
    return sorted(out, key=lambda a: (a.p, a.label, a.lora_rank))


def best(allocs: list[Allocation]) -> Allocation:
    """The best observed allocation: highest mean score; ties go to the smaller p (cheaper in
    update compute), then to the label, so the answer is deterministic."""
    return max(allocs, key=lambda a: (a.score, -a.p, a.label))


@dataclass(frozen=True)
class FrontierRow:
    """The best observed allocation of one condition."""

    condition: Condition
    """The condition."""
    best: Allocation
    """Its best observed allocation (p* is best.p)."""
    allocations: tuple[Allocation, ...]
    """All allocations of the condition, sorted by p."""
    cells: int
    """Number of cells (seeds included)."""


def compute_frontier(points: Sequence[tuple[float, float]]) -> list[tuple[int, bool]]:
    """The observed compute frontier of one series of (training FLOPs, score) points: every
    point's index in FLOP order (equal FLOPs: the higher score first, then the given order),
    each with whether it is on the frontier -- it scores higher than every cheaper point (a
    running maximum)."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    out, best = [], -math.inf
    for i in order:
        on = points[i][1] > best
        best = max(best, points[i][1])
        out.append((i, on))
    return out


def frontier(cells: Iterable[Cell]) -> list[FrontierRow]:
    """Best observed allocation per condition, never pooled across conditions.

    Args: `cells`, the evaluated cells (load_pilot). Returns one FrontierRow per condition
    (model size, budget band, reward system, evaluation target and metric): its best allocation.
    """
    rows = []
    for cond, cs in by_condition(cells).items():
        allocs = allocations(cs)
        rows.append(FrontierRow(condition=cond, best=best(allocs), allocations=tuple(allocs), cells=len(cs)))
    return rows


# The condition fields a "move" can vary, with how to show a value of each.
FACTORS = {
    "model": lambda c: c.model,
    "budget": lambda c: c.band,
    "reward_system": lambda c: c.reward_system,
    "evaluation": lambda c: c.evaluation,
}


def _factor_values(c: Condition) -> dict[str, tuple]:
    return {"model": (c.params_total, c.model), "budget": (c.band_low, c.band_high),
            "reward_system": (c.reward_system,), "evaluation": (c.target, c.metric, c.judge)}


@dataclass(frozen=True)
class Move:
    """How p* changes when exactly one factor of the condition changes."""

    factor: str
    """Which factor changed: model, budget, reward_system or evaluation."""
    held: str
    """The other factors, held fixed, as text."""
    frm: str
    """The factor's value before (the smaller model, the lower band, ...)."""
    to: str
    """The factor's value after."""
    p_from: float
    """p* under `frm`."""
    p_to: float
    """p* under `to`."""
    label_from: str
    """Best allocation's label under `frm`."""
    label_to: str
    """Best allocation's label under `to`."""

    @property
    def delta(self) -> float:
        """p*(to) - p*(from)."""
        return self.p_to - self.p_from

    @property
    def same_allocation(self) -> bool:
        """Both conditions prefer the same allocation label."""
        return self.label_from == self.label_to


def moves(rows: list[FrontierRow]) -> list[Move]:
    """How p* moves between conditions that differ in exactly one factor (model size, budget,
    reward system, evaluation). Pairs are adjacent in sorted order of that factor.

    Args: `rows`, the frontier (allocation_frontier). Returns one Move per such pair.
    """
    out = []
    for factor, show in FACTORS.items():
        lines: dict[tuple, list[FrontierRow]] = defaultdict(list)
        for r in rows:
            vals = _factor_values(r.condition)
            held = tuple(v for k, v in vals.items() if k != factor)
            lines[held].append(r)
        for held, rs in sorted(lines.items()):
            rs = sorted(rs, key=lambda r: _factor_values(r.condition)[factor])
            for a, b in zip(rs, rs[1:]):
                held_txt = ", ".join(f"{k}={FACTORS[k](a.condition)}" for k in FACTORS if k != factor)
                out.append(Move(factor=factor, held=held_txt, frm=show(a.condition), to=show(b.condition),
                                p_from=a.best.p, p_to=b.best.p, label_from=a.best.label, label_to=b.best.label))
    return out


# ---------------------------------------------------------------- presentation


def _fmt_flops(x: float) -> str:
    return f"{x:.3g}"


def table(rows: list[FrontierRow]) -> str:
    """Markdown table: one row per condition with its best observed allocation."""
    head = ("| model | params | budget band | reward | evaluation | allocations | cells "
            "| best | p* | score | reward share |\n"
            "|---|---:|---|---|---|---:|---:|---|---:|---:|---:|\n")
    body = "".join(
        f"| {r.condition.model} | {r.condition.params_total:,} | {r.condition.band} | "
        f"{r.condition.reward_system} | {r.condition.evaluation} | {len(r.allocations)} | {r.cells} | "
        f"{r.best.label} | {r.best.p:.3f} | {r.best.score:.4g} | {r.best.reward_share:.3f} |\n"
        for r in rows)
    return head + body


def moves_table(ms: list[Move]) -> str:
    """Markdown table of how p* moves when one factor changes."""
    if not ms:
        return "(no two conditions differ in exactly one factor)\n"
    head = "| factor | from | to | p* from | p* to | change | held fixed |\n|---|---|---|---:|---:|---:|---|\n"
    return head + "".join(
        f"| {m.factor} | {m.frm} ({m.label_from}) | {m.to} ({m.label_to}) | {m.p_from:.3f} | "
        f"{m.p_to:.3f} | {m.delta:+.3f} | {m.held} |\n" for m in ms)


def finish_figure(fig, axes, used: int, title: str, out: Path, stem: str) -> list[Path]:
    """Blank the unused panels, title the figure, save it as PNG and SVG and close it."""
    import matplotlib.pyplot as plt

    for ax in list(axes.flat)[used:]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    try:
        return _save_figure(fig, out, stem)
    finally:
        plt.close(fig)


def _save_figure(fig, out: Path, stem: str) -> list[Path]:
    paths = []
    for ext in ("png", "svg"):
        final = out / f"{stem}.{ext}"
        with atomic_path(final) as tmp:
            # svg.hashsalt + no date metadata keep SVGs byte-identical between runs.
            meta = {"Date": None} if ext == "svg" else {"Software": None}
            fig.savefig(tmp, format=ext, dpi=110, metadata=meta)
        paths.append(final)
    return paths


def plot(rows: list[FrontierRow], cells: list[Cell], out: str | os.PathLike) -> list[Path]:
    """Two figures, each as PNG and SVG, in `out`: score against update share (one panel per
    evaluation, one line per model/budget/reward condition, the best allocation starred) and
    score against total training FLOPs (one panel per evaluation, one colour per model and
    reward system, its compute frontier drawn as a line)."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never a display
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "race"
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    evals = sorted({r.condition.evaluation for r in rows})
    if not evals:
        return []
    ncol = min(3, len(evals))
    nrow = math.ceil(len(evals) / ncol)
    written = []

    fig, axes = plt.subplots(nrow, ncol, figsize=(5 * ncol, 3.8 * nrow), squeeze=False)
    for ax, ev in zip(axes.flat, evals):
        for r in (r for r in rows if r.condition.evaluation == ev):
            c = r.condition
            xs, ys = [a.p for a in r.allocations], [a.score for a in r.allocations]
            (line,) = ax.plot(xs, ys, marker="o", ms=4, lw=1,
                              label=f"{c.model} · {c.band} · {c.reward_system}")
            ax.plot([r.best.p], [r.best.score], marker="*", ms=12, color=line.get_color(), ls="none")
        ax.set_title(ev, fontsize=10)
        ax.set_xlabel("update share p = C_update / C_total")
        ax.set_ylabel("score")
        ax.grid(alpha=0.3)
        if len(ax.get_lines()) <= 24:  # a legend for hundreds of lines helps nobody
            ax.legend(fontsize=6)
    written += finish_figure(fig, axes, len(evals), "Score against update share per condition (★ best observed "
                             "allocation)", out, "score_vs_update_share")

    fig, axes = plt.subplots(nrow, ncol, figsize=(5 * ncol, 3.8 * nrow), squeeze=False)
    series = sorted({(c.condition.params_total, c.condition.model, c.condition.reward_system) for c in cells})
    for ax, ev in zip(axes.flat, evals):
        for params, model, system in series:
            pts = [c for c in cells if c.condition.evaluation == ev and c.condition.model == model
                   and c.condition.params_total == params and c.condition.reward_system == system]
            if pts:
                dots = ax.scatter([c.total_flops for c in pts], [c.score for c in pts], s=14,
                                  label=f"{model} · {system}")
                front = [pts[i] for i, on in compute_frontier([(c.total_flops, c.score) for c in pts]) if on]
                ax.plot([c.total_flops for c in front], [c.score for c in front], lw=1,
                        color=dots.get_facecolor()[0])
        ax.set_xscale("log")
        ax.set_title(ev, fontsize=10)
        ax.set_xlabel("training FLOPs (rollout + update + reward)")
        ax.set_ylabel("score")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    written += finish_figure(fig, axes, len(evals), "Score against total training FLOPs", out, "score_vs_total_flops")
    return written


def document(rows: list[FrontierRow], ms: list[Move]) -> str:
    """The Markdown page `race frontier` writes: the frontier table and how p* moves."""
    return ("# Conditional allocation frontiers\n\n"
            "Best observed allocation per condition (seeds averaged; p* = its update share). "
            "Model sizes are never pooled.\n\n" + table(rows) +
            "\n## How p* moves when one factor changes\n\n" + moves_table(ms))


def write(cells: list[Cell], out: str | os.PathLike, *, plots: bool = True) -> list[Path]:
    """Frontier, moves, out/frontier.md and (unless plots=False) the PNG/SVG plots; returns the
    paths written. Raises RaceError when there are no cells."""
    if not cells:
        raise RaceError("no evaluated cells to draw frontiers from", "evaluate the runs first (`race eval RUN_DIR`)")
    rows = frontier(cells)
    out = Path(out)
    write_text_atomic(out / "frontier.md", document(rows, moves(rows)))
    return [out / "frontier.md"] + (plot(rows, cells, out) if plots else [])
