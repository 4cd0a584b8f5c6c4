"""What a PEFT adapter trains, as the accounting's Adapter: the one conversion from a PEFT LoRA
config (a peft LoraConfig, or the adapter_config.json a saved adapter carries) that the TRL
callback (training) and the evaluation FLOPs both use, with one rule for what it cannot count.

The accounting counts a LoRA of one rank on some of the seven decoder projections of every
layer, or full fine-tuning. A LoRA on anything else (lm_head, embeddings), on some layers only,
with per-module ranks, or another PEFT method is refused with the reason, never priced as
something it is not.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import RaceError
from .flops import PROJECTIONS, Adapter


def _field(config: Any, name: str, default: Any = None) -> Any:
    if isinstance(config, Mapping):
        return config.get(name, default)
    return getattr(config, name, default)


def adapter_from_peft(config: Any, *, adapted: Mapping[str, int] | None = None,
                      num_layers: int | None = None) -> Adapter:
    """The Adapter of a PEFT LoRA config (None: no adapter, full fine-tuning).

    `adapted` (module leaf name -> how many layers carry a LoRA there), read off a loaded
    model, says exactly what PEFT adapted (target_modules may be a regex or "all-linear"); with
    `num_layers` it must cover every layer. Without it the config's target_modules decide: a
    list names modules (PEFT matches them by their last name part, and saves "all-linear" as
    the full module names), a string (a regex, "all-linear") stands for all seven."""
    if config is None:
        return Adapter(kind="full")
    peft_type = _field(config, "peft_type")
    if peft_type is not None and str(getattr(peft_type, "value", peft_type)) != "LORA":
        raise RaceError(f"PEFT method {peft_type} is not accounted", "the accounting supports LoRA and full fine-tuning")
    if adapted is not None:
        names = list(adapted)
    else:
        targets = _field(config, "target_modules") or PROJECTIONS
        names = list(PROJECTIONS) if isinstance(targets, str) else [str(t).rsplit(".", 1)[-1] for t in targets]
    extra = sorted(set(names) - set(PROJECTIONS))
    if extra:
        raise RaceError(f"LoRA on {extra} is outside the decoder projections",
                        f"the accounting knows {', '.join(PROJECTIONS)}")
    partial = sorted(t for t, n in (adapted or {}).items() if num_layers is not None and n != num_layers)
    if partial or _field(config, "rank_pattern") or _field(config, "layers_to_transform") is not None:
        raise RaceError(f"LoRA covers only some layers or ranks differ ({partial or 'rank_pattern'})",
                        "the accounting assumes one rank on every layer")
    return Adapter(kind="lora", rank=int(_field(config, "r")), alpha=float(_field(config, "lora_alpha") or 0.0),
                   targets=tuple(t for t in PROJECTIONS if t in names))


__all__ = ["adapter_from_peft"]
