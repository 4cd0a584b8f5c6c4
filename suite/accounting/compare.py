"""Other engines' formulas, for comparison: verl 0.9.1's MFU estimator and the 6*N*T rule
(docs/accounting.md sets them beside ours)."""

from __future__ import annotations

from typing import Sequence

from .modelspec import ModelSpec


VERL_ESTIMATORS = {"qwen2": "qwen2", "llama": "qwen2", "qwen3": "qwen2", "mistral": "qwen2",
                   "qwen3_moe": "qwen2_moe", "gemma3_text": "gemma3", "gpt_oss": "gpt_oss",
                   "deepseek_v3": "deepseek_v3", "qwen3_5_text": "qwen3_5",
                   "qwen3_5_moe_text": "qwen3_5"}
"""Our model types verl 0.9.1's FlopsCounter (verl/utils/flops_counter.py, ESTIMATE_FUNC)
estimates, and with which of its formulas (_estimate_<name>_flops); for the others (mixtral,
gemma2, olmo2, olmo3, phi3, smollm3, qwen3_next) verl logs MFU 0."""


def verl_update_flops(spec: ModelSpec, seq_lengths: Sequence[int]) -> int | None:
    """verl 0.9.1's estimate for one update pass over sequences of these lengths (None where
    verl has no formula for the model type): 6 * N * tokens, N the matmul weights a token passes
    (MoE: top-k experts; router) plus 2 * vocab * hidden (embedding and LM head, tied or not),
    plus attention 6 * sum(L^2) * head_dim * heads per full layer (sliding layers: L * min(L, w);
    DeepSeek MLA: 3 * sum(L^2) * (qk + v head dims) * heads; Qwen3.5 and Qwen3.5-MoE (verl's
    qwen3_5 formula, which reads the MoE fields when the config has them): + 15 * dk * dv * value
    heads per token and linear layer) -- the same for LoRA as for full fine-tuning. Rollout not counted."""
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
        if spec.is_moe:  # router, top-k experts, shared expert and its gate, in every layer
            mlp = (h * spec.num_experts + 3 * h * spec.moe_intermediate_size * spec.experts_per_token
                   + 3 * h * spec.shared_expert_intermediate_size + h) * nl
        else:
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


__all__ = ["VERL_ESTIMATORS", "verl_update_flops", "six_n_t"]
