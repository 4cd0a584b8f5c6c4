"""Roofline floors: the fewest seconds each phase of GRPO can take on given accelerators.

A phase cannot run faster than its FLOPs at the accelerators' dense peak (compute bound), and
decoding cannot run faster than the bytes it must read at their memory bandwidth (memory bound):
every decode iteration reads each replica's weights once, and every generated token reads its
context's keys and values. The floor of a phase is the larger bound; what a run achieves is a
fraction of it (the roofline efficiency, fitted in suite.analysis.cost).

- rollout: max(FLOPs / (G x peak), iterations x W / (g x BW) + KV / (G x BW)), G accelerators,
  g of them per replica (the fewest, a power of two, holding the bf16 weights in half their
  memory), W the weights' bytes (2 per parameter, every expert: a GRPO batch routes tokens to
  all of them), iterations = decode steps in sequence (steps x mean completion tokens: all a
  step's completions decode together, the shortest possible schedule), KV = 2 (key and value)
  x 2 bytes x the cached width of every full-attention layer, per query-key pair;
- update and reward: FLOPs / (G x peak) (training and scoring passes see whole sequences).

The validator's bound (`decode_floor_seconds`) is looser still: 1 byte per active parameter
(fp8 weights, the fewest experts) over all G accelerators' bandwidth, no KV, so that no real run
can fall under it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .work import PHASES

BF16 = 2
"""Bytes per weight and per cached key/value element in bf16."""


@dataclass(frozen=True)
class Floor:
    """One phase's fewest seconds and what binds it."""

    seconds: float
    bound: str
    """"compute" or "memory"."""
    compute_seconds: float
    memory_seconds: float = 0.0


def kv_bytes_per_pair(spec) -> int:
    """Bytes of keys and values one query reads per key position, summed over the full-attention
    layers (MLA: the compressed latent and the rotary key; sliding and linear layers left out)."""
    layers = sum(1 for t in spec.layer_types if t == "full_attention") if spec.layer_types else spec.num_layers
    if spec.kv_lora_rank:
        width = spec.kv_lora_rank + spec.qk_rope_head_dim
    else:
        width = 2 * spec.num_kv_heads * spec.head_dim
    return layers * width * BF16


def replica_gpus(spec, acc, gpus: int) -> int:
    """Accelerators one inference replica spans: the fewest (a power of two, at most `gpus`)
    whose memory holds the bf16 weights at half full, the rest left for the KV cache."""
    need = BF16 * spec.params_total / (0.5 * acc.memory)
    g = 1
    while g < need and g < gpus:
        g *= 2
    return min(g, gpus)


def phase_floors(flops: Mapping[str, float], *, decode_iterations: float, kv_pairs: float, spec, acc,
                 gpus: int) -> dict[str, Floor]:
    """The floor of every phase (PHASES) on `gpus` accelerators `acc` (suite.accounting.hardware)."""
    peak = gpus * acc.peak_flops
    out = {ph: Floor(flops.get(ph, 0) / peak, "compute", flops.get(ph, 0) / peak) for ph in PHASES}
    g = replica_gpus(spec, acc, gpus)
    mem = decode_iterations * BF16 * spec.params_total / (g * acc.bandwidth) \
        + kv_pairs * kv_bytes_per_pair(spec) / (gpus * acc.bandwidth)
    comp = out["rollout"].compute_seconds
    out["rollout"] = Floor(max(comp, mem), "memory" if mem > comp else "compute", comp, mem)
    return out


def decode_floor_seconds(decode_iterations: float, spec, acc, gpus: int) -> float:
    """Seconds no rollout can beat on any layout: 1 byte per active parameter read once per decode
    iteration, over every accelerator's bandwidth at once."""
    return decode_iterations * spec.params_active / (gpus * acc.bandwidth)


__all__ = ["Floor", "kv_bytes_per_pair", "replica_gpus", "phase_floors", "decode_floor_seconds"]
