"""The leaderboard's main table: its columns, in order, and how each reads a cell from a row
(suite.site.render.Row): text, sort key, tooltip, a second line, and the split column's bar.
Presentation only: every value is read from the row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .charts import split_bar
from .formatting import fixed, pct, sci, score, thousands

Row = Any
"""A suite.site.render.Row (not imported: render imports this module)."""

@dataclass(frozen=True)
class Cell:
    """What a table cell shows (text), how it sorts (sort: a number or text, '' = missing), an
    optional tooltip, and for the split column the bar's segments (suite.site.charts.split_bar)."""

    text: str
    sort: str
    title: str = ""
    bar: tuple = ()
    sub: str = ""        #: a second, smaller line (an estimate's range, the EU verdict)
    href: str | None = None  #: the second line links here: an http(s) URL (suite.site.formatting.safe_href)


@dataclass(frozen=True)
class Column:
    """A main-table column: a stable key, a header label and how to read a cell from a row.
    `kind`: "run" (a link to the run's page), "split" (the stacked phase bar), "obtained" (the row's
    badge, then the second line), "" (text; its second line a link where the cell has an `href`)."""

    key: str
    label: str
    cell: Callable[[Row], Cell]
    numeric: bool = False
    title: str = ""
    kind: str = ""
    label2: str = ""     #: a second header line (a score column's metric under its target)

    @property
    def css(self) -> str:
        """The column's class in the stylesheet (its minimum width): col-<key>, col-score for scores."""
        return "col-score" if self.key.startswith("score:") else f"col-{self.key}"


def _num(v: float | int | None, text: Callable[[Any], str], title: str = "") -> Cell:
    return Cell("—", "") if v is None else Cell(text(v), repr(v), title)


def _flops_cell(v: int) -> Cell:
    return Cell(sci(v), str(v), f"{v:,} FLOPs")


def _total_cell(r: Row) -> Cell:
    """Total FLOPs; an estimate of a published run also shows its range over the assumptions."""
    c = _flops_cell(r.total_flops)
    if r.flops_range is None:
        return c
    lo, hi = r.flops_range
    return Cell(c.text, c.sort, f"{c.title}; {lo:,} to {hi:,} over the assumptions (sources.range)",
                sub=f"{sci(lo, 2)}–{sci(hi, 2)}")


def _provenance_cell(r: Row) -> Cell:
    """How the numbers were obtained: the board's badge (suite.site.board), the report's own
    provenance beneath it; a maintained published run links its publication instead."""
    label = r.badge_label or r.provenance
    if r.origin != "published run":
        return Cell(label, label, f"{r.origin}; provenance as the report states it: {r.provenance}",
                    sub=r.provenance if r.provenance != label else "")
    return Cell(label, label, f"a published run re-accounted: {r.source_title or r.source_url or ''}",
                sub="published", href=r.source_url)


def _pretraining_cell(r: Row) -> Cell:
    """post-training / pretraining compute and the indicative EU one-third check."""
    if r.eu_exceeds is None:
        return Cell("—", "", "no pretraining section (reports before schema 1.2)")
    verdict = "above" if r.eu_exceeds else "below"
    if r.pretraining_ratio is None:
        return Cell("?", "", f"the base model's pretraining compute is unknown; against the default of 10^23 FLOP the "
                    f"run is {verdict} one third (indicative, not legal advice)", sub=f"EU: {verdict}")
    return Cell(f"{r.pretraining_ratio:.1e}", repr(r.pretraining_ratio),
                f"post-training FLOPs / the base model's pretraining FLOPs; {verdict} one third of it (the indicative "
                "check of C(2025) 5045 points 59-61, not legal advice)", sub=f"EU: {verdict}")


def _split_cell(r: Row) -> Cell:
    """The stacked rollout/update/reward bar with its shares as text (readable without colour)."""
    bar = split_bar(r.shares)
    text = " · ".join(f"{s['short']} {pct(s['share'])}" for s in bar)
    title = "; ".join(f"{s['phase']} {pct(s['share'])} ({sci(r.flops[s['phase']])} FLOPs)" for s in bar)
    return Cell(text, repr(r.shares["rollout"]), title, tuple(bar))


def _text(v: str, title: str = "") -> Cell:
    return Cell(v, v, title)


def columns(score_keys: Sequence[str]) -> list[Column]:
    """The main table's columns, in order; one per evaluation target after the fixed ones."""
    cols = [
        Column("run", "run", lambda r: _text(r.run_name, f"{r.run_name} (run id {r.run_id})"), kind="run"),
        Column("model", "model", lambda r: _text(r.model)),
        Column("size", "model size", lambda r: Cell(r.size_label, str(r.params), f"{r.params:,} parameters"),
               numeric=True),
        Column("reward", "reward system", lambda r: _text(r.reward_system, r.reward_kind)),
        Column("rank", "LoRA rank", lambda r: Cell("full", "1e99", "full fine-tuning") if r.lora_rank is None
               else Cell(str(r.lora_rank), str(r.lora_rank)), numeric=True),
        Column("k", "K", lambda r: Cell(str(r.group_size), str(r.group_size)), numeric=True,
               title="completions per prompt (GRPO group size)"),
        Column("steps", "steps", lambda r: Cell(thousands(r.steps), str(r.steps)), numeric=True,
               title="optimizer steps the run took"),
        Column("total", "total FLOPs", _total_cell, numeric=True,
               title="total training FLOPs; for an estimate of a published run, its range over the assumptions below"),
        Column("split", "rollout / update / reward", _split_cell, kind="split",
               title="where the FLOPs went: rollout (R), update (U) and reward (W) shares of the total; sorts by "
                     "rollout share"),
        Column("p", "update share p", lambda r: _num(r.update_share, lambda v: fixed(v, 3)),
               numeric=True, title="p = C_update / C_total"),
        Column("engine", "engine profile", lambda r: _text(r.engine_profile, f"{r.engine}; counted as {r.accounting}"),
               title="accounting engine profile: which passes were counted"),
        Column("attention", "attention", lambda r: _text(r.attention), title="attention FLOP convention"),
        Column("provenance", "provenance", _provenance_cell, kind="obtained",
               title="how the numbers were obtained, decided by the board from what it checked: measured with "
                     "ledger, imported from an engine log, estimated from a published setup (the maintained "
                     "published runs), reconstructed, or estimated by its submitter; 'published' links the paper"),
        Column("pretraining", "post / pre-training", _pretraining_cell, numeric=True,
               title="post-training FLOPs as a share of the base model's pretraining FLOPs, and the indicative EU "
                     "one-third check (C(2025) 5045 points 59-61; not legal advice)"),
    ]
    for key in score_keys:
        target, _, metric = key.partition(" · ")
        cols.append(Column(f"score:{key}", target, lambda r, key=key: _num(r.scores.get(key), score),
                           numeric=True, title=f"score on {target}, metric {metric} (higher is better)",
                           label2=metric))
    return cols
