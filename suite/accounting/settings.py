"""The GRPO settings that move FLOPs (names follow TRL's GRPOConfig), checked once."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..errors import RaceError

MAX_TOKENS = 10_000_000
"""Longest sequence accepted: anything longer is a unit mistake, not a context window."""

MAX_COMPLETIONS = 1 << 20
"""Most completions one generation batch may hold (K x B): 128x the largest published GRPO batch;
the work of a step is built per completion, so this bounds what any declared setting can cost."""


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
        if self.group_size * self.prompts_per_step > MAX_COMPLETIONS:
            raise RaceError(f"group_size x prompts_per_step = {self.group_size:,} x {self.prompts_per_step:,} completions "
                            f"per generation batch is over the {MAX_COMPLETIONS:,} any real run holds",
                            "check K (group_size) and prompts_per_step")

    def to_report(self) -> dict:
        """The report's `grpo` section (required keys)."""
        return {"group_size": self.group_size, "prompts_per_step": self.prompts_per_step,
                "num_iterations": self.num_iterations, "beta": self.beta,
                "max_completion_tokens": self.max_completion_tokens,
                "gradient_checkpointing": self.gradient_checkpointing, **self.schedule()}

    def schedule(self) -> dict:
        """The TRL schedule, where it is not the plain one (the report's optional grpo keys):
        steps_per_generation when set, gradient_accumulation_steps when set or not 1,
        pad_to_multiple_of when set (report 1.4)."""
        out = {}
        if self.steps_per_generation is not None or self.gradient_accumulation_steps != 1:
            out["gradient_accumulation_steps"] = self.gradient_accumulation_steps
        if self.steps_per_generation is not None:
            out["steps_per_generation"] = self.steps_per_generation
        if self.pad_to_multiple_of is not None:
            out["pad_to_multiple_of"] = self.pad_to_multiple_of
        return out

    def to_dict(self) -> dict:
        """Every field, JSON-able."""
        return asdict(self)


__all__ = ["GRPOSettings", "MAX_TOKENS"]
