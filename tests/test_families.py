"""Every model family the field post-trains, against torch's FlopCounterMode on the real
transformers code: a tiny random config per family built by transformers' own classes (eager
attention, eager experts), counted over generate with a KV cache (prefill + decode, window-bounded
where layers slide), a LoRA update through peft (what peft really adapts, read back from the PEFT
model) and a full fine-tuning update. The tests' own configs must match exactly; held-out configs
(other layer counts, windows, expert counts, chunk-crossing lengths) within 1%, and `race flops
--config DIR` must equal the measured passes."""

import json
import math

import pytest

from suite.accounting import (Work, PROJECTIONS, Adapter, GRPOSettings, lora_units, phase_flops, unmatched_targets,
                              verl_update_flops, work_from_lengths, work_from_means)
from suite.cli import main
from suite.errors import RaceError
from suite.accounting.modelspec import FAMILIES, spec_from_config
from suite.accounting.specs import spec_for

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

BASE = dict(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=4,
            vocab_size=300)
LINEAR = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
              linear_conv_kernel_dim=4)
MLA = dict(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12, n_group=1, topk_group=1,
           num_key_value_heads=4)

OWN = {  # the tests' own configs: FLOPs must be equal to the measured ones
    "qwen3": dict(head_dim=24),
    "qwen3_moe": dict(head_dim=16, num_experts=6, num_experts_per_tok=2, moe_intermediate_size=32, mlp_only_layers=[1]),
    "mixtral": dict(num_local_experts=5, num_experts_per_tok=2, sliding_window=8),
    "gemma2": dict(head_dim=16, sliding_window=8),
    "gemma3_text": dict(head_dim=16, sliding_window=8, sliding_window_pattern=2),
    "olmo2": dict(attention_bias=True),
    "olmo3": dict(sliding_window=8),
    "phi3": dict(sliding_window=8),
    "deepseek_v3": dict(n_routed_experts=6, num_experts_per_tok=2, moe_intermediate_size=32, first_k_dense_replace=1,
                        n_shared_experts=1, q_lora_rank=24, attention_bias=True, **MLA),
    "gpt_oss": dict(head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=8),
    "smollm3": dict(use_sliding_window=True, sliding_window=8, mlp_bias=True),
    "qwen3_next": dict(head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                       shared_expert_intermediate_size=40, **LINEAR),
    "qwen3_5_text": dict(head_dim=16, **LINEAR),
    "qwen3_5_moe_text": dict(head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                             shared_expert_intermediate_size=40, **LINEAR),
    "mistral": dict(sliding_window=8),  # decode past the window: bounded by it
}

HELD_OUT = {  # never tuned on: other layer counts, windows, experts, heads, chunk-crossing prompts
    "qwen3": dict(head_dim=32, num_key_value_heads=1, num_hidden_layers=3, tie_word_embeddings=True),
    "qwen3_moe": dict(head_dim=16, num_experts=8, num_experts_per_tok=3, moe_intermediate_size=24,
                      decoder_sparse_step=2, num_hidden_layers=3),
    "mixtral": dict(num_local_experts=3, num_experts_per_tok=1, sliding_window=5, num_hidden_layers=3),
    "gemma3_text": dict(head_dim=16, sliding_window=5, sliding_window_pattern=3, num_hidden_layers=5),
    "olmo3": dict(sliding_window=6, num_hidden_layers=5),
    "gpt_oss": dict(head_dim=16, num_local_experts=6, num_experts_per_tok=3, sliding_window=5, num_hidden_layers=3),
    "deepseek_v3": dict(n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=24, first_k_dense_replace=2,
                        n_shared_experts=3, q_lora_rank=None, **{**MLA, "kv_lora_rank": 8}, num_hidden_layers=3),
    "qwen3_next": dict(head_dim=16, num_experts=6, num_experts_per_tok=3, moe_intermediate_size=24,
                       shared_expert_intermediate_size=16, full_attention_interval=2, **LINEAR),
    "qwen3_5_text": dict(head_dim=16, full_attention_interval=3, num_hidden_layers=5,
                         **{**LINEAR, "linear_conv_kernel_dim": 3, "linear_value_head_dim": 12}),
    "qwen3_5_moe_text": dict(head_dim=16, num_experts=6, num_experts_per_tok=3, moe_intermediate_size=24,
                             shared_expert_intermediate_size=16, full_attention_interval=3, num_hidden_layers=5,
                             **{**LINEAR, "linear_num_value_heads": 2}),
    "phi3": dict(sliding_window=6, num_hidden_layers=3),
    "smollm3": dict(use_sliding_window=True, sliding_window=5, no_rope_layer_interval=2),
    "gemma2": dict(head_dim=16, sliding_window=4, num_hidden_layers=3),
}


def config(model_type: str, extra: dict) -> dict:
    return {"model_type": model_type, **BASE, **extra}


def spec_of(model_type: str, extra: dict):
    return spec_from_config(config(model_type, extra), model_type)


def only(work: Work, prefix: str) -> Work:
    """The statistics of one pass kind (the others zeroed), for the profile the work was built for."""
    return Work({k: (v if k.startswith(prefix) else 0) for k, v in work.items()}, work.engine)


def rollout(spec, adapter, prompts, completions):
    """(measured, analytic) FLOPs of HF generate with KV cache under the `trl` profile."""
    from suite.accounting.reference import add_lora, build_model, measure_generate

    model = add_lora(build_model(spec, "cpu"), adapter).eval()
    measured = measure_generate(model, prompts, completions)
    settings = GRPOSettings(group_size=1, prompts_per_step=len(prompts), max_completion_tokens=max(completions))
    work = work_from_lengths(prompts, completions, settings, "trl", policy=spec)
    return measured, phase_flops(work, spec, adapter, settings, engine="trl", attention="full")["rollout"]


def update(spec, adapter, prompts, completions, gc):
    """(measured, analytic) FLOPs of TRL's training micro-batch (PEFT, checkpointing, fused head)."""
    from suite.accounting.reference import build_model, measure_train_pass

    measured = measure_train_pass(spec, adapter, prompts, completions, gc, device="cpu", model=build_model(spec, "cpu"))
    settings = GRPOSettings(group_size=1, prompts_per_step=len(prompts), gradient_checkpointing=gc,
                            max_completion_tokens=max(completions))
    work = only(work_from_lengths(prompts, completions, settings, "trl-cpu", iterations=1, policy=spec), "update.train")
    return measured, phase_flops(work, spec, adapter, settings, engine="trl-cpu", attention="full")["update"]


# ---- the tests' own configs: exact ----------------------------------------------------------------


@pytest.mark.parametrize("model_type", sorted(OWN))
def test_parameters_equal_the_model_transformers_builds_from_the_config(model_type):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = config(model_type, OWN[model_type])
    spec = spec_from_config(cfg, model_type)
    hf = AutoConfig.for_model(**{**cfg, "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf)
    assert spec.params_total == sum(p.numel() for p in model.parameters())
    assert spec_from_config(spec.to_hf_config(), model_type) == spec  # the measured model is this one
    if spec.is_moe:
        assert spec.params_active < spec.params_total


@pytest.mark.parametrize("targets", [PROJECTIONS, ("all-linear",)], ids=["seven-names", "all-linear"])
@pytest.mark.parametrize("model_type", sorted(OWN))
def test_peft_adapts_what_the_accounting_counts(model_type, targets):
    """Read back from the PEFT model: on MoE families peft moves gate/up/down to the experts'
    stacks (gate_up at rank 2r) and leaves dense and shared-expert MLPs without an adapter."""
    from suite.accounting.reference import adapted_units, add_lora, build_model

    spec = spec_of(model_type, OWN[model_type])
    adapter = Adapter.from_rank(4, targets=targets)
    peft_model = add_lora(build_model(spec, "meta"), adapter)
    assert adapted_units(peft_model) == sorted((u.layer, u.name, u.fan_in, u.fan_out, u.rank, u.experts)
                                               for u in lora_units(spec, adapter))
    assert adapter.trainable_params(spec) == sum(p.numel() for p in peft_model.parameters() if p.requires_grad)


@pytest.mark.parametrize("rank", [pytest.param(0, marks=pytest.mark.slow), 4])  # rank 4 runs the base model too
@pytest.mark.parametrize("model_type", sorted(OWN))
def test_rollout_equals_generate(model_type, rank):
    """Left-padded prefill, one decode step per further token; sliding layers attend to the last
    `window` cached keys only; MLA re-expands every cached latent per step; linear attention
    decodes through the recurrent update (elementwise: 0 counted FLOPs); expert LoRAs are folded
    into the expert weights on every forward call."""
    spec = spec_of(model_type, OWN[model_type])
    measured, analytic = rollout(spec, Adapter.from_rank(rank), [5, 11, 3, 9], [12, 3, 7, 12])
    assert measured == analytic


@pytest.mark.parametrize("gc", [True, pytest.param(False, marks=pytest.mark.slow)],  # fast lane: partial adapters
                         ids=["checkpointing", "no-checkpointing"])
@pytest.mark.parametrize("model_type", sorted(OWN))
def test_lora_update_equals_trl_training_pass(model_type, gc):
    spec = spec_of(model_type, OWN[model_type])
    measured, analytic = update(spec, Adapter.from_rank(4), [5, 9], [6, 2], gc)
    assert measured == analytic


@pytest.mark.parametrize("model_type", sorted(OWN))
def test_full_finetuning_update_equals_trl_training_pass(model_type):
    spec = spec_of(model_type, OWN[model_type])
    measured, analytic = update(spec, Adapter(kind="full"), [5, 9], [6, 2], True)
    assert measured == analytic


@pytest.mark.parametrize("model_type,targets", [
    ("qwen3_5_text", ("in_proj_b",)), ("qwen3_5_text", ("in_proj_a",)), ("qwen3_next", ("in_proj_ba",)),
    ("deepseek_v3", ("kv_b_proj", "q_a_proj")), ("phi3", ("qkv_proj",)), ("qwen3_moe", ("o_proj",)),
    ("gpt_oss", ("experts.gate_up_proj", "experts.down_proj", "router.weight")), ("mixtral", ("all-linear",)),
])
def test_partial_adapters_follow_autograd(model_type, targets):
    """Without checkpointing layer 0's input needs no grad: which gradients the first layer
    computes depends on what is adapted (here down to the decay or the gate of the linear scan)."""
    spec = spec_of(model_type, OWN[model_type])
    measured, analytic = update(spec, Adapter.from_rank(4, targets=targets), [5, 9], [6, 2], False)
    assert measured == analytic


# ---- configs the tests never saw: within 1% -------------------------------------------------------


def close(measured: int, analytic: int) -> bool:
    """Equal: configs never tuned on are priced exactly too (docs/accounting.md)."""
    return measured > 0 and measured == analytic


@pytest.mark.parametrize("model_type", sorted(HELD_OUT))
def test_held_out_configs_priced_exactly(model_type):
    spec = spec_of(model_type, HELD_OUT[model_type])
    long = 70 if spec.layer_types and "linear_attention" in spec.layer_types else 10  # crosses a 64-token chunk
    assert close(*rollout(spec, Adapter.from_rank(8), [long, 4, 7], [9, 14, 2]))
    assert close(*update(spec, Adapter.from_rank(8, targets=("all-linear",)), [long, 6], [9, 3], True))
    assert close(*update(spec, Adapter(kind="full"), [long, 6], [9, 3], False))


@pytest.fixture
def flops_json(capsys):
    def run(args):
        capsys.readouterr()
        assert main(["flops", *args, "--json"]) == 0
        return json.loads(capsys.readouterr().out)
    return run


@pytest.mark.parametrize("model_type,rank", [("qwen3_moe", 4), ("gemma3_text", 0), ("qwen3_next", 4),
                                             ("deepseek_v3", 0), ("gpt_oss", 4), ("qwen3_5_moe_text", 4)])
def test_race_flops_config_dir_equals_flopcountermode(tmp_path, flops_json, model_type, rank):
    """`race flops --config DIR` (CPU profile, full-square convention) on an unseen config: its
    generate pass and its training passes equal FlopCounterMode on the eager HF model."""
    from suite.accounting.reference import add_lora, build_model, measure_generate, measure_train_pass

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config(model_type, HELD_OUT[model_type])))
    d = flops_json(["--config", str(folder), "--lora-rank", str(rank), "--group-size", "2", "--prompts-per-step", "2",
                    "--prompt-tokens", "9", "--completion-tokens", "7", "--engine-profile", "trl-cpu", "--attention", "full"])
    passes = {p["pass"]: p["flops"] for p in d["per_step"]["passes"]}
    spec, adapter = spec_for(str(folder)), Adapter.from_rank(rank)
    generated = measure_generate(add_lora(build_model(spec, "cpu"), adapter).eval(), [9] * 4, [7] * 4)
    trained = measure_train_pass(spec, adapter, [9] * 4, [7] * 4, True, device="cpu", model=build_model(spec, "cpu"))
    assert close(generated, passes["generate forward"])
    assert close(trained, passes["train forward"] + passes["train backward"] + passes["checkpoint recompute"])


# ---- conventions ----------------------------------------------------------------------------------


def test_mistral_decode_past_its_window_is_bounded_by_it():
    """transformers builds Mistral's cache from its config: a decode step attends to the last
    `sliding_window` keys, not the whole context (the accounting used to ignore the window)."""
    spec = spec_of("mistral", {"sliding_window": 4})
    assert spec.sliding_window == 4 and set(spec.layer_types) == {"sliding_attention"}
    assert spec_of("mistral", {}).sliding_window == 4096  # MistralConfig's default when the key is absent
    assert spec_of("mistral", {"sliding_window": None}).layer_types == ()
    s = GRPOSettings(1, 1, max_completion_tokens=64)
    w = work_from_lengths([10], [30], s, "generic", policy=spec)
    # prefill: min(i, 4) pairs per query (causal) or the whole square (eager); 29 decode steps, 4 keys each
    assert w["rollout.attn_causal.w4"] == (1 + 2 + 3 + 4 * 7) + 29 * 4
    assert w["rollout.attn_full.w4"] == 100 + 29 * 4
    # training: the eager square under `full`; a window-bounded triangle under `causal`
    assert w["update.train.attn_full.w4"] == 40 * 40 and w["update.train.attn_causal.w4"] == 6 + 4 * 37
    measured, analytic = rollout(spec, Adapter(kind="full"), [10], [30])
    assert measured == analytic


def test_mla_decode_cost_grows_with_the_cache_in_transformers_only():
    """transformers caches DeepSeek's compressed latents and re-expands all of them through
    kv_b_proj at every decode step; a vLLM-style engine decodes in the latent space (absorbed
    weights): its decode cost per step grows only by the latent attention products."""
    spec = spec_of("deepseek_v3", OWN["deepseek_v3"])
    ad, s = Adapter(kind="full"), GRPOSettings(1, 1, max_completion_tokens=4096)

    def step(engine, context):  # FLOPs of the one decode step at `context`
        def roll(c):
            return phase_flops(work_from_lengths([context], [c], s, engine, policy=spec), spec, ad, s,
                               engine=engine)["rollout"]
        return roll(3) - roll(2)

    kvb = 2 * spec.kv_lora_rank * spec.num_heads * (spec.head_dim - spec.qk_rope_head_dim + spec.v_head_dim)
    expand = step("trl", 1001) - step("trl", 1)
    latent = step("trl-vllm", 1001) - step("trl-vllm", 1)
    assert expand == 1000 * spec.num_layers * (kvb + 2 * spec.num_heads * (spec.head_dim + spec.v_head_dim))
    assert latent == 1000 * spec.num_layers * 2 * spec.num_heads * (2 * spec.kv_lora_rank + spec.qk_rope_head_dim)
    assert latent < expand
    # at one context: the absorbed step pays kv_b's FLOPs once (W_UK, W_UV) instead of per cached latent
    keys, pair = 1 + 2, 2 * spec.num_heads * (spec.head_dim + spec.v_head_dim)
    latent_pair = 2 * spec.num_heads * (2 * spec.kv_lora_rank + spec.qk_rope_head_dim)
    assert step("trl", 1) - step("trl-vllm", 1) == spec.num_layers * (kvb * (keys - 1) + (pair - latent_pair) * keys)


def test_linear_attention_counts_chunks_and_not_the_recurrent_decode():
    """Gated delta net: the chunked scan costs per 64-token chunk (a 65-token prefill pays two
    chunks); a decode step pays its projections and the two-output conv, no attention pairs."""
    spec = spec_of("qwen3_5_text", OWN["qwen3_5_text"])
    s = GRPOSettings(1, 1, max_completion_tokens=512)
    w64, w65 = (work_from_lengths([p], [1], s, "generic", policy=spec) for p in (64, 65))
    assert (w64["rollout.chunks"], w65["rollout.chunks"]) == (1, 2)
    ad = Adapter(kind="full")

    def roll(p, c):
        return phase_flops(work_from_lengths([p], [c], s, "generic", policy=spec), spec, ad, s)["rollout"]
    far, near = roll(300, 3) - roll(300, 2), roll(3, 3) - roll(3, 2)
    full_layers = sum(t == "full_attention" for t in spec.layer_types)
    # only the full-attention layers' pairs grow with the context
    assert far - near == 297 * full_layers * 4 * spec.num_heads * spec.head_dim


@pytest.mark.parametrize("outer,inner", [("gemma3", "gemma3_text"), ("qwen3_5_moe", "qwen3_5_moe_text")])
def test_multimodal_config_reads_its_text_decoder(outer, inner):
    text = {**config(inner, OWN[inner]), "model_type": inner}
    mm = {"model_type": outer, "architectures": ["ForConditionalGeneration"], "text_config": text,
          "vision_config": {"model_type": "vision", "hidden_size": 32}}
    spec = spec_from_config(mm, "g")
    assert spec == spec_from_config(text, "g") and spec.model_type == inner
    assert spec.tie_embeddings == (inner == "gemma3_text")  # Gemma ties unless told otherwise
    assert spec_for("gemma-3-4b-it").model_type == "gemma3_text"


@pytest.mark.parametrize("cfg,words", [
    ({"model_type": "qwen2_moe", "num_experts": 8}, ["mixture-of-experts", "qwen2_moe", "not supported"]),
    ({"model_type": "olmoe", "num_experts": 8}, ["olmoe", "not supported"]),
    ({"model_type": "deepseek_v2"}, ["deepseek_v2", "not supported"]),
    ({"model_type": "qwen3_vl", "text_config": {}, "vision_config": {}}, ["multimodal", "qwen3_vl"]),
    ({"model_type": "llama", "layer_types": ["chunked_attention"] * 4}, ["chunked_attention", "not supported"]),
    ({"model_type": "gemma3_text", "use_bidirectional_attention": True}, ["use_bidirectional_attention"]),
    ({"model_type": "deepseek_v3", "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8,
      **{**MLA, "num_key_value_heads": 2}}, ["MLA", "num_key_value_heads"]),
    ({"model_type": "qwen3_moe", "num_experts": 4, "moe_intermediate_size": 8}, ["num_experts_per_tok"]),
    ({"model_type": "mixtral", "num_local_experts": 2, "num_experts_per_tok": 3}, ["exceeds"]),
    ({"model_type": "gemma2", "hidden_activation": "relu"}, ["hidden_activation", "gelu_pytorch_tanh"]),
])
def test_what_is_not_modelled_is_refused_by_name(cfg, words):
    with pytest.raises(RaceError) as e:
        spec_from_config({**BASE, **cfg}, "x")
    text = f"{e.value} {e.value.hint}"
    assert all(w in text for w in words), text


def test_lora_targets_peft_would_refuse_or_skip_are_named():
    moe = spec_of("qwen3_moe", OWN["qwen3_moe"])
    with pytest.raises(RaceError, match="gate_proj without up_proj"):
        lora_units(moe, Adapter.from_rank(4, targets=("gate_proj",)))
    phi = spec_of("phi3", OWN["phi3"])
    with pytest.raises(RaceError, match="adapt nothing.*qkv_proj"):
        lora_units(phi, Adapter.from_rank(4, targets=("q_proj", "v_proj")))
    assert unmatched_targets(phi, Adapter.from_rank(4)) == ["q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"]
    with pytest.raises(RaceError, match="unknown LoRA target"):
        Adapter.from_rank(4, targets=("lm_head",))


def test_work_without_what_the_architecture_needs_is_refused():
    spec = spec_of("gemma2", OWN["gemma2"])
    s = GRPOSettings(1, 1)
    bare = work_from_lengths([5], [5], s, "generic")  # no policy: no windowed pair counts
    with pytest.raises(RaceError, match="attn_causal.w8"):
        phase_flops(bare, spec, Adapter(kind="full"), s)


# ---- beside verl's estimator; the MoE sanity check --------------------------------------------------


def _verl_estimators():
    """verl 0.9.1's own ESTIMATE_FUNC (verl/utils/flops_counter.py), loaded without verl's
    runtime dependencies (the device helper it imports is stubbed: only formulas run)."""
    import importlib.util
    import sys
    import types
    from pathlib import Path

    found = importlib.util.find_spec("verl")
    if found is None:
        pytest.skip("verl is not installed (scripts/setup.sh --test installs it)")
    path = Path(found.submodule_search_locations[0]) / "utils" / "flops_counter.py"
    stub = types.ModuleType("verl.utils.device")
    stub.get_torch_device = lambda: None
    saved = sys.modules.get("verl.utils.device")
    sys.modules["verl.utils.device"] = stub
    try:
        loader = importlib.util.spec_from_file_location("verl_flops_counter", path)
        mod = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(mod)
    finally:
        sys.modules.pop("verl.utils.device") if saved is None else sys.modules.__setitem__("verl.utils.device", saved)
    return mod.ESTIMATE_FUNC


@pytest.mark.parametrize("model_type", sorted(OWN))
def test_verl_estimator_equals_verls_own_formula(model_type):
    from transformers import AutoConfig

    estimators = _verl_estimators()
    cfg = config(model_type, OWN[model_type])
    spec = spec_from_config(cfg, model_type)
    seqs = [13, 40, 7]
    fn = estimators.get({"qwen3_5_text": "qwen3_5", "qwen3_5_moe_text": "qwen3_5_moe"}.get(model_type, model_type))
    ours = verl_update_flops(spec, seqs)
    if fn is None:
        assert ours is None  # verl logs MFU 0 for this model type
    else:
        theirs = fn(AutoConfig.for_model(**cfg), sum(seqs), seqs, 1.0) * 1e12
        assert ours == pytest.approx(theirs, rel=1e-9)


def test_moe_update_costs_about_six_active_parameters_per_token():
    """Qwen3-30B-A3B: a full fine-tuning update (no checkpointing) costs ~6 x active parameters
    per trained token (attention adds a few percent), a tenth of 6 x total parameters."""
    spec = spec_for("Qwen3-30B-A3B")
    s = GRPOSettings(group_size=8, prompts_per_step=16, max_completion_tokens=1024, gradient_checkpointing=False)
    work = work_from_means(256, 1024, s, "generic", policy=spec)
    per_token = phase_flops(work, spec, Adapter(kind="full"), s, engine="generic")["update"] / work["count.update"]
    assert 1.0 < per_token / (6 * spec.params_active) < 1.1
    assert per_token / (6 * spec.params_total) < 0.11
    assert math.isclose(spec.params_active / 1e9, 3.04, abs_tol=0.01)


def test_qwen3_5_397b_update_costs_six_active_parameters_per_token(flops_json):
    """MLPerf's GRPO policy: a full fine-tuning update (no checkpointing) costs 1.011 x 6 x its
    16.3B active parameters per trained token at P=256, C=1024 (attention and the delta-net scan
    are the rest), 4% of 6 x its 396B parameters; `race flops` prints the active count."""
    spec = spec_for("Qwen3.5-397B-A17B")
    s = GRPOSettings(group_size=8, prompts_per_step=16, max_completion_tokens=1024, gradient_checkpointing=False)
    work = work_from_means(256, 1024, s, "generic", policy=spec)
    per_token = phase_flops(work, spec, Adapter(kind="full"), s, engine="generic")["update"] / work["count.update"]
    assert 1.0 < per_token / (6 * spec.params_active) < 1.02
    assert per_token / (6 * spec.params_total) < 0.05
    d = flops_json(["--model", "Qwen3.5-397B-A17B", "--lora-rank", "0"])
    assert d["policy"]["params_active"] == spec.params_active and d["policy"]["spec"]["num_experts"] == 512


def test_every_family_is_registered_and_tested():
    from suite.record.schemas import REPORT, load

    assert set(FAMILIES) == set(OWN) | {"llama", "qwen2"}  # llama, qwen2: tests/test_accounting.py
    # a report of any family validates: the schema names every model_type a recipe reads
    assert load(REPORT)["$defs"]["model_spec"]["properties"]["model_type"]["enum"] == sorted(FAMILIES)


def test_race_plan_says_active_parameters_buy_tokens_and_total_parameters_set_memory(flops_json, capsys):
    capsys.readouterr()
    assert main(["plan", "--budget", "1e19", "--models", "Qwen3-30B-A3B,Qwen3-4B", "--engine-profile", "trl-vllm", "--json"]) == 0
    moe, dense = json.loads(capsys.readouterr().out)["rows"]
    spec = spec_for("Qwen3-30B-A3B")
    assert (moe["params_active"], moe["params_total"]) == (spec.params_active, spec.params_total)
    assert moe["weights_gb_bf16"] == pytest.approx(2 * spec.params_total / 1e9)
    assert dense["params_active"] == dense["params_total"]
    # ~3B active parameters cost about what the dense 4B costs per step, at 7.6x the weight memory
    assert 0.5 < moe["flops_per_step"] / dense["flops_per_step"] < 1.5
    assert main(["plan", "--budget", "1e19", "--models", "Qwen3-30B-A3B"]) == 0
    out = capsys.readouterr().out
    assert "active parameters (top-k experts) buy tokens" in out and "total parameters set memory" in out
    d = flops_json(["--model", "Qwen3-30B-A3B", "--lora-rank", "16"])
    assert d["policy"]["params_active"] == spec.params_active
    assert d["adapter"]["adapted"]["modules"]["experts.gate_up_proj"] == 48


@pytest.mark.parametrize("model_type,targets", [("qwen3_moe", PROJECTIONS), ("qwen3_moe", ("all-linear",)),
                                                ("mixtral", ("w1", "w3", "w2", "q_proj")), ("phi3", ("all-linear",)),
                                                ("gpt_oss", ("q_proj", "experts.gate_up_proj"))])
def test_training_and_evaluation_read_the_same_adapter_off_peft(tmp_path, model_type, targets):
    """The TRL callback reads the adapter off the live PEFT model, the evaluation off its saved
    adapter_config.json (where peft keeps its MoE conversion: target_parameters and the fused
    rank pattern); both give an Adapter whose lora_units are what peft adapted."""
    from suite.accounting.adapter import adapter_from_peft
    from suite.accounting.reference import adapted_units, add_lora, build_model
    from suite.train.trlsetup import adapter_of

    spec = spec_of(model_type, OWN[model_type])
    peft_model = add_lora(build_model(spec, "cpu"), Adapter.from_rank(4, targets=targets))
    live = adapter_of(peft_model, spec)
    assert sorted((u.layer, u.name, u.fan_in, u.fan_out, u.rank, u.experts)
                  for u in lora_units(spec, live)) == adapted_units(peft_model)
    peft_model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "adapter_config.json").read_text())
    assert lora_units(spec, adapter_from_peft(saved, spec=spec)) == lora_units(spec, live)


@pytest.mark.parametrize("model_type,extra", [
    *[(m, OWN[m]) for m in ("mistral", "mixtral", "phi3", "gemma2", "gemma3_text", "olmo3", "gpt_oss", "smollm3",
                            "qwen3_next", "qwen3_5_text")],
    ("qwen3", {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 2}),
    ("qwen2", {"use_sliding_window": False, "sliding_window": 8}),
    ("qwen2", {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1}),
    ("qwen3_moe", {**OWN["qwen3_moe"], "use_sliding_window": True, "sliding_window": 8}),
    ("gemma3_text", {"head_dim": 16, "sliding_window": 8, "num_hidden_layers": 7}),  # the default 5:1 pattern
])
def test_layer_types_as_transformers_derives_them(model_type, extra):
    """Which layers slide (or scan linearly) is what transformers' config class and cache make of
    the config: explicit layer_types, or each family's own default pattern."""
    from transformers import AutoConfig

    cfg = config(model_type, extra)
    spec = spec_from_config(cfg, model_type)
    hf = AutoConfig.for_model(**cfg)
    window = getattr(hf, "sliding_window", None)
    hf_types = getattr(hf, "layer_types", None) or ["sliding_attention" if window else "full_attention"] * spec.num_layers
    want = ["full_attention" if t == "sliding_attention" and not window else t for t in hf_types]
    assert list(spec.layer_types or ["full_attention"] * spec.num_layers) == want
    assert spec.sliding_window == (window if "sliding_attention" in want else 0)
