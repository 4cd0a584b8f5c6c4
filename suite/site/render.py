"""Presentation of reports: the static leaderboard site and the paper tables.

Reporters never compute science: every number shown is read from a report v1 document (its
`totals`, `evaluations`, ...) or from its ledger; this module only lays them out. Templates live
in reporters/ (site/ for HTML, tables/ for Markdown and LaTeX).

Submissions are untrusted text. HTML is rendered by a Jinja environment with autoescape on,
no value from a submission ever becomes markup or script, links are emitted only for http(s)
URLs, and each page's Content-Security-Policy admits only its own inline style and script.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import secrets
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence
from urllib.parse import urlsplit

from .. import __version__, paths
from ..accounting import PHASES
from ..errors import RaceError
from ..record.report import Report

PHASE_COLORS = {"rollout": "#4e79a7", "update": "#f28e2b", "reward": "#59a14f"}
# Condition colours of the frontier plot (Tableau 10, colour-blind friendly enough for 10 series).
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
           "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")


# --------------------------------------------------------------------------- formatting

def sci(n: float | int | None, digits: int = 3) -> str:
    """A FLOP count in short scientific form (1.23e18); '—' for None."""
    if n is None:
        return "—"
    if n == 0:
        return "0"
    return f"{float(n):.{digits - 1}e}".replace("e+", "e")


def pct(x: float | None) -> str:
    """A share in [0, 1] as a percentage with one decimal."""
    return "—" if x is None else f"{100.0 * x:.1f}%"


def fixed(x: float | None, digits: int = 3) -> str:
    """A number with a fixed number of decimals; '—' for None."""
    return "—" if x is None else f"{x:.{digits}f}"


def thousands(n: int | None) -> str:
    """An integer with thousands separators; '—' for None."""
    return "—" if n is None else f"{n:,}"


def size_label(params: int) -> str:
    """Model size as people say it, from an exact parameter count: 1543714304 -> '1.5B'."""
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if params >= scale:
            v = params / scale
            return f"{v:.2g}{unit}" if v < 100 else f"{v:.0f}{unit}"
    return str(params)


def safe_href(value: Any) -> str | None:
    """The value itself when it is an absolute http(s) URL a reader may follow, else None.
    `javascript:`, `data:` and relative URLs are never emitted as links."""
    if not isinstance(value, str) or len(value) > 2000:
        return None
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return None
    if parts.scheme.lower() in ("http", "https") and parts.netloc and value == value.strip() \
            and not any(ord(ch) < 33 for ch in value):
        return value
    return None


# --------------------------------------------------------------------------- rows

@dataclass(frozen=True)
class Row:
    """One report as the leaderboard and the paper tables see it: numbers read from the report."""

    id: str                      #: submission id (content hash) or the report's file stem
    page: str                    #: site-relative link to the submission page
    run_id: str                  #: run.id
    run_name: str                #: run.label, else run.id
    model: str                   #: policy.name
    params: int                  #: policy.params_total
    size_label: str              #: params as '1.5B'
    reward_system: str           #: reward.system
    reward_kind: str             #: reward.kind (rule, orm, prm, judge)
    adapter: str                 #: adapter.type (lora, full)
    lora_rank: int | None        #: adapter.rank; None for full fine-tuning
    group_size: int              #: grpo.group_size (K)
    steps: int                   #: totals.steps
    flops: dict[str, int]        #: totals.flops: rollout, update, reward, total
    shares: dict[str, float]     #: totals.shares: rollout, update, reward
    update_share: float          #: totals.update_share (p)
    tokens: dict[str, int]       #: totals.tokens
    attention: str               #: accounting.attention
    accounting: str              #: accounting.method + version + engine profile
    engine: str                  #: run.engine name + version
    budget_band: str             #: declared band, else the decade of the total
    scores: dict[str, float] = field(default_factory=dict)  #: 'target · metric' -> value

    @property
    def total_flops(self) -> int:
        """C_total."""
        return self.flops["total"]

    @property
    def series(self) -> str:
        """The series a compute frontier is drawn for: never pool model sizes or reward systems."""
        return f"{self.size_label} · {self.reward_system}"


def score_key(target: str, metric: str) -> str:
    """Column name of an evaluation: its target and metric."""
    return f"{target} · {metric}"


def band_label(report: Report) -> str:
    """The budget band a run is filtered by: its declared IsoFLOP band, else the decade of its
    total FLOPs (a run with no declared band still lands in exactly one band)."""
    band = report.band
    if band:
        return f"{sci(band[0], 2)}–{sci(band[1], 2)}"
    total = report.total_flops
    if total <= 0:
        return "0"
    e = math.floor(math.log10(total))
    return f"1e{e}–1e{e + 1}"


def row_from_report(doc: dict | Report, id: str, page: str = "") -> Row:
    """Read a report v1 (a document or a suite.record.report.Report) into a Row. Raises
    RaceError naming the field on a document that is not schema-valid: validate first."""
    r = doc if isinstance(doc, Report) else Report(doc, id)
    acc = r.accounting
    return Row(
        id=id,
        page=page,
        run_id=r.run_id,
        run_name=r.label or r.run_id,
        model=r.model,
        params=r.params_total,
        size_label=size_label(r.params_total),
        reward_system=r.reward_system,
        reward_kind=r.reward_kind,
        adapter=r.adapter_type,
        lora_rank=r.lora_rank,
        group_size=r.group_size,
        steps=r.steps,
        flops=r.flops,
        shares=r.shares,
        update_share=r.update_share,
        tokens=r.tokens,
        attention=acc["attention"],
        accounting=f"{acc['method']} {acc['version']} ({acc['engine_profile']})",
        engine=r.engine,
        budget_band=band_label(r),
        scores={score_key(t, m): v for (t, m), v in r.scores().items()},
    )


# --------------------------------------------------------------------------- columns

@dataclass(frozen=True)
class Cell:
    """What a table cell shows (text), how it sorts (sort: a number or text, '' = missing) and
    an optional tooltip."""

    text: str
    sort: str
    title: str = ""


@dataclass(frozen=True)
class Column:
    """A main-table column: a stable key, a header label and how to read a cell from a row."""

    key: str
    label: str
    cell: Callable[[Row], Cell]
    numeric: bool = False
    title: str = ""


def _num(v: float | int | None, text: Callable[[Any], str], title: str = "") -> Cell:
    return Cell("—", "") if v is None else Cell(text(v), repr(v), title)


def _flops_cell(v: int) -> Cell:
    return Cell(sci(v), str(v), f"{v:,} FLOPs")


def columns(score_keys: Sequence[str]) -> list[Column]:
    """The main table's columns, in order; one per evaluation target after the fixed ones."""
    cols = [
        Column("run", "run", lambda r: Cell(r.run_name, r.run_name)),
        Column("model", "model", lambda r: Cell(r.model, r.model)),
        Column("size", "model size", lambda r: Cell(r.size_label, str(r.params), f"{r.params:,} parameters"),
               numeric=True),
        Column("reward", "reward system", lambda r: Cell(r.reward_system, r.reward_system, r.reward_kind)),
        Column("rank", "LoRA rank", lambda r: Cell("full", "1e99", "full fine-tuning") if r.lora_rank is None
               else Cell(str(r.lora_rank), str(r.lora_rank)), numeric=True),
        Column("k", "K", lambda r: Cell(str(r.group_size), str(r.group_size)), numeric=True,
               title="completions per prompt (GRPO group size)"),
        Column("total", "total FLOPs", lambda r: _flops_cell(r.flops["total"]), numeric=True),
    ]
    for ph in PHASES:
        cols.append(Column(ph, f"{ph} FLOPs", lambda r, ph=ph: _flops_cell(r.flops[ph]), numeric=True))
        cols.append(Column(f"{ph}_share", f"{ph} share", lambda r, ph=ph: _num(r.shares[ph], pct), numeric=True))
    cols.append(Column("p", "update share p", lambda r: _num(r.update_share, lambda v: fixed(v, 3)),
                       numeric=True, title="p = C_update / C_total"))
    for key in score_keys:
        cols.append(Column(f"score:{key}", key, lambda r, key=key: _num(r.scores.get(key), lambda v: fixed(v, 3)),
                           numeric=True))
    return cols


def all_score_keys(rows: Iterable[Row]) -> list[str]:
    """Every evaluation target·metric present in any row, sorted."""
    return sorted({k for r in rows for k in r.scores})


# --------------------------------------------------------------------------- charts (geometry only)

def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def phase_chart(steps: Sequence[int], per_step: Sequence[dict[str, int]], max_points: int = 400) -> dict:
    """Geometry of the stacked phase chart: FLOPs per optimizer step, rollout at the bottom, then
    update, then reward. Long ledgers are averaged into at most `max_points` bins."""
    width, height, left, right, top, bottom = 720, 260, 70, 700, 30, 220
    n = len(steps)
    bin_ = max(1, math.ceil(n / max_points))
    xs, stacks = [], []
    for i in range(0, n, bin_):
        chunk = per_step[i:i + bin_]
        xs.append(sum(steps[i:i + bin_]) / len(chunk))
        stacks.append([sum(r[ph] for r in chunk) / len(chunk) for ph in PHASES])
    ymax = max((sum(s) for s in stacks), default=0) or 1
    x0, x1 = (xs[0], xs[-1]) if xs else (0, 1)
    sx, sy = (right - left) / ((x1 - x0) or 1), (bottom - top) / ymax

    def X(x):
        return round(left + (x - x0) * sx, 1)

    def Y(y):
        return round(bottom - y * sy, 1)

    # x positions are shared by every layer: format them once (long ledgers make many charts).
    px = [f"{X(x):g}" for x in xs] if n > 1 else [f"{left}", f"{right}"]
    layers, base = [], [0.0] * len(stacks)
    for j, ph in enumerate(PHASES):
        topline = [b + st[j] for b, st in zip(base, stacks)]
        if n == 1:  # one step: a bar, not a line
            topline, base = topline * 2, base * 2
        upper = [f"{a},{Y(t):g}" for a, t in zip(px, topline)]
        lower = [f"{a},{Y(b):g}" for a, b in zip(px, base)]
        layers.append({"phase": ph, "color": PHASE_COLORS[ph], "total": sum(r[ph] for r in per_step),
                       "points": " ".join(upper + lower[::-1])})
        base = topline[:len(stacks)]
    yticks = [{"pos": Y(v), "label": sci(v, 2)} for v in _ticks(0, ymax)]
    xticks = [{"pos": X(v), "label": f"{v:g}"} for v in _ticks(x0, x1)] if n > 1 else \
        [{"pos": (left + right) / 2, "label": str(steps[0])}]
    return {"width": width, "height": height, "left": left, "right": right, "top": top, "bottom": bottom,
            "layers": layers, "yticks": yticks, "xticks": xticks, "steps": n, "bin": bin_, "binned": bin_ > 1}


def frontier_charts(rows: Sequence[Row]) -> list[dict]:
    """Geometry of the frontier plots: per evaluation target, score against total FLOPs (log x)
    with one series per model size and reward system; a series' frontier joins the runs no
    cheaper run of the series beats (suite.analysis.frontier.compute_frontier)."""
    from ..analysis.frontier import compute_frontier

    charts = []
    for key in all_score_keys(rows):
        pts = [r for r in rows if key in r.scores and r.total_flops > 0]
        if not pts:
            continue
        width, height, left, right, top, bottom = 900, 340, 60, 660, 20, 290
        lx = [math.log10(r.total_flops) for r in pts]
        lo, hi = math.floor(min(lx) - 0.05), math.ceil(max(lx) + 0.05)   # keep points off the frame
        if hi == lo:
            hi = lo + 1
        ys = [r.scores[key] for r in pts]
        ylo, yhi = min(ys), max(ys)
        if 0 <= ylo and yhi <= 1:
            ylo, yhi = 0.0, 1.0          # scores in [0, 1] get the whole unit range
        elif yhi == ylo:
            ylo, yhi = ylo - 1, yhi + 1

        def X(v):
            return round(left + (math.log10(v) - lo) / (hi - lo) * (right - left), 2)

        def Y(v):
            return round(bottom - (v - ylo) / (yhi - ylo) * (bottom - top), 2)

        series = []
        names = sorted({r.series for r in pts}, key=lambda c: (c.split(" · ")[0], c))
        for i, name in enumerate(names):
            mine = [r for r in pts if r.series == name]
            frontier, marks = [], []
            for j, is_best in compute_frontier([(r.total_flops, r.scores[key]) for r in mine]):
                r = mine[j]
                if is_best:
                    frontier.append(f"{X(r.total_flops)},{Y(r.scores[key])}")
                marks.append({"x": X(r.total_flops), "y": Y(r.scores[key]), "best": is_best, "page": r.page,
                              "label": f"{r.run_name}: {fixed(r.scores[key], 3)} at {sci(r.total_flops)} FLOPs, "
                                       f"p = {fixed(r.update_share, 3)}"})
            series.append({"name": name, "color": PALETTE[i % len(PALETTE)], "points": marks,
                           "frontier": " ".join(frontier) if len(frontier) > 1 else ""})
        target, _, metric = key.partition(" · ")
        charts.append({"target": target, "metric": metric, "n": len(pts), "series": series,
                       "width": width, "height": height, "left": left, "right": right, "top": top,
                       "bottom": bottom,
                       "xticks": [{"pos": X(10 ** e), "label": f"1e{e}"} for e in range(lo, hi + 1)],
                       "yticks": [{"pos": Y(v), "label": f"{v:g}"} for v in _ticks(ylo, yhi)]})
    return charts


# --------------------------------------------------------------------------- Jinja

def _csp_hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


@lru_cache(maxsize=None)
def site_env(template_dir: str | None = None):
    """The Jinja environment of the site: autoescape ON for every template, undefined names are
    errors, and the formatting filters above."""
    import jinja2

    folder = template_dir or str(paths.reporters() / "site")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        autoescape=True,                     # every template, whatever its name: all output is HTML
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
    )
    env.filters.update(sci=sci, pct=pct, fixed=fixed, thousands=thousands, safe_href=safe_href)
    return env


@lru_cache(maxsize=None)
def _static(template_dir: str | None = None):
    """The site's own stylesheet and script, inlined verbatim (they are ours, not submission
    data: marked safe so autoescape leaves them byte-identical to what the CSP hash covers)."""
    from markupsafe import Markup

    folder = Path(template_dir or paths.reporters() / "site")
    css = (folder / "site.css").read_text(encoding="utf-8")
    js = (folder / "site.js").read_text(encoding="utf-8")
    if "</style" in css.lower() or "</script" in js.lower():
        raise RaceError("reporters/site: site.css or site.js closes its own element", "remove the closing tag")
    return Markup(css), Markup(js)


# --------------------------------------------------------------------------- site

@dataclass(frozen=True)
class SiteEntry:
    """A listed submission as the site builder needs it."""

    row: Row
    doc: dict                       #: the report v1 document
    filename: str                   #: its file name in the submissions folder (no folders)
    findings: tuple = ()            #: validation findings (suite.validate.Finding), none = clean
    ledger: tuple[list[int], list[dict[str, int]]] | None = None  #: steps and per-step FLOPs
    ledger_note: str = ""           #: why there is no ledger chart


@dataclass(frozen=True)
class Skip:
    """A file of the submissions folder that was not listed, and why (shown on the site)."""

    name: str
    reason: str


NAV = (("index.html", "by total FLOPs"), ("allocation.html", "by allocation"), ("frontier.html", "frontier"))


SITE_MARKER = ".race-site"   # marks a folder as a built site: only such a folder is ever replaced


def _write(path: Path, text: str) -> None:
    # Pages go into a fresh staging folder (see build_site), so plain writes are enough here.
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _swap_in(staging: Path, out: Path) -> None:
    """Replace `out` with the finished `staging` folder: readers see the old site or the new one,
    never a half-built one. Refuses to replace a folder that is not a built site."""
    import shutil

    if out.exists():
        if not out.is_dir() or (any(out.iterdir()) and not (out / SITE_MARKER).is_file()):
            shutil.rmtree(staging, ignore_errors=True)
            raise RaceError(f"{out} exists and is not a site built by race",
                            "choose an empty or new folder for --out")
        old = out.with_name(f".{out.name}.old-{os.getpid()}-{secrets.token_hex(3)}")
        try:
            os.rename(out, old)
            os.rename(staging, out)
        except OSError:             # a concurrent build moved or recreated `out` meanwhile
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)
            raise RaceError(f"another build replaced {out} at the same time", "run the build again") from None
        shutil.rmtree(old, ignore_errors=True)
    else:
        try:
            os.rename(staging, out)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            raise RaceError(f"another build created {out} at the same time", "run the build again") from None


def settings_rows(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """A report section flattened to (dotted key, leaf value) pairs, for the settings tables."""
    if isinstance(value, dict) and value:
        return [kv for k, v in value.items() for kv in settings_rows(v, f"{prefix}.{k}" if prefix else str(k))]
    if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        return [kv for i, v in enumerate(value) for kv in settings_rows(v, f"{prefix}[{i}]")]
    return [(prefix, value)]


def leaf_text(v: Any) -> str:
    """How a settings leaf reads: JSON literals for booleans and null, thousands separators for
    integers, lists joined by commas."""
    if v is None or isinstance(v, bool):
        return json.dumps(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, list):
        return ", ".join(leaf_text(x) for x in v) if v else "[]"
    if isinstance(v, dict):
        return "{}"
    return str(v)


def build_site(entries: Sequence[SiteEntry], out: Path, skipped: Sequence[Skip] = (),
               template_dir: str | None = None, extra_files: dict[str, str] | None = None) -> dict[str, Any]:
    """Write the static site into `out`: index.html (sorted by total FLOPs), allocation.html
    (sorted by update share p), frontier.html and s/<id>.html per submission. Pages use only
    relative links and carry no local paths. Returns a summary: pages written and the main page's
    size in bytes."""
    env = site_env(template_dir)
    css, js = _static(template_dir)
    final = Path(out)
    final.parent.mkdir(parents=True, exist_ok=True)
    out = final.with_name(f".{final.name}.building-{os.getpid()}-{secrets.token_hex(3)}")
    (out / "s").mkdir(parents=True)
    (out / SITE_MARKER).write_text(f"built by race {__version__}\n")
    for name, text in (extra_files or {}).items():      # e.g. the validation cache (hidden files)
        _write(out / name, text)
    rows = [e.row for e in entries]
    cols = columns(all_score_keys(rows))
    col_index = {c.key: i for i, c in enumerate(cols)}
    common = {"version": __version__, "css": css, "nav": NAV, "n_submissions": len(entries),
              "csp": {"style": _csp_hash(css), "script": _csp_hash(js)}}
    size_order = sorted({(r.params, r.size_label) for r in rows})
    filters = [
        {"name": "size", "label": "model size", "options": list(dict.fromkeys(s for _, s in size_order))},
        {"name": "reward", "label": "reward system", "options": sorted({r.reward_system for r in rows})},
        {"name": "band", "label": "budget band",
         "options": sorted({r.budget_band for r in rows}, key=_band_order)},
    ]
    views = {
        "index.html": ("by total FLOPs", "Sorted by total training FLOPs, largest first.", "total",
                       sorted(rows, key=lambda r: (-r.total_flops, r.run_name))),
        "allocation.html": ("by allocation", "Sorted by allocation: update share p, largest first; "
                            "ties by total FLOPs.", "p",
                            sorted(rows, key=lambda r: (-r.update_share, -r.total_flops, r.run_name))),
    }
    sizes = {}
    for name, (label, note, sort_key, ordered) in views.items():
        html = env.get_template("index.html.j2").render(
            **common, js=js, root="", current=name, view_label=label, view_note=note, rows=ordered,
            columns=cols, sort_col=col_index[sort_key], sort_dir="descending", filters=filters,
            skipped=list(skipped))
        _write(out / name, html)
        sizes[name] = len(html.encode("utf-8"))
    _write(out / "frontier.html", env.get_template("frontier.html.j2").render(
        **common, js="", root="", current="frontier.html", charts_=frontier_charts(rows)))
    page = env.get_template("submission.html.j2")
    for e in entries:
        chart = phase_chart(*e.ledger) if e.ledger else None
        totals = e.doc["totals"]
        phases = [{"name": ph, "flops": totals["flops"][ph], "share": totals["shares"][ph],
                   "tokens": (totals["tokens"]["rollout_prompt"] + totals["tokens"]["rollout_completion"])
                   if ph == "rollout" else totals["tokens"][ph]} for ph in PHASES]
        sections = [(k, [(key, leaf_text(v), safe_href(v)) for key, v in settings_rows(e.doc[k])])
                    for k in ("run", "policy", "adapter", "grpo", "reward", "accounting", "budget", "ledger")
                    if k in e.doc]
        _write(out / e.row.page, page.render(
            **common, js="", root="../", current="", row=e.row, filename=e.filename, phases=phases,
            findings=list(e.findings), chart=chart, ledger_name=e.doc["ledger"]["path"],
            ledger_note=e.ledger_note, sections=sections))
    _swap_in(out, final)
    return {"pages": 3 + len(entries), "listed": len(entries), "skipped": len(skipped),
            "index_bytes": sizes["index.html"], "allocation_bytes": sizes["allocation.html"]}


def _band_order(label: str) -> tuple[float, str]:
    try:
        return float(label.split("–")[0]), label
    except ValueError:
        return math.inf, label


# --------------------------------------------------------------------------- paper tables

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

    env.filters.update(sci=sci, pct=pct, fixed=fixed, thousands=thousands, texsci=texsci)
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
            "scores": r.scores}


def table_from_files(paths: Sequence[str | os.PathLike], fmt: str, *, check: bool = True) -> str:
    """`race report --format markdown|latex|json REPORT...`: the paper table of report files, in
    the order given. Each report is read strictly and, when `check`, must pass `race validate`
    (its ledger checked beside it) without error findings: a paper prints only checked numbers."""
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
