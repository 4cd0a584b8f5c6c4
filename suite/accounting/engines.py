"""Engine profiles: which passes an engine runs per GRPO step, and over which positions
(padding, prefix sharing, which log-prob passes, how the LM head and checkpointing behave).
Work is built for one profile (`suite.accounting.work`) and priced under the same one
(`suite.accounting.pricing`).

Profiles are data: each engine is one file, tasks/engines/NAME.yaml (schemas/engine-v1.schema.json,
loaded by `suite.accounting.enginefile`), whose `profiles` become EngineProfile instances here.
Other packages add engine files (`engine_file(path)`) or, as before, Python profiles
(`@engine(name)` on an EngineProfile subclass) through the `race.engines` entry point group."""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import RaceError
from ..registry import Registry
from .adapter import Adapter
from .enginefile import DATA_FIELDS, ENGINE_FILES, profile_fields, register_file
from .settings import GRPOSettings

OLD_POLICY = ("always", "mu_gt_1", "misaligned", "never")
"""When the old-policy log-prob forward runs: every generation; when mu > 1; when TRL's schedule is
misaligned (gradient_accumulation_steps % (steps_per_generation x mu) != 0); never (the loss takes
the rollout's log-probs, or those of the first training forward)."""
REFERENCE = ("beta", "never", "always")
"""When the reference log-prob forward runs: iff beta != 0 (KL in the loss or the reward); never; always."""
LAYER0 = ("always", "full_or_checkpointing")
"""Whether decoder layer 0's input requires grad: always; for full fine-tuning or with checkpointing."""


class EngineProfile:
    """Which passes an engine runs per GRPO step, and over which positions. Built from an engine
    file's profile (`from_data`), or subclassed and registered with @engine(name) (a plugin's
    Python profile: override the attributes and methods that differ)."""

    name: str = "?"
    description: str = ""
    engine: str | None = None
    """The engine whose file owns the profile (WORK-008); None for a Python profile (its name says)."""
    versions: str | None = None
    """The engine versions (PEP 440 range) the profile's facts hold for, where its file says."""
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
    old_policy: str = "mu_gt_1"
    """When the no-grad old-policy log-prob forward runs (one of OLD_POLICY)."""
    reference: str = "beta"
    """When the reference model's log-prob forward runs (one of REFERENCE)."""
    layer0_grad: str = "full_or_checkpointing"
    """Whether layer 0's input requires grad (one of LAYER0; the file's `layer0_input_grad`)."""
    critic: bool = False
    """A PPO critic runs (values forward, critic update): work the suite does not price."""
    any_engine: bool = False
    """Any engine may declare the profile (generic: engines without profiles of their own, and
    estimates); an engine's own profiles are declared by that engine only (WORK-008)."""

    @classmethod
    def from_data(cls, name: str, fields: Mapping[str, Any], *, engine: str | None = None) -> "EngineProfile":
        """A profile from an engine file's (already resolved) profile fields."""
        prof = cls()
        prof.name, prof.engine = name, engine
        prof.description = str(fields.get("description", ""))
        prof.versions = fields.get("versions")
        for key in DATA_FIELDS:
            if key in fields:
                setattr(prof, "layer0_grad" if key == "layer0_input_grad" else key, fields[key])
        return prof

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
        if self.old_policy in ("always", "never"):
            return self.old_policy == "always"
        if self.old_policy == "misaligned":
            # TRL grpo_trainer._generate_and_score_completions: generation misaligned with optimizer steps
            spg = s.steps_per_generation or s.gradient_accumulation_steps
            return s.gradient_accumulation_steps % (spg * s.num_iterations) != 0
        return s.num_iterations > 1

    def reference_pass(self, s: GRPOSettings) -> bool:
        """Whether the reference model's log-prob forward runs once per generation."""
        return {"always": True, "never": False}.get(self.reference, s.beta != 0)

    def layer0_input_grad(self, adapter: Adapter, s: GRPOSettings) -> bool:
        """Whether the input of decoder layer 0 requires grad (adds its activation gradients).
        Full fine-tuning: yes (embeddings train). LoRA: PEFT + gradient checkpointing calls
        enable_input_require_grads, so yes exactly when checkpointing; 'always' where the engine
        calls it for every LoRA model (verl's FSDP workers)."""
        return self.layer0_grad == "always" or adapter.kind == "full" or s.gradient_checkpointing

    def describe(self) -> dict:
        """The profile's facts, for docs and reports."""
        return {"name": self.name, "description": self.description, "padded": self.padded,
                "prefill_per_completion": self.prefill_per_completion, "rollout_padded": self.rollout_is_padded,
                "lm_head_train": self.lm_head_train, "lm_head_recompute": self.lm_head_recompute,
                "checkpoint_early_stop": self.checkpoint_early_stop, "hf_rollout": self.hf_rollout,
                "peft_training": self.peft_training}

    def passes(self) -> dict:
        """Which log-prob passes run and when, as the engine file says them (old_policy,
        reference, layer0_input_grad, critic)."""
        return {"old_policy": self.old_policy, "reference": self.reference, "layer0_input_grad": self.layer0_grad,
                "critic": self.critic}


_FROM_FILES: set[str] = set()     # the profiles built from engine files (the rest: Python plugins')


def _add_file_profiles() -> None:
    """Build the profiles of every registered engine file not built yet into ENGINES."""
    for rec in list(ENGINE_FILES.values()):     # loads the shipped files, then the plugins' (race.engines)
        for p in rec.profiles:
            if p in _FROM_FILES:
                continue
            if p in ENGINES._items:
                raise RaceError(f"{rec.where}: profile {p!r} is already a registered Python profile",
                                "give the profile a name of its own")
            ENGINES.add(p, EngineProfile.from_data(p, profile_fields(p), engine=rec.name))
            _FROM_FILES.add(p)


def _load() -> None:
    _add_file_profiles()


ENGINES: Registry[EngineProfile] = Registry("engine profile", loader=_load, group="race.engines")
"""Engine profiles by name: the engine files' (tasks/engines/*.yaml), then plugins'."""


def engine(name: str):
    """Register an EngineProfile subclass under `name` (an instance lands in ENGINES).

    Args: `name`, the profile's name (reports' accounting.engine_profile, `race flops --engine-profile`).
    Returns the class decorator, which returns the class unchanged.
    """

    def register(cls):
        inst = cls()
        inst.name = name
        ENGINES.add(name, inst)
        return cls

    return register


def get_engine(name: str) -> EngineProfile:
    """The registered profile `name`, or RaceError listing the known ones."""
    try:
        return ENGINES[name]
    except (KeyError, TypeError):
        raise RaceError(f"unknown engine profile '{name}'", f"known profiles: {', '.join(sorted(ENGINES))}")


def engine_file(path) -> Any:
    """Register an engine file (schemas/engine-v1.schema.json): its record, its profiles and its logs.
    A plugin calls it from the module its `race.engines` entry point names.

    Args: `path`, the engine file (a YAML file shipped beside the plugin's module). Returns the
    EngineFile; RaceError naming the file for a schema problem or a name another engine has.
    """
    rec = register_file(path)
    _add_file_profiles()
    return rec


__all__ = ["EngineProfile", "ENGINES", "engine", "get_engine", "engine_file"]
