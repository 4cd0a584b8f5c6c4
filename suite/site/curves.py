"""Compute-performance curves presented: the table `race curves` prints and the figure with the
fitted curves and their bands (PNG and SVG through suite.analysis.frontier's figure code), each
reading only the curves document suite.analysis.curves computes. Nothing here computes science.

    from suite.site import curves as page
    page.write(doc, "runs/curves")       # curves.json, curves.png, curves.svg
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from .formatting import interval

#: The figure's name (FIGURE.png and FIGURE.svg beside curves.json).
FIGURE = "curves"


def _e(x: dict | None, fmt: str = ".3f") -> str:
    return "—" if x is None else interval(x) if fmt == ".3f" else \
        f"{x['value']:{fmt}} [{x['low']:{fmt}}, {x['high']:{fmt}}]"


def table(doc: dict) -> str:
    """Per condition: each allocation's A, B, C_mid (and R(budget)) with intervals or its refusal,
    then which allocation has the highest asymptote and the best efficiency."""
    budget = doc["settings"]["budget"]
    lines = [f"{doc['form']}; {doc['settings']['level']:.0%} intervals, bootstrap over problems and seeds "
             f"({doc['settings']['replicates']} replicates, seed {doc['settings']['seed']})"]
    for c in doc["conditions"]:
        lines += ["", f"{c['name']} ({c['problems']} problems at every point)"]
        for a in c["allocations"]:
            if a["status"] == "refused":
                lines.append(f"  {a['label']:<12} refused: {a['reason'].split(': ', 1)[1]}")
                continue
            at = f"  R({budget:.3g}) {_e(a['at_budget'])}" if budget else ""
            refits = doc["settings"]["replicates"] - a["failed_replicates"]
            bound = (f"; A's interval reaches the bound: {a['unbent_replicates']} of {refits} refits did not bend"
                     if a["unbent_replicates"] > (1 - doc["settings"]["level"]) / 2 * refits else "")
            lines.append(f"  {a['label']:<12} A {_e(a['A'])}  B {_e(a['B'], '.2f')}  C_mid {_e(a['C_mid'], '.3g')}  "
                         f"R0 {_e(a['r0'])}  ({a['seeds']} seeds, {len(a['points'])} points{bound}){at}")
        for key, what in (("highest_asymptote", "highest asymptote"), ("best_efficiency", "best efficiency")):
            lead = c[key]
            if lead:
                lines.append(f"  {what}: {lead['label']} (leads in {lead['prob']:.0%} of replicates, "
                             f"among {lead['of']} fitted)")
    if doc.get("surface"):
        lines += ["", *surface_table(doc["surface"])]
    return "\n".join(lines)


def surface_table(sec: dict) -> list[str]:
    """The surfaces (parameters with intervals, or the refusal) and the held-out predictors side by
    side: how often each picks the validation budget's best allocation, and its regret."""
    st = sec["settings"]
    lines = [f"Surface {sec['form']}: Huber delta {st['huber_delta']}, L-BFGS-B with restarts, "
             f"{st['replicates']} replicates (seed {st['seed']})"]
    for c in sec["conditions"]:
        head = f"  {c['name']} ({c['points']} points, {c['rays']} update shares, budgets " \
               f"{', '.join(f'{b:.3g}' for b in c['budgets'])})"
        if c["status"] == "refused":
            lines += [head, f"    refused: {c['reason'].split(': ', 1)[1]}"]
            continue
        lines += [head, f"    R_inf {_e(c['R_inf'])}  A {_e(c['A'], '.3g')}  alpha {_e(c['alpha'], '.2f')}  "
                        f"B {_e(c['B'], '.3g')}  beta {_e(c['beta'], '.2f')}"]
        lines += [f"    R at {p['label']}: {_e(p['value'])}" for p in c["predictions"]]
    h = sec.get("holdout")
    if not h:
        lines.append("  held-out predictors: none (one budget, or no condition with 3 allocations at both)")
        return lines
    fitted = sum(t["surface_refusal"] is None for t in h["trials"] if t["surface"])
    lines += ["", f"Held-out predictors, pilot {h['settings']['pilot_budget']:.3g} -> validation "
                  f"{h['settings']['validation_budget']:.3g} FLOPs, {len(h['trials'])} conditions "
                  f"({h['settings']['replicates']} replicates):",
              f"  {'predictor':<46} {'picks the validation best':<26} mean regret"]
    for r in h["predictors"]:
        lines.append(f"  {r['what']:<46} {_e(r['pick_hit_rate']):<26} {_e(r['mean_regret'])}")
    if any(t["surface"] for t in h["trials"]):
        lines.append(f"  the surface was fitted in {fitted} of {len(h['trials'])} conditions; where refused it "
                     f"predicts each allocation's pilot score")
    for t in h["trials"]:
        lines.append(f"  {t['name']}: best {t['best']}; RACE {t['race']}, baseline {t['baseline']}, curves "
                     f"{t['curves'] or '—'}, surface {t['surface'] or '—'}")
    return lines


def plot(doc: dict, out: str | os.PathLike) -> list[Path]:
    """FIGURE.png/.svg: score against training FLOPs (log), one panel per condition; each
    allocation's points, and for a fitted one its curve with the 95% band, extended dashed to
    the named budget. Refused allocations show their points only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..analysis.frontier import finish_figure

    matplotlib.rcParams["svg.hashsalt"] = "race"
    conds = doc["conditions"]
    if not conds:
        return []
    budget = doc["settings"]["budget"]
    ncol = min(2, len(conds))
    nrow = math.ceil(len(conds) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(6 * ncol, 4 * nrow), squeeze=False)
    for ax, c in zip(axes.flat, conds):
        for a in c["allocations"]:
            xs, ys = zip(*a["points"])
            dots = ax.scatter(xs, ys, s=9, alpha=0.6, label=a["label"] + ("" if a["band"] else " (refused)"))
            band = a["band"]
            if band:
                colour = dots.get_facecolor()[0]
                seen = [i for i, f in enumerate(band["flops"]) if f <= max(xs)]
                beyond = [i for i, f in enumerate(band["flops"]) if f >= max(xs)]
                for idx, style in ((seen, "-"), (beyond, "--")):
                    if idx:
                        ax.plot([band["flops"][i] for i in idx], [band["value"][i] for i in idx], style, lw=1.2,
                                color=colour)
                ax.fill_between(band["flops"], band["low"], band["high"], color=colour, alpha=0.15, lw=0)
        if budget:
            ax.axvline(budget, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_title(c["name"], fontsize=8)
        ax.set_xlabel("cumulative training FLOPs")
        ax.set_ylabel(f"{c['condition']['metric']} (first {c['problems']} problems)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    return finish_figure(fig, axes, len(conds), f"Curves per allocation, {doc['settings']['level']:.0%} bootstrap bands",
                         Path(out), FIGURE)


def write(doc: dict, out: str | os.PathLike, *, plots: bool = True) -> list[Path]:
    """curves.json (checked against its schema) and, unless plots=False, the figure, into `out`."""
    from ..analysis.curves import check, to_json
    from ..atomic import write_text_atomic

    check(doc)
    out = Path(out)
    paths = [write_text_atomic(out / "curves.json", to_json(doc))]
    return paths + (plot(doc, out) if plots else [])
