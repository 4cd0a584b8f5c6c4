"""The findings of a study presented: findings.md (template in reporters/findings/) and the
frontier figure with intervals, each reading only the findings document suite.analysis.findings
computes; the same document becomes the leaderboard site's findings page (suite.site.render,
`race leaderboard build --findings`). Nothing here computes science.

    from suite.site import findings as page
    page.write(doc, "runs/study")        # findings.json, findings.md, figures
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from ..analysis.findings import FORMAT, SCORE_METRICS, check, to_json
from .formatting import interval

#: What `write` puts in its folder besides the figures; `race findings --check` compares these.
FILES = ("findings.json", "findings.md")
#: The figure with intervals (FIGURE.png and FIGURE.svg beside findings.json).
FIGURE = "frontier_intervals"


def _env():
    import jinja2

    from ..paths import reporters

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(reporters() / "findings")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["est"] = interval
    env.filters["sci"] = lambda x: f"{float(x):.3g}"
    return env


def claims_text(doc: dict) -> str:
    """The claims as a few lines for a terminal."""
    return "\n".join(f"({c['id']}) {c['verdict'].upper()}: {c['claim']}\n    {c['summary']}" for c in doc["claims"])


def headline_text(rows: list[dict]) -> str:
    """The current verdict of each claim (suite.analysis.headline) for a terminal."""
    out = []
    for r in rows:
        others = "; ".join(f"{o['study']}: {o['verdict']}" + ("" if o["designed"] else " (not designed for it)")
                           for o in r["others"])
        out += [f"({r['id']}) {r['verdict'].upper()} — decided by {r['study']} ({r['folder']}, {r['cells']} cells, "
                f"{r['finished'][:10]})" + ("" if r["designed"] else " [no study was designed for it]"),
                f"    {r['number']}", f"    why: {r['rule']}"] + ([f"    other runs: {others}"] if others else [])
    return "\n".join(out)


def headline_markdown(rows: list[dict]) -> str:
    """The same as a Markdown table: the first table of docs/findings.md."""
    out = ["| claim | current verdict | the number behind it (95% interval) | decided by | why | other runs |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        others = "; ".join(f"{o['study']}: {o['verdict']}" + ("" if o["designed"] else " (not designed for it)")
                           for o in r["others"]) or "—"
        by = f"`{r['folder']}` ({r['study']}, {r['cells']} cells, {r['finished'][:10]})"
        out.append(f"| ({r['id']}) {r['claim']} | **{r['verdict']}** | {r['number']} | {by} | {r['rule']} | {others} |")
    return "\n".join(out) + "\n"


def markdown(doc: dict) -> str:
    """findings.md: the claims table, RACE's held-out validation, every condition with intervals."""
    return _env().get_template("findings.md.j2").render(doc=doc)


def texts(doc: dict) -> dict[str, str]:
    """The text files of a findings folder, by name: the document and its Markdown."""
    return {"findings.json": to_json(doc), "findings.md": markdown(doc)}


def for_site(path: str | os.PathLike) -> tuple[dict, bytes | None]:
    """A findings.json for the leaderboard site (`race leaderboard build --findings`): the document,
    read strictly (suite.jsonstrict) and checked against schemas/findings-v1, and FIGURE.png beside
    it when there is one (the PNG only: an SVG opened from the site is a document that could run
    script). RaceError with one line naming the first problem."""
    from .. import jsonstrict
    from ..errors import RaceError
    from ..record import schemas

    path = Path(path)
    redo = "write it with `race findings DIR` (DIR/findings.json) from the study's runs"
    if path.is_dir():
        raise RaceError(f"{path} is a folder, not a findings.json", f"pass {path / 'findings.json'}")
    try:
        doc = jsonstrict.load(path)
    except jsonstrict.JSONInputError as e:
        raise RaceError(f"{path}: {e.message}", redo) from None
    except OSError as e:
        raise RaceError(f"cannot read {path}: {e.strerror or e}", redo) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:       # another document (a report?)
        raise RaceError(f"{path} is not a findings document (no \"format\": \"{FORMAT}\")", redo)
    try:
        schemas.check_spec(doc, schemas.FINDINGS, f"{path} does not follow {schemas.FINDINGS}")
    except RaceError as e:
        message = e.message if len(e.message) <= 300 else e.message[:299] + "…"   # a whole document as a value
        raise RaceError(message, redo) from None
    png = path.with_name(f"{FIGURE}.png")
    if not png.is_file():
        return doc, None
    data = png.read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise RaceError(f"{png} is not a PNG image", f"draw it again with `race findings {png.parent}`, or remove it")
    return doc, data


def plot(doc: dict, out: str | os.PathLike) -> list[Path]:
    """FIGURE.png/.svg: score against update share, one panel per target and metric,
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
                         "and seeds resampled)", Path(out), FIGURE)


def write(doc: dict, out: str | os.PathLike, *, plots: bool = True) -> list[Path]:
    """findings.json (the data, checked against its schema), findings.md (its presentation) and,
    unless plots=False, the figure with intervals, into `out` (atomically, file by file)."""
    from ..atomic import write_text_atomic

    check(doc)
    out = Path(out)
    paths = [write_text_atomic(out / name, text) for name, text in texts(doc).items()]
    if plots:
        paths += plot(doc, out)
    return paths
