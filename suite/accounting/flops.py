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
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Iterable, Sequence

from ..errors import RaceError
from ..registry import Registry
from .modelspec import ModelSpec

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
    """Adapted projections, a subset of PROJECTIONS (all seven by default)."""

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
            bad = [t for t in self.targets if t not in PROJECTIONS]
            if bad:
                raise RaceError(f"unknown LoRA target(s): {', '.join(bad)}",
                                f"targets are decoder projections: {', '.join(PROJECTIONS)}")
            if len(set(self.targets)) != len(self.targets):
                raise RaceError("LoRA targets repeat a projection")
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
        """Trainable parameters on `spec`: every parameter for full fine-tuning; r*(in+out) per
        adapted projection and layer for LoRA (peft's lora_A and lora_B, no bias)."""
        if self.kind == "full":
            return spec.params_total
        proj = spec.projections()
        return spec.num_layers * sum(self.rank * (proj[t][0] + proj[t][1]) for t in self.targets)

    def to_report(self, spec: ModelSpec) -> dict:
        """The report's `adapter` section."""
        lora = self.kind == "lora"
        return {"type": self.kind, "rank": self.rank if lora else None,
                "alpha": (self.alpha or float(2 * self.rank)) if lora else None,
                "targets": list(self.targets) if lora else [],
                "trainable_params": self.trainable_params(spec)}


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
    lm_head_train: str = "completion"
    """LM head positions in log-prob passes: 'completion' (the tokens scored) or 'all'
    (every position but the last of the padded row)."""
    lm_head_recompute: bool = False
    """The LM head recomputes its logits in the backward (a fused, memory-saving head)."""
    checkpoint_early_stop: bool = False
    """Gradient checkpointing stops each layer's recompute once the last tensor the backward
    needs is saved (torch non-reentrant checkpoint): the layer's last matmul is not rerun."""

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
                "prefill_per_completion": self.prefill_per_completion,
                "lm_head_train": self.lm_head_train, "lm_head_recompute": self.lm_head_recompute,
                "checkpoint_early_stop": self.checkpoint_early_stop}


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


@engine("generic")
class GenericProfile(EngineProfile):
    """Useful work only: no padding, LM head on completion tokens; for hand-filled reports."""

    description = ("useful work of an ideal engine: no padding, each completion prefills its prompt and decodes "
                   "its own tokens; log-prob passes project completion tokens only; old-policy pass when mu > 1")


@engine("verl")
class VerlProfile(EngineProfile):
    """verl 0.9 main_ppo (FSDP actor, remove-padding on, vLLM rollout), as `race import verl`
    and `race export verl` configure it."""

    description = ("verl 0.9 main_ppo with use_remove_padding: no padding; each completion prefills its prompt; "
                   "log-prob passes project every position (logits over the unpadded sequence); the old-policy "
                   "log-prob forward runs every step (rollout_correction.bypass_mode off)")
    lm_head_train = "all"
    # fsdp_workers: gradient_checkpointing_enable(use_reentrant=False) -> torch's early stop
    checkpoint_early_stop = True

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
                reward: list | None, iterations: int, generation: bool) -> dict:
    """The work of one generation batch (generation=True) plus `iterations` training passes."""
    w = dict.fromkeys(WORK_KEYS, 0)
    n = len(completions)
    k = settings.group_size
    lens = [p + c for p, c in zip(prompts, completions)]
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
        if prof.prefill_per_completion:
            pre = prompts
        else:  # K consecutive completions share one prompt prefill
            pre = [prompts[i] if i % k == 0 else 0 for i in range(n)]
        roll = {"tokens": sum(pre) + sum(c - 1 for c in completions),
                "attn_causal": sum(_tri(p) for p in pre) + sum(_decode_pairs(p, c) for p, c in zip(prompts, completions)),
                "attn_full": sum(p * p for p in pre) + sum(_decode_pairs(p, c) for p, c in zip(prompts, completions)),
                "lm_head": sum(completions)}
        lm = sum(completions) if prof.lm_head_train == "completion" else sum(x - 1 for x in lens)
        one = {"tokens": sum(lens), "attn_causal": sum(_tri(x) for x in lens),
               "attn_full": sum(x * x for x in lens), "lm_head": lm}
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
            w["reward.tokens"] = sum(reward)
            w["reward.attn_causal"] = sum(_tri(r) for r in reward)
            w["reward.attn_full"] = sum(r * r for r in reward)
            w["reward.heads"] = sum(reward)
            w["count.reward"] = sum(reward)
    return {key: int(round(v)) for key, v in w.items()}


def work_from_lengths(prompt_lengths: Sequence[int], completion_lengths: Sequence[int],
                      settings: GRPOSettings, engine: str = "trl",
                      reward_lengths: Sequence[int] | None = None, *,
                      iterations: int | None = None, generation: bool = True) -> dict:
    """Exact work of one GRPO generation batch from real token lengths.

    prompt_lengths: one entry per completion (K per prompt, consecutive), or one per prompt
    (then repeated K times). completion_lengths: generated tokens of each completion, EOS
    included, as the engine returned them. reward_lengths: lengths of the sequences a reward
    model scored, in its own tokenizer; None for rule rewards.

    By default the batch's whole life is counted: rollout, reward, old-policy and reference
    passes, and settings.num_iterations training passes. A ledger that records TRL's mu
    optimizer steps separately passes iterations=1 for each, generation=False for all but the
    step that generated: the parts add up to the whole.
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
    reward = None
    if reward_lengths is not None:
        reward = _check_lengths(list(reward_lengths), "reward_lengths")
    its = settings.num_iterations if iterations is None else iterations
    if isinstance(its, bool) or not isinstance(its, int) or its < 0:
        raise RaceError(f"iterations must be a non-negative integer, got {its!r}")
    return _build_work(prompts, comps, settings, prof, reward, its, generation)


def work_from_means(prompt_tokens: float, completion_tokens: float, settings: GRPOSettings,
                    engine: str = "generic", reward_tokens: float | None = None) -> dict:
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
    return _build_work([p] * n, [c] * n, settings, prof, r, settings.num_iterations, True)


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


def _check_work(work: dict) -> None:
    if not isinstance(work, dict):
        raise RaceError("work must be a JSON object of token statistics")
    for key, v in work.items():
        if key not in WORK_KEYS:
            raise RaceError(f"work has unknown key '{key}'", f"accounting {VERSION} knows: {', '.join(WORK_KEYS)}")
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise RaceError(f"work['{key}'] = {v!r} must be a non-negative integer")


# ---- FLOP coefficients -------------------------------------------------------------------------


def _linear_fwd(spec: ModelSpec) -> int:
    """FLOPs per token of the seven projections of all layers (bias adds are not matmuls)."""
    return spec.num_layers * sum(2 * i * o for i, o in spec.projections().values())


def _lora_fwd(spec: ModelSpec, adapter: Adapter) -> int:
    """FLOPs per token of the LoRA branches, x @ A then @ B, of all layers."""
    if adapter.kind != "lora":
        return 0
    proj = spec.projections()
    return spec.num_layers * sum(2 * adapter.rank * (proj[t][0] + proj[t][1]) for t in adapter.targets)


def _attn_pair(spec: ModelSpec) -> int:
    """FLOPs per (query, key) pair over all layers: q.k and p.v, 2*head_dim each, every head."""
    return spec.num_layers * 4 * spec.num_heads * spec.head_dim


def _head_fwd(spec: ModelSpec) -> int:
    """FLOPs per position of the output head: the score head if any, else the LM head."""
    if spec.score_head:
        return sum(2 * i * o for i, o in spec.score_head)
    return 2 * spec.hidden_size * spec.vocab_size if spec.has_lm_head else 0


def _last_mm(spec: ModelSpec, adapter: Adapter) -> int:
    """FLOPs per token of a decoder layer's last matmul in forward order: down_proj, or its
    LoRA B when down_proj is adapted (peft runs the base layer first)."""
    h = spec.hidden_size
    if adapter.kind == "lora" and "down_proj" in adapter.targets:
        return 2 * adapter.rank * h
    return 2 * spec.intermediate_size * h


def _layer_backward(spec: ModelSpec, adapter: Adapter, rg_in: bool) -> tuple[int, int, bool]:
    """(FLOPs per token, FLOPs per attention pair, output requires grad) of one decoder layer's
    backward. Autograd computes an input gradient only where the input requires grad and a
    weight gradient only for trainable weights."""
    proj = spec.projections()
    pair_mm = 2 * spec.num_heads * spec.head_dim  # one of the two attention products, per pair
    if adapter.kind == "full":
        return 2 * sum(2 * i * o for i, o in proj.values()), 2 * 2 * pair_mm, True
    r, targets = adapter.rank, set(adapter.targets)

    def linear(name: str, rg_x: bool) -> tuple[int, bool]:
        i, o = proj[name]
        f = 2 * i * o if rg_x else 0           # dx through the frozen weight
        if name in targets:
            f += 2 * r * o + 2 * r * o          # lora_B: weight grad, grad of x @ A
            f += 2 * i * r                      # lora_A: weight grad
            f += 2 * i * r if rg_x else 0       # lora_A: dx
        return f, rg_x or name in targets

    fq, rq = linear("q_proj", rg_in)
    fk, rk = linear("k_proj", rg_in)
    fv, rv = linear("v_proj", rg_in)
    pair = pair_mm * (rq + rk)                  # scores = q @ k^T: dq, dk
    pair += pair_mm * ((rq or rk) + rv)         # out = p @ v: dp, dv
    r_attn = rq or rk or rv
    fo, ro = linear("o_proj", r_attn)
    r_mid = rg_in or ro                         # residual stream after attention
    fg, rgate = linear("gate_proj", r_mid)
    fu, rup = linear("up_proj", r_mid)
    fd, rd = linear("down_proj", rgate or rup)
    return fq + fk + fv + fo + fg + fu + fd, pair, r_mid or rd


def coefficients(policy: ModelSpec, adapter: Adapter, settings: GRPOSettings,
                 reward_model: ModelSpec | None = None, engine: str = "trl",
                 attention: str = "causal") -> list[tuple[str, str, dict[str, int]]]:
    """The linear map from work to FLOPs: [(phase, pass name, {work key: FLOPs per unit})].
    FLOPs of a pass = sum(coef * work[key])."""
    prof = get_engine(engine)
    _check_attention(attention)
    attn = f"attn_{attention}"
    lin, lora, pair, head = _linear_fwd(policy), _lora_fwd(policy, adapter), _attn_pair(policy), _head_fwd(policy)
    if not policy.has_lm_head:
        raise RaceError(f"policy {policy.name} has no LM head", "a policy must be a causal LM; reward models go in reward_model")

    # Backward of the decoder: layer 0 may differ (its input may not require grad).
    rg = prof.layer0_input_grad(adapter, settings)
    bwd_tok = bwd_pair = 0
    for _ in range(policy.num_layers):
        t, p, rg = _layer_backward(policy, adapter, rg)
        bwd_tok, bwd_pair = bwd_tok + t, bwd_pair + p
    # LM head backward: dx always (something upstream trains); dW only when it trains itself;
    # a fused head first recomputes its logits.
    head_bwd = head * (1 + (adapter.kind == "full") + prof.lm_head_recompute)
    # Checkpointed decoder layers run their forward again in the backward.
    recompute = lin + lora - (policy.num_layers * _last_mm(policy, adapter) if prof.checkpoint_early_stop else 0)

    table = [
        ("rollout", "generate forward", {"rollout.tokens": lin + lora, f"rollout.{attn}": pair, "rollout.lm_head": head}),
        ("update", "train forward", {"update.train.tokens": lin + lora, f"update.train.{attn}": pair,
                                     "update.train.lm_head": head}),
        ("update", "train backward", {"update.train.tokens": bwd_tok, f"update.train.{attn}": bwd_pair,
                                      "update.train.lm_head": head_bwd}),
        ("update", "checkpoint recompute", {"update.train.tokens": recompute, f"update.train.{attn}": pair}
         if settings.gradient_checkpointing else {}),
        ("update", "old-policy forward", {"update.old.tokens": lin + lora, f"update.old.{attn}": pair,
                                          "update.old.lm_head": head}),
        # With PEFT the reference is the base model with the adapter off; for full fine-tuning a
        # frozen copy of the policy: either way no adapter FLOPs.
        ("update", "reference forward", {"update.ref.tokens": lin, f"update.ref.{attn}": pair, "update.ref.lm_head": head}),
    ]
    if reward_model is not None:
        table.append(("reward", "reward-model forward", {
            "reward.tokens": _linear_fwd(reward_model), f"reward.{attn}": _attn_pair(reward_model),
            "reward.heads": _head_fwd(reward_model)}))
    return table


def pass_breakdown(work: dict, policy: ModelSpec, adapter: Adapter, settings: GRPOSettings,
                   reward_model: ModelSpec | None = None, engine: str = "trl",
                   attention: str = "causal") -> list[tuple[str, str, int]]:
    """FLOPs of each pass: [(phase, pass name, FLOPs)], in the order docs/accounting.md
    derives them."""
    _check_work(work)
    if reward_model is None and work.get("reward.tokens", 0):
        raise RaceError("work has reward-model tokens but no reward model spec was given",
                        "pass the reward model (--reward-model) or drop reward_lengths")
    rows = []
    for phase, name, coef in _coefficients(policy, adapter, settings, reward_model, engine, attention):
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
                             iterations=1, generation=generation)
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
    work = work_from_means(prompt_tokens, completion_tokens, settings, engine, reward_tokens)
    passes = pass_breakdown(work, policy, adapter, settings, reward_model, engine, attention)
    flops = dict.fromkeys(PHASES, 0)
    for phase, _, f in passes:
        flops[phase] += f
    return StepFlops(work=work, tokens=tokens_from_work(work), flops=flops, passes=passes)


# ---- other engines' formulas, for comparison -------------------------------------------------


def verl_update_flops(spec: ModelSpec, seq_lengths: Sequence[int]) -> int:
    """verl's estimate (verl/utils/flops_counter.py, _estimate_qwen2_flops) for one update
    pass over sequences of these lengths: 6 * N_dense * tokens + 6 * sum(L^2) * head_dim *
    heads * layers (verl 0.9.1; older releases used 12), with N_dense the projection weights plus 2 * vocab * hidden (embedding and
    LM head, tied or not) -- the same for LoRA as for full fine-tuning. Rollout not counted."""
    h = spec.hidden_size
    mlp = 3 * h * spec.intermediate_size
    attn_lin = h * (spec.q_dim + 2 * spec.kv_dim + spec.q_dim)
    dense = (mlp + attn_lin) * spec.num_layers + 2 * spec.vocab_size * h
    return 6 * dense * sum(seq_lengths) + 6 * sum(x * x for x in seq_lengths) * spec.head_dim \
        * spec.num_heads * spec.num_layers


def six_n_t(spec: ModelSpec, tokens: int) -> int:
    """The 6*N*T rule: 6 FLOPs per parameter per trained token, N = all parameters."""
    return 6 * spec.params_total * tokens


__all__ = [
    "ATTENTION", "PROJECTIONS", "PHASES", "TOKEN_KEYS", "WORK_KEYS", "METHOD", "VERSION", "Adapter", "GRPOSettings",
    "EngineProfile", "ENGINES", "engine", "get_engine", "work_from_lengths", "work_from_means", "add_work",
    "tokens_from_work", "coefficients", "pass_breakdown", "phase_flops", "StepFlops", "step_flops", "step_cost_bound",
    "verl_update_flops", "six_n_t",
]
