"""A published run re-accounted: the report's `sources` section -- where each number of the
setup was read, what was assumed where the sources are silent, and the range of the estimate
over those assumptions.

A run description of a published run (`published:`, `sources:`, `assumed:` in the cell YAML)
names, for each setup field, the URL and place it was read from, or an assumption {low, high,
why} around the field's own value. The estimate is priced three times: at the values given, with
every assumption at its low end and with every one at its high end (FLOPs grow with steps,
batch and lengths, so these bound it), and the implied utilization at the stated hours is
bounded the same way (fewer hours, higher utilization). A run with a declared budget (the
paper's IsoFLOP bands) spends it at every end: its steps absorb the budget.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

from ..errors import RaceError
from ..numbers import parse_number

SETUP_FIELDS = ("policy", "lora_rank", "group_size", "prompts_per_step", "max_completion_tokens", "num_iterations",
                "beta", "steps", "mean_prompt_tokens", "mean_completion_tokens")
"""The setup numbers every published run must source or assume (PUB-002); `hardware` too when
the run states it, `mean_reward_tokens` when a reward model scores."""

ASSUMABLE = ("steps", "mean_prompt_tokens", "mean_completion_tokens", "mean_reward_tokens", "prompts_per_step",
             "group_size", "num_iterations", "beta", "accelerator_hours")
"""Fields an assumption may stand for: those the estimate is re-priced over."""


def _value(spec, means, field: str) -> float | None:
    """The value a run description gives a field (what an assumption is centred on)."""
    if field == "steps":
        return spec.steps
    if field.startswith("mean_"):
        return getattr(means, field[len("mean_"):])
    if field in ("prompts_per_step", "group_size", "num_iterations", "beta"):
        return getattr(spec.grpo, field)
    if field == "accelerator_hours":
        h = spec.hardware
        return None if h is None else h.accelerator_seconds / 3600.0
    return None


def _at(spec, means, assumed: Mapping[str, Mapping[str, float]], end: str):
    """The run description with every assumption at one end of its range."""
    a = {k: v[end] for k, v in assumed.items()}
    grpo = spec.grpo
    for k in ("prompts_per_step", "group_size", "num_iterations"):
        if k in a:
            grpo = replace(grpo, **{k: int(round(a[k]))})
    if "beta" in a:         # a non-zero beta adds the reference forward: FLOPs grow with it too
        grpo = replace(grpo, beta=a["beta"])
    spec = replace(spec, grpo=grpo, steps=int(round(a.get("steps", spec.steps))))
    means = replace(means, **{k[len("mean_"):]: a[k] for k in ("mean_prompt_tokens", "mean_completion_tokens",
                                                                "mean_reward_tokens") if k in a})
    return spec, means


def section(spec, means, total_flops: int, price: Callable[[Any, Any], int]) -> dict:
    """The report's `sources` section of a published run: its publication, the facts' sources,
    the assumptions with their ranges, and the estimate's range (`price(spec, means)` returns the
    total FLOPs of a run description). RaceError for an assumption the estimate cannot be priced
    over, or one whose range does not hold its own value."""
    src = spec.sources
    assumed: dict[str, dict] = {}
    for field, a in src["assumed"].items():
        if field not in ASSUMABLE:
            raise RaceError(f"assumed: {field!r} is not a number the estimate is priced over",
                            f"assume one of {', '.join(ASSUMABLE)}; source the others")
        value = _value(spec, means, field)
        if value is None:
            raise RaceError(f"assumed: {field} has no value in the run description", f"give {field} its assumed value")
        lo, hi = (float(parse_number(a[k])) for k in ("low", "high"))
        floor_ok = lo >= 0 if field == "beta" else lo > 0       # only beta may be assumed zero
        if not (floor_ok and lo <= value <= hi):
            raise RaceError(f"assumed: {field} = {value:g} lies outside its range [{lo:g}, {hi:g}]",
                            "the range must hold the value assumed")
        assumed[field] = {"value": value, "low": lo, "high": hi, "why": str(a["why"])}
    out: dict = {"published": dict(src["published"]), "facts": {k: dict(v) for k, v in src["facts"].items()},
                 "assumed": assumed}
    ends = [_priced(spec, means, assumed, end, price) for end in ("low", "high")]
    flops = {"low": min(total_flops, *ends), "high": max(total_flops, *ends)}   # a budget can reorder them
    out["range"] = {"flops": flops}
    if spec.hardware is not None:    # least FLOPs in the most hours, most FLOPs in the fewest
        out["range"]["utilization"] = {"low": _util(spec, assumed, flops["low"], "high"),
                                       "high": _util(spec, assumed, flops["high"], "low")}
    return out


def _priced(spec, means, assumed, end: str, price: Callable[[Any, Any], int]) -> int:
    """Total FLOPs with every assumption at `end`. A run with a declared budget spends it: its
    steps absorb the budget (as many whole steps as it buys), so only the split moves."""
    s, m = _at(spec, means, assumed, end)
    if spec.budget.flops:
        per_step = price(replace(s, steps=1), m)
        s = replace(s, steps=max(1, int(spec.budget.flops // per_step)))
    return price(s, m)


def _util(spec, assumed, flops: int, hours_end: str) -> float:
    """Implied utilization of `flops` at the stated hours, or at one end of assumed hours."""
    hw = spec.hardware
    if "accelerator_hours" in assumed:
        hw = replace(hw, wall_seconds=None, accelerator_hours=assumed["accelerator_hours"][hours_end])
    return hw.utilization(flops)


__all__ = ["SETUP_FIELDS", "ASSUMABLE", "section"]
