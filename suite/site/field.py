"""The docs page "The field's runs, re-accounted" (docs/field.md), generated from the published
runs' reports: per run its total FLOPs and their range over the assumptions, the rollout /
update / reward split, p, FLOPs per trained token, the implied utilization at the stated hours
(and at every other published figure for them), what 6*N*D and verl's estimator would have
said, and the share of the base model's pretraining compute.

Every number is read from a report (`Report`), except the two comparison columns, which are
verl's estimator (suite.accounting.counters.verl_flops: its installed code, else the
re-implementation of suite.accounting.compare) and 6*N*T applied to the report's own token counts."""

from __future__ import annotations

from typing import Sequence

from ..record.report import Report
from ..record.runspec import Hardware
from .formatting import pct, sci

BEGIN, END = "<!-- field:begin -->", "<!-- field:end -->"


def _range(lo: float, hi: float, fmt) -> str:
    return f"{fmt(lo)}–{fmt(hi)}"


def _util(u: float | None) -> str:
    return "—" if u is None else f"{100 * u:.1f}%" if u >= 0.001 else f"{100 * u:.2g}%"


def _compare(r: Report) -> tuple[int, int | None]:
    """6*N*D over the tokens trained, and verl's estimate of one update pass over every trained
    sequence (mean lengths: each prompt + completion counted at the means)."""
    from ..accounting.compare import six_n_t
    from ..accounting.counters import verl_flops
    from ..accounting.refcase import checkpoint_config
    from ..accounting.specs import PATH_RECIPE
    from ..accounting.stored import spec_from_dict

    spec = spec_from_dict(r.doc["policy"]["spec"], r.model)    # a recipe's facts, or a traced model's config
    means = r.provenance.get("means") or {}
    length = round(float(means.get("prompt_tokens", 0)) + float(means.get("completion_tokens", 0)))
    # verl's installed FlopsCounter where verl installs, its re-implementation in the light core; verl's
    # formulas read a recipe's widths, a traced model has none to give them
    verl = verl_flops(spec, checkpoint_config(spec), [length] * r.completions)[0] \
        if length and spec.priced_by == PATH_RECIPE else None
    return six_n_t(spec, r.tokens["update"]), verl


def row(r: Report) -> dict:
    """The numbers of one run's line of the page."""
    src = r.doc["sources"]
    rng = src.get("range", {})
    hw = r.hardware
    six, verl = _compare(r)
    pre = r.doc.get("pretraining") or {}
    out = {"run": r.label or r.run_id, "url": src["published"]["url"], "model": r.model,
           "reconstructed": bool(src["published"].get("reconstructed")),
           "total": r.total_flops, "range": rng.get("flops"), "shares": r.shares, "p": r.update_share,
           "per_token": r.total_flops / r.tokens["update"] if r.tokens["update"] else None,
           "utilization": hw.utilization(r.total_flops) if hw else None, "util_range": rng.get("utilization"),
           "hours": hw.accelerator_seconds / 3600 if hw else None, "accelerator": f"{hw.count} x {hw.accelerator}"
           if hw else "", "six_n_d": six, "verl": verl, "pretraining": pre,
           "alternatives": []}
    for alt in (src["facts"].get("hardware") or {}).get("alternatives", []):
        other = Hardware(hw.accelerator, hw.count, hw.peak_flops, hw.dtype, accelerator_hours=alt["value"]) if hw \
            else None
        out["alternatives"].append({"hours": alt["value"], "url": alt["url"], "where": alt["where"],
                                    "utilization": other.utilization(r.total_flops) if other else None})
    return out


def _cell_total(x: dict) -> str:
    rng = x["range"]
    return sci(x["total"]) + (f" ({_range(rng['low'], rng['high'], sci)})" if rng else "")


def _cell_util(x: dict) -> str:
    if x["utilization"] is None:
        return "— (no hours published)"
    u = x["util_range"]
    return _util(x["utilization"]) + (f" ({_range(u['low'], u['high'], _util)})" if u else "") + \
        f" of {x['accelerator']}, {x['hours']:,.0f} h"


def _cell_pre(x: dict) -> str:
    pre = x["pretraining"]
    if not pre:
        return "—"
    if pre.get("ratio") is None:
        return "unknown (EU default: " + ("above" if pre["eu"]["exceeds"] else "below") + ")"
    verdict = "above" if pre["eu"]["exceeds"] else "below"
    return f"{pre['ratio']:.2e} ({pre['method']}; {verdict} 1/3)"


def page(reports: Sequence[Report]) -> str:
    """The generated block of docs/field.md: the table, the disagreements, the sources."""
    rows = sorted((row(r) for r in reports), key=lambda x: (-x["total"], x["run"]))
    lines = ["| run | model | total FLOPs (range) | rollout / update / reward | p | FLOPs per trained token | "
             "implied utilization (range) at the stated hours | 6·N·D | verl's estimator | post-training / "
             "pretraining (EU) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for x in rows:
        s = x["shares"]
        name = f"[{x['run']}]({x['url']})" + (" *(reconstructed)*" if x["reconstructed"] else "")
        lines.append(f"| {name} | {x['model']} | {_cell_total(x)} | {pct(s['rollout'])} / {pct(s['update'])} / "
                     f"{pct(s['reward'])} | {x['p']:.3f} | {sci(x['per_token'])} | {_cell_util(x)} | "
                     f"{sci(x['six_n_d'])} ({x['six_n_d'] / x['total']:.2f}x) | "
                     + (f"{sci(x['verl'])} ({x['verl'] / x['total']:.2f}x)" if x["verl"] else "—")
                     + f" | {_cell_pre(x)} |")
    alts = [x for x in rows if x["alternatives"]]
    if alts:
        lines += ["", "Where two sources disagree on the hours, each figure and what it implies:", "",
                  "| run | hours | implied utilization | source |", "|---|---|---|---|"]
        for x in alts:
            lines.append(f"| {x['run']} | {x['hours']:,.0f} | {_util(x['utilization'])} | the run's report |")
            for a in x["alternatives"]:
                lines.append(f"| {x['run']} | {a['hours']:,.0f} | {_util(a['utilization'])} | [{a['where']}]({a['url']}) |")
    return "\n".join(lines) + "\n"


__all__ = ["BEGIN", "END", "row", "page"]
