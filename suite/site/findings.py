"""The findings of a study presented: findings.md and findings.html (templates in
reporters/findings/) and the frontier figure with intervals, each reading only the findings
document suite.analysis.findings computes. Nothing here computes science.

    from suite.site import findings as page
    page.write(doc, "runs/study")        # findings.json, findings.md, findings.html, figures
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from ..analysis.findings import SCORE_METRICS, check, to_json

#: What `write` puts in its folder besides the figures; `race findings --check` compares these.
FILES = ("findings.json", "findings.md")


def _env():
    import jinja2

    from ..paths import reporters

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(reporters() / "findings")),
                             autoescape=jinja2.select_autoescape(["html.j2"]), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["est"] = lambda e, d=3: "—" if not e else f"{e['value']:.{d}f} [{e['low']:.{d}f}, {e['high']:.{d}f}]"
    env.filters["sci"] = lambda x: f"{float(x):.3g}"
    return env


def claims_text(doc: dict) -> str:
    """The claims as a few lines for a terminal."""
    return "\n".join(f"({c['id']}) {c['verdict'].upper()}: {c['claim']}\n    {c['summary']}" for c in doc["claims"])


def markdown(doc: dict) -> str:
    """findings.md: the claims table, RACE's held-out validation, every condition with intervals."""
    return _env().get_template("findings.md.j2").render(doc=doc)


def html(doc: dict) -> str:
    """findings.html: the same, as a page the site can show (autoescaped; no script)."""
    from markupsafe import Markup

    from ..paths import reporters
    from .render import csp_hash

    css = (reporters() / "findings" / "findings.css").read_text(encoding="utf-8")
    return _env().get_template("findings.html.j2").render(doc=doc, css=Markup(css), csp_style=csp_hash(css))


def texts(doc: dict) -> dict[str, str]:
    """The text files of a findings folder, by name: the document and its pages."""
    return {"findings.json": to_json(doc), "findings.md": markdown(doc), "findings.html": html(doc)}


def plot(doc: dict, out: str | os.PathLike) -> list[Path]:
    """frontier_intervals.png/.svg: score against update share, one panel per target and metric,
    one line per model · budget · reward, each allocation with its 95% interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..analysis.frontier import finish_figure

    matplotlib.rcParams["svg.hashsalt"] = "race"
    panels = sorted({(c["condition"]["target"], c["condition"]["metric"]) for c in doc["conditions"]
                     if c["condition"]["metric"] in SCORE_METRICS})
    if not panels:
        return []
    ncol = min(2, len(panels))
    nrow = math.ceil(len(panels) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(6 * ncol, 4 * nrow), squeeze=False)
    for ax, (target, metric) in zip(axes.flat, panels):
        for c in doc["conditions"]:
            cd = c["condition"]
            if (cd["target"], cd["metric"]) != (target, metric):
                continue
            xs = [a["p"] for a in c["allocations"]]
            ys = [a["score"]["value"] for a in c["allocations"]]
            err = [[a["score"]["value"] - a["score"]["low"] for a in c["allocations"]],
                   [a["score"]["high"] - a["score"]["value"] for a in c["allocations"]]]
            ax.errorbar(xs, ys, yerr=err, marker="o", ms=3, lw=1, capsize=2,
                        label=f"{cd['model']} · {cd['budget_band']['label']} · {cd['reward_system']}")
        ax.set_title(f"{target} · {metric}", fontsize=10)
        ax.set_xlabel("update share p")
        ax.set_ylabel(f"{metric} (95% interval)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    return finish_figure(fig, axes, len(panels), "Allocations per condition with bootstrap 95% intervals (problems "
                         "and seeds resampled)", Path(out), "frontier_intervals")


def write(doc: dict, out: str | os.PathLike, *, plots: bool = True) -> list[Path]:
    """findings.json (the data, checked against its schema), findings.md and findings.html (its
    presentation) and, unless plots=False, the figure with intervals, into `out` (atomically,
    file by file)."""
    from ..atomic import write_text_atomic

    check(doc)
    out = Path(out)
    paths = [write_text_atomic(out / name, text) for name, text in texts(doc).items()]
    if plots:
        paths += plot(doc, out)
    return paths
