"""What is trained, as the accounting counts it: the `Adapter` (a LoRA of one rank on named
modules, or full fine-tuning), what peft 0.21 adapts for it on transformers 5's model of a spec
(`lora_units`), and the one conversion from a PEFT LoRA config (a peft LoraConfig, or the
adapter_config.json a saved adapter carries) that the TRL callback and the evaluation FLOPs
both use (`adapter_from_peft`).

A LoRA on anything else (lm_head, embeddings), on some layers only, with per-module ranks other
than peft's own fused expert rank, or another PEFT method is refused with the reason, never
priced as something it is not.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable, Mapping, NamedTuple, Sequence

from ..errors import RaceError

if TYPE_CHECKING:  # specs answer the LoRA question themselves (Spec.lora); this module sits below them
    from .specs import Spec

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The seven Linear layers of a decoder layer, the LoRA targets by default."""


@dataclass(frozen=True)
class Adapter:
    """What is trained: a LoRA on frozen weights or the full model."""

    kind: str = "lora"
    """'lora' or 'full'."""
    rank: int = 0
    """LoRA rank r (>= 1 for lora; 0 for full fine-tuning)."""
    alpha: float = 0.0
    """LoRA alpha (scales the adapter output; no FLOPs). 0 means 'not given'."""
    targets: tuple[str, ...] = PROJECTIONS
    """peft target_modules: module names (TARGET_NAMES; the seven PROJECTIONS by default),
    parameter targets such as experts.gate_up_proj, or ('all-linear',). What they adapt on a
    given model follows peft 0.21's rules (`lora_units`)."""

    def __post_init__(self):
        object.__setattr__(self, "targets", tuple(self.targets))
        if self.kind not in ("lora", "full"):
            raise RaceError(f"adapter kind '{self.kind}' is unknown", "use 'lora' or 'full'")
        if self.kind == "lora":
            if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
                raise RaceError(f"LoRA rank must be a positive integer, got {self.rank!r}",
                                "use rank 0 (kind 'full') for full fine-tuning")
            if not self.targets:
                raise RaceError("LoRA needs at least one target projection", f"choose from {', '.join(PROJECTIONS)}")
            bad = [t for t in self.targets if t not in TARGET_NAMES]
            if bad:
                raise RaceError(f"unknown LoRA target(s): {', '.join(map(str, bad))}",
                                f"targets are module names of a decoder layer ({', '.join(PROJECTIONS)}, ...: "
                                f"{len(TARGET_NAMES)} known, see suite.accounting.TARGET_NAMES) or all-linear")
            if len(set(self.targets)) != len(self.targets):
                raise RaceError("LoRA targets repeat a projection")
            if ALL_LINEAR in self.targets and len(self.targets) > 1:
                raise RaceError("all-linear stands alone as a LoRA target", "drop the other names")
        elif self.rank:
            raise RaceError("full fine-tuning takes no LoRA rank", "set rank 0")
        if not math.isfinite(self.alpha) or self.alpha < 0:
            raise RaceError(f"LoRA alpha must be a finite non-negative number, got {self.alpha!r}")

    @classmethod
    def from_rank(cls, rank: int, alpha: float | None = None,
                  targets: Iterable[str] = PROJECTIONS) -> "Adapter":
        """rank 0 -> full fine-tuning; otherwise a LoRA (alpha defaults to 2*rank)."""
        if rank == 0:
            return cls(kind="full")
        return cls(kind="lora", rank=rank, alpha=float(2 * rank if alpha is None else alpha),
                   targets=tuple(targets))

    def trainable_params(self, spec: Spec) -> int:
        """Trainable parameters on `spec`: every parameter for full fine-tuning; for LoRA,
        r*(in+out) per adapted module and layer (peft's lora_A and lora_B, no bias), E*r*(in+out)
        per adapted expert stack, as peft adapts them (`lora_units`)."""
        if self.kind == "full":
            return spec.params_total
        return spec.lora(self).trainable

    def to_report(self, spec: Spec) -> dict:
        """The report's `adapter` section."""
        lora = self.kind == "lora"
        return {"type": self.kind, "rank": self.rank if lora else None,
                "alpha": (self.alpha or float(2 * self.rank)) if lora else None,
                "targets": list(self.targets) if lora else [],
                "trainable_params": self.trainable_params(spec)}


# ---- what peft adapts -------------------------------------------------------------------------

ALL_LINEAR = "all-linear"
"""peft's shorthand: every nn.Linear of the model but the output head."""

LINEAR_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
                "kv_b_proj", "in_proj_qkvz", "in_proj_ba", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a",
                "out_proj", "gate_proj", "up_proj", "down_proj", "gate_up_proj", "shared_expert_gate")
"""Leaf names of the nn.Linear modules of every recipe family's decoder layer (the LoRA target
names; suite.accounting.modelspec builds the layers)."""

_PEFT_MOE_MAP = {
    # peft 0.21 utils/transformers_weight_conversion.py: transformers-4 module names of MoE models
    # whose experts transformers 5 fuses into 3-D parameters -> the parameters peft targets instead
    # (the names leave target_modules: dense and shared-expert MLPs of those names lose their LoRA).
    "qwen2_moe": {"gate": "gate.weight", "gate_proj": "experts.gate_up_proj", "up_proj": "experts.gate_up_proj",
                  "down_proj": "experts.down_proj"},
    "mixtral": {"gate": "gate.weight", "w1": "experts.gate_up_proj", "w3": "experts.gate_up_proj",
                "w2": "experts.down_proj"},
}
_PEFT_FUSED = {"qwen2_moe": ("gate_proj", "up_proj"), "mixtral": ("w1", "w3")}
"""Names peft must see together, fused into experts.gate_up_proj at rank len(names) * r."""
_PEFT_DOWN = {pattern: next(n for n, p in conv.items() if p == "experts.down_proj")
              for pattern, conv in _PEFT_MOE_MAP.items()}
"""The name peft turns into experts.down_proj, per conversion pattern."""

_PARAM_TARGETS = ("experts.gate_up_proj", "experts.down_proj", "gate.weight", "router.weight")
"""peft target_parameters this accounting follows: the expert stacks and the router weight."""

TRACED_NAMES = ("in_proj", "c_attn", "c_proj", "c_fc", "query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h",
                "fc1", "fc2", "qkv", "wqkv", "w_in", "w_out", "x_proj", "dt_proj")
"""Module names of families priced by the traced path (GPT-2, Mamba hybrids, ...): what peft adapts
there is read off the real model (suite.accounting.traced)."""

TARGET_NAMES = tuple(sorted(set(LINEAR_NAMES).union(*_PEFT_MOE_MAP.values(), _PARAM_TARGETS, {ALL_LINEAR},
                                                    TRACED_NAMES)))
"""Every LoRA target name the accounting knows (a name a model lacks adapts nothing there)."""


@dataclass(frozen=True)
class LoraUnit:
    """One module or parameter of one decoder layer that peft adapts, with its rank."""

    layer: int
    """Decoder layer (0-based)."""
    name: str
    """Module leaf name (q_proj, ...) or parameter (experts.gate_up_proj, experts.down_proj,
    gate.weight: peft target_parameters, wrapped by its ParamWrapper)."""
    fan_in: int
    """in_features of the adapted matrix."""
    fan_out: int
    """out_features of the adapted matrix."""
    rank: int
    """LoRA rank (peft fuses gate and up at twice the rank)."""
    experts: int = 0
    """E for a 3-D expert stack (lora_A: in -> r*E, lora_B: r*E -> out); 0 otherwise."""

    @property
    def params(self) -> int:
        """lora_A and lora_B weights."""
        return self.rank * max(1, self.experts) * (self.fan_in + self.fan_out)

    @property
    def is_param(self) -> bool:
        """A target_parameters unit (peft ParamWrapper), not a wrapped nn.Linear."""
        return "." in self.name


class Lora(NamedTuple):
    """The LoRA question answered for one model (`Spec.lora`): what peft adapts, how many
    parameters train, and which targets adapt nothing."""

    units: tuple[LoraUnit, ...]
    """Adapted modules and expert stacks, per layer."""
    trainable: int
    """Trainable parameters (lora_A and lora_B of every unit)."""
    unmatched: tuple[str, ...] = ()
    """Targets that adapt nothing in the model (peft skips them silently when others match);
    () where the model's code is traced (peft reads them off the real model)."""


def lora_units(spec: Spec, adapter: Adapter) -> tuple[LoraUnit, ...]:
    """What peft adapts on `spec` for `adapter` (() for full fine-tuning): `spec.lora(adapter).units`."""
    return spec.lora(adapter).units if adapter.kind == "lora" else ()


@lru_cache(maxsize=512)
def recipe_lora(spec: Spec, adapter: Adapter) -> Lora:
    """The LoRA question on a recipe spec (`ModelSpec.lora`): what peft 0.21 adapts on
    transformers 5's model of `spec` for these targets: a name
    matches nn.Linear modules of that leaf name (the router is no nn.Linear); all-linear matches
    every decoder Linear; on MoE families peft converts transformers-4 expert names into
    target_parameters on the expert stacks (gate_proj + up_proj -> experts.gate_up_proj at rank
    2r, down_proj -> experts.down_proj, gate -> the router weight) and drops those names from
    the modules, so dense and shared-expert MLPs keep no LoRA there. tests/test_families.py reads
    the adapted modules back from real PEFT models."""
    if adapter.kind != "lora":
        return Lora((), spec.params_total)
    layers = spec.layers()
    names = set(adapter.targets)
    conv = _PEFT_MOE_MAP.get(spec.family.peft_moe, {})
    if ALL_LINEAR in names:
        names = {li.name for lay in layers for li in lay.linears if li.part != "router"} | set(conv)
    ranks = {}
    moved = names & set(conv)
    if moved:
        fused = _PEFT_FUSED[spec.family.peft_moe]
        present = moved & set(fused)
        if 0 < len(present) < len(fused):
            raise RaceError(f"LoRA target {', '.join(sorted(present))} without {', '.join(sorted(set(fused) - present))}"
                            f" on {spec.model_type}: peft fuses them into the experts' gate_up_proj and refuses one alone",
                            f"target both {' and '.join(fused)}, or neither")
        names = (names - moved) | {conv[n] for n in moved}
        if present:
            ranks["experts.gate_up_proj"] = adapter.rank * len(fused)
    units = []
    for i, lay in enumerate(layers):
        for li in lay.linears:
            if li.part == "router":
                if f"{li.name}.weight" in names:
                    units.append(LoraUnit(i, f"{li.name}.weight", li.fan_in, li.fan_out, adapter.rank))
            elif li.name in names:
                units.append(LoraUnit(i, li.name, li.fan_in, li.fan_out, adapter.rank))
        ex = lay.experts
        if ex:
            if "experts.gate_up_proj" in names:
                units.append(LoraUnit(i, "experts.gate_up_proj", ex.hidden, 2 * ex.width,
                                      ranks.get("experts.gate_up_proj", adapter.rank), ex.num))
            if "experts.down_proj" in names:
                units.append(LoraUnit(i, "experts.down_proj", ex.width, ex.hidden, adapter.rank, ex.num))
    if not units:
        raise RaceError(f"LoRA targets {', '.join(adapter.targets)} adapt nothing in {spec.name} ({spec.model_type})",
                        f"its adaptable modules: {', '.join(adaptable_names(spec))}")
    known = set(adaptable_names(spec))
    unmatched = () if ALL_LINEAR in adapter.targets else tuple(t for t in adapter.targets if t not in known)
    return Lora(tuple(units), sum(u.params for u in units), unmatched)


def adaptable_names(spec: Spec) -> list[str]:
    """Target names that adapt something in `spec` (module names, expert parameters)."""
    out = set()
    for lay in spec.layers():
        out |= {li.name if li.part != "router" else f"{li.name}.weight" for li in lay.linears}
    if spec.is_moe:
        out |= {"experts.gate_up_proj", "experts.down_proj"}
        out |= set(_PEFT_MOE_MAP.get(spec.family.peft_moe, {}))
    return sorted(out)


def unmatched_targets(spec: Spec, adapter: Adapter) -> list[str]:
    """Targets that adapt nothing in `spec` (peft skips them silently when others match)."""
    if adapter.kind != "lora" or ALL_LINEAR in adapter.targets:
        return []
    return list(spec.lora(adapter).unmatched)


# ---- from a peft config -----------------------------------------------------------------------


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


def _unconvert(params: set[str], fused: bool, spec: Spec | None) -> set[str]:
    """peft's target_parameters back to the names a user passes: on MoE families peft turned
    gate/up/down (Mixtral: w1/w3/w2) and the router `gate` into expert-stack parameters (gate_up
    at rank 2r when it fused them)."""
    pattern = spec.family.peft_moe if spec is not None else ""
    out = set()
    for n in params:
        if pattern and n == "experts.gate_up_proj" and fused:
            out |= set(_PEFT_FUSED[pattern])
        elif pattern and n == "experts.down_proj":
            out.add(_PEFT_DOWN[pattern])
        elif pattern and n == "gate.weight":
            out.add("gate")
        else:
            out.add(n)
    return out


def adapter_from_peft(config: Any, *, adapted: Mapping[str, int] | None = None,
                      num_layers: int | None = None, units: Sequence[tuple] | None = None,
                      spec: Spec | None = None) -> Adapter:
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


__all__ = ["PROJECTIONS", "ALL_LINEAR", "TARGET_NAMES", "Adapter", "LoraUnit", "Lora", "lora_units", "adaptable_names",
           "unmatched_targets", "adapter_from_peft"]
