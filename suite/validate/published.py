"""PUB rules: what a report says about published work -- the share of the policy's pretraining
compute (and the indicative EU check built on it), and a published run's sources, assumptions
and estimate range."""

from __future__ import annotations

import math
from typing import Iterable

from .registry import Issue, rule

REL = 1e-9          # ratios are floats computed from exact integers: only rounding may differ


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=0.0)


@rule("PUB-001", title="the pretraining share disagrees with its recomputation", requires=("pretraining", "totals", "policy"))
def pretraining_share(ctx) -> Iterable[Issue]:
    """`pretraining` is recomputed from the suite's pretraining facts for the report's policy
    (suite/accounting/catalog/pretraining.yaml: published FLOPs, else 6 * N * D) and the report's
    own total: the pretraining FLOPs, post-training / pretraining and the EU one-third threshold
    and verdict must agree. An inflated pretraining figure would hide a modification that
    crosses one third of the original compute."""
    from dataclasses import replace

    from ..accounting.pretraining import share_of_pretraining

    doc, sec = ctx.doc, ctx.doc["pretraining"]
    total = doc["totals"]["flops"]["total"]
    read = ctx.models.get("$.policy")
    if read is None or read.spec is None:
        return  # PHYS-006 reports an unreadable spec (PHYS-010 one that cannot be traced here)
    from .identity import catalog_name

    name = doc["policy"]["name"]   # the facts are looked up by the model's name, normalised as the catalog's
    spec = replace(read.spec, name=catalog_name(name) or name)
    want = share_of_pretraining(total, spec)
    if sec["flops"] != want["flops"] or sec["method"] != want["method"]:
        yield Issue("$.pretraining.flops", f"pretraining {sec['flops']} ({sec['method']}) for {spec.name}; the "
                    f"suite's facts give {want['flops']} ({want['method']})",
                    "rebuild the report (race report) or correct the pretraining facts with their source")
        return
    if (sec["ratio"] is None) != (want["ratio"] is None) or (want["ratio"] is not None and not _close(sec["ratio"],
                                                                                                  want["ratio"])):
        yield Issue("$.pretraining.ratio", f"ratio {sec['ratio']} but totals.flops.total / pretraining.flops = "
                    f"{want['ratio']}", "the ratio is C_total / pretraining FLOPs")
    eu, w = sec["eu"], want["eu"]
    if eu["threshold_flops"] != w["threshold_flops"] or eu["exceeds"] != w["exceeds"]:
        yield Issue("$.pretraining.eu", f"threshold {eu['threshold_flops']:,} (exceeds: {eu['exceeds']}) but one third "
                    f"of {'the original compute' if want['flops'] else 'the default 10^23 FLOP'} is "
                    f"{w['threshold_flops']:,} (exceeds: {w['exceeds']})",
                    "C(2025) 5045 points 59-61: one third of the original training compute, else of 10^23 FLOP")


@rule("PUB-002", title="a published run's setup number has no source and no assumption", requires=("sources", "reward"))
def sourced(ctx) -> Iterable[Issue]:
    """A published run re-accounted (`sources`) says for every number of its setup where it was
    read (`sources.facts`: URL and place) or that it was assumed (`sources.assumed`: value, range,
    why): the policy, adapter, K, prompts per step, completion cap, mu, beta, steps and mean
    lengths; the hardware and its peak when the report has a hardware section; the reward
    model's scored tokens when a model scores."""
    from ..record.sources import SETUP_FIELDS

    doc, src = ctx.doc, ctx.doc["sources"]
    known = set(src["facts"]) | set(src.get("assumed", {}))
    need = list(SETUP_FIELDS)
    if "hardware" in doc:
        need += ["hardware", "peak_flops"]
    if (doc.get("reward") or {}).get("model"):
        need.append("mean_reward_tokens")
    missing = [f for f in need if f not in known]
    if missing:
        yield Issue("$.sources", f"no source or assumption for {', '.join(missing)}",
                    "add each to `sources:` ({url, where}) or to `assumed:` ({low, high, why}) in the run description")


def _reported(doc: dict, field: str, hw: dict | None) -> float | None:
    """The report's own value of an assumable setup field (`hw`: its hardware section, if valid)."""
    means = (doc.get("provenance") or {}).get("means") or {}
    if field == "steps":
        return doc["totals"]["steps"]
    if field.startswith("mean_"):
        return means.get(field[len("mean_"):])
    if field in ("prompts_per_step", "group_size", "num_iterations", "beta"):
        return doc["grpo"][field]
    if field == "accelerator_hours" and hw:
        return hw["accelerator_hours"] if "accelerator_hours" in hw else hw["count"] * hw["wall_seconds"] / 3600
    return None


@rule("PUB-003", title="an assumption or the estimate's range does not hold its value", requires=("sources", "totals", "grpo", "provenance"))
def ranges(ctx) -> Iterable[Issue]:
    """Each assumption's value is the report's own (the steps, means, batch or hours it was priced
    with) and lies in its [low, high]; the FLOPs range holds the total, and the utilization range
    the implied utilization at the stated hours."""
    doc, src = ctx.doc, ctx.doc["sources"]
    hw = doc["hardware"] if ctx.section_ok("hardware") else None
    for field, a in (src.get("assumed") or {}).items():
        have = _reported(doc, field, hw)
        where = f"$.sources.assumed.{field}"
        if have is None:
            yield Issue(where, f"{field} is not a number this report was priced with",
                        "assume only steps, mean lengths, batch, K, mu, beta or accelerator hours")
        elif not _close(float(have), float(a["value"])):
            yield Issue(where, f"assumed {field} = {a['value']:g} but the report was priced with {have:g}",
                        "rebuild the report from its run description (race report --estimate)")
        elif not a["low"] <= a["value"] <= a["high"]:
            yield Issue(where, f"{field} = {a['value']:g} lies outside its range [{a['low']:g}, {a['high']:g}]",
                        "the range must hold the value assumed")
    rng = src.get("range") or {}
    total = doc["totals"]["flops"]["total"]
    f = rng.get("flops")
    if f and not f["low"] <= total <= f["high"]:
        yield Issue("$.sources.range.flops", f"range [{f['low']:.3e}, {f['high']:.3e}] does not hold the total "
                    f"{total:.3e}", "rebuild the report (race report --estimate)")
    u = rng.get("utilization")
    if u and hw:
        from ..record.runspec import Hardware

        point = Hardware.from_dict(hw).utilization(total)
        if not u["low"] * (1 - REL) <= point <= u["high"] * (1 + REL):
            yield Issue("$.sources.range.utilization", f"range [{u['low']:.3g}, {u['high']:.3g}] does not hold the "
                        f"implied utilization {point:.3g} at the stated hours", "rebuild the report (race report --estimate)")


@rule("PUB-004", title="a catalog policy's report has no pretraining share", requires=("policy", "totals"))
def pretraining_kept(ctx) -> Iterable[Issue]:
    """A report whose policy is a catalog model with pretraining facts
    (suite/accounting/catalog/pretraining.yaml) carries its `pretraining` section, in every
    schema version that has it (1.2 on; 1.0 and 1.1 reports predate it): PUB-001 recomputes it from the policy's name, which ties the name to the
    compute of the model it names. Dropped, a policy renamed or respecified under a catalog name
    would lose that check; `race report`, `race import` and `race report --estimate` always write it."""
    if "pretraining" in ctx.doc or ctx.doc.get("schema_version") in ("1.0", "1.1"):
        return      # 1.0 and 1.1 predate the section (PHYS-007 / PHYS-011 still hold the name)
    from dataclasses import replace

    from ..accounting.pretraining import pretraining
    from .identity import catalog_name

    name = catalog_name(ctx.doc["policy"]["name"])
    read = ctx.models.get("$.policy")
    if name is None or read is None or read.spec is None:
        return
    if pretraining(replace(read.spec, name=name)) is not None:
        yield Issue("$.pretraining", f"policy {name!r} has pretraining facts, but the report carries no pretraining "
                    "section", "rebuild the report (race report), which writes the pretraining share")
