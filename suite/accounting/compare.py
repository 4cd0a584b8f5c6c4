"""Other engines' formulas, re-implemented for the light core (no torch): verl 0.9.1's MFU
estimator and the 6*N*T rule (docs/accounting.md sets them beside ours). Where verl is
installed, `suite.accounting.counters` runs verl's own code instead and checks it against
this (tests/test_compare.py): this copy is the fallback, broken into the parts that the
referee (`suite.accounting.referee`) names."""

from __future__ import annotations

from typing import Sequence

from .modelspec import ModelSpec


VERL_ESTIMATORS = {"qwen2": "qwen2", "llama": "qwen2", "qwen3": "qwen2", "mistral": "qwen2",
                   "qwen3_moe": "qwen2_moe", "gemma3_text": "gemma3", "gpt_oss": "gpt_oss",
                   "deepseek_v3": "deepseek_v3", "qwen3_5_text": "qwen3_5", "qwen3_5": "qwen3_5",
                   "qwen3_5_moe_text": "qwen3_5", "qwen3_5_moe": "qwen3_5", "qwen3_vl": "qwen3_vl"}
"""Model types verl 0.9.1's FlopsCounter (verl/utils/flops_counter.py, ESTIMATE_FUNC)
estimates, and with which of its formulas (_estimate_<name>_flops); for the others (mixtral,
gemma2, olmo2, olmo3, phi3, smollm3, qwen3_next, and a composite checkpoint type such as
gemma3) verl logs MFU 0. Our text types of Qwen3.5 stand for the checkpoint verl reads
(qwen3_5, qwen3_5_moe, whose text_config its formula reads); qwen3_vl prices the text tower of
a Qwen3-VL checkpoint (no images)."""

VERL_PARTS = ("matmuls", "embedding", "LM head", "attention", "linear-attention scan")
"""The parts of verl's estimate, as the referee names them."""


def verl_update_parts(spec: ModelSpec, seq_lengths: Sequence[int], model_type: str | None = None) -> dict | None:
    """verl 0.9.1's estimate for one update pass over sequences of these lengths, by part
    (VERL_PARTS), or None where verl has no formula for the model type (`model_type`: the type of
    the checkpoint verl reads, default the spec's): 6 * N * tokens, N the matmul weights a
    token passes (MoE: top-k experts; router) plus V * h for the embedding (a lookup, priced
    as a matmul) and V * h for the LM head (tied or not), plus attention 6 * sum(L^2) *
    head_dim * heads per full layer (sliding layers: L * min(L, w); DeepSeek MLA: 3 * sum(L^2)
    * (qk + v head dims) * heads; Qwen3.5 and Qwen3.5-MoE (verl's qwen3_5 formula, which reads
    the MoE fields when the config has them): + 15 * dk * dv * value heads per token and linear
    layer; Qwen3-VL: head_dim = hidden_size // heads whatever the config says) -- the same for
    LoRA as for full fine-tuning. Rollout not counted."""
    kind = VERL_ESTIMATORS.get(model_type or spec.model_type)
    if kind is None:
        return None
    h, nl = spec.hidden_size, spec.num_layers
    tokens, sq = sum(seq_lengths), sum(x * x for x in seq_lengths)
    vh = 6 * spec.vocab_size * h * tokens
    out = dict.fromkeys(VERL_PARTS, 0)
    out["embedding"] = out["LM head"] = vh
    if kind == "deepseek_v3":
        nope_rope, v, rank = spec.head_dim, spec.v_head_dim or spec.head_dim, spec.kv_lora_rank
        attn = (h * spec.q_lora_rank + spec.num_heads * nope_rope * spec.q_lora_rank) if spec.q_lora_rank \
            else h * spec.num_heads * nope_rope
        attn += h * (rank + spec.qk_rope_head_dim) + spec.num_heads * (nope_rope - spec.qk_rope_head_dim + v) * rank
        attn += spec.num_heads * v * h
        dense_k = len(spec.dense_mlp_layers)
        n_shared = spec.shared_expert_intermediate_size // spec.moe_intermediate_size
        moe = h * spec.num_experts + h * spec.moe_intermediate_size * (spec.experts_per_token + n_shared) * 3
        out["matmuls"] = 6 * ((moe + attn) * (nl - dense_k) + (3 * h * spec.intermediate_size + attn) * dense_k) * tokens
        out["attention"] = 3 * sq * nl * (nope_rope + v) * spec.num_heads
        return out
    if kind == "qwen3_5":
        full = sum(t == "full_attention" for t in spec.layer_types) if spec.layer_types else nl
        lin = nl - full
        q, kv = spec.q_dim, spec.kv_dim
        lk = spec.linear_num_key_heads * spec.linear_key_head_dim
        lv = spec.linear_num_value_heads * spec.linear_value_head_dim
        attn = h * (2 * q + 2 * kv + q) * full
        attn += (h * (2 * lk + 3 * lv + 2 * spec.linear_num_value_heads) + spec.linear_conv_kernel * (2 * lk + lv)) * lin
        if spec.is_moe:  # router, top-k experts, shared expert and its gate, in every layer
            mlp = (h * spec.num_experts + 3 * h * spec.moe_intermediate_size * spec.experts_per_token
                   + 3 * h * spec.shared_expert_intermediate_size + h) * nl
        else:
            mlp = 3 * h * spec.intermediate_size * nl
        out["matmuls"] = 6 * (mlp + attn) * tokens
        out["attention"] = 6 * sq * spec.head_dim * spec.num_heads * full
        out["linear-attention scan"] = (15 * spec.linear_key_head_dim * spec.linear_value_head_dim
                                        * spec.linear_num_value_heads * tokens * lin)
        return out
    # Qwen3-VL's text formula derives head_dim from hidden_size (verl#6903, defect 1)
    hd = h // spec.num_heads if kind == "qwen3_vl" else spec.head_dim
    attn_lin = h * (2 * spec.num_heads * hd + 2 * spec.num_kv_heads * hd)
    if kind in ("qwen2_moe", "gpt_oss"):
        mlp = 3 * h * spec.moe_intermediate_size * spec.experts_per_token + h * spec.num_experts
    else:  # qwen2, qwen3_vl, gemma3
        mlp = 3 * h * spec.intermediate_size
    out["matmuls"] = 6 * (mlp + attn_lin) * nl * tokens
    if kind in ("gemma3", "gpt_oss") and spec.layer_types:
        w = spec.sliding_window
        sq = sum(x * (min(x, w) if t == "sliding_attention" and w else x)
                 for t in spec.layer_types for x in seq_lengths)
    else:
        sq *= nl
    out["attention"] = 6 * sq * hd * spec.num_heads
    return out


def verl_update_flops(spec: ModelSpec, seq_lengths: Sequence[int], model_type: str | None = None) -> int | None:
    """verl 0.9.1's estimate for one update pass over sequences of these lengths: the sum of
    `verl_update_parts` (None where verl has no formula for the model type)."""
    parts = verl_update_parts(spec, seq_lengths, model_type)
    return None if parts is None else sum(parts.values())


def six_n_t(spec: ModelSpec, tokens: int) -> int:
    """The 6*N*T rule: 6 FLOPs per parameter per trained token, N = all parameters."""
    return 6 * spec.params_total * tokens


__all__ = ["VERL_ESTIMATORS", "VERL_PARTS", "verl_update_parts", "verl_update_flops", "six_n_t"]
