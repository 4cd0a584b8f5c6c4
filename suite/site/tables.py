"""The compute-allocation table a paper should include (`race report --format markdown|latex|json
REPORT...`): every printed value escaped for its format, every number read from a checked
report. Templates in reporters/tables/."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from .. import __version__, paths
from ..accounting import PHASES
from ..errors import RaceError
from . import formatting
from .formatting import all_score_keys, fixed, pct, sci, thousands
from .render import Row, row_from_report

TABLE_FORMATS = ("markdown", "latex", "json")

_TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                "<": r"\textless{}", ">": r"\textgreater{}", "\n": " ", "\r": " ",
                "·": r"\textperiodcentered{}", "—": "---", "–": "--"}
_MD_SPECIAL = set("\\`*_[]<>|#!{}")


def tex_escape(text: str) -> str:
    """Plain text made safe inside a LaTeX document (no command can be smuggled in)."""
    return "".join(_TEX_SPECIAL.get(ch, ch) for ch in text)


def md_escape(text: str) -> str:
    """Plain text made safe inside a Markdown table cell (no markup, links, HTML or cell breaks)."""
    return "".join(("\\" + ch) if ch in _MD_SPECIAL else (" " if ch in "\r\n" else ch) for ch in text)


@lru_cache(maxsize=None)
def _table_env(fmt: str):
    """Jinja environment for a paper-table format: `finalize` escapes every printed value for
    that format, the way autoescape does for HTML; filters that produce markup return Markup."""
    import jinja2
    from markupsafe import Markup

    escape = tex_escape if fmt == "latex" else md_escape

    def finalize(v):
        return v if isinstance(v, Markup) else escape("" if v is None else str(v))

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(paths.reporters() / "tables")),
                             autoescape=False, undefined=jinja2.StrictUndefined, finalize=finalize,
                             keep_trailing_newline=True)

    def texsci(n):
        if n is None:
            return "--"
        if n == 0:
            return Markup("0")
        mant, _, exp = f"{float(n):.2e}".partition("e")
        return Markup(f"${mant}\\times10^{{{int(exp)}}}$")

    def gflops(rates):
        """Achieved GFLOP/s of rollout / update / reward ("—" for a phase without FLOPs or seconds)."""
        return " / ".join(formatting.gflops(rates.get(ph)) for ph in PHASES)

    def phases(values, fmt_one):
        """rollout / update / reward of a per-phase mapping, each formatted ("—" where absent)."""
        return " / ".join(fmt_one(values.get(ph)) for ph in PHASES)

    def seconds(values):
        return phases(values, lambda v: "—" if v is None else f"{v:,.0f}")

    def utils(values):
        return phases(values, pct)

    env.filters.update(sci=sci, pct=pct, fixed=fixed, thousands=thousands, texsci=texsci, gflops=gflops,
                       seconds=seconds, utils=utils)
    return env


def table_rows(docs: Sequence[tuple[str, dict]]) -> list[Row]:
    """Rows for a paper table from (name, report document) pairs, in the given order."""
    return [row_from_report(doc, id=name) for name, doc in docs]


def render_table(rows: Sequence[Row], fmt: str) -> str:
    """The compute-allocation table a paper should include, as Markdown, LaTeX or JSON: total
    FLOPs and its split, p, tokens per phase, model size, reward system, accounting convention and
    every evaluation score."""
    if fmt not in TABLE_FORMATS:
        raise RaceError(f"unknown table format {fmt!r}", f"choose one of {', '.join(TABLE_FORMATS)}")
    keys = all_score_keys(rows)
    if fmt == "json":
        return json.dumps({"rows": [table_record(r) for r in rows]}, indent=2, ensure_ascii=False) + "\n"
    template = "table.tex.j2" if fmt == "latex" else "table.md.j2"
    conventions = list(dict.fromkeys(f"{r.accounting}, {r.attention} attention" for r in rows))
    return _table_env(fmt).get_template(template).render(rows=rows, score_keys=keys, version=__version__,
                                                         conventions=conventions)


def table_record(r: Row) -> dict[str, Any]:
    """One row of the JSON table: exact numbers as the report has them."""
    return {"run": r.run_name, "run_id": r.run_id, "model": r.model, "params": r.params,
            "size": r.size_label, "reward_system": r.reward_system, "reward_kind": r.reward_kind,
            "adapter": r.adapter, "lora_rank": r.lora_rank, "group_size": r.group_size, "steps": r.steps,
            "flops": r.flops, "shares": r.shares, "update_share": r.update_share, "tokens": r.tokens,
            "accounting": r.accounting, "attention": r.attention, "budget_band": r.budget_band,
            "scores": r.scores, "seconds": r.seconds, "flops_per_second": r.flops_per_second,
            "utilization": r.phase_utilization}


def table_from_files(paths: Sequence[str | os.PathLike], fmt: str, *, check: bool = True) -> str:
    """`race report --format markdown|latex|json REPORT...`: the paper table of report files, in
    the order given. Each report is read strictly and, when `check`, must pass `race validate`
    (its ledger checked beside it) without error findings: a paper prints only checked numbers.

    Args: `paths`, report files; `fmt`, markdown, latex or json. Returns the table as text.
    """
    from ..record.report import read_report

    if fmt not in TABLE_FORMATS:
        raise RaceError(f"unknown table format {fmt!r}", f"choose one of {', '.join(TABLE_FORMATS)}")
    if not paths:
        raise RaceError("no report given", "pass one or more report JSON files")
    docs = []
    for p in map(Path, paths):
        doc = read_report(p, check=False).doc
        if check:
            from ..validate import validate_report

            errors = [f for f in validate_report(doc, base_dir=p.parent, file=p.name) if f.severity == "error"]
            if errors:
                shown = "; ".join(f"{f.rule_id} at {f.path}: {f.message}" for f in errors[:3])
                raise RaceError(f"{p} has {len(errors)} error finding(s): {shown}",
                                f"fix them (race validate {p}) before putting its numbers in a paper")
        try:
            docs.append((p.stem, doc))
            row_from_report(doc, id=p.stem)
        except (RaceError, KeyError, TypeError, AttributeError):
            raise RaceError(f"{p} is not a report v1 document", f"check it with race validate {p}") from None
    return render_table(table_rows(docs), fmt)
