"""What a PEFT adapter trains, as the accounting's Adapter: the one conversion from a PEFT LoRA
config (a peft LoraConfig, or the adapter_config.json a saved adapter carries) that the TRL
callback (training) and the evaluation FLOPs both use, with one rule for what it cannot count.

The accounting counts a LoRA of one rank on named decoder modules of every layer (the seven
projections by default; any module name of a supported family, and the MoE expert stacks peft
adapts as target_parameters), or full fine-tuning. A LoRA on anything else (lm_head,
embeddings), on some layers only, with per-module ranks other than peft's own fused expert
rank, or another PEFT method is refused with the reason, never priced as something it is not.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from ..errors import RaceError
from .flops import ALL_LINEAR, PROJECTIONS, TARGET_NAMES, Adapter, lora_units
from .modelspec import ModelSpec

_FUSED = {"qwen2_moe": ("gate_proj", "up_proj"), "mixtral": ("w1", "w3")}
_DOWN = {"qwen2_moe": "down_proj", "mixtral": "w2"}


def _field(config: Any, name: str, default: Any = None) -> Any:
    if isinstance(config, Mapping):
        return config.get(name, default)
    return getattr(config, name, default)


def _order(names) -> tuple[str, ...]:
    """The seven projections in their order, then the other names sorted."""
    return tuple(sorted(set(names), key=lambda t: (PROJECTIONS.index(t) if t in PROJECTIONS else len(PROJECTIONS), t)))


def _fused_pattern(config: Any, r: int, alpha: float) -> bool:
    """peft's own rank_pattern for MoE targets it fused (gate + up at 2r, alpha 2a): nothing else."""
    ranks, alphas = _field(config, "rank_pattern") or {}, _field(config, "alpha_pattern") or {}
    return bool(ranks) and all(re.search(r"gate_up_proj", k) and v == 2 * r for k, v in ranks.items()) \
        and all(re.search(r"gate_up_proj", k) and v == 2 * alpha for k, v in alphas.items())


def _unconvert(params: set[str], fused: bool, spec: ModelSpec | None) -> set[str]:
    """peft's target_parameters back to the names a user passes: on MoE families peft turned
    gate/up/down (Mixtral: w1/w3/w2) and the router `gate` into expert-stack parameters (gate_up
    at rank 2r when it fused them)."""
    pattern = spec.family.peft_moe if spec is not None else ""
    out = set()
    for n in params:
        if pattern and n == "experts.gate_up_proj" and fused:
            out |= set(_FUSED[pattern])
        elif pattern and n == "experts.down_proj":
            out.add(_DOWN[pattern])
        elif pattern and n == "gate.weight":
            out.add("gate")
        else:
            out.add(n)
    return out


def adapter_from_peft(config: Any, *, adapted: Mapping[str, int] | None = None,
                      num_layers: int | None = None, units: Sequence[tuple] | None = None,
                      spec: ModelSpec | None = None) -> Adapter:
    """The Adapter of a PEFT LoRA config (None: no adapter, full fine-tuning).

    `units` (suite.accounting.reference.adapted_units of a loaded PEFT model) say exactly what
    PEFT adapted; with `spec` the Adapter must reproduce them under lora_units. `adapted`
    (module leaf name -> how many layers carry a LoRA there), with `num_layers`, must cover every
    layer. Without either the config decides: target_modules as a list names modules (PEFT
    matches them by their last name part, and saves "all-linear" as the full module names), a
    string (a regex, "all-linear") stands for all seven; target_parameters (peft's MoE
    conversion) name the expert stacks, mapped back with `spec`."""
    if config is None:
        return Adapter(kind="full")
    peft_type = _field(config, "peft_type")
    if peft_type is not None and str(getattr(peft_type, "value", peft_type)) != "LORA":
        raise RaceError(f"PEFT method {peft_type} is not accounted", "the accounting supports LoRA and full fine-tuning")
    r, alpha = int(_field(config, "r")), float(_field(config, "lora_alpha") or 0.0)
    fused = _fused_pattern(config, r, alpha)
    params: set[str] = set()
    if units is not None:
        names = {u[1] for u in units if "." not in u[1]}
        params = {u[1] for u in units if "." in u[1]}
        fused = any(u[1] == "experts.gate_up_proj" and u[4] == 2 * r for u in units)
    elif adapted is not None:
        names = set(adapted)
    else:
        targets = _field(config, "target_modules") or PROJECTIONS
        names = set(PROJECTIONS) if isinstance(targets, str) else {str(t).rsplit(".", 1)[-1] for t in targets}
        # peft saves the expert stacks as gate_up_proj / down_proj, the router as gate.weight
        params = {t if "." in t else f"experts.{t}" for t in map(str, _field(config, "target_parameters") or ())}
    names |= _unconvert(params, fused, spec)
    extra = sorted(n for n in names if n not in TARGET_NAMES or n == ALL_LINEAR)
    if extra:
        raise RaceError(f"LoRA on {extra} is outside what the accounting counts",
                        f"it knows the decoder modules of the supported families ({', '.join(PROJECTIONS)}, ...) "
                        "and the MoE expert stacks")
    partial = sorted(t for t, n in (adapted or {}).items() if num_layers is not None and n != num_layers)
    if partial or (_field(config, "rank_pattern") and not fused) or _field(config, "layers_to_transform") is not None:
        raise RaceError(f"LoRA covers only some layers or ranks differ ({partial or 'rank_pattern'})",
                        "the accounting assumes one rank on every layer")
    adapter = Adapter(kind="lora", rank=r, alpha=alpha, targets=_order(names))
    if units is not None and spec is not None:
        want = sorted((u.layer, u.name, u.fan_in, u.fan_out, u.rank, u.experts) for u in lora_units(spec, adapter))
        if want != sorted(units):
            raise RaceError("LoRA covers only some layers or ranks differ (rank_pattern, layers_to_transform)",
                            "the accounting assumes one rank on every layer peft adapts by name")
    return adapter


__all__ = ["adapter_from_peft"]
