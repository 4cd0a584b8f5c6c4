"""The engines' own FLOP counters, run on a `Case` (suite.accounting.refcase) the way each
engine runs them, for the referee (suite.accounting.referee) to set beside the exact count.

Two origins, said in every table:
- **installed**: the engine's code is called from its installed package (the `compare` extra:
  verl 0.9.1 installed with --no-deps as scripts/setup.sh does, TRL 1.16, transformers 5.24);
  nothing is copied. verl's FlopsCounter is broken into parts by the light re-implementation in
  suite.accounting.compare, which must sum to what verl's code returns (a mismatch shows as an
  'unexplained' part);
- **from code, not run**: engines that do not install here (CUDA-only or unpublished packages)
  are transcribed from their source, cited by repository, file and commit.

A counter returns a `Figure`: per pass group it meters ("update", "old-policy forward",
"reference forward", "rollout prefill", "rollout decode") its FLOPs by part ("matmuls",
"embedding", "LM head", "attention", "linear-attention scan"), and per part the convention that
makes it differ from an exact count. Passes a counter does not meter are absent.
"""

from __future__ import annotations

import contextlib
import copy
import io
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Callable

from ..registry import Registry
from .compare import verl_update_parts
from .refcase import Case

PREFILL, DECODE, FWD, BWD = "rollout prefill", "rollout decode", "update forward", "update backward"
OLD, REF = "old-policy forward", "reference forward"
GROUPS = (PREFILL, DECODE, FWD, BWD, OLD, REF)
"""Passes a counter meters; the update's forward and backward are summed over the mu iterations
(a counter that prices the update as one figure is split by its own convention: 3 x forward is
one forward and a backward of two)."""

INSTALLED, FROM_CODE, RULE = "installed", "from code, not run", "rule"


@dataclass(frozen=True)
class Figure:
    """What one counter says about one case."""

    passes: dict = field(default_factory=dict)
    """{pass group: {part: FLOPs}} for the groups it meters."""
    notes: dict = field(default_factory=dict)
    """{part or "pass:part": why it differs from the exact count}; "*" names a reason for the whole figure."""
    error: str = ""
    """The engine's code raised this (its figure is then empty)."""

    def total(self, group: str) -> int | None:
        parts = self.passes.get(group)
        return None if parts is None else sum(parts.values())

    def update_total(self) -> int | None:
        """The update's forward and backward together (None: not metered)."""
        f, b = self.total(FWD), self.total(BWD)
        return None if f is None and b is None else (f or 0) + (b or 0)


@dataclass(frozen=True)
class Counter:
    """An engine's FLOP counter."""

    name: str
    title: str
    origin: str
    """INSTALLED, FROM_CODE or RULE."""
    source: str
    """Package and function, or repository, file and commit."""
    count: Callable[[Case], Figure]


COUNTERS: Registry[Counter] = Registry("engine counter")
"""Every counter, in the order of the tables."""


def counter(name: str, title: str, origin: str, source: str):
    """Register a counting function as the counter `name`."""
    return COUNTERS.register(name, lambda fn: Counter(name, title, origin, source, fn))


# ---- helpers ---------------------------------------------------------------------------------

@lru_cache(maxsize=64)
def _hf_config(config_json: str):
    """The transformers config object an engine builds from the checkpoint's config.json."""
    import json

    from transformers import AutoConfig

    d = json.loads(config_json)
    return AutoConfig.for_model(d["model_type"], **{k: v for k, v in d.items() if k != "model_type"})


def _scaled(parts: dict, num: int, den: int = 1) -> dict:
    return {k: int(Fraction(v) * num / den) for k, v in parts.items()}


def _passes_run(case: Case, exact_runs: dict, update: dict, forward: dict | None, update_fwd: dict | None = None) -> dict:
    """An update counter's passes: the update x mu, split into its forward (`update_fwd`; by
    default a third of each part: 3 x forward) and its backward (the rest); its forward-only
    figure for the old-policy and reference passes where they ran and the engine meters them
    (forward None: it does not)."""
    fwd = update_fwd if update_fwd is not None else _scaled(update, 1, 3)
    out = {FWD: _scaled(fwd, case.mu), BWD: {k: (v - fwd.get(k, 0)) * case.mu for k, v in update.items()}}
    if forward is not None:
        for g in (OLD, REF):
            if exact_runs.get(g):
                out[g] = dict(forward)
    return out


def _runs(case: Case) -> dict:
    """Which of the old-policy and reference passes run in this case (the exact profile's rules)."""
    from .engines import get_engine

    prof, s = get_engine(case.profile), case.settings
    return {OLD: prof.old_policy_pass(s), REF: prof.reference_pass(s)}


def _mm_notes(case: Case, extra: str = "", per: str = "6 FLOPs per weight and token whatever the adapter") -> dict:
    """Matmul notes of a 3 x forward counter, per pass: its forward prices no LoRA branch, its
    backward charges frozen weights a weight gradient they never get (the LoRA backward)."""
    lora = case.lora_rank > 0
    return {"matmuls": per + extra,
            f"{FWD}:matmuls": "forward: 2 FLOPs per weight and token" + ("; the LoRA branch not counted" if lora else "")
                              + extra,
            f"{BWD}:matmuls": "backward as 2 x forward" + ("; a LoRA's frozen weights get no weight gradient (LoRA "
                                                           "backward), the adapter's own FLOPs are not counted"
                                                           if lora else "") + extra}


# ---- verl 0.9.1 (installed) ------------------------------------------------------------------

VERL_VERSION = "0.9.1"


@lru_cache(maxsize=1)
def verl_flops_module():
    """verl.utils.flops_counter of the installed verl, or None. verl's package __init__ pulls in
    Ray and tensordict (the worker stack) which the --no-deps install leaves out; the counter
    needs neither, so it is imported under a bare parent package whose path is verl's own
    folder (nothing is copied or patched), and the stand-ins are removed again."""
    import importlib
    import importlib.util
    import types

    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    if "verl" in sys.modules and hasattr(sys.modules["verl"], "DataProto"):
        return importlib.import_module("verl.utils.flops_counter")   # the real package is loaded
    root = list(spec.submodule_search_locations)[0]
    before = set(sys.modules)
    for name, sub in (("verl", ""), ("verl.utils", "/utils")):
        stub = types.ModuleType(name)
        stub.__path__ = [root + sub]
        sys.modules[name] = stub
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return importlib.import_module("verl.utils.flops_counter")
    except ImportError:
        return None
    finally:
        for k in set(sys.modules) - before:
            if k == "verl" or k.startswith("verl."):
                del sys.modules[k]


def verl_installed_flops(config, seq_lengths) -> tuple[int, str]:
    """FLOPs verl's own FlopsCounter estimates for one update pass over sequences of these
    lengths (its TFLOP/s at delta_time = 1 s, times 1e12), and what it printed (an unknown
    model type: "MFU will always be zero"). The device-peak lookup, which needs a GPU and is
    not part of the count, answers 1."""
    from unittest import mock

    fc = verl_flops_module()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), mock.patch.object(fc, "get_device_flops", lambda *a, **k: 1.0):
        achieved, _ = fc.FlopsCounter(config).estimate_flops(list(seq_lengths), 1.0)
    return round(achieved * 1e12), out.getvalue().strip()


def verl_flops(spec, config: dict, seq_lengths) -> tuple[int | None, str]:
    """verl's estimate of one update pass: its installed code where verl installs, else the
    re-implementation (suite.accounting.compare) -- and which ran ('installed' or 're-implementation')."""
    if verl_flops_module() is not None:
        import json

        return verl_installed_flops(_hf_config(json.dumps(config, sort_keys=True)), seq_lengths)[0], INSTALLED
    parts = verl_update_parts(spec, seq_lengths, config.get("model_type"))
    return (None if parts is None else sum(parts.values())), "re-implementation"


@counter("verl", f"verl {VERL_VERSION} FlopsCounter", INSTALLED,
         f"verl=={VERL_VERSION}: verl/utils/flops_counter.py FlopsCounter.estimate_flops, as "
         "verl/workers/engine_workers.py calls it per mini-batch (sequence lengths from the nested tensor's "
         "offsets; forward-only passes: mfu / 3)")
def _verl(case: Case) -> Figure:
    mt = case.config.get("model_type")
    parts = verl_update_parts(case.spec, case.rows, mt)
    if verl_flops_module() is not None:
        total, printed = verl_installed_flops(_hf_config(case.config_json), case.rows)
    else:
        total, printed = (0 if parts is None else sum(parts.values())), ""
    if parts is None:
        parts = {"matmuls": 0}
        notes = {"*": f"model type '{mt}' is not in verl's table: MFU 0" + (f" (verl prints: {printed[:60]}...)"
                                                                         if printed else "")}
    else:
        notes = {
            **_mm_notes(case, "; head_dim from hidden_size // heads" if mt == "qwen3_vl" else ""),
            "embedding": "the embedding counted as a matmul (a lookup: 0 FLOPs)",
            "LM head": "LM head at every position with its weight gradient, whatever is scored or trained",
            "attention": "6·ΣL² per layer (causal) over the lengths it is given"
                         + (": packed rows, not sequences" if case.pack_tokens else "")
                         + ("; head_dim from hidden_size // heads" if mt == "qwen3_vl" else ""),
            "linear-attention scan": "15·d_k·d_v per value head and token",
        }
        diff = total - sum(parts.values())
        if abs(diff) > max(1e-9 * total, 1e6):
            parts = {**parts, "unexplained": diff}
            notes["unexplained"] = "verl's installed code differs from its re-implementation"
    fwd = _scaled(parts, 1, 3)   # engine_workers.py: forward_only -> mfu /= 3
    return Figure(passes=_passes_run(case, _runs(case), parts, fwd), notes=notes)


# ---- TRL 1.16 (installed) -------------------------------------------------------------------

@counter("trl", "TRL 1.16 compute_flops_per_token", INSTALLED,
         "trl==1.16.0: trl/trainer/utils.py compute_flops_per_token(config, int(mean_seq_len)) x forwarded tokens, "
         "as trl/experimental/async_distillation/async_distillation_trainer.py logs perf/mfu (GRPOTrainer calls none)")
def _trl(case: Case) -> Figure:
    from trl.trainer.utils import compute_flops_per_token

    cfg = _hf_config(case.config_json).get_text_config()
    tokens = sum(case.rows)
    mean = int(tokens / len(case.rows))
    try:
        per, base = compute_flops_per_token(cfg, mean), compute_flops_per_token(cfg, 0)
        headless = copy.deepcopy(cfg)
        headless.vocab_size = 0
        layers = compute_flops_per_token(headless, 0)
    except Exception as e:  # noqa: BLE001 - the engine's own code failing is the finding
        return Figure(error=f"{type(e).__name__}: {e}", notes={"*": f"raises {type(e).__name__}: {e}"})
    parts = {"matmuls": layers * tokens, "LM head": (base - layers) * tokens, "attention": (per - base) * tokens}
    sp = case.spec
    notes = {**_mm_notes(case, ("; MoE: routed experts and router, no shared experts" if sp.is_moe else "")
                         + ("; MLA priced as GQA attention" if sp.family.mla else "")
                         + ("; linear-attention layers priced as attention" if sp.family.linear else "")),
             "LM head": "LM head at every position, 3 x forward",
             "attention": f"full L² square at the mean row length ({mean} tokens), every layer"
                          + (" (packed rows)" if case.pack_tokens else "")
                          + ("; sliding windows ignored" if sp.sliding_window else "")}
    return Figure(passes=_passes_run(case, _runs(case), parts, None), notes=notes)


# ---- transformers 5.24 Trainer (installed): what TRL's GRPOTrainer logs as total_flos -------------

@lru_cache(maxsize=16)
def _meta_model(config_json: str):
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(_hf_config(config_json))


class _TrainerModel:
    """The model as Trainer.floating_point_ops reads it: its class's main_input_name at once, the
    model itself (built on the meta device) for anything more -- the parameter count it asks for
    when the batch holds that input."""

    def __init__(self, config_json: str):
        self._key = config_json

    def __getattr__(self, name):
        if name == "main_input_name":
            from transformers import AutoModelForCausalLM

            return AutoModelForCausalLM._model_mapping[type(_hf_config(self._key))].main_input_name
        return getattr(_meta_model(self._key), name)


@counter("hf-trainer", "transformers 5.24 Trainer.floating_point_ops (total_flos)", INSTALLED,
         "transformers==5.24.0: transformers/trainer.py Trainer.floating_point_ops, added to state.total_flos per "
         "micro-batch; TRL 1.16's GRPOTrainer feeds it the dict of trl/trainer/grpo_trainer.py "
         "_generate_and_score_completions")
def _hf_trainer(case: Case) -> Figure:
    import types

    import torch
    from transformers import Trainer

    rows, width = len(case.rows), case.row_width
    p, c = max(case.prompt_lengths), max(case.completion_lengths)
    meta = dict(device="meta", dtype=torch.long)
    inputs = {"prompt_ids": torch.empty(rows, p, **meta), "prompt_mask": torch.empty(rows, p, **meta),
              "completion_ids": torch.empty(rows, c, **meta), "completion_mask": torch.empty(rows, c, **meta),
              "advantages": torch.empty(rows, device="meta"), "num_items_in_batch": torch.tensor(rows * width)}
    flops = Trainer.floating_point_ops(types.SimpleNamespace(model=_TrainerModel(case.config_json)), inputs)
    notes = {"matmuls": "6·N_non-embedding x input_ids.numel(); GRPO's batch has no input_ids, so 0"
             if not flops else "6·N_non-embedding per padded input token"}
    return Figure(passes=_passes_run(case, _runs(case), {"matmuls": int(flops)}, None), notes=notes)


# ---- Megatron-LM (from code) -----------------------------------------------------------------

MEGATRON_COMMIT = "86df799dc4c78e4bd7fbae972b3ee743e8b14f02"


@counter("megatron-lm", "Megatron-LM num_floating_point_operations", FROM_CODE,
         f"NVIDIA/Megatron-LM@{MEGATRON_COMMIT[:10]} megatron/training/training.py num_floating_point_operations "
         "(not in the megatron-core wheel; megatron.training needs CUDA): per row of args.seq_length tokens, "
         "vocab padded to a multiple of 128")
def _megatron(case: Case) -> Figure:
    s = case.spec
    h, layers = s.hidden_size, s.num_layers
    q = s.head_dim * s.num_heads
    ffn = s.moe_intermediate_size if s.is_moe else s.intermediate_size
    topk = s.experts_per_token if s.is_moe else 1
    vocab = -(-s.vocab_size // 128) * 128
    lens = [case.row_width] * len(case.rows) if case.layout == "padded" else list(case.rows)
    parts = dict.fromkeys(("matmuls", "LM head", "attention"), Fraction(0))
    for seq in lens:   # 12·b·s·L·h²·[(1 + g/n + s/h)·q/h + ffn/h·topk·3/2 + V/(2·L·h)], b = 1 per row
        base = 12 * seq * layers * h * h
        parts["matmuls"] += base * ((1 + Fraction(s.num_kv_heads, s.num_heads)) * Fraction(q, h)
                                    + Fraction(ffn, h) * topk * Fraction(3, 2))
        parts["attention"] += base * Fraction(seq, h) * Fraction(q, h)
        parts["LM head"] += base * Fraction(vocab, 2 * layers * h)
    notes = {**_mm_notes(case, ("; padded rows" if case.layout == "padded" else "")
                         + ("; MoE: top-k experts, no router, no shared experts" if s.is_moe else "")
                         + ("; MLA and linear-attention layers priced as GQA attention"
                            if s.family.mla or s.family.linear else "")),
             "LM head": "LM head at every position with its weight gradient, vocab padded to 128",
             "attention": "full s² square per row" + (" of the padded width" if case.layout == "padded" else "")
                          + (" (packed rows)" if case.pack_tokens else "") + ", every layer"
                          + ("; sliding windows ignored" if s.sliding_window else "")}
    return Figure(passes=_passes_run(case, _runs(case), {k: int(v) for k, v in parts.items()}, None), notes=notes)


# ---- prime-rl (from code) -------------------------------------------------------------------

PRIME_COMMIT = "0e6c67fcdd45e8c2fc1c0d5ea572e510ecf968ec"


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
         f"PrimeIntellect-ai/prime-rl@{PRIME_COMMIT[:10]} src/prime_rl/trainer/perf.py PerfCounter.estimate_batch_flops "
         "(sequence_lengths given): LoRA 4·N_active + 6·N_lora, full 6·N_active, attention 12·l·h·(hidden // h)·ΣL²")
def _prime(case: Case) -> Figure:
    cfg = _hf_config(case.config_json)
    body, head = _prime_active_mm(cfg)
    tc = cfg.get_text_config()
    lora = case.adapter.trainable_params(case.spec) if case.lora_rank else 0
    mult = 4 if case.lora_rank else 6
    tokens, sq = sum(case.seq_lengths), sum(x * x for x in case.seq_lengths)
    q = tc.hidden_size // tc.num_attention_heads
    att = 12 * tc.num_hidden_layers * tc.num_attention_heads * q * sq
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
             "attention": "full L² square per sequence, every layer"
                          + ("; sliding windows ignored" if case.spec.sliding_window else "")
                          + (f"; head_dim from hidden_size // heads ({q}, the config says {case.spec.head_dim})"
                             if derived else "")}
    return Figure(passes=_passes_run(case, _runs(case), parts, None, fwd), notes=notes)


# ---- NeMo-RL (from code) ---------------------------------------------------------------------

NEMO_TRACKER, NEMO_FORMULAS = "02306ec9c9cb4db1c0a0d7d608f68470c36551b3", "0126d86c19d9c0bf097e8019b7ad09752b6971c3"


@counter("nemo-rl", "NeMo-RL FLOPTracker", FROM_CODE,
         f"NVIDIA-NeMo/RL nemo_rl/utils/flops_tracker.py@{NEMO_TRACKER[:10]} (config dispatch by class; track_batch: "
         f"one sequence at a time) with nemo_rl/utils/flops_formulas.py@{NEMO_FORMULAS[:10]} (qwen2, qwen3)")
def _nemo(case: Case) -> Figure:
    from transformers import LlamaConfig, Qwen2Config, Qwen3MoeConfig

    cfg = _hf_config(case.config_json)
    if isinstance(cfg, LlamaConfig):   # llama2 / llama3: not in the formulas version transcribed
        return Figure(notes={"*": "Llama configs: NeMo-RL's llama2/llama3 formulas are not transcribed here"})
    if not isinstance(cfg, (Qwen2Config, Qwen3MoeConfig)):
        msg = f"ValueError: Unsupported config type: {type(cfg)}"
        return Figure(error=msg, notes={"*": f"raises {msg}"})
    h, nl, v = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    qwen3 = isinstance(cfg, Qwen3MoeConfig)
    # qwen2: QKV as 3 h x h gemms; qwen3: (2·groups/heads + 1) h x h. Both: causal attention with
    # hidden_size for heads x head_dim, o_proj h x h; qwen3's MLP is moe_ffn_hidden_size x top-k,
    # which the tracker sets to intermediate_size x 1 for every Qwen3-MoE config.
    qkv = Fraction(2 * cfg.num_key_value_heads, cfg.num_attention_heads) + 1 if qwen3 else Fraction(3)
    parts = dict.fromkeys(("matmuls", "attention", "LM head"), Fraction(0))
    for sl in case.seq_lengths:
        parts["matmuls"] += 6 * nl * sl * h * h * (qkv + 1) + 6 * nl * sl * h * 3 * cfg.intermediate_size
        parts["attention"] += 6 * nl * sl * h * h * Fraction(sl, h)
        parts["LM head"] += 6 * sl * h * v
    notes = {**_mm_notes(case, "; " + ("MoE priced as one dense MLP of intermediate_size (top-1), no router" if qwen3
                                     else "q, k and v each h x h (GQA ignored)") + "; o_proj h x h"),
             "attention": "causal, hidden_size for heads x head_dim (NVIDIA-NeMo/RL#2736 fixed this for qwen3 later)",
             "LM head": "LM head at every position with its weight gradient"}
    return Figure(passes=_passes_run(case, _runs(case), {k: int(x) for k, x in parts.items()}, None), notes=notes)


# ---- slime (from code) -----------------------------------------------------------------------

SLIME_COMMIT = "3797ef9752a94202c4d0c825930dbf6ef6d3c301"


@counter("slime", "slime calculate_fwd_flops", FROM_CODE,
         f"THUDM/slime@{SLIME_COMMIT[:10]} slime/utils/flops_utils.py calculate_fwd_flops over the recorded sequence "
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
            kv = 2 * sl * h * (nh // g) * d
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
    notes = {**_mm_notes(case, ("; k and v priced as heads // groups heads (GQA inverted)" if g != nh and not mla else "")
                         + ("; o_proj as h x h" if nh * (vd or d) != h else "")
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


__all__ = ["Counter", "Figure", "COUNTERS", "GROUPS", "FWD", "BWD", "OLD", "REF", "PREFILL", "DECODE", "INSTALLED",
           "FROM_CODE", "RULE", "verl_flops", "verl_flops_module", "verl_installed_flops", "VERL_VERSION"]
