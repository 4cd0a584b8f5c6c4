"""What the log cannot say, the run description says: the run-description fields a key map takes
token counts from (`{description: FIELD}`), and the sequences per step where the log does not count
them (prompts_per_step x K), each written into the report's provenance.assumptions with its value,
why, and the range the description's `assumed` section gives (low, high, why)."""

from __future__ import annotations

from typing import Any, Mapping


def described(cell, f: str) -> float | None:
    """The run description's value of token field `f` (environment_tokens: under rollouts), None if absent."""
    v = (cell.rollouts or {}).get("environment_tokens") if f == "environment_tokens" else getattr(cell, f)
    return None if v is None else float(v)


def _descriptions(spec) -> list[str]:
    """The run-description fields a token spec reads."""
    if isinstance(spec, str):
        return []
    if "description" in spec:
        return [spec["description"]]
    return [x["description"] for x in spec.get("minus", ()) if isinstance(x, Mapping)]


DESCRIBED_WHY = {
    "mean_prompt_tokens": "the log counts generated tokens only; the prompt length is the run description's",
    "mean_completion_tokens": "the log does not count generated tokens; the run description's mean is used",
    "environment_tokens": "the log does not count environment (tool) tokens; the run description's mean is used",
}


def assumptions_of(km: Any, cell, steps: list) -> list[dict]:
    """What the import took from the run description rather than the log, for the report's
    provenance.assumptions: each field with its value, why, and its range (the cell's `assumed`
    entry for the field: low, high, why) where the description gives one."""
    assumed = cell.assumed or {}
    out = []
    fields = sorted({f for spec in km.tokens.values() for f in _descriptions(spec)})
    for f in fields:
        a = {"field": f, "value": described(cell, f), "why": DESCRIBED_WHY[f]}
        a.update({k: v for k, v in (assumed.get(f) or {}).items() if k in ("low", "high", "why")})
        out.append(a)
    counted = [s for s in steps if s.sequences is not None]
    if len(counted) < len(steps):
        n = cell.prompts_per_step * cell.group_size
        a = {"field": "sequences per step", "value": n,
             "why": f"the log does not count the sequences of {len(steps) - len(counted)} of its {len(steps)} steps; "
                    f"prompts_per_step x K of the run description ({cell.prompts_per_step} x {cell.group_size})"}
        for k in ("group_size", "prompts_per_step"):
            r = assumed.get(k) or {}
            if "low" in r and "high" in r:
                other = cell.prompts_per_step if k == "group_size" else cell.group_size
                a.update(low=r["low"] * other, high=r["high"] * other, why=a["why"] + f"; {k}: {r.get('why', '')}")
        out.append(a)
    return out
