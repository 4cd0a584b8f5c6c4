"""suite.accounting against torch's FlopCounterMode (eager attention) on the real code paths:
HF forward for every catalog architecture (meta device), TRL's training pass with PEFT and gradient
checkpointing (meta device, 1.5B and 7B, several LoRA ranks incl. full fine-tuning), HF
generate with KV cache on small real models; plus the algebra of work (additive, linear)."""

import json
import math

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from suite.accounting import (Work, ATTENTION, ENGINES, PROJECTIONS, WORK_KEYS, Adapter, GRPOSettings, add_work,
                              coefficients, get_engine, pass_breakdown, phase_flops, step_flops, tokens_from_work,
                              work_from_lengths, work_from_means)
from suite.errors import RaceError
from suite.accounting.modelspec import spec_from_config
from suite.accounting.specs import catalog_names, spec_for

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

TINY = dict(model_type="qwen2", hidden_size=64, intermediate_size=160, num_attention_heads=4,
            num_key_value_heads=2, num_hidden_layers=3, vocab_size=300, tie_word_embeddings=False)


def close(measured: int, analytic: int, rel: float = 0.01) -> bool:
    return measured > 0 and abs(measured - analytic) <= rel * measured


def only(work: Work, prefix: str) -> Work:
    """The statistics of one pass kind (the others zeroed), for the profile the work was built for."""
    return Work({k: (v if k.startswith(prefix) else 0) for k, v in work.items()}, work.engine)


# ---- analytic == measured --------------------------------------------------------------------


def distinct_architectures() -> list[str]:
    """One catalog name per distinct architecture: entries whose specs are equal but for the name
    (Qwen2.5-7B, its Instruct and Math variants and DeepSeek-R1-Distill-Qwen-7B) build the same
    meta model, so measuring one measures them all."""
    seen: dict[str, str] = {}
    for n in catalog_names("recipe"):
        d = spec_for(n).to_dict()
        d.pop("name", None)
        seen.setdefault(json.dumps(d, sort_keys=True), n)
    return sorted(seen.values())


@pytest.mark.parametrize("name", distinct_architectures())
def test_forward_of_every_catalog_model_matches_flopcounter(name):
    from suite.accounting.reference import build_model, measure_forward

    spec = spec_for(name)
    model = build_model(spec, "meta")
    assert spec.params_total == sum(p.numel() for p in model.parameters())
    for batch, length in ((1, 17), (3, 64)):
        measured = measure_forward(model, batch, length)
        n = batch * length
        if spec.has_lm_head:  # a plain forward: the reference-model pass, logits at every position
            # (work_from_lengths adds what sliding windows, linear attention and MoE calls need)
            ref = GRPOSettings(1, batch, beta=0.1, max_completion_tokens=1)
            work = only(work_from_lengths([length - 1] * batch, [1] * batch, ref, "generic", policy=spec), "update.ref")
            assert (work["update.ref.tokens"], work["update.ref.attn_full"]) == (n, batch * length ** 2)
            work["update.ref.lm_head"] = n
            rows = pass_breakdown(work, spec, Adapter(kind="full"), GRPOSettings(1, 1), engine="generic", attention="full")
            analytic = dict(((p, name_), f) for p, name_, f in rows)[("update", "reference forward")]
        else:  # a reward model: backbone + score head on every position
            work = {"reward.tokens": n, "reward.attn_full": batch * length ** 2, "reward.heads": n}
            analytic = phase_flops(work, spec_for("Qwen2.5-0.5B-Instruct"), Adapter(kind="full"), GRPOSettings(1, 1),
                                   reward_model=spec, engine="generic", attention="full")["reward"]
        assert measured == analytic, (name, batch, length)


def _train_pass_analytic(spec, adapter, prompts, completions, gc):
    settings = GRPOSettings(group_size=1, prompts_per_step=len(completions), gradient_checkpointing=gc,
                            max_completion_tokens=max(completions))
    work = only(work_from_lengths(prompts, completions, settings, "trl-cpu", iterations=1), "update.train")
    return phase_flops(work, spec, adapter, settings, engine="trl-cpu", attention="full")["update"]


@pytest.mark.parametrize("name,rank,gc", [
    ("Qwen2.5-1.5B-Instruct", 64, True), ("Qwen2.5-1.5B-Instruct", 0, False), ("Qwen2.5-7B-Instruct", 8, True),
])
def test_lora_training_pass_matches_flopcounter_on_meta(name, rank, gc):
    """TRL's training micro-batch: fused-LM-head forward + backward (+ checkpoint recompute)."""
    from suite.accounting.reference import measure_train_pass

    spec = spec_for(name)
    adapter = Adapter.from_rank(rank)
    prompts, completions = [40, 33, 40], [25, 7, 31]
    measured = measure_train_pass(spec, adapter, prompts, completions, gradient_checkpointing=gc)
    analytic = _train_pass_analytic(spec, adapter, prompts, completions, gc)
    assert close(measured, analytic)
    assert measured == analytic


@pytest.mark.parametrize("rank", [0, 8, 64, 256])
@pytest.mark.parametrize("gc", [True, False])
@pytest.mark.parametrize("prompts,completions", [([7], [5]), ([3, 9, 4], [12, 1, 6])])
@pytest.mark.parametrize("tied", [False, True])
def test_training_pass_over_ranks_lengths_batches(rank, gc, prompts, completions, tied):
    from suite.accounting.reference import build_model, measure_train_pass

    spec = spec_from_config({**TINY, "tie_word_embeddings": tied}, "tiny")
    adapter = Adapter.from_rank(rank)
    measured = measure_train_pass(spec, adapter, prompts, completions, gc, device="cpu",
                                  model=build_model(spec, "cpu"))
    assert measured == _train_pass_analytic(spec, adapter, prompts, completions, gc)


@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), ("o_proj",), ("gate_proj", "up_proj"), ("down_proj",)])
@pytest.mark.parametrize("gc", [True, False])
def test_lora_target_subsets_match_flopcounter(targets, gc):
    """Without checkpointing layer 0's input needs no grad: which gradients exist depends on the
    targets; the accounting follows autograd's requires-grad propagation."""
    from suite.accounting.reference import build_model, measure_train_pass

    spec = spec_from_config(TINY, "tiny")
    adapter = Adapter(kind="lora", rank=4, alpha=8.0, targets=targets)
    prompts, completions = [5, 9], [6, 2]
    measured = measure_train_pass(spec, adapter, prompts, completions, gc, device="cpu",
                                  model=build_model(spec, "cpu"))
    assert measured == _train_pass_analytic(spec, adapter, prompts, completions, gc)


@pytest.mark.parametrize("rank", [0, 4, 16])
@pytest.mark.parametrize("prompts,completions", [([5, 9, 7, 9], [4, 11, 1, 6]), ([12], [9]), ([3, 3], [8, 8])])
def test_generate_matches_flopcounter(rank, prompts, completions):
    """HF generate: left-padded prefill (LM head at the last position only), then one decode step
    per further token for every row until the longest completion ends."""
    from suite.accounting.reference import add_lora, build_model, measure_generate

    spec = spec_from_config(TINY, "tiny")
    adapter = Adapter.from_rank(rank)
    model = add_lora(build_model(spec, "cpu"), adapter).eval()
    measured = measure_generate(model, prompts, completions)
    k = 2 if len(completions) % 2 == 0 else 1
    settings = GRPOSettings(group_size=k, prompts_per_step=len(completions) // k, max_completion_tokens=16)
    work = work_from_lengths(prompts, completions, settings, "trl")
    full = phase_flops(work, spec, adapter, settings, engine="trl", attention="full")["rollout"]
    causal = phase_flops(work, spec, adapter, settings, engine="trl", attention="causal")["rollout"]
    assert measured == full
    assert causal < full  # only the prefill's upper triangle differs


# ---- the algebra of work --------------------------------------------------------------------


SPEC15 = spec_for("Qwen2.5-1.5B-Instruct")
SETTINGS = GRPOSettings(group_size=2, prompts_per_step=3, num_iterations=2, beta=0.04, max_completion_tokens=64)


def test_work_is_additive_over_the_steps_a_ledger_records():
    """mu optimizer steps (generation on the first only) add up to the whole generation batch."""
    prompts, comps = [10, 20, 30], [5, 64, 7, 7, 33, 1]
    whole = work_from_lengths(prompts, comps, SETTINGS, "trl")
    first = work_from_lengths(prompts, comps, SETTINGS, "trl", iterations=1, generation=True)
    second = work_from_lengths(prompts, comps, SETTINGS, "trl", iterations=1, generation=False)
    assert add_work(first, second) == whole
    assert second["rollout.tokens"] == 0 and second["update.train.tokens"] > 0
    ad = Adapter.from_rank(16)
    parts = [phase_flops(w, SPEC15, ad, SETTINGS) for w in (first, second)]
    total = phase_flops(whole, SPEC15, ad, SETTINGS)
    assert {k: parts[0][k] + parts[1][k] for k in total} == total


@hsettings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 10**6), min_size=len(WORK_KEYS), max_size=len(WORK_KEYS)),
       st.lists(st.integers(0, 10**6), min_size=len(WORK_KEYS), max_size=len(WORK_KEYS)),
       st.sampled_from(sorted(ENGINES)), st.sampled_from(ATTENTION), st.sampled_from([0, 1, 8, 256]))
def test_flops_are_linear_in_work(a, b, eng, attention, rank):
    wa, wb = dict(zip(WORK_KEYS, a)), dict(zip(WORK_KEYS, b))
    prm = spec_for("Qwen2.5-Math-PRM-7B")
    ad = Adapter.from_rank(rank)
    fa, fb = (phase_flops(w, SPEC15, ad, SETTINGS, prm, eng, attention) for w in (wa, wb))
    fab = phase_flops(add_work(wa, wb), SPEC15, ad, SETTINGS, prm, eng, attention)
    assert fab == {k: fa[k] + fb[k] for k in fab}


def test_passes_run_when_the_engine_runs_them():
    prompts, comps = [10, 20], [5, 6, 7, 8]
    base = GRPOSettings(group_size=2, prompts_per_step=2, max_completion_tokens=8)
    w = work_from_lengths(prompts, comps, base, "trl")
    assert w["update.old.tokens"] == 0 and w["update.ref.tokens"] == 0
    # TRL: old-policy forward iff gradient_accumulation_steps % (steps_per_generation * mu) != 0
    mu2 = GRPOSettings(group_size=2, prompts_per_step=2, num_iterations=2, max_completion_tokens=8)
    assert work_from_lengths(prompts, comps, mu2, "trl")["update.old.tokens"] > 0
    misaligned = GRPOSettings(group_size=2, prompts_per_step=2, gradient_accumulation_steps=3, steps_per_generation=2,
                              max_completion_tokens=8)
    assert work_from_lengths(prompts, comps, misaligned, "trl")["update.old.tokens"] > 0
    aligned = GRPOSettings(group_size=2, prompts_per_step=2, gradient_accumulation_steps=4, steps_per_generation=2,
                           max_completion_tokens=8)
    assert work_from_lengths(prompts, comps, aligned, "trl")["update.old.tokens"] == 0
    beta = GRPOSettings(group_size=2, prompts_per_step=2, beta=0.1, max_completion_tokens=8)
    wb = work_from_lengths(prompts, comps, beta, "trl")
    assert wb["update.ref.tokens"] == wb["update.train.tokens"]
    # the reference forward runs without the adapter: cheaper than the old-policy forward
    rows = {n: f for _, n, f in pass_breakdown({**wb, "update.old.tokens": wb["update.ref.tokens"]}, SPEC15,
                                                Adapter.from_rank(64), beta, engine="trl")}
    assert 0 < rows["reference forward"] < rows["old-policy forward"]


def test_trl_pads_and_generic_counts_useful_tokens():
    prompts, comps = [10, 30], [5, 60, 7, 9]
    s = GRPOSettings(group_size=2, prompts_per_step=2, max_completion_tokens=64)
    trl, gen = work_from_lengths(prompts, comps, s, "trl"), work_from_lengths(prompts, comps, s, "generic")
    assert gen["update.train.tokens"] == sum(p + c for p, c in zip([10, 10, 30, 30], comps))
    assert trl["update.train.tokens"] == 4 * (30 + 60)
    assert trl["rollout.lm_head"] == 4 * 60 and gen["rollout.lm_head"] == sum(comps)
    assert gen["update.train.lm_head"] == sum(comps) == trl["update.train.lm_head"]
    assert work_from_lengths(prompts, comps, s, "trl-cpu")["update.train.lm_head"] == 4 * (90 - 1)
    assert tokens_from_work(trl) == tokens_from_work(gen) == {
        "rollout_prompt": 80, "rollout_completion": 81, "update": 161, "reward": 0}
    ad = Adapter.from_rank(8)
    assert phase_flops(trl, SPEC15, ad, s, engine="trl")["update"] > phase_flops(gen, SPEC15, ad, s, engine="generic")["update"]


def test_means_equal_lengths_when_every_length_is_the_mean():
    s = GRPOSettings(group_size=4, prompts_per_step=3, num_iterations=2, beta=0.1, max_completion_tokens=300)
    for eng in ENGINES:
        w = work_from_means(100, 200, s, eng, reward_tokens=300)
        assert w == work_from_lengths([100] * 3, [200] * 12, s, eng, reward_lengths=[300] * 12)


def test_prompt_lengths_per_prompt_or_per_completion():
    s = GRPOSettings(group_size=3, prompts_per_step=2, max_completion_tokens=9)
    assert work_from_lengths([4, 6], [1, 2, 3, 4, 5, 6], s) == work_from_lengths([4, 4, 4, 6, 6, 6], [1, 2, 3, 4, 5, 6], s)
    with pytest.raises(RaceError, match="prompt lengths for 6 completions"):
        work_from_lengths([4, 6, 7], [1, 2, 3, 4, 5, 6], s)


def test_attention_conventions():
    s = GRPOSettings(group_size=1, prompts_per_step=1, max_completion_tokens=1)
    w = work_from_lengths([4], [1], s, "generic")  # one prefill of 4 tokens, no decode
    assert w["rollout.attn_causal"] == 10 and w["rollout.attn_full"] == 16
    ad = Adapter.from_rank(8)
    diff = (phase_flops(w, SPEC15, ad, s, engine="generic", attention="full")["rollout"]
            - phase_flops(w, SPEC15, ad, s, engine="generic", attention="causal")["rollout"])
    assert diff == 6 * SPEC15.num_layers * 4 * SPEC15.num_heads * SPEC15.head_dim


def test_reward_model_forward_over_scored_tokens():
    prm = spec_for("Qwen2.5-Math-PRM-7B")
    s = GRPOSettings(group_size=2, prompts_per_step=1, max_completion_tokens=10)
    w = work_from_lengths([5], [3, 4], s, "trl", reward_lengths=[9, 12])
    f = phase_flops(w, SPEC15, Adapter.from_rank(8), s, reward_model=prm)
    h = prm.hidden_size
    per_token = 2 * sum(i * o for i, o in prm.projections().values()) * prm.num_layers + 2 * (h * h + h * 2)
    pairs = (9 * 10 // 2 + 12 * 13 // 2) * prm.num_layers * 4 * prm.num_heads * prm.head_dim
    assert f["reward"] == 21 * per_token + pairs
    assert phase_flops(work_from_lengths([5], [3, 4], s, "trl"), SPEC15, Adapter.from_rank(8), s)["reward"] == 0
    with pytest.raises(RaceError, match="no reward model"):
        phase_flops(w, SPEC15, Adapter.from_rank(8), s)


def test_trainable_params_match_peft():
    from peft import LoraConfig, get_peft_model

    from suite.accounting.reference import build_model

    for targets in (PROJECTIONS, ("q_proj", "v_proj")):
        ad = Adapter(kind="lora", rank=16, alpha=32.0, targets=targets)
        model = get_peft_model(build_model(SPEC15, "meta"), LoraConfig(r=16, target_modules=list(targets)))
        assert ad.trainable_params(SPEC15) == sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert Adapter.from_rank(0).trainable_params(SPEC15) == SPEC15.params_total


def test_step_flops_shares():
    r = step_flops(SPEC15, Adapter.from_rank(64), GRPOSettings(2, 16), 256, 1024, engine="trl")
    assert r.total == sum(r.flops.values()) and 0.5 < r.update_share < 0.9
    assert r.flops["reward"] == 0 and r.tokens["rollout_completion"] == 32 * 1024


# ---- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("lengths,msg", [([3, -1], "below 1"), ([3, math.nan], "not a finite"), ([3, 2.5], "whole"),
                                         ([3, 10**9], "absurd"), ([3, "7"], "not a finite"), ([], "no completions"),
                                         ([3, 100], "max_completion_tokens")])
def test_bad_lengths_are_refused_with_a_reason(lengths, msg):
    s = GRPOSettings(group_size=1, prompts_per_step=2, max_completion_tokens=50)
    with pytest.raises(RaceError, match=msg):
        work_from_lengths([4] * max(1, len(lengths)), lengths, s)


def test_work_is_priced_under_the_profile_it_was_built_for():
    """Work remembers its engine profile: pricing follows it, another profile is refused, a
    plain dict (read from a file) must name one, and work of two profiles does not add."""
    import pickle

    s, ad = GRPOSettings(2, 2, max_completion_tokens=16), Adapter.from_rank(8)
    trl, gen = (work_from_lengths([5, 7], [3, 4, 9, 2], s, e) for e in ("trl", "generic"))
    assert (trl.engine, gen.engine, work_from_means(6, 5, s).engine) == ("trl", "generic", "generic")
    assert phase_flops(trl, SPEC15, ad, s) == phase_flops(dict(trl), SPEC15, ad, s, engine="trl")
    assert phase_flops(trl, SPEC15, ad, s) != phase_flops(dict(trl), SPEC15, ad, s, engine="generic")
    with pytest.raises(RaceError, match="built for engine profile 'trl' priced under 'generic'"):
        phase_flops(trl, SPEC15, ad, s, engine="generic")
    with pytest.raises(RaceError, match="does not say which engine profile"):
        phase_flops(dict(trl), SPEC15, ad, s)
    with pytest.raises(RaceError, match="cannot be added"):
        add_work(trl, gen)
    assert add_work(trl, trl).engine == "trl" and add_work(trl, dict(trl)).engine == "trl"
    back = pickle.loads(pickle.dumps(trl))          # grid workers send work between processes
    assert back == trl and back.engine == "trl"


def test_bad_means_engines_settings_and_work():
    s = GRPOSettings(2, 2)
    for p, c in ((math.inf, 10), (10, -5), (10, 5e8), (math.nan, 3)):
        with pytest.raises(RaceError):
            work_from_means(p, c, s)
    with pytest.raises(RaceError, match="unknown engine"):
        get_engine("vllm-magic")
    with pytest.raises(RaceError, match="unknown attention"):
        coefficients(SPEC15, Adapter.from_rank(8), s, attention="sparse")
    for bad in (dict(group_size=0, prompts_per_step=1), dict(group_size=2, prompts_per_step=1, beta=-1.0),
                dict(group_size=2, prompts_per_step=1, beta=math.nan), dict(group_size=2, prompts_per_step=True)):
        with pytest.raises(RaceError):
            GRPOSettings(**bad)
    with pytest.raises(RaceError, match="unknown LoRA target"):
        Adapter(kind="lora", rank=8, targets=("lm_head",))
    with pytest.raises(RaceError):
        Adapter(kind="lora", rank=0)
    w = work_from_means(10, 10, s)
    with pytest.raises(RaceError, match="unknown key"):
        phase_flops({**w, "rollout.tokenz": 1}, SPEC15, Adapter.from_rank(8), s, engine="generic")
    with pytest.raises(RaceError, match="non-negative integer"):
        phase_flops({**w, "rollout.tokens": -1}, SPEC15, Adapter.from_rank(8), s, engine="generic")
