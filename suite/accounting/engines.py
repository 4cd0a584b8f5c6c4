"""Engine profiles: which passes an engine runs per GRPO step, and over which positions
(padding, prefix sharing, which log-prob passes, how the LM head and checkpointing behave).
Work is built for one profile (`suite.accounting.work`) and priced under the same one
(`suite.accounting.pricing`). Register a new profile with `@engine(name)`, or from another
package through the `race.engines` entry point group."""

from __future__ import annotations

from ..errors import RaceError
from ..registry import Registry
from .adapter import Adapter
from .settings import GRPOSettings


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


ENGINES: Registry[EngineProfile] = Registry("engine profile", group="race.engines")
"""Engine profiles by name; other packages add theirs through the `race.engines` entry points."""


def engine(name: str):
    """Register an EngineProfile subclass under `name` (an instance lands in ENGINES).

    Args: `name`, the profile's name (reports' accounting.engine_profile, `race flops --engine`).
    Returns the class decorator, which returns the class unchanged.
    """

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
    """TRL 1.16 GRPOTrainer with use_vllm=True (vllm_mode server or colocate) and TRL's default
    vllm_importance_sampling_correction=True: vLLM generates, TRL trains as in 'trl', and the
    old-policy log-prob forward runs every generation (the importance-sampling ratio needs it)."""

    description = ("TRL 1.16 GRPOTrainer with vLLM generation (server or colocate): vLLM's prefix caching (on by "
                   "default) shares one prompt prefill among the K completions of a prompt, each completion decodes "
                   "its own tokens and logits are computed only at sampled positions; training as 'trl', plus the "
                   "old-policy log-prob forward every generation (vllm_importance_sampling_correction, on by default)")
    rollout_padded = False
    prefill_per_completion = False
    hf_rollout = False

    def old_policy_pass(self, s: GRPOSettings) -> bool:
        # grpo_trainer._generate_and_score_completions: "When using vLLM, we always compute
        # old_per_token_logps for importance sampling" (use_vllm and vllm_importance_sampling_correction)
        return True


@engine("trl-vllm-no-is")
class TRLVLLMNoISProfile(TRLVLLMProfile):
    """'trl-vllm' with vllm_importance_sampling_correction=False: the old-policy forward runs only
    when generation is misaligned with optimizer steps, as in 'trl'."""

    description = ("TRL 1.16 GRPOTrainer with vLLM generation and vllm_importance_sampling_correction=False: as "
                   "'trl-vllm', but the old-policy log-prob forward runs only when gradient_accumulation_steps is not "
                   "a multiple of steps_per_generation x mu (as 'trl')")

    old_policy_pass = TRLProfile.old_policy_pass


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


@engine("nemo-rl")
class NemoRLProfile(EngineProfile):
    """NeMo-RL GRPO (Megatron policy with packed sequences, vLLM generation with prefix caching),
    as `race import mlperf` reads its MLPerf logs. grpo.py computes the previous-policy log-probs
    (prev_logprobs) every step before training."""

    description = ("NeMo-RL GRPO with the Megatron policy: packed sequences (no padding); vLLM generation with "
                   "prefix caching (one prompt prefill per group); log-prob passes project every position; the "
                   "previous-policy log-prob forward runs every step")
    prefill_per_completion = False
    lm_head_train = "all"

    def old_policy_pass(self, s: GRPOSettings) -> bool:
        return True


@engine("nemo-rl-on-policy")
class NemoRLOnPolicyProfile(NemoRLProfile):
    """NeMo-RL GRPO with loss_fn.force_on_policy_ratio: true (MLPerf Training 6.1's
    qwen35_397b_grpo): grpo.py skips the prev_logprobs forward, the ratio is taken as 1."""

    description = ("NeMo-RL GRPO as 'nemo-rl', with force_on_policy_ratio: the previous-policy log-prob forward is "
                   "skipped (it runs only when mu > 1)")

    def old_policy_pass(self, s: GRPOSettings) -> bool:
        return s.num_iterations > 1


def get_engine(name: str) -> EngineProfile:
    """The registered profile `name`, or RaceError listing the known ones."""
    try:
        return ENGINES[name]
    except (KeyError, TypeError):
        raise RaceError(f"unknown engine profile '{name}'", f"known profiles: {', '.join(sorted(ENGINES))}")


__all__ = ["EngineProfile", "ENGINES", "engine", "get_engine"]
