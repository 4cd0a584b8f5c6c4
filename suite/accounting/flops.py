# Over 500 lines: the whole work -> FLOPs derivation of docs/accounting.md, one place to read it in.
"""Per-phase FLOPs of a GRPO step: rollout, update and reward (docs/accounting.md derives
every formula here).

Two stages, so that any report can be recomputed from what it stores:

1. **work** — token statistics of one step (a flat JSON dict of non-negative ints, additive
   over steps): tokens through the decoder per pass kind, attention (query, key) pairs under
   both conventions, LM-head positions, reward-model tokens. `work_from_lengths` builds it from
   the real lengths of every completion, following what an *engine profile* really computes
   (padding, which passes run); `work_from_means` from mean lengths.
2. **FLOPs** — `phase_flops(work, specs, ...)`: a linear function of work whose coefficients
   depend only on the model specs, the adapter, gradient checkpointing, the engine profile
   and the attention convention (`coefficients` exposes them).

Conventions: 1 multiply-add = 2 FLOPs; counted are matrix multiplies (every nn.Linear, the LM
head, reward heads) and the attention score and value products; not counted: norms,
activations, softmax, rotary embeddings, residual adds, embedding lookups, optimizer
arithmetic. This is what torch.utils.flop_counter.FlopCounterMode counts for the eager model.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Iterable, Sequence

from ..errors import RaceError
from ..registry import Registry
from .modelspec import LINEAR_NAMES, ModelSpec

METHOD = "race-analytic"
"""Name of this accounting method, as written into reports."""
VERSION = "1.0"
"""Version of the formulas; bump when a coefficient changes."""

ATTENTION = ("causal", "full")
"""Attention conventions: causal counts the lower triangle (with the diagonal) of each L x L
score matrix; full counts the whole square, as eager attention computes it."""

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The seven Linear layers of a decoder layer, the LoRA targets by default."""

MAX_TOKENS = 10_000_000
"""Longest sequence accepted: anything longer is a unit mistake, not a context window."""

PHASES = ("rollout", "update", "reward")
"""The phases of a GRPO step, in the order every ledger, report and table lists them."""
TOKEN_KEYS = ("rollout_prompt", "rollout_completion", "update", "reward")
"""Token counts per phase as ledgers and reports write them (tokens_from_work)."""

# Pass kinds of the policy and the statistics kept for each (all additive over steps).
_STATS = ("tokens", "attn_causal", "attn_full", "lm_head")
_PASSES = ("rollout", "update.train", "update.old", "update.ref")
_REWARD_STATS = ("tokens", "attn_causal", "attn_full", "heads")
COUNT_KEYS = ("count.completions", "count.rollout_prompt", "count.rollout_completion",
              "count.update", "count.reward")
WORK_KEYS = tuple(f"{p}.{s}" for p in _PASSES for s in _STATS) \
    + tuple(f"reward.{s}" for s in _REWARD_STATS) + COUNT_KEYS
"""Every key a work dict may hold. count.* are plain token counts (0 FLOPs), kept for reports."""


# ---- adapter and settings -------------------------------------------------------------------


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

    def trainable_params(self, spec: ModelSpec) -> int:
        """Trainable parameters on `spec`: every parameter for full fine-tuning; for LoRA,
        r*(in+out) per adapted module and layer (peft's lora_A and lora_B, no bias), E*r*(in+out)
        per adapted expert stack, as peft adapts them (`lora_units`)."""
        if self.kind == "full":
            return spec.params_total
        return sum(u.params for u in lora_units(spec, self))

    def to_report(self, spec: ModelSpec) -> dict:
        """The report's `adapter` section."""
        lora = self.kind == "lora"
        return {"type": self.kind, "rank": self.rank if lora else None,
                "alpha": (self.alpha or float(2 * self.rank)) if lora else None,
                "targets": list(self.targets) if lora else [],
                "trainable_params": self.trainable_params(spec)}


# ---- what peft adapts -------------------------------------------------------------------------

ALL_LINEAR = "all-linear"
"""peft's shorthand: every nn.Linear of the model but the output head."""

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

_PARAM_TARGETS = ("experts.gate_up_proj", "experts.down_proj", "gate.weight", "router.weight")
"""peft target_parameters this accounting follows: the expert stacks and the router weight."""

TARGET_NAMES = tuple(sorted(set(LINEAR_NAMES) | set(_PEFT_MOE_MAP["qwen2_moe"]) | set(_PEFT_MOE_MAP["mixtral"])
                            | set(_PARAM_TARGETS) | {ALL_LINEAR}))
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


@lru_cache(maxsize=512)
def lora_units(spec: ModelSpec, adapter: Adapter) -> tuple[LoraUnit, ...]:
    """What peft 0.21 adapts on transformers 5's model of `spec` for these targets: a name
    matches nn.Linear modules of that leaf name (the router is no nn.Linear); all-linear matches
    every decoder Linear; on MoE families peft converts transformers-4 expert names into
    target_parameters on the expert stacks (gate_proj + up_proj -> experts.gate_up_proj at rank
    2r, down_proj -> experts.down_proj, gate -> the router weight) and drops those names from
    the modules, so dense and shared-expert MLPs keep no LoRA there. tests/test_families.py reads
    the adapted modules back from real PEFT models."""
    if adapter.kind != "lora":
        return ()
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
    return tuple(units)


def adaptable_names(spec: ModelSpec) -> list[str]:
    """Target names that adapt something in `spec` (module names, expert parameters)."""
    out = set()
    for lay in spec.layers():
        out |= {li.name if li.part != "router" else f"{li.name}.weight" for li in lay.linears}
    if spec.is_moe:
        out |= {"experts.gate_up_proj", "experts.down_proj"}
        out |= set(_PEFT_MOE_MAP.get(spec.family.peft_moe, {}))
    return sorted(out)


def unmatched_targets(spec: ModelSpec, adapter: Adapter) -> list[str]:
    """Targets that adapt nothing in `spec` (peft skips them silently when others match)."""
    if adapter.kind != "lora" or ALL_LINEAR in adapter.targets:
        return []
    known = set(adaptable_names(spec))
    return [t for t in adapter.targets if t not in known]


@dataclass(frozen=True)
class GRPOSettings:
    """The GRPO settings that move FLOPs (names follow TRL's GRPOConfig)."""

    group_size: int
    """K: completions sampled per prompt (TRL num_generations)."""
    prompts_per_step: int
    """B: prompts per generation batch."""
    num_iterations: int = 1
    """mu: policy updates per generation batch."""
    beta: float = 0.0
    """KL coefficient; != 0 adds the reference-model forward."""
    max_completion_tokens: int = 2048
    """Longest completion allowed (TRL max_completion_length)."""
    gradient_checkpointing: bool = True
    """Recompute decoder-layer activations in the backward (TRL's default)."""
    gradient_accumulation_steps: int = 1
    """TRL gradient_accumulation_steps (decides whether the old-policy pass runs)."""
    steps_per_generation: int | None = None
    """TRL steps_per_generation; None means TRL's default (= gradient_accumulation_steps)."""
    pad_to_multiple_of: int | None = None
    """TRL pad_to_multiple_of: padded widths are rounded up to a multiple of it."""

    def __post_init__(self):
        for name in ("group_size", "prompts_per_step", "num_iterations", "max_completion_tokens",
                     "gradient_accumulation_steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise RaceError(f"GRPO setting {name} must be a positive integer, got {v!r}")
        for name in ("steps_per_generation", "pad_to_multiple_of"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise RaceError(f"GRPO setting {name} must be a positive integer or None, got {v!r}")
        if not isinstance(self.beta, (int, float)) or not math.isfinite(self.beta) or self.beta < 0:
            raise RaceError(f"GRPO setting beta must be a finite number >= 0, got {self.beta!r}")
        if self.max_completion_tokens > MAX_TOKENS:
            raise RaceError(f"max_completion_tokens {self.max_completion_tokens} is absurd (> {MAX_TOKENS:,})")

    def to_report(self) -> dict:
        """The report's `grpo` section (required keys)."""
        return {"group_size": self.group_size, "prompts_per_step": self.prompts_per_step,
                "num_iterations": self.num_iterations, "beta": self.beta,
                "max_completion_tokens": self.max_completion_tokens,
                "gradient_checkpointing": self.gradient_checkpointing}

    def to_dict(self) -> dict:
        """Every field, JSON-able."""
        return asdict(self)


# ---- engine profiles --------------------------------------------------------------------------


class EngineProfile:
    """Which passes an engine runs per GRPO step, and over which positions. Subclass and
    register with @engine(name); override the attributes and methods that differ."""

    name: str = "?"
    description: str = ""
    padded: bool = False
    """Generation and training batches are padded to their longest prompt and completion;
    finished sequences keep decoding until the longest one ends."""
    prefill_per_completion: bool = True
    """Each of the K completions prefills its own copy of the prompt (no prefix sharing)."""
    rollout_padded: bool | None = None
    """Generation pads like training (HF generate: left-padded prompts, finished rows keep
    decoding); None: as `padded`. False for vLLM rollouts of a padded trainer."""
    lm_head_train: str = "completion"
    """LM head positions in log-prob passes: 'completion' (the tokens scored) or 'all'
    (every position but the last of the padded row)."""
    lm_head_recompute: bool = False
    """The LM head recomputes its logits in the backward (a fused, memory-saving head)."""
    checkpoint_early_stop: bool = False
    """Gradient checkpointing stops each layer's recompute once the last tensor the backward
    needs is saved (torch non-reentrant checkpoint): the layer's last matmul is not rerun."""
    hf_rollout: bool = False
    """Generation runs transformers' generate through the PEFT model: MLA re-expands every cached
    latent at each decode step, and an expert LoRA is folded into the expert weights on every
    forward call. False: a vLLM-style engine (MLA decodes in the latent space with absorbed
    weights; an expert LoRA runs per routed token)."""
    peft_training: bool = False
    """Training passes run the PEFT model: an expert LoRA (peft ParamWrapper) is folded into the
    expert weights once per forward call, and its gradient flows through the folded weights.
    False: the LoRA branch per routed token (useful work)."""

    @property
    def rollout_is_padded(self) -> bool:
        """Whether generation pads (rollout_padded, defaulting to padded)."""
        return self.padded if self.rollout_padded is None else self.rollout_padded

    def micro_batches(self, s: GRPOSettings) -> int:
        """Forward calls per training pass over a generation batch (TRL: steps_per_generation,
        default gradient_accumulation_steps), on one process."""
        return s.steps_per_generation or s.gradient_accumulation_steps

    def old_policy_pass(self, s: GRPOSettings) -> bool:
        """Whether a no-grad log-prob forward of the current policy runs once per generation."""
        return s.num_iterations > 1

    def reference_pass(self, s: GRPOSettings) -> bool:
        """Whether the reference model's log-prob forward runs once per generation."""
        return s.beta != 0

    def layer0_input_grad(self, adapter: Adapter, s: GRPOSettings) -> bool:
        """Whether the input of decoder layer 0 requires grad (adds its activation gradients).
        Full fine-tuning: yes (embeddings train). LoRA: PEFT + gradient checkpointing calls
        enable_input_require_grads, so yes exactly when checkpointing."""
        return adapter.kind == "full" or s.gradient_checkpointing

    def describe(self) -> dict:
        """The profile's facts, for docs and reports."""
        return {"name": self.name, "description": self.description, "padded": self.padded,
                "prefill_per_completion": self.prefill_per_completion, "rollout_padded": self.rollout_is_padded,
                "lm_head_train": self.lm_head_train, "lm_head_recompute": self.lm_head_recompute,
                "checkpoint_early_stop": self.checkpoint_early_stop, "hf_rollout": self.hf_rollout,
                "peft_training": self.peft_training}


ENGINES: Registry[EngineProfile] = Registry("engine profile")
"""Engine profiles by name."""


def engine(name: str):
    """Register an EngineProfile subclass under `name` (an instance lands in ENGINES)."""

    def register(cls):
        inst = cls()
        inst.name = name
        ENGINES.add(name, inst)
        return cls

    return register


@engine("trl")
class TRLProfile(EngineProfile):
    """TRL 1.16 GRPOTrainer, transformers generate (no vLLM), on a CUDA/XPU device."""

    description = ("TRL 1.16 GRPOTrainer with transformers generate on CUDA: prompts repeated K times, "
                   "left-padded; finished rows keep decoding; one padded batch per generation; fused LM head "
                   "over scored completion tokens, recomputed in the backward")
    padded = True
    prefill_per_completion = True
    lm_head_train = "completion"  # Triton path of trl's fused LM head: only labels != -100
    lm_head_recompute = True
    checkpoint_early_stop = True  # transformers 5 checkpoints with use_reentrant=False
    hf_rollout = True
    peft_training = True

    def old_policy_pass(self, s: GRPOSettings) -> bool:
        # grpo_trainer._generate_and_score_completions: runs when generation is misaligned with
        # optimizer steps, i.e. gradient_accumulation_steps % (steps_per_generation * mu) != 0.
        spg = s.steps_per_generation or s.gradient_accumulation_steps
        return s.gradient_accumulation_steps % (spg * s.num_iterations) != 0


@engine("trl-cpu")
class TRLCPUProfile(TRLProfile):
    """TRL 1.16 where Triton is unavailable (CPU): the fused LM head scores every position."""

    description = ("TRL 1.16 GRPOTrainer on a device without Triton (CPU): as 'trl', but the fused LM head "
                   "projects every position of the padded row (prompt included)")
    lm_head_train = "all"


@engine("trl-vllm")
class TRLVLLMProfile(TRLProfile):
    """TRL 1.16 GRPOTrainer with use_vllm=True (vllm_mode server or colocate): vLLM generates,
    TRL trains as in 'trl'."""

    description = ("TRL 1.16 GRPOTrainer with vLLM generation (server or colocate): vLLM's prefix caching (on by "
                   "default) shares one prompt prefill among the K completions of a prompt, each completion decodes "
                   "its own tokens and logits are computed only at sampled positions; training as 'trl'")
    rollout_padded = False
    prefill_per_completion = False
    hf_rollout = False


@engine("generic")
class GenericProfile(EngineProfile):
    """Useful work only: no padding, LM head on completion tokens; for hand-filled reports."""

    description = ("useful work of an ideal engine: no padding, each completion prefills its prompt and decodes "
                   "its own tokens; log-prob passes project completion tokens only; old-policy pass when mu > 1")


@engine("verl")
class VerlProfile(EngineProfile):
    """verl 0.9 main_ppo (FSDP actor, remove-padding on, vLLM rollout), as `race import verl`
    and `race export verl` configure it."""

    description = ("verl 0.9 main_ppo with use_remove_padding: no padding; vLLM rollout with prefix caching "
                   "(rollout.enable_prefix_caching, on by default) shares one prompt prefill among the K completions; "
                   "log-prob passes project every position (logits over the unpadded sequence); the old-policy "
                   "log-prob forward runs every step (rollout_correction.bypass_mode off)")
    prefill_per_completion = False  # verl/trainer/config/rollout/rollout.yaml: enable_prefix_caching: True
    lm_head_train = "all"
    # fsdp_workers: gradient_checkpointing_enable(use_reentrant=False) -> torch's early stop
    checkpoint_early_stop = True
    peft_training = True  # the FSDP actor wraps the HF model with peft

    def old_policy_pass(self, s: GRPOSettings) -> bool:
        return True  # ray_trainer recomputes old_log_probs each step unless bypass_mode

    def layer0_input_grad(self, adapter: Adapter, s: GRPOSettings) -> bool:
        return True  # fsdp_workers calls enable_input_require_grads() for every LoRA actor


def get_engine(name: str) -> EngineProfile:
    """The registered profile `name`, or RaceError listing the known ones."""
    try:
        return ENGINES[name]
    except (KeyError, TypeError):
        raise RaceError(f"unknown engine profile '{name}'", f"known profiles: {', '.join(sorted(ENGINES))}")


def _check_attention(attention: str) -> None:
    if attention not in ATTENTION:
        raise RaceError(f"unknown attention convention '{attention}'", f"use one of: {', '.join(ATTENTION)}")


# ---- work: token statistics ----------------------------------------------------------------


def _check_lengths(values: Sequence, what: str, minimum: int = 1, integral: bool = True,
                   scalar: bool = False) -> list:
    if integral and values and set(map(type, values)) == {int} and min(values) >= minimum \
            and max(values) <= MAX_TOKENS:
        return list(values)  # the ledger's per-step path: plain ints, checked at C speed
    out = []
    for i, v in enumerate(values):
        name = what if scalar else f"{what}[{i}]"
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise RaceError(f"{name} = {v!r} is not a finite number")
        if integral and not float(v).is_integer():
            raise RaceError(f"{name} = {v!r} is not a whole number of tokens")
        if v < minimum:
            raise RaceError(f"{name} = {v:g} is below {minimum}", "token counts are positive")
        if v > MAX_TOKENS:
            raise RaceError(f"{name} = {v:g} is absurd (more than {MAX_TOKENS:,} tokens)",
                            "pass token counts, not characters or FLOPs")
        out.append(int(v) if integral else float(v))
    return out


def _ceil_to(x, m: int | None):
    return x if not m else -(-x // m) * m


def _decode_pairs(p, c):
    """Key positions attended by decode steps 1..c-1 over a prompt of p: sum_j (p + j)."""
    return (c - 1) * p + (c - 1) * c / 2 if isinstance(c, float) or isinstance(p, float) \
        else (c - 1) * p + (c - 1) * c // 2


def _tri(n):
    return n * (n + 1) / 2 if isinstance(n, float) else n * (n + 1) // 2


def _build_work(prompts: list, completions: list, settings: GRPOSettings, prof: EngineProfile,
                reward: list | None, iterations: int, generation: bool,
                needs: tuple["Needs", "Needs"] | None = None, reward_widths: list | None = None) -> dict:
    """The work of one generation batch (generation=True) plus `iterations` training passes;
    `needs` (policy's, reward model's) adds the statistics other architectures need.
    reward_widths: the padded width of each sequence the reward model ran over (None: unpadded)."""
    w = dict.fromkeys(WORK_KEYS, 0)
    if needs is not None:       # a reward model's statistics follow what its forward ran over
        w.update(_extra_work(prompts, completions, settings, prof, reward_widths or reward, iterations, generation,
                             *needs))
    n = len(completions)
    k = settings.group_size
    lens = [p + c for p, c in zip(prompts, completions)]
    if prof.prefill_per_completion:
        pre = prompts
    else:  # K consecutive completions share one prompt prefill (prefix caching)
        pre = [prompts[i] if i % k == 0 else 0 for i in range(n)]
    if prof.padded:
        pw = _ceil_to(max(prompts), settings.pad_to_multiple_of)
        cw = _ceil_to(max(completions), settings.pad_to_multiple_of)
        cmax = max(completions)  # generation stops when the longest completion ends
        lw = pw + cw
        roll = {"tokens": n * (pw + cmax - 1),
                "attn_causal": n * (_tri(pw) + _decode_pairs(pw, cmax)),
                "attn_full": n * (pw * pw + _decode_pairs(pw, cmax)),
                "lm_head": n * cmax}
        lm = sum(completions) if prof.lm_head_train == "completion" else n * (lw - 1)
        one = {"tokens": n * lw, "attn_causal": n * _tri(lw), "attn_full": n * lw * lw, "lm_head": lm}
    else:
        lm = sum(completions) if prof.lm_head_train == "completion" else sum(x - 1 for x in lens)
        one = {"tokens": sum(lens), "attn_causal": sum(_tri(x) for x in lens),
               "attn_full": sum(x * x for x in lens), "lm_head": lm}
    if not prof.rollout_is_padded:  # each completion decodes its own tokens; logits only where sampled
        roll = {"tokens": sum(pre) + sum(c - 1 for c in completions),
                "attn_causal": sum(_tri(p) for p in pre) + sum(_decode_pairs(p, c) for p, c in zip(prompts, completions)),
                "attn_full": sum(p * p for p in pre) + sum(_decode_pairs(p, c) for p, c in zip(prompts, completions)),
                "lm_head": sum(completions)}
    for s in _STATS:
        w[f"update.train.{s}"] = iterations * one[s]
    w["count.update"] = iterations * sum(lens)
    if generation:
        for s in _STATS:
            w[f"rollout.{s}"] = roll[s]
            w[f"update.old.{s}"] = one[s] if prof.old_policy_pass(settings) else 0
            w[f"update.ref.{s}"] = one[s] if prof.reference_pass(settings) else 0
        w["count.completions"] = n
        w["count.rollout_prompt"] = sum(prompts if prof.prefill_per_completion else pre)
        w["count.rollout_completion"] = sum(completions)
        if reward:
            run = reward_widths or reward      # what the forward ran over; the count is real tokens
            w["reward.tokens"] = sum(run)
            w["reward.attn_causal"] = sum(_tri(r) for r in run)
            w["reward.attn_full"] = sum(r * r for r in run)
            w["reward.heads"] = sum(run)       # score heads project every position, padding included
            w["count.reward"] = sum(reward)
    return {key: int(round(v)) for key, v in w.items()}


@dataclass(frozen=True)
class Needs:
    """Statistics beyond the base work keys that a model's FLOPs depend on."""

    windows: tuple[int, ...] = ()
    """Sliding windows of its layers: pairs within each window, per convention."""
    decode: bool = False
    """Rollout split into prefill and decode (MLA expands cached latents per decode step;
    linear attention decodes through a recurrent update)."""
    chunks: bool = False
    """Linear attention: sequences and 64-token chunks of full-sequence passes."""
    calls: bool = False
    """MoE: forward calls (peft folds an expert LoRA into the expert weights once per call)."""

    @classmethod
    def of(cls, spec: ModelSpec | None) -> "Needs":
        """What `spec` needs (nothing for None and for dense full-attention models)."""
        if spec is None:
            return cls()
        mixers = {spec.mixer_of(i) for i in range(spec.num_layers)}
        return cls(windows=(spec.sliding_window,) if "sliding" in mixers else (),
                   decode=bool(mixers & {"mla", "linear"}), chunks="linear" in mixers, calls=spec.is_moe)

    def keys(self, pass_name: str) -> list[str]:
        """Work keys these needs add to one pass kind (rollout, update.train, ..., reward)."""
        out = [f"{pass_name}.attn_{a}.w{w}" for w in self.windows for a in ATTENTION]
        if self.chunks:
            out += [f"{pass_name}.rows", f"{pass_name}.chunks"]
        if self.decode and pass_name == "rollout":
            out += ["rollout.prefill_tokens", "rollout.decode_tokens", "rollout.decode_pairs"]
        if self.calls and pass_name in ("rollout", "update.train", "update.old"):  # the adapter runs
            out.append(f"{pass_name}.calls")
        return out


CHUNK = 64
"""Chunk length of the gated-delta-rule scan (transformers' torch fallback and FLA's kernels)."""


def _win(n, w: int):
    """Causal (query, key) pairs of n tokens when each query sees at most the last w keys."""
    return _tri(n) if n <= w else _tri(w) + (n - w) * w


def _seq_stats(length, needs: Needs) -> dict:
    """Extra statistics of one full-sequence forward over `length` tokens."""
    out = {}
    for w in needs.windows:
        out[f"attn_causal.w{w}"] = _win(length, w)
        out[f"attn_full.w{w}"] = length * length  # eager attention computes the square, then masks
    if needs.chunks:
        out["rows"], out["chunks"] = 1, math.ceil(length / CHUNK)
    return out


def _decode_stats(p, c, needs: Needs) -> dict:
    """Extra statistics of the c-1 decode steps after a prefill of p tokens (window-bounded:
    the cache keeps the last w keys of a sliding layer)."""
    out = {}
    for w in needs.windows:
        out[f"attn_causal.w{w}"] = out[f"attn_full.w{w}"] = _win(p + c - 1, w) - _win(p, w)
    if needs.decode:
        out["decode_tokens"], out["decode_pairs"] = c - 1, _decode_pairs(p, c)
    return out


def _acc(total: dict, prefix: str, stats: dict, times=1) -> None:
    for key, v in stats.items():
        total[f"{prefix}.{key}"] = total.get(f"{prefix}.{key}", 0) + times * v


def _extra_work(prompts: list, completions: list, settings: GRPOSettings, prof: EngineProfile,
                reward: list | None, iterations: int, generation: bool, pol: Needs, rm: Needs) -> dict:
    """The statistics `pol` and `rm` add, over the same passes _build_work counts."""
    w = {key: 0 for p in _PASSES for key in pol.keys(p)}
    w.update({key: 0 for key in rm.keys("reward")} if reward else {})
    n, k = len(completions), settings.group_size
    lens = [p + c for p, c in zip(prompts, completions)]
    pw = _ceil_to(max(prompts), settings.pad_to_multiple_of)
    lw = pw + _ceil_to(max(completions), settings.pad_to_multiple_of)
    train = [lw] * n if prof.padded else lens
    if prof.rollout_is_padded:
        cmax = max(completions)
        gen = [(pw, cmax, True)] * n
        calls = cmax  # one batched generate: the prefill, then one forward per decode step
    else:
        gen = [(p, c, prof.prefill_per_completion or i % k == 0) for i, (p, c) in enumerate(zip(prompts, completions))]
        calls = 0  # engines without HF generate (vLLM) run no peft forward per step
    micro = prof.micro_batches(settings)
    one = {}
    for x in train:
        _acc(one, "x", _seq_stats(x, pol))
    one = {key[2:]: v for key, v in one.items()}
    _acc(w, "update.train", one, iterations)
    if pol.calls:
        w["update.train.calls"] += iterations * micro
    if generation:
        for p, c, prefill in gen:
            if prefill:
                _acc(w, "rollout", _seq_stats(p, pol))
                if pol.decode:
                    w["rollout.prefill_tokens"] += p
            _acc(w, "rollout", _decode_stats(p, c, pol))
        if pol.calls:
            w["rollout.calls"] += calls
        for name, runs in (("update.old", prof.old_policy_pass(settings)), ("update.ref", prof.reference_pass(settings))):
            if runs:
                _acc(w, name, one)
                if f"{name}.calls" in w:
                    w[f"{name}.calls"] += micro
        for r in reward or ():
            _acc(w, "reward", _seq_stats(r, rm))
    return w


def work_from_lengths(prompt_lengths: Sequence[int], completion_lengths: Sequence[int],
                      settings: GRPOSettings, engine: str = "trl",
                      reward_lengths: Sequence[int] | None = None, *,
                      iterations: int | None = None, generation: bool = True,
                      reward_widths: Sequence[int] | None = None,
                      policy: ModelSpec | None = None, reward_model: ModelSpec | None = None) -> dict:
    """Exact work of one GRPO generation batch from real token lengths.

    prompt_lengths: one entry per completion (K per prompt, consecutive), or one per prompt
    (then repeated K times). completion_lengths: generated tokens of each completion, EOS
    included, as the engine returned them. reward_lengths: lengths of the sequences a reward
    model scored, in its own tokenizer; None for rule rewards. reward_widths: where the reward
    model ran over a padded batch (TRL's model rewards: right-padded to the longest sequence),
    the padded width of each of those sequences: FLOPs follow the widths, the reward token
    count the lengths.

    By default the batch's whole life is counted: rollout, reward, old-policy and reference
    passes, and settings.num_iterations training passes. A ledger that records TRL's mu
    optimizer steps separately passes iterations=1 for each, generation=False for all but the
    step that generated: the parts add up to the whole.

    policy, reward_model: the specs, when their architecture needs more than the base statistics
    (sliding windows, latent or linear attention, MoE forward calls: `Needs`); dense
    full-attention models need none.
    """
    prof = get_engine(engine)
    comps = _check_lengths(list(completion_lengths), "completion_lengths")
    prompts = _check_lengths(list(prompt_lengths), "prompt_lengths")
    if not comps:
        raise RaceError("no completions: completion_lengths is empty")
    k = settings.group_size
    if len(prompts) * k == len(comps) and k > 1:
        prompts = [p for p in prompts for _ in range(k)]
    if len(prompts) != len(comps):
        raise RaceError(f"{len(prompt_lengths)} prompt lengths for {len(comps)} completions",
                        f"give one prompt length per completion, or one per prompt (K={k} completions each)")
    if not prof.prefill_per_completion and len(comps) % k:
        raise RaceError(f"{len(comps)} completions is not a multiple of the group size K={k}")
    longest = max(comps)
    if longest > settings.max_completion_tokens:
        raise RaceError(f"a completion has {longest} tokens, more than max_completion_tokens="
                        f"{settings.max_completion_tokens}", "raise max_completion_tokens or check the lengths")
    reward = widths = None
    if reward_lengths is not None:
        reward = _check_lengths(list(reward_lengths), "reward_lengths")
    if reward_widths is not None:
        widths = _check_lengths(list(reward_widths), "reward_widths")
        if reward is None or len(widths) != len(reward) or any(w < r for w, r in zip(widths, reward)):
            raise RaceError("reward_widths must give one padded width >= its length per reward_lengths entry")
    its = settings.num_iterations if iterations is None else iterations
    if isinstance(its, bool) or not isinstance(its, int) or its < 0:
        raise RaceError(f"iterations must be a non-negative integer, got {its!r}")
    return _build_work(prompts, comps, settings, prof, reward, its, generation, _needs(policy, reward_model), widths)


def work_from_means(prompt_tokens: float, completion_tokens: float, settings: GRPOSettings,
                    engine: str = "generic", reward_tokens: float | None = None, *,
                    policy: ModelSpec | None = None, reward_model: ModelSpec | None = None) -> dict:
    """Work of one GRPO step (a generation batch of K*B completions and mu updates) when every
    prompt has `prompt_tokens` and every completion `completion_tokens` tokens (means may be
    fractional; each work entry is rounded to an integer). reward_tokens: tokens per sequence
    scored by a reward model, None for rule rewards."""
    prof = get_engine(engine)
    (p,) = _check_lengths([prompt_tokens], "prompt_tokens", integral=False, scalar=True)
    (c,) = _check_lengths([completion_tokens], "completion_tokens", integral=False, scalar=True)
    if c > settings.max_completion_tokens:
        raise RaceError(f"completion_tokens {c:g} exceeds max_completion_tokens={settings.max_completion_tokens}")
    n = settings.group_size * settings.prompts_per_step
    r = None
    if reward_tokens is not None:
        (rt,) = _check_lengths([reward_tokens], "reward_tokens", integral=False, scalar=True)
        r = [rt] * n
    if prof.padded:  # every row equally long: padding only from pad_to_multiple_of
        p, c = (math.ceil(p), math.ceil(c)) if settings.pad_to_multiple_of else (p, c)
    return _build_work([p] * n, [c] * n, settings, prof, r, settings.num_iterations, True,
                       _needs(policy, reward_model))


def _needs(policy: ModelSpec | None, reward_model: ModelSpec | None) -> tuple[Needs, Needs] | None:
    if policy is None and reward_model is None:
        return None
    return Needs.of(policy), Needs.of(reward_model)


def add_work(*works: dict) -> dict:
    """Sum of work dicts (work is additive over steps)."""
    out = dict.fromkeys(WORK_KEYS, 0)
    for w in works:
        for key, v in w.items():
            out[key] = out.get(key, 0) + v
    return out


def tokens_from_work(work: dict) -> dict:
    """Tokens per phase, as ledgers and reports write them: rollout_prompt, rollout_completion,
    update (real prompt+completion tokens per iteration), reward."""
    return {"rollout_prompt": work.get("count.rollout_prompt", 0),
            "rollout_completion": work.get("count.rollout_completion", 0),
            "update": work.get("count.update", 0), "reward": work.get("count.reward", 0)}


_EXTRA_KEY = re.compile(r"^(?:(?:rollout|update\.train|update\.old|update\.ref|reward)\.(?:attn_(?:causal|full)\.w[1-9][0-9]*"
                        r"|rows|chunks)|(?:rollout|update\.train|update\.old)\.calls"
                        r"|rollout\.(?:prefill_tokens|decode_tokens|decode_pairs))$")
"""Work keys `Needs` adds (calls only where the adapter runs: not the reference, not the reward model)."""


def _check_work(work: dict) -> None:
    if not isinstance(work, dict):
        raise RaceError("work must be a JSON object of token statistics")
    for key, v in work.items():
        if key not in WORK_KEYS and not (isinstance(key, str) and _EXTRA_KEY.match(key)):
            raise RaceError(f"work has unknown key '{key}'", f"accounting {VERSION} knows: {', '.join(WORK_KEYS)}")
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise RaceError(f"work['{key}'] = {v!r} must be a non-negative integer")


# ---- FLOP coefficients -------------------------------------------------------------------------
#
# Per model, each pass kind costs FLOPs per unit of a few statistics ("stats"): tok (a token
# through every layer), pair / pair.w{W} (a (query, key) pair of full / W-window layers), kvb
# (an MLA latent expanded by kv_b_proj), row and chunk (a sequence and a 64-token chunk of a
# linear-attention scan), dec_tok / dec_pair (what a decode step adds per token / per pair),
# call (a forward call: peft folds expert LoRAs into the weights once per call) and head (a
# position of the output head). coefficients() maps them onto work keys per pass.


def _add(c: dict, stat: str, v: int) -> None:
    if v:
        c[stat] = c.get(stat, 0) + v


def _lin(i: int, o: int) -> int:
    return 2 * i * o


def _lora_tok(u: LoraUnit) -> int:
    """x @ A then @ B, per token (per routed token for an expert stack)."""
    return 2 * u.rank * (u.fan_in + u.fan_out)


def _fold(u: LoraUnit) -> int:
    """One fold of a peft ParamWrapper: s * B @ A over every expert (a baddbmm onto W), or B @ A
    for the 2-D router weight."""
    return 2 * max(1, u.experts) * u.fan_in * u.fan_out * u.rank


def _fold_fwd(u: LoraUnit) -> int:
    """A ParamWrapper's forward, per call: the expert stack is folded twice -- torch's
    register_parametrization evaluates the fold once to check its shape, then the forward uses
    it (peft registers and removes the parametrization on every call); the router's delta is
    computed once, outside the parametrization."""
    return _fold(u) * (2 if u.experts else 1)


def _units_by_layer(spec: ModelSpec, adapter: Adapter) -> list[dict[str, LoraUnit]]:
    out = [{} for _ in range(spec.num_layers)]
    for u in lora_units(spec, adapter):
        out[u.layer][u.name] = u
    return out


def _pair_widths(spec: ModelSpec) -> tuple[int, int]:
    """FLOPs per (query, key) pair of one layer: q.k over every query head, and p.v."""
    v = spec.v_head_dim or spec.head_dim
    return 2 * spec.num_heads * spec.head_dim, 2 * spec.num_heads * v


def _linear_dims(spec: ModelSpec) -> tuple[int, int, int, int, int]:
    """(value heads, key head width, value head width, conv channels, conv kernel)."""
    kd = spec.linear_num_key_heads * spec.linear_key_head_dim
    vd = spec.linear_num_value_heads * spec.linear_value_head_dim
    return (spec.linear_num_value_heads, spec.linear_key_head_dim, spec.linear_value_head_dim,
            2 * kd + vd, spec.linear_conv_kernel)


def _chunk_fwd(spec: ModelSpec) -> int:
    """torch_chunk_gated_delta_rule per 64-token chunk: k_beta.k^T and q.k^T (C x C), the
    intra-chunk output (C x C).(C x dv), and the state products k_cumdecay.S, q.S, k^T.v_new;
    per value head (queries and keys are repeated to the value heads). The two triangular
    solves are not counted (FlopCounterMode counts no linalg solve)."""
    nv, dk, dv, _, _ = _linear_dims(spec)
    c = CHUNK
    return nv * (4 * c * c * dk + 2 * c * c * dv + 6 * c * dk * dv)


def _mixer_fwd(spec: ModelSpec, lay, c: dict) -> None:
    """Attention products and the linear-attention scan of one layer, per stat."""
    if lay.mixer == "linear":
        _, _, _, cd, k = _linear_dims(spec)
        _add(c, "tok", 2 * cd * k)            # depthwise causal conv, padded by k-1 ...
        _add(c, "row", 2 * cd * k * (k - 1))  # ... on the left of every sequence
        _add(c, "chunk", _chunk_fwd(spec))
        _add(c, "dec_tok", 2 * cd * k)        # a decode step convolves [state | token]: two outputs
        return                                # (the recurrent decode update is elementwise: 0)
    qk, pv = _pair_widths(spec)
    _add(c, f"pair.w{lay.window}" if lay.window else "pair", qk + pv)


def _layer_fwd(spec: ModelSpec, lay, units: dict, lora: bool, fold: bool) -> dict:
    """Forward FLOPs of one decoder layer per stat. kv_b_proj (MLA) goes to 'kvb'."""
    c: dict = {}
    for li in lay.linears:
        stat = "kvb" if li.name == "kv_b_proj" else "tok"
        _add(c, stat, _lin(li.fan_in, li.fan_out))
        u = units.get(f"{li.name}.weight" if li.part == "router" else li.name) if lora else None
        if u is not None:
            _add(c, "call", _fold_fwd(u)) if fold and u.is_param else _add(c, stat, _lora_tok(u))
    ex = lay.experts
    if ex:
        _add(c, "tok", ex.top_k * ex.fwd_per_pair)
        for name in ("experts.gate_up_proj", "experts.down_proj"):
            u = units.get(name) if lora else None
            if u is not None:
                _add(c, "call", _fold_fwd(u)) if fold else _add(c, "tok", ex.top_k * _lora_tok(u))
    _mixer_fwd(spec, lay, c)
    return c


def _lora_bwd(u: LoraUnit, rg_x: bool) -> int:
    """LoRA branch backward per token: B's weight grad and input grad, A's weight grad, A's
    input grad when x requires grad."""
    r, i, o = u.rank, u.fan_in, u.fan_out
    return 2 * r * o + 2 * r * o + 2 * i * r + (2 * i * r if rg_x else 0)


class _Bwd:
    """Backward of one decoder layer: autograd computes an input gradient only where the input
    requires grad and a weight gradient only for weights that require grad."""

    def __init__(self, spec: ModelSpec, units: dict, full: bool, fold: bool):
        self.spec, self.units, self.full, self.fold, self.c = spec, units, full, fold, {}

    def linear(self, li, rg_x: bool, stat: str = "tok") -> bool:
        """One nn.Linear (or the router's F.linear); returns whether its output requires grad."""
        f = _lin(li.fan_in, li.fan_out)
        u = self.units.get(f"{li.name}.weight" if li.part == "router" else li.name)
        if self.full:
            _add(self.c, stat, 2 * f if rg_x else f)
            return True
        _add(self.c, stat, f if rg_x else 0)
        if u is None:
            return rg_x
        if u.is_param:  # folded router weight: its gradient per token, then through B @ A per call
            _add(self.c, stat, f)
            _add(self.c, "call", 2 * _fold(u))
        else:
            _add(self.c, stat, _lora_bwd(u, rg_x))
        return True

    def experts(self, ex, rg_x: bool) -> bool:
        """Routed experts, per (token, expert) pair: gate_up then down."""
        k = ex.top_k
        r_out = rg_x
        for name, (i, o) in (("experts.gate_up_proj", (ex.hidden, 2 * ex.width)),
                             ("experts.down_proj", (ex.width, ex.hidden))):
            f = _lin(i, o)
            u = self.units.get(name)
            w_grad = self.full or (u is not None and self.fold)
            _add(self.c, "tok", k * ((f if r_out else 0) + (f if w_grad else 0)))
            if u is not None:
                if self.fold:
                    _add(self.c, "call", 2 * _fold(u))
                else:
                    _add(self.c, "tok", k * _lora_bwd(u, r_out))
            r_out = r_out or w_grad or u is not None
        return r_out

    def pairs(self, lay, rq: bool, rk: bool, rv: bool) -> None:
        qk, pv = _pair_widths(self.spec)
        stat = f"pair.w{lay.window}" if lay.window else "pair"
        # scores = q k^T: dq, dk; out = p v: dp (p requires grad when q or k does), dv
        _add(self.c, stat, qk * (rq + rk) + pv * ((rq or rk) + rv))

    def layer(self, lay, rg_in: bool) -> bool:
        by = {li.name: li for li in lay.linears}
        if lay.mixer == "linear":
            r_attn = self.linear_attention(lay, by, rg_in)
        elif lay.mixer == "mla":
            if "q_proj" in by:
                rq = self.linear(by["q_proj"], rg_in)
            else:
                rq = self.linear(by["q_b_proj"], self.linear(by["q_a_proj"], rg_in))
            rkva = self.linear(by["kv_a_proj_with_mqa"], rg_in)
            rkvb = self.linear(by["kv_b_proj"], rkva)
            self.pairs(lay, rq, rkva or rkvb, rkvb)
            r_attn = self.linear(by["o_proj"], rq or rkva or rkvb)
        else:
            if "qkv_proj" in by:
                rq = rk = rv = self.linear(by["qkv_proj"], rg_in)
            else:
                rq, rk, rv = (self.linear(by[n], rg_in) for n in ("q_proj", "k_proj", "v_proj"))
            self.pairs(lay, rq, rk, rv)
            r_attn = self.linear(by["o_proj"], rq or rk or rv)
        r_mid = rg_in or r_attn  # residual stream after the token mixer
        mlp = [li for li in lay.linears if li.part != "attn"]
        if lay.experts is None:
            r_out = self.dense(mlp, r_mid)
            return r_mid or r_out
        r_out = False
        shared = [li for li in mlp if li.part == "shared" and li.name != "shared_expert_gate"]
        if shared:
            r_out = self.dense(shared, r_mid)
        for li in mlp:
            if li.part == "router" or li.name == "shared_expert_gate":
                r_out = self.linear(li, r_mid) | r_out
        r_out = self.experts(lay.experts, r_mid) | r_out
        return r_mid or r_out

    def dense(self, mlp: list, rg_x: bool) -> bool:
        by = {li.name: li for li in mlp}
        if "gate_up_proj" in by:
            r_act = self.linear(by["gate_up_proj"], rg_x)
        else:
            r_act = self.linear(by["gate_proj"], rg_x) | self.linear(by["up_proj"], rg_x)
        return self.linear(by["down_proj"], r_act)

    def linear_attention(self, lay, by: dict, rg_in: bool) -> bool:
        """In-projections, the depthwise conv, the chunked scan, the gated norm, out_proj."""
        spec = self.spec
        if "in_proj_qkvz" in by:
            r_qkv = r_z = self.linear(by["in_proj_qkvz"], rg_in)
            r_b = r_a = self.linear(by["in_proj_ba"], rg_in)
        else:
            r_qkv, r_z = self.linear(by["in_proj_qkv"], rg_in), self.linear(by["in_proj_z"], rg_in)
            r_b, r_a = self.linear(by["in_proj_b"], rg_in), self.linear(by["in_proj_a"], rg_in)
        r_ba = r_b or r_a
        nv, dk, dv, cd, k = _linear_dims(spec)
        conv_tok, conv_row = 2 * cd * k, 2 * cd * k * (k - 1)
        n_conv = (1 if r_qkv else 0) + (1 if self.full else 0)  # input grad, weight grad
        _add(self.c, "tok", n_conv * conv_tok)
        _add(self.c, "row", n_conv * conv_row)
        r_core = r_qkv or self.full or r_ba
        if r_core:
            c = CHUNK
            # every chunk product gets both operand gradients, the two triangular solves one matmul
            # each (the solved-for matrix) ...
            _add(self.c, "chunk", 2 * _chunk_fwd(spec) + nv * 2 * c * c * (dk + dv))
            # ... except the products of the zero initial state and of the unused final state
            _add(self.c, "row", -nv * 4 * 2 * c * dk * dv)
            if not (r_qkv or self.full):  # only beta and the decay need grads: q.k^T gets none,
                _add(self.c, "chunk", -nv * 3 * 2 * c * c * dk)  # k_beta.k^T none for k
                if not r_a:  # beta alone (measured): one C x C product and two state products fewer
                    _add(self.c, "chunk", -nv * (2 * c * c * dk + 2 * 2 * c * dk * dv))
                    _add(self.c, "row", nv * 2 * c * dk * dv)
                elif not r_b:  # the decay alone (measured): one C x C product fewer
                    _add(self.c, "chunk", -nv * 2 * c * c * dk)
        return self.linear(by["out_proj"], r_core or r_z)


def _skipped(spec: ModelSpec, lay, units: dict) -> int:
    """FLOPs per token torch's non-reentrant checkpoint does not recompute: the layer's last
    matmul when its output feeds only the residual add (a dense MLP's or DeepSeek's shared
    experts' down_proj; peft runs a LoRA's base layer first, so then its B). Nothing is skipped
    where the last output is saved: MoE layers whose experts or a sigmoid-gated shared expert
    come last, and families with a norm after the MLP (Gemma 2/3, OLMo 2/3)."""
    last = lay.linears[-1]
    if last.name != "down_proj" or spec.family.post_mlp_norm or \
            (lay.experts is not None and lay.experts_at >= len(lay.linears)):
        return 0
    u = units.get("down_proj")
    return 2 * u.rank * last.fan_out if u is not None else _lin(last.fan_in, last.fan_out)


@lru_cache(maxsize=256)
def _model_costs(spec: ModelSpec, adapter: Adapter, fold: bool, rg0: bool, early_stop: bool) -> dict:
    """{'fwd', 'base', 'bwd', 'recompute'}: FLOPs per stat of the decoder's forward with the
    adapter, without it, its backward, and its checkpoint recompute."""
    units = _units_by_layer(spec, adapter)
    out = {"fwd": {}, "base": {}, "bwd": {}, "recompute": {}}
    rg = rg0
    for i in range(spec.num_layers):
        lay = spec.layer(i)
        fwd = _layer_fwd(spec, lay, units[i], True, fold)
        for part, c in (("fwd", fwd), ("recompute", fwd), ("base", _layer_fwd(spec, lay, {}, False, fold))):
            for stat, v in c.items():
                _add(out[part], stat, v)
        if early_stop:
            _add(out["recompute"], "tok", -_skipped(spec, lay, units[i]))
        b = _Bwd(spec, units[i], adapter.kind == "full", fold)
        rg = b.layer(lay, rg)
        for stat, v in b.c.items():
            _add(out["bwd"], stat, v)
    return out


def _head_fwd(spec: ModelSpec) -> int:
    """FLOPs per position of the output head: the score head if any, else the LM head."""
    if spec.score_head:
        return sum(2 * i * o for i, o in spec.score_head)
    return 2 * spec.hidden_size * spec.vocab_size if spec.has_lm_head else 0


def _mla_absorbed(spec: ModelSpec) -> int:
    """MLA decode in the latent space (vLLM), per decode pair: scores over latent + rope and
    values over the latent, in place of the expanded pair (returned as the difference). Per
    decode token, q_nope through W_UK and the latent output through W_UV cost 2 n_h r (d_nope +
    d_v): exactly kv_b_proj on one latent, which the 'kvb' stat already charges per decode token."""
    nh, r, rope = spec.num_heads, spec.kv_lora_rank, spec.qk_rope_head_dim
    qk, pv = _pair_widths(spec)
    return 2 * nh * (r + rope) + 2 * nh * r - qk - pv


def _map(costs: dict, prefix: str, attn: str, *, rollout: bool = False, absorbed: bool = False,
         calls: bool = True) -> dict:
    """Coefficients of one pass: stats -> work keys of `prefix`."""
    out: dict = {}
    for stat, v in costs.items():
        if stat == "tok":
            _add(out, f"{prefix}.tokens", v)
        elif stat == "pair":
            _add(out, f"{prefix}.{attn}", v)
        elif stat.startswith("pair.w"):
            _add(out, f"{prefix}.{attn}.{stat[5:]}", v)
        elif stat in ("row", "chunk"):
            _add(out, f"{prefix}.{stat}s", v)
        elif stat == "call":
            if calls:
                _add(out, f"{prefix}.calls", v)
        elif stat == "kvb":
            if not rollout:
                _add(out, f"{prefix}.tokens", v)
            else:  # the prompt's latents once; HF generate re-expands every cached latent per step,
                _add(out, "rollout.prefill_tokens", v)  # absorbed weights cost as much per decode token
                _add(out, "rollout.decode_pairs" if not absorbed else "rollout.decode_tokens", v)
        elif stat == "dec_tok" and rollout:
            _add(out, "rollout.decode_tokens", v)
    return out


def coefficients(policy: ModelSpec, adapter: Adapter, settings: GRPOSettings,
                 reward_model: ModelSpec | None = None, engine: str = "trl",
                 attention: str = "causal") -> list[tuple[str, str, dict[str, int]]]:
    """The linear map from work to FLOPs: [(phase, pass name, {work key: FLOPs per unit})].
    FLOPs of a pass = sum(coef * work[key])."""
    prof = get_engine(engine)
    _check_attention(attention)
    attn = f"attn_{attention}"
    if not policy.has_lm_head:
        raise RaceError(f"policy {policy.name} has no LM head", "a policy must be a causal LM; reward models go in reward_model")
    head = _head_fwd(policy)
    early = prof.checkpoint_early_stop
    costs = _model_costs(policy, adapter, prof.peft_training, prof.layer0_input_grad(adapter, settings), early)
    gen = _model_costs(policy, adapter, prof.hf_rollout, True, early)["fwd"]
    roll = _map(gen, "rollout", attn, rollout=True, absorbed=not prof.hf_rollout, calls=prof.hf_rollout)
    if policy.family.mla and not prof.hf_rollout:
        _add(roll, "rollout.decode_pairs", policy.num_layers * _mla_absorbed(policy))
    _add(roll, "rollout.lm_head", head)
    # LM head backward: dx always (something upstream trains); dW only when it trains itself;
    # a fused head first recomputes its logits.
    head_bwd = head * (1 + (adapter.kind == "full") + prof.lm_head_recompute)

    def train(part: str, extra: dict) -> dict:
        return {**_map(costs[part], "update.train", attn), **extra}

    table = [
        ("rollout", "generate forward", roll),
        ("update", "train forward", train("fwd", {"update.train.lm_head": head})),
        ("update", "train backward", train("bwd", {"update.train.lm_head": head_bwd})),
        ("update", "checkpoint recompute", train("recompute", {}) if settings.gradient_checkpointing else {}),
        ("update", "old-policy forward", {**_map(costs["fwd"], "update.old", attn), "update.old.lm_head": head}),
        # With PEFT the reference is the base model with the adapter off; for full fine-tuning a
        # frozen copy of the policy: either way no adapter FLOPs.
        ("update", "reference forward", {**_map(costs["base"], "update.ref", attn), "update.ref.lm_head": head}),
    ]
    if reward_model is not None:
        rc = _model_costs(reward_model, Adapter(kind="full"), False, False, False)["base"]
        table.append(("reward", "reward-model forward", {**_map(rc, "reward", attn), "reward.heads": _head_fwd(reward_model)}))
    return [(ph, name, {k: v for k, v in coef.items() if v}) for ph, name, coef in table]


def required_keys(policy: ModelSpec, reward_model: ModelSpec | None = None) -> dict[str, list[str]]:
    """Work keys beyond WORK_KEYS each pass of these models may need, by pass ('rollout', ...)."""
    pol, rm = Needs.of(policy), Needs.of(reward_model)
    out = {p: pol.keys(p) for p in _PASSES}
    out["reward"] = rm.keys("reward")
    return out


def _check_needs(work: dict, table: list) -> None:
    """Refuse work that lacks a statistic these models' coefficients use, in a pass that ran:
    its FLOPs would silently be missing."""
    for _, name, coef in table:
        for key in coef:
            if key not in work and key not in WORK_KEYS:
                prefix = next(p for p in (*_PASSES, "reward") if key.startswith(p + "."))
                if work.get(f"{prefix}.tokens", 0):
                    raise RaceError(f"work has no '{key}', which the {name} of these models needs",
                                    "build the work with work_from_lengths(..., policy=, reward_model=): sliding "
                                    "windows, latent or linear attention and MoE calls need more than token counts")


def pass_breakdown(work: dict, policy: ModelSpec, adapter: Adapter, settings: GRPOSettings,
                   reward_model: ModelSpec | None = None, engine: str = "trl",
                   attention: str = "causal") -> list[tuple[str, str, int]]:
    """FLOPs of each pass: [(phase, pass name, FLOPs)], in the order docs/accounting.md
    derives them."""
    _check_work(work)
    if reward_model is None and work.get("reward.tokens", 0):
        raise RaceError("work has reward-model tokens but no reward model spec was given",
                        "pass the reward model (--reward-model) or drop reward_lengths")
    table = _coefficients(policy, adapter, settings, reward_model, engine, attention)
    _check_needs(work, table)
    rows = []
    for phase, name, coef in table:
        rows.append((phase, name, sum(c * work.get(key, 0) for key, c in coef.items())))
    return rows


@lru_cache(maxsize=512)
def _cached_coefficients(*args) -> list:
    return coefficients(*args)


def _coefficients(*args) -> list:
    """coefficients(), built once per distinct setting: a leaderboard prices a few settings
    across many reports, an import one setting across many steps."""
    try:
        return _cached_coefficients(*args)
    except TypeError:               # an unhashable spec field: build it the plain way
        return coefficients(*args)


def phase_flops(work: dict, policy: ModelSpec, adapter: Adapter, settings: GRPOSettings,
                reward_model: ModelSpec | None = None, engine: str = "trl",
                attention: str = "causal") -> dict:
    """{"rollout": int, "update": int, "reward": int}: exact FLOPs of `work` (linear in it)."""
    out = dict.fromkeys(PHASES, 0)
    for phase, _, f in pass_breakdown(work, policy, adapter, settings, reward_model, engine, attention):
        out[phase] += f
    return out


def step_cost_bound(policy, adapter, settings, *, max_prompt_tokens: int, engine: str = "trl-cpu",
                    attention: str = "causal", reward_model=None, reward_tokens: int | None = None,
                    generation: bool = True) -> int:
    """Upper bound on the FLOPs of one optimizer step: every completion runs to
    max_completion_tokens and every prompt is max_prompt_tokens long (longer sequences only
    cost more); a reward model scores twice prompt + completion unless reward_tokens says how
    much. generation=False: a reuse step of mu > 1 (update only). A run's budget stop
    (suite.train.trl_callback) and the grid planner (suite.analysis.grid) both use it."""
    n = settings.group_size * settings.prompts_per_step
    if reward_model is not None and reward_tokens is None:
        reward_tokens = 2 * (max_prompt_tokens + settings.max_completion_tokens)
    work = work_from_lengths([max_prompt_tokens] * n, [settings.max_completion_tokens] * n, settings, engine,
                             [reward_tokens] * n if reward_model is not None and generation else None,
                             iterations=1, generation=generation, policy=policy, reward_model=reward_model)
    return sum(phase_flops(work, policy, adapter, settings, reward_model, engine, attention).values())


@dataclass(frozen=True)
class StepFlops:
    """One GRPO step from means: its work, tokens and per-phase FLOPs."""

    work: dict
    tokens: dict
    flops: dict
    passes: list = field(default_factory=list)

    @property
    def total(self) -> int:
        """rollout + update + reward."""
        return sum(self.flops.values())

    @property
    def update_share(self) -> float:
        """p = C_update / C_total."""
        return self.flops["update"] / self.total if self.total else 0.0


def step_flops(policy: ModelSpec, adapter: Adapter, settings: GRPOSettings, prompt_tokens: float,
               completion_tokens: float, engine: str = "generic", attention: str = "causal",
               reward_model: ModelSpec | None = None, reward_tokens: float | None = None) -> StepFlops:
    """work_from_means + phase_flops for one step. With a reward model and no reward_tokens,
    the reward model scores prompt + completion."""
    if reward_model is not None and reward_tokens is None:
        reward_tokens = prompt_tokens + completion_tokens
    if reward_model is None:
        reward_tokens = None
    work = work_from_means(prompt_tokens, completion_tokens, settings, engine, reward_tokens,
                           policy=policy, reward_model=reward_model)
    passes = pass_breakdown(work, policy, adapter, settings, reward_model, engine, attention)
    flops = dict.fromkeys(PHASES, 0)
    for phase, _, f in passes:
        flops[phase] += f
    return StepFlops(work=work, tokens=tokens_from_work(work), flops=flops, passes=passes)


# ---- other engines' formulas, for comparison -------------------------------------------------


VERL_ESTIMATORS = {"qwen2": "qwen2", "llama": "qwen2", "qwen3": "qwen2", "mistral": "qwen2",
                   "qwen3_moe": "qwen2_moe", "gemma3_text": "gemma3", "gpt_oss": "gpt_oss",
                   "deepseek_v3": "deepseek_v3", "qwen3_5_text": "qwen3_5"}
"""Our model types verl 0.9.1's FlopsCounter (verl/utils/flops_counter.py, ESTIMATE_FUNC)
estimates, and with which of its formulas (_estimate_<name>_flops); for the others (mixtral,
gemma2, olmo2, olmo3, phi3, smollm3, qwen3_next) verl logs MFU 0."""


def verl_update_flops(spec: ModelSpec, seq_lengths: Sequence[int]) -> int | None:
    """verl 0.9.1's estimate for one update pass over sequences of these lengths (None where
    verl has no formula for the model type): 6 * N * tokens, N the matmul weights a token passes
    (MoE: top-k experts; router) plus 2 * vocab * hidden (embedding and LM head, tied or not),
    plus attention 6 * sum(L^2) * head_dim * heads per full layer (sliding layers: L * min(L, w);
    DeepSeek MLA: 3 * sum(L^2) * (qk + v head dims) * heads; Qwen3.5: + 15 * dk * dv * value heads
    per token and linear layer) -- the same for LoRA as for full fine-tuning. Rollout not counted."""
    kind = VERL_ESTIMATORS.get(spec.model_type)
    if kind is None:
        return None
    h, nl = spec.hidden_size, spec.num_layers
    tokens, sq = sum(seq_lengths), sum(x * x for x in seq_lengths)
    emb = 2 * spec.vocab_size * h
    if kind == "deepseek_v3":
        nope_rope, v, rank = spec.head_dim, spec.v_head_dim or spec.head_dim, spec.kv_lora_rank
        attn = (h * spec.q_lora_rank + spec.num_heads * nope_rope * spec.q_lora_rank) if spec.q_lora_rank \
            else h * spec.num_heads * nope_rope
        attn += h * (rank + spec.qk_rope_head_dim) + spec.num_heads * (nope_rope - spec.qk_rope_head_dim + v) * rank
        attn += spec.num_heads * v * h
        dense_k = len(spec.dense_mlp_layers)
        n_shared = spec.shared_expert_intermediate_size // spec.moe_intermediate_size
        moe = h * spec.num_experts + h * spec.moe_intermediate_size * (spec.experts_per_token + n_shared) * 3
        n = (moe + attn) * (nl - dense_k) + (3 * h * spec.intermediate_size + attn) * dense_k + emb
        return 6 * n * tokens + 3 * sq * nl * (nope_rope + v) * spec.num_heads
    if kind == "qwen3_5":
        full = sum(t == "full_attention" for t in spec.layer_types) if spec.layer_types else nl
        lin = nl - full
        q, kv = spec.q_dim, spec.kv_dim
        lk = spec.linear_num_key_heads * spec.linear_key_head_dim
        lv = spec.linear_num_value_heads * spec.linear_value_head_dim
        attn = h * (2 * q + 2 * kv + q) * full
        attn += (h * (2 * lk + 3 * lv + 2 * spec.linear_num_value_heads) + spec.linear_conv_kernel * (2 * lk + lv)) * lin
        mlp = 3 * h * spec.intermediate_size * nl
        gdn = 15 * spec.linear_key_head_dim * spec.linear_value_head_dim * spec.linear_num_value_heads * tokens * lin
        return 6 * (mlp + attn + emb) * tokens + 6 * sq * spec.head_dim * spec.num_heads * full + gdn
    attn_lin = h * (spec.q_dim + 2 * spec.kv_dim + spec.q_dim)
    if kind == "qwen2":
        mlp = 3 * h * spec.intermediate_size
    elif kind in ("qwen2_moe", "gpt_oss"):
        mlp = 3 * h * spec.moe_intermediate_size * spec.experts_per_token + h * spec.num_experts
    else:  # gemma3
        mlp = 3 * h * spec.intermediate_size
    dense = (mlp + attn_lin) * nl + emb
    if kind in ("gemma3", "gpt_oss") and spec.layer_types:
        w = spec.sliding_window
        sq = sum(x * (min(x, w) if t == "sliding_attention" and w else x)
                 for t in spec.layer_types for x in seq_lengths)
    else:
        sq *= nl
    return 6 * dense * tokens + 6 * sq * spec.head_dim * spec.num_heads


def six_n_t(spec: ModelSpec, tokens: int) -> int:
    """The 6*N*T rule: 6 FLOPs per parameter per trained token, N = all parameters."""
    return 6 * spec.params_total * tokens


__all__ = [
    "ATTENTION", "PROJECTIONS", "PHASES", "TOKEN_KEYS", "WORK_KEYS", "METHOD", "VERSION", "Adapter", "GRPOSettings",
    "EngineProfile", "ENGINES", "engine", "get_engine", "work_from_lengths", "work_from_means", "add_work",
    "tokens_from_work", "coefficients", "pass_breakdown", "phase_flops", "StepFlops", "step_flops", "step_cost_bound",
    "verl_update_flops", "six_n_t", "VERL_ESTIMATORS", "Needs", "LoraUnit", "lora_units", "TARGET_NAMES", "ALL_LINEAR",
    "CHUNK", "required_keys", "adaptable_names", "unmatched_targets",
]
