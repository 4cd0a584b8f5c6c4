"""The vLLM rollout profiles: TRL with use_vllm (`trl-vllm`) and verl (`verl`, prefix caching on by
default): one prompt prefill shared among the K completions of a prompt, no padding, logits only at
sampled positions; selectable in `race flops`, the TRL ledger and the importers; recomputed by the
validator. vLLM itself does not install beside the CPU stack, so the profile is checked against the
passes it is defined from (the generic profile's per-completion rollout, TRL's training)."""

import json
from pathlib import Path

import pytest
import yaml

from suite.accounting import Adapter, GRPOSettings, get_engine, pass_breakdown, phase_flops, work_from_lengths
from suite.cli import main
from suite.accounting.modelspec import spec_from_config
from suite.accounting.specs import spec_for
from suite.validate import validate_path

FIX = Path(__file__).parent / "fixtures"
PROMPTS, COMPLETIONS = [30, 50], [7, 20, 11, 3, 40, 9]  # two prompts, K = 3 completions each
SETTINGS = GRPOSettings(group_size=3, prompts_per_step=2, max_completion_tokens=64)


def test_prefix_caching_prefills_each_prompt_once_and_scores_only_sampled_tokens():
    shared = work_from_lengths(PROMPTS, COMPLETIONS, SETTINGS, "trl-vllm")
    own = work_from_lengths(PROMPTS, COMPLETIONS, SETTINGS, "generic")  # each completion prefills its prompt
    assert shared["count.rollout_prompt"] == sum(PROMPTS) and own["count.rollout_prompt"] == 3 * sum(PROMPTS)
    assert shared["rollout.tokens"] == own["rollout.tokens"] - 2 * sum(PROMPTS)
    assert shared["rollout.attn_causal"] == own["rollout.attn_causal"] - 2 * sum(p * (p + 1) // 2 for p in PROMPTS)
    # every completion still decodes against its whole prompt; logits at its sampled tokens only
    decode = sum((c - 1) * p + (c - 1) * c // 2 for p, c in zip([30] * 3 + [50] * 3, COMPLETIONS))
    assert shared["rollout.attn_full"] == sum(p * p for p in PROMPTS) + decode
    assert shared["rollout.lm_head"] == sum(COMPLETIONS)
    # no padding in generation, while TRL still pads the training batch
    padded = work_from_lengths(PROMPTS, COMPLETIONS, SETTINGS, "trl")
    assert shared["rollout.tokens"] < padded["rollout.tokens"]
    # training as TRL's (the old-policy forward aside: below)
    assert {k: v for k, v in shared.items() if k.startswith("update.") and not k.startswith("update.old.")} == \
           {k: v for k, v in padded.items() if k.startswith("update.") and not k.startswith("update.old.")}


def test_with_one_completion_per_prompt_nothing_is_shared():
    one = GRPOSettings(group_size=1, prompts_per_step=6, max_completion_tokens=64)
    prompts = [30] * 3 + [50] * 3
    a, b = (work_from_lengths(prompts, COMPLETIONS, one, e) for e in ("trl-vllm", "generic"))
    assert {k: v for k, v in a.items() if k.startswith("rollout.")} == {k: v for k, v in b.items() if k.startswith("rollout.")}


def test_trains_as_trl_does():
    spec = spec_for("Qwen2.5-1.5B-Instruct")
    ad = Adapter.from_rank(64)
    w = work_from_lengths(PROMPTS, COMPLETIONS, SETTINGS, "trl-vllm")
    vllm = dict(((p, n), f) for p, n, f in pass_breakdown(w, spec, ad, SETTINGS, engine="trl-vllm"))
    # the same statistics (a plain dict: priced under another profile on purpose) train as under 'trl'
    trl = dict(((p, n), f) for p, n, f in pass_breakdown(dict(w), spec, ad, SETTINGS, engine="trl"))
    assert {k: v for k, v in vllm.items() if k[0] == "update"} == {k: v for k, v in trl.items() if k[0] == "update"}
    assert get_engine("trl-vllm").describe()["prefill_per_completion"] is False


def test_moe_expert_lora_runs_per_token_in_vllm_and_per_call_in_generate():
    """transformers generate through peft folds an expert LoRA into every expert's weights at each
    decode step; vLLM applies it to the routed tokens only."""
    moe = spec_from_config({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 96, "head_dim": 16,
                            "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
                            "vocab_size": 300, "num_experts": 16, "num_experts_per_tok": 2,
                            "moe_intermediate_size": 32}, "moe")
    ad = Adapter.from_rank(8)
    s = GRPOSettings(group_size=1, prompts_per_step=2, max_completion_tokens=64)
    roll = {e: phase_flops(work_from_lengths([20, 20], [30, 30], s, e, policy=moe), moe, ad, s, engine=e)["rollout"]
            for e in ("trl", "trl-vllm", "generic")}
    assert roll["trl-vllm"] == roll["generic"]  # same lengths, one completion per prompt: nothing shared
    assert roll["trl"] > 3 * roll["trl-vllm"]  # 30 calls x 16 experts' folds


def test_verl_rollout_shares_the_prefill_as_its_config_says():
    import importlib.util

    from suite.integrations.verl import config_dir

    if importlib.util.find_spec("verl") is None:     # only a missing verl skips; a broken config fails
        pytest.skip("verl's packaged config is not installed (scripts/setup.sh --test installs verl==0.9.1)")
    rollout_yaml = config_dir() / "rollout" / "rollout.yaml"
    assert yaml.safe_load(rollout_yaml.read_text())["enable_prefix_caching"] is True
    assert get_engine("verl").prefill_per_completion is False
    shared = work_from_lengths(PROMPTS, COMPLETIONS, SETTINGS, "verl")
    assert shared["count.rollout_prompt"] == sum(PROMPTS)


def test_race_flops_selects_it(capsys):
    base = ["flops", "--model", "Qwen3-4B", "--group-size", "8", "--prompts-per-step", "4", "--json"]
    out = {}
    for e in ("trl", "trl-vllm", "trl-vllm-no-is"):
        capsys.readouterr()
        assert main([*base, "--engine-profile", e]) == 0
        out[e] = json.loads(capsys.readouterr().out)
    assert out["trl-vllm"]["engine_profile"] == "trl-vllm"
    # K = 8 completions share each 256-token prompt
    assert out["trl"]["per_step"]["tokens"]["rollout_prompt"] == 8 * out["trl-vllm"]["per_step"]["tokens"]["rollout_prompt"]
    assert out["trl-vllm"]["per_step"]["flops"]["rollout"] < out["trl"]["per_step"]["flops"]["rollout"]
    assert out["trl-vllm-no-is"]["per_step"]["flops"] == {**out["trl-vllm"]["per_step"]["flops"],
                                                        "update": out["trl"]["per_step"]["flops"]["update"],
                                                        "total": out["trl-vllm-no-is"]["per_step"]["flops"]["total"]}


def test_trl_with_vllm_runs_the_old_policy_forward_for_its_importance_sampling():
    """TRL 1.16 grpo_trainer._generate_and_score_completions computes old_per_token_logps whenever
    use_vllm and vllm_importance_sampling_correction (its default) are set, even at mu = 1 with
    aligned steps: trl-vllm charges that no-grad forward; trl-vllm-no-is (the correction off) as trl."""
    import inspect

    from trl.trainer import grpo_trainer

    src = inspect.getsource(grpo_trainer.GRPOTrainer._generate_and_score_completions)
    assert "self.use_vllm and self.vllm_importance_sampling_correction" in src
    assert grpo_trainer.GRPOConfig.__dataclass_fields__["vllm_importance_sampling_correction"].default is True
    spec, ad = spec_for("Qwen3-4B"), Adapter.from_rank(16)
    flops = {}
    for e in ("trl", "trl-vllm", "trl-vllm-no-is"):
        w = work_from_lengths(PROMPTS, COMPLETIONS, SETTINGS, e)
        flops[e] = dict(((p, n), f) for p, n, f in pass_breakdown(w, spec, ad, SETTINGS, engine=e))
    old = "update", "old-policy forward"
    assert flops["trl-vllm"][old] > 0 and flops["trl"][old] == flops["trl-vllm-no-is"][old] == 0
    # a no-grad forward of the policy over the trained rows: under full fine-tuning it costs what the
    # reference forward (beta > 0) costs
    import dataclasses

    kl = dataclasses.replace(SETTINGS, beta=0.1)
    w = work_from_lengths(PROMPTS, COMPLETIONS, kl, "trl-vllm")
    full = dict(((p, n), f) for p, n, f in pass_breakdown(w, spec, Adapter(kind="full"), kl, engine="trl-vllm"))
    assert full[old] == full[("update", "reference forward")] > 0


def test_the_ledger_of_a_trl_run_with_vllm_uses_it():
    from types import SimpleNamespace

    from suite.train.trlsetup import engine_of

    assert engine_of(None, SimpleNamespace(use_vllm=True)) == "trl-vllm"
    assert engine_of(None, SimpleNamespace(use_vllm=True, vllm_importance_sampling_correction=False)) == "trl-vllm-no-is"


def test_imported_trl_vllm_run_validates_and_tampering_is_caught(tmp_path):
    log, cell = FIX / "trl" / "trainer_state.json", FIX / "trl" / "cell-trl-qwen0.5b.yaml"
    assert main(["import", "trl", str(log), "--cell", str(cell), "--out", str(tmp_path),
                 "--engine-profile", "trl-vllm"]) == 0
    report = tmp_path / "report.json"
    assert validate_path(report) == []  # the validator recomputes every phase under trl-vllm
    doc = json.loads(report.read_text())
    assert doc["accounting"]["engine_profile"] == "trl-vllm"
    k = doc["grpo"]["group_size"]
    hist = [e for e in json.loads(log.read_text())["log_history"] if "num_tokens" in e]
    tok = doc["totals"]["tokens"]  # TRL counts each prompt K times; the prefill ran once per prompt
    assert k * tok["rollout_prompt"] + tok["rollout_completion"] == pytest.approx(hist[-1]["num_tokens"], abs=3 * k)
    # claim the rollout FLOPs of per-completion prefills (the K-fold prompt) on this shared-prefill work
    doc["totals"]["flops"]["rollout"] += (k - 1) * doc["totals"]["flops"]["rollout"] // 10
    report.write_text(json.dumps(doc))
    assert any("rollout" in f.path for f in validate_path(report))
