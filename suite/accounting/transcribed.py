"""The engines' FLOP counters that do not install here, transcribed from their source at a cited
commit and marked "from code, not run" (Megatron-LM, prime-rl, NeMo-RL, slime, vLLM's MFU
metrics), and the 6·N·T rule. They register into suite.accounting.counters.COUNTERS, which
imports this module at its first lookup; the conventions of Figure and the notes are there."""

from __future__ import annotations

from fractions import Fraction

from .counters import (BWD, DECODE, FROM_CODE, FWD, PREFILL, RULE, Figure, _hf_config, _mm_notes, _passes_run,
                       _runs, _scaled, counter)
from .refcase import Case


# ---- Megatron-LM (from code) -----------------------------------------------------------------

MEGATRON_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"


@counter("megatron-lm", "Megatron-LM num_floating_point_operations", FROM_CODE,
         f"NVIDIA/Megatron-LM@{MEGATRON_COMMIT[:10]} (2026-08-22) megatron/training/training.py "
         "num_floating_point_operations, transformer_flops (not in the megatron-core wheel; megatron.training needs "
         "CUDA): args from the HF config (kv_channels = head_dim, swiglu, moe_layer_freq from the dense layers, "
         "gated delta net every full_attention_interval, vocab padded to 128); padded rows as BSHD, packed as THD "
         "(real cu_seqlens)")
def _megatron(case: Case) -> Figure:
    s = case.spec
    h, nl, n, g, kvc = s.hidden_size, s.num_layers, s.num_heads, s.num_kv_heads, s.head_dim
    vocab = -(-s.vocab_size // 128) * 128
    if case.layout == "padded":   # BSHD: batch x seq_length, batch x seq_length^2
        tokens, sq = len(case.rows) * case.row_width, len(case.rows) * case.row_width ** 2
    else:                         # THD: sum(L_i), sum(L_i^2) of the real sub-sequences
        tokens, sq = sum(case.seq_lengths), sum(x * x for x in case.seq_lengths)
    if s.family.mla:
        nope, rope, vd = s.head_dim - s.qk_rope_head_dim, s.qk_rope_head_dim, s.v_head_dim or s.head_dim
        q_term = (h * n * (nope + rope) if not s.q_lora_rank
                  else s.q_lora_rank * (h + n * (nope + rope) + 1))
        attn_lin = 6 * (q_term + s.kv_lora_rank * (h + n * (nope + vd) + 1) + h * rope + n * vd * h)
        core = 6 * (Fraction(n * (nope + rope), 2) + Fraction(n * vd, 2))
    else:
        qp, kp = kvc * n, kvc * g
        gate = qp if s.family.linear else 0          # Qwen3-Next / Qwen3.5: attention_output_gate
        attn_lin = 6 * (h * (qp + 2 * kp + gate) + qp * h)
        core = Fraction(6 * qp, 2) * 2
    lin_layers, lin_proj, lin_scan = 0, 0, 0
    if s.family.linear:                             # experimental_attention_variant = gated_delta_net
        lin_layers = sum(t == "linear_attention" for t in s.layer_types)
        qk = s.linear_key_head_dim * s.linear_num_key_heads
        vd_ = s.linear_value_head_dim * s.linear_num_value_heads
        lin_proj = 6 * (h * (2 * qk + 2 * vd_ + 2 * s.linear_num_value_heads) + s.linear_conv_kernel * (2 * qk + vd_)
                        + h * vd_)
        lin_scan = 6 * s.linear_num_value_heads * s.linear_value_head_dim ** 2 * 4
    std_layers = nl - lin_layers
    if s.is_moe:
        moe_layers = nl - len(s.dense_mlp_layers)
        mlp = 6 * h * (s.intermediate_size * 3 * (nl - moe_layers)
                       + s.moe_intermediate_size * s.experts_per_token * 3 * moe_layers
                       + s.shared_expert_intermediate_size * 3 * moe_layers)
    else:
        mlp = 6 * h * s.intermediate_size * 3 * nl
    parts = {"matmuls": tokens * (mlp + attn_lin * std_layers + lin_proj * lin_layers),
             "LM head": tokens * 6 * h * vocab, "attention": int(sq * core * std_layers),
             "linear-attention scan": tokens * lin_scan * lin_layers}
    notes = {**_mm_notes(case, ("; BSHD: padded rows" if case.layout == "padded" else "")
                         + ("; MoE: no router" if s.is_moe else "")
                         + ("; MLA's q and kv norms priced as a column" if s.family.mla else "")),
             "LM head": "LM head at every position with its weight gradient, vocab padded to 128",
             "attention": "causal ΣL² per layer" + (" of the padded width (BSHD)" if case.layout == "padded"
                                                    else " of the real sequences (THD)")
                          + ("; sliding windows ignored" if s.sliding_window else ""),
             "linear-attention scan": "4·n_v·d_v² per token and linear layer (its gated-delta-rule estimate)"}
    return Figure(passes=_passes_run(case, _runs(case), {k: int(v) for k, v in parts.items() if v}, None),
                  notes=notes)


# ---- prime-rl (from code) -------------------------------------------------------------------

PRIME_COMMIT = "559b44772e471d1538537b8805cc77f3824a5e64"


def _prime_active_mm(cfg) -> int:
    """PerfCounter.get_active_mm_params, transcribed (prime-rl src/prime_rl/trainer/perf.py)."""
    if hasattr(cfg, "text_config"):
        cfg = cfg.text_config
    v, h = cfg.vocab_size, cfg.hidden_size
    inter = getattr(cfg, "intermediate_size", getattr(cfg, "moe_intermediate_size", 0))
    hd = getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
    nh, nl = cfg.num_attention_heads, cfg.num_hidden_layers
    if hasattr(cfg, "q_lora_rank") and hasattr(cfg, "kv_lora_rank"):
        qp = nl * (h * cfg.q_lora_rank + cfg.q_lora_rank * nh * cfg.qk_head_dim)
        kvp = nl * (h * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) + cfg.kv_lora_rank * nh * (cfg.qk_nope_head_dim
                                                                                            + cfg.v_head_dim))
        op = nl * (nh * cfg.v_head_dim * h)
    else:
        qp = nl * h * nh * hd
        kvp = 2 * nl * h * cfg.num_key_value_heads * hd
        op = nl * h * nh * hd
    if hasattr(cfg, "first_k_dense_replace"):
        dense, sparse = cfg.first_k_dense_replace, nl - cfg.first_k_dense_replace
    elif hasattr(cfg, "num_experts_per_tok"):
        dense, sparse = 0, nl
    else:
        dense, sparse = nl, 0
    dense_mlp = dense * 3 * inter * h
    moe_inter = getattr(cfg, "moe_intermediate_size", None) or inter
    sp = 0
    if getattr(cfg, "num_shared_experts", None):
        sp += sparse * cfg.num_shared_experts * 3 * moe_inter * h
    if getattr(cfg, "num_experts_per_tok", None):
        sp += sparse * cfg.num_experts_per_tok * 3 * moe_inter * h
    if hasattr(cfg, "n_routed_experts"):
        sp += sparse * cfg.n_routed_experts * h
    elif getattr(cfg, "num_experts", None) is not None:
        sp += sparse * cfg.num_experts * h
    else:
        sp = 0
    return qp + kvp + op + dense_mlp + sp, v * h


@counter("prime-rl", "prime-rl PerfCounter", FROM_CODE,
         f"PrimeIntellect-ai/prime-rl@{PRIME_COMMIT[:10]} (main, 2026-08-21) src/prime_rl/trainer/perf.py "
         "PerfCounter._get_num_flop_per_token(config, seq_len) x tokens: LoRA 4·N_active + 6·N_lora, full 6·N_active, "
         "attention 12·l·h·(hidden // h)·seq_len per token (seq_len: the packing length, else the longest sequence)")
def _prime(case: Case) -> Figure:
    cfg = _hf_config(case.config_json)
    body, head = _prime_active_mm(cfg)
    tc = cfg.get_text_config()
    lora = case.adapter.trainable_params(case.spec) if case.lora_rank else 0
    mult = 4 if case.lora_rank else 6
    tokens, seq_len = sum(case.seq_lengths), case.pack_tokens or case.row_width
    q = tc.hidden_size // tc.num_attention_heads
    att = 12 * tc.num_hidden_layers * tc.num_attention_heads * q * seq_len * tokens
    parts = {"matmuls": (mult * body + 6 * lora) * tokens, "LM head": mult * head * tokens, "attention": att}
    # its comments: forward 2 per weight (and per LoRA parameter); the backward the rest; attention 2 of 6 matmuls
    fwd = {"matmuls": (2 * body + 2 * lora) * tokens, "LM head": 2 * head * tokens, "attention": att // 3}
    derived = q != case.spec.head_dim
    extra = (("; shared experts not found (it reads num_shared_experts)" if case.spec.shared_expert_intermediate_size
              and not getattr(tc, "num_shared_experts", None) else "")
             + ("; linear-attention layers priced as GQA attention" if case.spec.family.linear else "")
             + ("; every expert's adapter counted per token" if case.lora_rank and case.spec.is_moe else ""))
    notes = {"matmuls": ("4 x forward for frozen weights, 6 per LoRA parameter" if case.lora_rank else "6 per weight")
                        + extra,
             f"{FWD}:matmuls": "forward: 2 per weight and LoRA parameter" + extra,
             f"{BWD}:matmuls": ("backward: 2 per frozen weight (input gradient only), 4 per LoRA parameter"
                                if case.lora_rank else "backward: 4 per weight") + extra,
             "LM head": "LM head at every position (frozen: 4x, else 6x)",
             "attention": f"full square: every token attends seq_len = {seq_len} keys, every layer"
                          + ("; sliding windows ignored" if case.spec.sliding_window else "")
                          + (f"; head_dim from hidden_size // heads ({q}, the config says {case.spec.head_dim})"
                             if derived else "")}
    return Figure(passes=_passes_run(case, _runs(case), parts, None, fwd), notes=notes)


# ---- NeMo-RL (from code) ---------------------------------------------------------------------

NEMO_COMMIT = "7ea279abfbeb698b092856d0dab61e7cf39bc909"


@counter("nemo-rl", "NeMo-RL FLOPTracker", FROM_CODE,
         f"NVIDIA-NeMo/RL@{NEMO_COMMIT[:10]} (2026-08-22) nemo_rl/utils/flops_tracker.py (config dispatch by class; "
         "track_batch: one sequence at a time) and nemo_rl/utils/flops_formulas.py (qwen2, qwen3, llama, deepseekv3)")
def _nemo(case: Case) -> Figure:
    from transformers import LlamaConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig

    cfg = _hf_config(case.config_json)
    if isinstance(cfg, Qwen2Config):
        kind = "qwen2"
    elif isinstance(cfg, (Qwen3Config, Qwen3MoeConfig)):
        kind = "qwen3"
    elif isinstance(cfg, LlamaConfig):
        kind = "llama"
    elif cfg.__class__.model_type == "deepseek_v3":
        kind = "deepseekv3"
    else:
        msg = f"ValueError: Unsupported config type: {type(cfg)}"
        return Figure(error=msg, notes={"*": f"raises {msg}"})
    h, nl, v = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    parts = dict.fromkeys(("matmuls", "attention", "LM head"), Fraction(0))
    for sl in case.seq_lengths:   # track(n_samples=1, padded_seq_len=L) per sequence
        parts["LM head"] += 6 * sl * h * v
        if kind == "qwen2":       # QKV as three h x h gemms, causal attention over hidden_size
            parts["matmuls"] += 6 * nl * sl * h * h * 4 + 6 * nl * sl * h * 3 * cfg.intermediate_size
            parts["attention"] += 6 * nl * sl * sl * h
        elif kind == "qwen3":     # head_dim-aware since NVIDIA-NeMo/RL#2736; MLP: intermediate_size x top-1
            hd = getattr(cfg, "head_dim", None) or h // cfg.num_attention_heads
            qp, kvp = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
            parts["matmuls"] += 6 * nl * sl * (2 * qp * h + 2 * kvp * h) + 6 * nl * sl * h * 3 * cfg.intermediate_size
            parts["attention"] += 6 * nl * sl * sl * qp
        elif kind == "llama":
            parts["matmuls"] += sl * nl * h * h * (12 + Fraction(12 * cfg.num_key_value_heads, cfg.num_attention_heads)
                                                   + Fraction(18 * cfg.intermediate_size, h))
            parts["attention"] += 6 * nl * sl * sl * h
        else:                     # deepseekv3 with moe_layer_freq=1, shared = moe_intermediate_size, mtp 0
            n, qk, rope, vd = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
            mla = (h * cfg.q_lora_rank + cfg.q_lora_rank * (qk + rope) * n if cfg.q_lora_rank is not None
                   else h * (qk + rope) * n)
            mla += h * rope + h * cfg.kv_lora_rank + cfg.kv_lora_rank * (qk + vd) * n + vd * n * h
            ffn = nl * (h * cfg.moe_intermediate_size * 3 * (1 + cfg.num_experts_per_tok))
            parts["matmuls"] += 6 * (mla * nl + ffn) * sl
            parts["attention"] += 6 * (Fraction((qk + rope) * n, 2) + Fraction(vd * n, 2)) * sl * sl * nl
    extra = {"qwen2": "; q, k and v each h x h (GQA ignored); o_proj h x h",
             "qwen3": "; MoE priced as one dense MLP of intermediate_size (top-1), no router" if case.spec.is_moe else "",
             "llama": "; q and o as h x h",
             "deepseekv3": "; every layer priced as MoE (first_k_dense_replace ignored), no router"}[kind]
    notes = {**_mm_notes(case, extra),
             "attention": "causal, per sequence, every layer" + (", hidden_size for heads x head_dim"
                                                                  if kind in ("qwen2", "llama") else ""),
             "LM head": "LM head at every position with its weight gradient"}
    return Figure(passes=_passes_run(case, _runs(case), {k: int(x) for k, x in parts.items()}, None), notes=notes)


# ---- slime (from code) -----------------------------------------------------------------------

SLIME_COMMIT = "624b824a898ab0ec1fcb4d373004c7f3852bf515"


@counter("slime", "slime calculate_fwd_flops", FROM_CODE,
         f"THUDM/slime@{SLIME_COMMIT[:10]} (2026-08-21) slime/utils/flops_utils.py calculate_fwd_flops over the recorded sequence "
         "lengths: perf/actor_train_tflops = 3 x F, log_probs and ref_log_probs = F; Megatron args from the HF config "
         "(kv_channels = head_dim, MLA fields only for MLA models)")
def _slime(case: Case) -> Figure:
    s = case.spec
    h, nh, g, d, nl = s.hidden_size, s.num_heads, s.num_kv_heads, s.head_dim, s.num_layers
    mla = s.family.mla
    rope = s.qk_rope_head_dim if mla else 0
    nope = s.head_dim - rope if mla else 0
    vd = (s.v_head_dim or s.head_dim) if mla else 0

    def layer(sl: int, ffn: int) -> tuple[Fraction, Fraction]:
        if mla and s.q_lora_rank:
            q = 2 * sl * s.q_lora_rank * (h + nh * (nope + rope))
        else:
            q = 2 * sl * h * nh * d
        if mla:
            kv = 2 * sl * (s.kv_lora_rank * (h + nh * (nope + vd)) + h * rope)
        else:
            kv = 2 * 2 * sl * h * g * d
        att = Fraction(2 * nh * sl * sl * (nope + rope if rope else d), 2) + nh * sl * sl * (vd or d)
        return Fraction(q + kv + 2 * sl * h * h + 2 * sl * h * ffn * 3), att

    if s.is_moe:
        moe_ffn = s.moe_intermediate_size * s.experts_per_token + s.shared_expert_intermediate_size
        dense = len(s.dense_mlp_layers)
        moe = nl - dense
    else:
        moe_ffn, dense, moe = 0, nl, 0
    fwd = dict.fromkeys(("matmuls", "attention", "LM head"), Fraction(0))
    for sl in case.seq_lengths:
        for count, ffn in ((dense, s.intermediate_size), (moe, moe_ffn)):
            if count:
                mm, att = layer(sl, ffn)
                fwd["matmuls"] += count * mm
                fwd["attention"] += count * att
        fwd["LM head"] += 2 * sl * h * s.vocab_size
    fwd = {k: int(x) for k, x in fwd.items()}
    notes = {**_mm_notes(case, ("; o_proj as h x h" if nh * (vd or d) != h else "")
                         + ("; no router" if s.is_moe else "")
                         + ("; linear-attention layers priced as attention" if s.family.linear else "")),
             "attention": "causal, per sequence, every layer" + ("; sliding windows ignored" if s.sliding_window else ""),
             "LM head": "LM head at every position (3 x forward in the update)"}
    return Figure(passes=_passes_run(case, _runs(case), _scaled(fwd, 3), fwd), notes=notes)


# ---- vLLM MFU metrics (from code) -----------------------------------------------------------

VLLM_COMMIT = "00cee63e04bf5b7dbaa5f08d6e4360f28777fdc3"


@counter("vllm", "vLLM --enable-mfu-metrics", FROM_CODE,
         f"vllm-project/vllm@{VLLM_COMMIT[:10]} vllm/v1/metrics/perf.py (#30738) ModelMetrics.get_step_perf_stats_per_gpu "
         "at TP = PP = 1: per request num_tokens x context_len; prefill logits at the last token only")
def _vllm(case: Case) -> Figure:
    if case.profile != "verl":
        return Figure(notes={"*": "generation here is transformers generate, not vLLM"})
    s = case.spec
    cfg = _hf_config(case.config_json).get_text_config()
    h, nl, nh = s.hidden_size, s.num_layers, s.num_heads
    # requests: per prompt one full prefill; with prefix caching the other K - 1 recompute the
    # prompt's last token (context P); then one decode request (1 token, context P + j) per
    # further token j = 1 .. C - 1. Summed in closed form: (requests, tokens, Σ tokens x context,
    # Σ tokens x min(context, window)).
    w = s.sliding_window or None

    def upto(a: int, b: int) -> int:      # Σ min(x, w) for x in a..b
        if b < a:
            return 0
        if not w or b <= w:
            return (a + b) * (b - a + 1) // 2
        if a >= w:
            return (b - a + 1) * w
        return (a + w) * (w - a + 1) // 2 + (b - w) * w

    pre, dec = [0, 0, 0, 0], [0, 0, 0, 0]
    for i, (p, c) in enumerate(zip(case.prompt_lengths, case.completion_lengths)):
        t = p if i % case.group_size == 0 else 1
        for k, v in enumerate((1, t, t * p, t * min(p, w) if w else 0)):
            pre[k] += v
        for k, v in enumerate((c - 1, c - 1, (c - 1) * p + c * (c - 1) // 2, upto(p + 1, p + c - 1) if w else 0)):
            dec[k] += v
    swa = sum("sliding" in t for t in (getattr(cfg, "layer_types", None) or [])[:nl]) if w else 0
    n_shared = getattr(cfg, "n_shared_experts", None) or getattr(cfg, "num_shared_experts", None) or 0
    moe_layers = nl if s.is_moe else 0
    if s.is_moe and hasattr(cfg, "moe_layer_freq") and hasattr(cfg, "first_k_dense_replace"):   # MoeLayerFreqParser
        moe_layers = sum(i >= cfg.first_k_dense_replace and i % cfg.moe_layer_freq == 0 for i in range(nl))

    def metered(stats, prefill_logits: bool) -> dict:
        reqs, t, tc_full, tc_swa = stats
        if s.family.mla:
            qk, v, c_, r = s.head_dim, s.v_head_dim or s.head_dim, s.kv_lora_rank, s.qk_rope_head_dim
            mm = (2 * t * h * s.q_lora_rank + 2 * t * s.q_lora_rank * nh * qk if s.q_lora_rank else 2 * t * h * nh * qk)
            mm += 2 * t * h * (c_ + r) + 2 * t * c_ * nh * (qk - r + v) + 2 * t * nh * v * h
            mm *= nl
            att = 2 * nh * tc_full * (qk + v) * nl
        else:
            d, kv = s.head_dim, s.num_kv_heads
            mm = 2 * t * h * (nh + 2 * kv) * d * nl + 2 * t * h * nh * d * nl
            att = 4 * nh * tc_full * d * (nl - swa) + 4 * nh * tc_swa * d * swa
        di, mi = getattr(cfg, "intermediate_size", 4 * h), s.moe_intermediate_size or getattr(cfg, "intermediate_size", 0)
        mm += 2 * h * 3 * di * t * (nl - moe_layers)
        if moe_layers:
            mm += 2 * h * 3 * mi * t * s.experts_per_token * moe_layers + 2 * h * 3 * mi * n_shared * t * moe_layers
        logits = reqs if prefill_logits else t
        return {"matmuls": mm, "attention": att, "LM head": 2 * logits * h * s.vocab_size}

    notes = {"matmuls": "no LoRA branch, no router" + ("; shared expert widths not read (it reads n_shared_experts)"
                                                      if s.shared_expert_intermediate_size and not n_shared else "")
                        + ("; linear-attention layers priced as full attention" if s.family.linear else "")
                        + ("; kv_b_proj per token (no absorbed decode)" if s.family.mla else "")
                        + ("; every cached prompt recomputes its last token" if case.group_size > 1 else ""),
             "attention": "prefill: full P² square (context = P for every prompt token); decode: the whole context",
             "LM head": "last prefill token and every decode token"}
    return Figure(passes={PREFILL: metered(pre, True), DECODE: metered(dec, False)}, notes=notes)


# ---- 6·N·T (the rule) ------------------------------------------------------------------------

@counter("6NT", "6·N·T", RULE, "6 FLOPs per parameter (all of them) per trained token (Kaplan et al. 2020)")
def _six_nt(case: Case) -> Figure:
    parts = {"matmuls": 6 * case.spec.params_total * case.trained_tokens}
    return Figure(passes=_passes_run(case, _runs(case), parts, None),
                  notes=_mm_notes(case, "; all parameters (MoE: every expert, the embedding), no attention",
                                  "6 per parameter and token whatever the adapter"))
