"""The workload the referee judges (`suite.accounting.referee`): a model, as its checkpoint's
config.json and as the suite's spec, and one GRPO generation batch with real lengths, laid out
the way an engine lays it out. Every engine counter (`suite.accounting.counters`) reads what
that engine's own code would receive from it: verl the per-row token counts, TRL the forwarded
tokens and their mean length, Megatron the padded row width, vLLM its requests.

Lengths are spread, not means: completion j has C·(1 − s + 2·s·u_j) tokens with u_j evenly
spaced over [0, 1] in a fixed shuffled order (mean C), and prompt g of the batch P·(0.75 +
0.5·g/(B−1)) tokens, so padded layouts really pad and packed rows really mix sequences.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property

from ..errors import RaceError
from .adapter import Adapter
from .modelspec import ModelSpec
from .settings import GRPOSettings

LAYOUTS = ("padded", "packed")
"""padded: one right/left-padded row per sequence (TRL; the exact count is the `trl` profile,
padding included); packed: no padding (verl's remove-padding; the `verl` profile), and with
pack_tokens > 0 several sequences share a row that a counter sees as one."""

PROFILE_OF = {"padded": "trl", "packed": "verl"}
"""The suite's engine profile that prices each layout exactly (docs/accounting.md)."""


@dataclass(frozen=True)
class Case:
    """A model and one GRPO generation batch (B prompts x K completions, mu updates)."""

    name: str
    """Label of the case (tables, messages)."""
    spec: ModelSpec
    """What the exact count prices (the text decoder)."""
    config: dict = field(hash=False, compare=False)
    """The checkpoint's config.json as an engine reads it (composite VLM configs included)."""
    lora_rank: int = 64
    """0: full fine-tuning."""
    group_size: int = 4
    prompts: int = 16
    prompt_tokens: int = 512
    completion_tokens: int = 1024
    mu: int = 1
    beta: float = 0.0
    layout: str = "packed"
    pack_tokens: int = 0
    """packed layout: sequences first-fit into rows of at most this many tokens, which the
    counters see as one sequence each (verl#6903's packing case); 0: one sequence per row."""
    gradient_checkpointing: bool = False
    spread: float = 0.5
    """Completion lengths spread over C·(1 ± spread)."""

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise RaceError(f"unknown layout '{self.layout}'", f"use one of: {', '.join(LAYOUTS)}")
        for k in ("group_size", "prompts", "prompt_tokens", "completion_tokens", "mu"):
            if getattr(self, k) < 1:
                raise RaceError(f"{k} must be >= 1, got {getattr(self, k)}")
        if self.lora_rank < 0:
            raise RaceError(f"lora rank must be >= 0, got {self.lora_rank}", "0 means full fine-tuning")
        if self.pack_tokens and self.layout != "packed":
            raise RaceError("pack_tokens applies to the packed layout only", "give --layout packed")
        if not 0 <= self.spread < 1:
            raise RaceError(f"spread must be in [0, 1), got {self.spread}")

    # ---- the batch ------------------------------------------------------------------------

    @property
    def n(self) -> int:
        """Completions in the batch."""
        return self.group_size * self.prompts

    @cached_property
    def prompt_lengths(self) -> tuple[int, ...]:
        """One per completion (K consecutive completions share a prompt)."""
        b, p = self.prompts, self.prompt_tokens
        per = [max(1, round(p * (0.75 + 0.5 * g / (b - 1)))) if b > 1 else p for g in range(b)]
        return tuple(x for x in per for _ in range(self.group_size))

    @cached_property
    def completion_lengths(self) -> tuple[int, ...]:
        n, c, s = self.n, self.completion_tokens, self.spread
        order = [(j * 7919) % n for j in range(n)] if n > 1 else [0]   # 7919 is prime: a fixed shuffle
        return tuple(max(1, round(c * (1 - s + 2 * s * u / max(1, n - 1)))) for u in order)

    @cached_property
    def seq_lengths(self) -> tuple[int, ...]:
        """Prompt + completion of each sequence: the tokens an update pass runs (no padding)."""
        return tuple(p + c for p, c in zip(self.prompt_lengths, self.completion_lengths))

    @cached_property
    def rows(self) -> tuple[int, ...]:
        """Valid tokens of each row the update runs: one row per sequence, or packed rows."""
        if not self.pack_tokens:
            return self.seq_lengths
        rows: list[int] = []
        for x in self.seq_lengths:   # first fit, in batch order
            for i, r in enumerate(rows):
                if r + x <= self.pack_tokens:
                    rows[i] += x
                    break
            else:
                rows.append(x)
        return tuple(rows)

    @property
    def row_width(self) -> int:
        """Padded width of every row (padded layout: longest prompt + longest completion, as
        TRL pads); the longest row otherwise."""
        if self.layout == "padded":
            return max(self.prompt_lengths) + max(self.completion_lengths)
        return max(self.rows)

    @property
    def trained_tokens(self) -> int:
        """Tokens one update pass trains (no padding)."""
        return sum(self.seq_lengths)

    # ---- what the suite prices --------------------------------------------------------------

    @property
    def profile(self) -> str:
        return PROFILE_OF[self.layout]

    @property
    def adapter(self) -> Adapter:
        return Adapter.from_rank(self.lora_rank)

    @property
    def settings(self) -> GRPOSettings:
        return GRPOSettings(group_size=self.group_size, prompts_per_step=self.prompts, num_iterations=self.mu,
                            beta=self.beta, max_completion_tokens=max(self.completion_lengths),
                            gradient_checkpointing=self.gradient_checkpointing)

    def describe(self) -> str:
        """One line: the setting."""
        what = f"LoRA r={self.lora_rank}" if self.lora_rank else "full fine-tuning"
        lay = self.layout + (f" into {self.pack_tokens}-token rows" if self.pack_tokens else "")
        return (f"{self.spec.name}: {what}; B={self.prompts} x K={self.group_size}, P={self.prompt_tokens}, "
                f"C={self.completion_tokens} (spread ±{self.spread:.0%}), mu={self.mu}, beta={self.beta:g}, {lay} "
                f"(exact: `{self.profile}` profile), gradient checkpointing {'on' if self.gradient_checkpointing else 'off'}")

    @property
    def config_json(self) -> str:
        """The config, canonical (a cache key)."""
        return json.dumps(self.config, sort_keys=True)


def checkpoint_config(spec: ModelSpec) -> dict:
    """The config.json an engine reads for a spec known only as a spec (a report's): the spec's
    transformers config; Qwen3.5's text types inside the composite checkpoint config that
    verl's formula reads (`text_config`)."""
    cfg = spec.to_hf_config()
    outer = {"qwen3_5_text": "qwen3_5", "qwen3_5_moe_text": "qwen3_5_moe"}.get(spec.model_type)
    return {"model_type": outer, "text_config": cfg} if outer else cfg


__all__ = ["Case", "LAYOUTS", "PROFILE_OF", "checkpoint_config"]
