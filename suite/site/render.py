"""The static leaderboard site: a report as a row of the site (and of the paper tables,
suite.site.tables), the main table's columns, and the pages written with Jinja.

Reporters never compute science: every number shown is read from a report v1 document (its
`totals`, `evaluations`, ...) or from its ledger; this module only lays them out. Templates live
in reporters/site/; chart geometry is suite.site.charts, number formats suite.site.formatting.

Submissions are untrusted text. HTML is rendered by a Jinja environment with autoescape on,
no value from a submission ever becomes markup or script, links are emitted only for http(s)
URLs, and each page's Content-Security-Policy admits only its own inline style and script.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from .. import __version__, paths
from ..accounting import PHASES
from ..errors import RaceError
from ..record.report import Report
from ..record.runspec import Hardware
from .charts import frontier_charts, phase_chart, split_bar
from .board import legend
from .columns import columns
from .formatting import (BOARD_SCORE_COLUMNS, FRONTIER_CHARTS, fixed, gflops, interval, pct, safe_href, sci, score,
                         score_key, size_label, thousands, top_score_keys)
from .swap import SITE_MARKER, remove_leftovers, sibling, swap_in

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
    engine_profile: str = ""     #: accounting.engine_profile: which passes were counted (trl, trl-cpu, verl, ...)
    provenance: str = ""         #: how the numbers were obtained: measured, imported (engine), estimated, not stated
    origin: str = "submitted run"  #: "reference cell" for the suite's own tiny cells, else "submitted run"
    notes: str = ""              #: run.notes
    hardware: Hardware | None = None  #: the hardware section, if any (accelerator, count, peak, time)
    seconds: dict[str, float] = field(default_factory=dict)  #: totals.seconds: wall seconds per phase, if recorded
    source_url: str | None = None  #: a published run's publication (sources.published.url), if a followable link
    source_title: str = ""       #: its title
    flops_range: tuple[int, int] | None = None  #: an estimate's total over its assumptions (sources.range.flops)
    utilization_range: tuple[float, float] | None = None  #: and its implied utilization at the stated hours
    pretraining_ratio: float | None = None  #: post-training / pretraining compute (pretraining.ratio)
    eu_exceeds: bool | None = None  #: the indicative EU one-third check (pretraining.eu.exceeds), if stated
    badge: str = ""              #: how the row was obtained (suite.site.board.BADGES key), set by the board
    badge_label: str = ""        #: the badge's words

    @property
    def total_flops(self) -> int:
        """C_total."""
        return self.flops["total"]

    @property
    def utilization(self) -> float | None:
        """Total FLOPs over the declared accelerators' peak for the time held; None without hardware."""
        return None if self.hardware is None else self.hardware.utilization(self.total_flops)

    @property
    def flops_per_second(self) -> dict[str, float | None]:
        """Achieved FLOP/s per phase and in total (FLOPs over seconds; None without seconds)."""
        from ..accounting.utilization import achieved

        return achieved(self.flops, self.seconds)

    @property
    def phase_utilization(self) -> dict[str, float | None]:
        """Each phase's achieved FLOP/s over the declared peak of all its accelerators (None without
        hardware or seconds): beside the FLOP shares, where rollouts take the wall time and
        updates the FLOPs."""
        peak = self.hardware.peak_flops * self.hardware.count if self.hardware else None
        return {ph: (r / peak if r and peak else None) for ph, r in self.flops_per_second.items()}

    @property
    def series(self) -> str:
        """The series a compute frontier is drawn for: never pool model sizes or reward systems."""
        return f"{self.size_label} · {self.reward_system}"


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


def provenance_label(r: Report) -> str:
    """How a run's numbers were obtained, as the leaderboard says it."""
    method = r.provenance_method
    if method == "imported":
        engine = (r.provenance.get("source") or {}).get("engine")
        return f"imported ({engine})" if engine else "imported"
    return method or "not stated"


def row_from_report(doc: dict | Report, id: str, page: str = "", *, origin: str | None = None,
                    badge: Any = None) -> Row:
    """Read a report v1 (a document or a suite.record.report.Report) into a Row. Raises
    RaceError naming the field on a document that is not schema-valid: validate first.
    `origin` and `badge` (a suite.site.board.Badge) are the board's verdicts (suite.site.board):
    never read from the report's own fields. Without them a row is a submitted run (or, naming
    one, a reference cell) with no badge."""
    r = doc if isinstance(doc, Report) else Report(doc, id)
    acc = r.accounting
    src = r.doc.get("sources") if isinstance(r.doc.get("sources"), dict) else {}
    rng = src.get("range") or {}
    pre = r.doc.get("pretraining") if isinstance(r.doc.get("pretraining"), dict) else {}
    published = src.get("published") or {}
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
        steps=r.declared_steps,
        flops=r.flops,
        shares=r.shares,
        update_share=r.update_share,
        tokens=r.tokens,
        attention=acc["attention"],
        accounting=f"{acc['method']} {acc['version']} ({acc['engine_profile']})",
        engine=r.engine,
        budget_band=band_label(r),
        scores={score_key(t, m): v for (t, m), v in r.scores().items()},
        engine_profile=str(acc["engine_profile"]),
        provenance=provenance_label(r),
        origin=origin or ("reference cell" if r.reference_cell else "submitted run"),
        notes=r.notes,
        hardware=r.hardware,
        seconds=r.seconds,
        source_url=safe_href(published.get("url")),
        source_title=str(published.get("title") or ""),
        flops_range=(rng["flops"]["low"], rng["flops"]["high"]) if "flops" in rng else None,
        utilization_range=(rng["utilization"]["low"], rng["utilization"]["high"]) if "utilization" in rng else None,
        pretraining_ratio=pre.get("ratio"),
        eu_exceeds=(pre.get("eu") or {}).get("exceeds"),
        badge=badge.key if badge is not None else "",
        badge_label=badge.label if badge is not None else "",
    )


# --------------------------------------------------------------------------- Jinja

def csp_hash(text: str) -> str:
    """The Content-Security-Policy source of one inline style or script: sha256-BASE64."""
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
    env.filters.update(sci=sci, pct=pct, fixed=fixed, score=score, thousands=thousands, safe_href=safe_href, gflops=gflops,
                       est=interval)
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
FINDINGS_NAV = ("findings.html", "findings")     # beside the views when the build is given a study's findings


def _write(path: Path, text: str) -> None:
    # Pages go into a fresh staging folder (see build_site), so plain writes are enough here.
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


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
               template_dir: str | None = None, extra_files: dict[str, str] | None = None,
               findings: dict | None = None, figure: bytes | None = None) -> dict[str, Any]:
    """Write the static site into `out`: index.html (sorted by total FLOPs), allocation.html
    (sorted by update share p), frontier.html and s/<id>.html per submission; with `findings` (a
    findings.json document, already checked against its schema) also findings.html, linked from
    every page's navigation, and with `figure` (the PNG of suite.site.findings.FIGURE) that
    figure, linked from it. Pages use only relative links and carry no local paths. Returns a
    summary: pages written and the main page's size in bytes."""
    final = Path(out)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(final)         # what killed builds left: their staging folders, or the old site
    staging = sibling(final, "building")
    try:
        summary = _render(entries, staging, skipped, template_dir, extra_files, findings, figure)
    except BaseException:           # a failed build leaves no staging folder behind
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
        raise
    swap_in(staging, final)
    return summary


def _render(entries: Sequence[SiteEntry], out: Path, skipped: Sequence[Skip], template_dir: str | None,
            extra_files: dict[str, str] | None, findings: dict | None, figure: bytes | None) -> dict[str, Any]:
    """Write every page of the site into the fresh folder `out` (build_site's staging folder)."""
    env = site_env(template_dir)
    css, js = _static(template_dir)
    (out / "s").mkdir(parents=True)
    (out / SITE_MARKER).write_text(f"built by race {__version__}\n")
    for name, text in (extra_files or {}).items():      # e.g. the validation cache (hidden files)
        _write(out / name, text)
    rows = [e.row for e in entries]
    board_keys = top_score_keys(rows, BOARD_SCORE_COLUMNS)
    n_keys = len({k for r in rows for k in r.scores})
    cols = columns(board_keys)
    col_index = {c.key: i for i, c in enumerate(cols)}
    nav = NAV + (FINDINGS_NAV,) if findings is not None else NAV
    common = {"version": __version__, "css": css, "nav": nav, "n_submissions": len(entries),
              "csp": {"style": csp_hash(css), "script": csp_hash(js)}}
    size_order = sorted({(r.params, r.size_label) for r in rows})
    filters = [
        {"name": "origin", "label": "runs", "options": sorted({r.origin for r in rows}, reverse=True)},
        {"name": "size", "label": "model size", "options": list(dict.fromkeys(s for _, s in size_order))},
        {"name": "reward", "label": "reward system", "options": sorted({r.reward_system for r in rows})},
        {"name": "band", "label": "budget band",
         "options": sorted({r.budget_band for r in rows}, key=_band_order)},
        {"name": "badge", "label": "how obtained", "options": [b.label for b in legend(r.badge for r in rows)]},
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
            **common, js=js, root="", current=name, view_label=label, view_note=note,
            rows=[r for r in ordered if r.origin != "reference cell"],
            reference_rows=[r for r in ordered if r.origin == "reference cell"],
            columns=cols, sort_col=col_index[sort_key], sort_dir="descending", filters=filters,
            skipped=list(skipped), hidden_targets=n_keys - len(board_keys), badges=legend(r.badge for r in rows))
        _write(out / name, html)
        sizes[name] = len(html.encode("utf-8"))
    _write(out / "frontier.html", env.get_template("frontier.html.j2").render(
        **common, js="", root="", current="frontier.html", charts_=frontier_charts(rows, top_score_keys(rows, FRONTIER_CHARTS)),
        hidden_targets=n_keys - min(n_keys, FRONTIER_CHARTS)))
    if findings is not None:
        figure_name = ""
        if figure is not None:
            from .findings import FIGURE
            figure_name = f"{FIGURE}.png"
            (out / figure_name).write_bytes(figure)
        _write(out / FINDINGS_NAV[0], env.get_template("findings.html.j2").render(
            **common, js="", root="", current=FINDINGS_NAV[0], doc=findings, figure=figure_name))
    page = env.get_template("submission.html.j2")
    for e in entries:
        chart = phase_chart(*e.ledger) if e.ledger else None
        row = e.row
        rates = row.flops_per_second
        peak = row.hardware.peak_flops * row.hardware.count if row.hardware else None
        phases = [{"name": ph, "flops": row.flops[ph], "share": row.shares[ph],
                   "tokens": (row.tokens["rollout_prompt"] + row.tokens["rollout_completion"])
                   if ph == "rollout" else row.tokens[ph], "rate": rates[ph],
                   "utilization": rates[ph] / peak if rates[ph] and peak else None} for ph in PHASES]
        sections = [(k, [(key, leaf_text(v), safe_href(v)) for key, v in settings_rows(e.doc[k])])
                    for k in ("run", "policy", "adapter", "grpo", "reward", "accounting", "budget", "ledger",
                              "provenance", "hardware", "rollouts", "stages", "pretraining", "sources")
                    if k in e.doc]
        _write(out / e.row.page, page.render(
            **common, js="", root="../", current="", row=e.row, filename=e.filename, phases=phases,
            findings=list(e.findings), chart=chart, ledger_name=Report(e.doc, e.filename).ledger_path or "",
            ledger_note=e.ledger_note, sections=sections, bar=split_bar(e.row.shares),
            provenance=e.doc.get("provenance") or {}, rate=rates["total"],
            utilization=rates["total"] / peak if rates["total"] and peak else None))
    return {"pages": 3 + (findings is not None) + len(entries), "listed": len(entries), "skipped": len(skipped),
            "index_bytes": sizes["index.html"], "allocation_bytes": sizes["allocation.html"]}


def _band_order(label: str) -> tuple[float, str]:
    try:
        return float(label.split("–")[0]), label
    except ValueError:
        return math.inf, label


