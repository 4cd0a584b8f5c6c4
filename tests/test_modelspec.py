"""Model specs: exact parameter counts against the real Hugging Face model (meta device, no
weights), config.json from a path (Qwen2, Llama, Mistral), and clear errors."""

import json

import pytest

from suite.errors import RaceError
from suite.accounting.modelspec import ModelSpec, spec_from_config
from suite.accounting.specs import CATALOG_DIR, catalog_names, spec_for

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

CATALOG = ["Qwen2.5-0.5B-Instruct", "Qwen2.5-1.5B-Instruct", "Qwen2.5-3B-Instruct", "Qwen2.5-7B-Instruct",
           "Qwen2.5-Math-PRM-7B"]
FAMILY_CATALOG = ["Qwen3-0.6B", "Qwen3-1.7B", "Qwen3-4B", "Qwen3-8B", "Qwen3-14B", "Qwen3-32B", "Qwen3-30B-A3B",
                  "Qwen3-Next-80B-A3B-Instruct", "Llama-3.1-8B-Instruct", "Llama-3.2-1B-Instruct",
                  "Llama-3.2-3B-Instruct", "DeepSeek-R1-Distill-Qwen-1.5B", "DeepSeek-R1-Distill-Qwen-7B",
                  "gemma-3-1b-it", "gemma-3-4b-it", "gemma-3-12b-it", "OLMo-2-1124-7B-Instruct", "gpt-oss-20b"]
"""Catalog entries of issue 18 (their counts equal the HF model: tests/test_accounting.py)."""
RUNS_CATALOG = ["Qwen3.5-397B-A17B", "Qwen2.5-7B", "Qwen2.5-14B", "Qwen2.5-32B", "Qwen2.5-Math-7B",
                "DeepSeek-R1-Distill-Qwen-14B", "DeepSeek-R1-Distill-Qwen-32B", "DeepSeek-V3-Base", "Qwen3-4B-Base",
                "gpt-oss-120b", "Olmo-3-1025-7B", "Olmo-3-1125-32B"]
"""Catalog entries of issues 28 and 30: the policies of published GRPO runs (MLPerf Training 6.1's
first; then SimpleRL-Zoo's, DAPO's, Oat-Zero's, DeepCoder's and Skywork-OR1's bases)."""


def hf_param_count(spec: ModelSpec) -> int:
    from suite.accounting.reference import build_model

    return sum(p.numel() for p in build_model(spec, "meta").parameters())


def test_catalog_lists_the_paper_models():
    assert catalog_names("recipe") == sorted(CATALOG + FAMILY_CATALOG + RUNS_CATALOG)


@pytest.mark.parametrize("name,total,non_embedding,active", [
    # the model cards' rounded figures (B): Qwen3 cards state total and non-embedding parameters;
    # Qwen3-30B-A3B "30.5B total, 3.3B activated" counts the embedding, ours leaves the lookup out
    # (3.0B); Qwen3-Next "80B total, 3B activated" (ours 3.6B with the LM head); OpenAI gpt-oss-20b
    # "20.9B total, 3.6B active" (no embedding, as ours); Llama 3.x, R1 distills, Gemma 3, OLMo 2:
    # the sizes their hub pages show
    ("Qwen3-0.6B", 0.6, 0.44, None), ("Qwen3-1.7B", 1.7, 1.4, None), ("Qwen3-4B", 4.0, 3.6, None),
    ("Qwen3-8B", 8.2, 6.95, None), ("Qwen3-14B", 14.8, 13.2, None), ("Qwen3-32B", 32.8, 31.2, None),
    ("Qwen3-30B-A3B", 30.5, 29.9, 3.0), ("Qwen3-Next-80B-A3B-Instruct", 80, None, 3.6),
    ("gpt-oss-20b", 20.9, None, 3.6), ("Llama-3.1-8B-Instruct", 8.03, None, None),
    ("Llama-3.2-1B-Instruct", 1.24, None, None), ("Llama-3.2-3B-Instruct", 3.21, None, None),
    ("DeepSeek-R1-Distill-Qwen-1.5B", 1.78, None, None), ("DeepSeek-R1-Distill-Qwen-7B", 7.62, None, None),
    ("gemma-3-1b-it", 1.0, None, None), ("OLMo-2-1124-7B-Instruct", 7.3, None, None),
    ("Qwen2.5-7B", 7.62, None, None), ("Qwen2.5-Math-7B", 7.62, None, None), ("Qwen2.5-14B", 14.8, None, None),
    ("Qwen2.5-32B", 32.8, None, None), ("DeepSeek-R1-Distill-Qwen-14B", 14.8, None, None),
    ("DeepSeek-R1-Distill-Qwen-32B", 32.8, None, None),
    # DeepSeek-V3 "671B total, 37B activated" (without its 14B MTP module; ours 36.6B active leaves
    # the 0.93B embedding lookup out); OpenAI gpt-oss-120b "116.8B total, 5.1B active"; Qwen3-4B-Base
    # as Qwen3-4B
    ("DeepSeek-V3-Base", 671, None, 36.6), ("gpt-oss-120b", 116.8, None, 5.1), ("Qwen3-4B-Base", 4.0, 3.6, None),
    # OLMo 3 (issue 28): the sizes their names state
    ("Olmo-3-1025-7B", 7, None, None), ("Olmo-3-1125-32B", 32, None, None),
])
def test_transcribed_catalog_matches_the_model_cards(name, total, non_embedding, active):
    s = spec_for(name)
    digits = len(str(total).split(".")[1]) if "." in str(total) else 0
    assert round(s.params_total / 1e9, digits) == total
    if non_embedding is not None:
        assert round(s.params_non_embedding / 1e9, len(str(non_embedding).split(".")[1])) == non_embedding
    if active is not None:
        assert s.is_moe and round(s.params_active / 1e9, 1) == active
    assert s.params_active < s.params_total if s.is_moe else True


def test_catalog_sources_say_they_are_transcribed():
    for name in FAMILY_CATALOG + RUNS_CATALOG:
        cfg = json.loads((CATALOG_DIR / f"{name}.json").read_text())
        assert "transcribed" in cfg["_source"] and "no weights" in cfg["_source"]


def test_qwen3_5_397b_a17b_is_the_model_its_card_describes():
    """MLPerf Training 6.1's GRPO policy: the card's 397B total are the text decoder (396.3B) and
    its vision tower; its 17B activated count the embedding, as Qwen's cards do (Qwen3-30B-A3B's
    3.3B): ours leaves the lookup out (16.3B)."""
    s = spec_for("Qwen3.5-397B-A17B")
    assert (s.model_type, s.num_layers, s.hidden_size, s.num_experts, s.experts_per_token) == \
        ("qwen3_5_moe_text", 60, 4096, 512, 10)
    assert s.layer_types.count("full_attention") == 15 and s.layer_types[3] == "full_attention"
    assert round(s.params_total / 1e9) == 396 and round((s.params_active + s.vocab_size * s.hidden_size) / 1e9) == 17
    assert s.dense_mlp_layers == () and not s.tie_embeddings
    cfg = json.loads((CATALOG_DIR / "Qwen3.5-397B-A17B.json").read_text())
    assert spec_from_config(cfg["text_config"], s.name) == s  # hub-shaped (multimodal) or text-only: one spec


@pytest.mark.parametrize("name", CATALOG)
def test_catalog_param_counts_equal_the_hf_model(name):
    spec = spec_for(name)
    assert spec.params_total == hf_param_count(spec)


def test_catalog_facts_of_the_paper_models():
    s15, s7 = spec_for("Qwen2.5-1.5B-Instruct"), spec_for("Qwen2.5-7B-Instruct")
    assert s15.params_total == 1_543_714_304
    assert (s15.hidden_size, s15.num_layers, s15.num_heads, s15.num_kv_heads, s15.intermediate_size,
            s15.vocab_size, s15.tie_embeddings, s15.qkv_bias) == (1536, 28, 12, 2, 8960, 151936, True, True)
    assert (s7.hidden_size, s7.num_heads, s7.num_kv_heads, s7.intermediate_size, s7.vocab_size,
            s7.tie_embeddings) == (3584, 28, 4, 18944, 152064, False)
    # Qwen's model cards: 1.31B and 6.53B non-embedding parameters.
    assert round(s15.params_non_embedding / 1e9, 2) == 1.31
    assert round(s7.params_non_embedding / 1e9, 2) == 6.53


def test_prm_is_a_backbone_with_a_two_layer_score_head():
    prm = spec_for("Qwen2.5-Math-PRM-7B")
    assert not prm.has_lm_head
    assert prm.score_head == ((3584, 3584), (3584, 2))
    backbone = spec_for("Qwen2.5-7B-Instruct")
    # same backbone as the 7B policy, minus the LM head, plus Linear(h,h)+Linear(h,2) with biases
    assert prm.params_total == backbone.params_total - 152064 * 3584 + 3584 * 3584 + 3584 + 3584 * 2 + 2


def test_names_are_case_insensitive_and_accept_hub_ids():
    assert spec_for("qwen2.5-1.5b-instruct") == spec_for("Qwen/Qwen2.5-1.5B-Instruct")


def test_unknown_name_lists_closest_catalog_names():
    with pytest.raises(RaceError) as e:
        spec_for("Qwen2.5-7B-Instuct")
    assert "Qwen2.5-7B-Instruct" in e.value.hint


def test_round_trip_through_json():
    for name in CATALOG + FAMILY_CATALOG:
        spec = spec_for(name)
        again = ModelSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
        assert again == spec and again.params_total == spec.params_total
    with pytest.raises(RaceError, match="unknown field"):
        ModelSpec.from_dict({**spec_for(CATALOG[0]).to_dict(), "bogus": 1})
    d = spec_for(CATALOG[0]).to_dict()
    del d["vocab_size"]
    with pytest.raises(RaceError, match="vocab_size"):
        ModelSpec.from_dict(d)


LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 96, "intermediate_size": 200,
         "num_attention_heads": 6, "num_key_value_heads": 2, "num_hidden_layers": 3, "vocab_size": 500,
         "attention_bias": True, "mlp_bias": True, "tie_word_embeddings": False, "head_dim": 24}
MISTRAL = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 64,
           "intermediate_size": 160, "num_attention_heads": 4, "num_key_value_heads": 1, "num_hidden_layers": 2,
           "vocab_size": 300, "sliding_window": 4096}  # tie_word_embeddings absent: untied


@pytest.mark.parametrize("cfg", [LLAMA, MISTRAL, {**LLAMA, "attention_bias": False, "mlp_bias": False,
                                                  "tie_word_embeddings": True, "head_dim": None}],
                         ids=["llama-biased-headdim", "mistral", "llama-tied"])
def test_config_from_a_path_counts_like_the_real_model(tmp_path, cfg):
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    spec = spec_for(str(folder))  # a folder
    assert spec == spec_for(str(folder / "config.json"))  # or the file itself
    hf_cfg = AutoConfig.for_model(**{k: v for k, v in cfg.items() if k != "architectures" and v is not None})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_cfg)
    assert spec.params_total == sum(p.numel() for p in model.parameters())
    assert spec.head_dim == (cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])


def test_missing_field_is_named(tmp_path):
    cfg = dict(MISTRAL)
    del cfg["intermediate_size"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(RaceError, match="missing field 'intermediate_size'"):
        spec_for(str(path))


@pytest.mark.parametrize("extra,word", [
    ({"num_local_experts": 8, "num_experts_per_tok": 2}, "mixture-of-experts"),  # experts on a dense type
    ({"model_type": "qwen2_moe", "num_experts": 60}, "mixture-of-experts"),
    ({"model_type": "t5", "is_encoder_decoder": True, "d_model": 512}, "encoder-decoder"),
    ({"model_type": "gpt2"}, "not supported"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"num_key_value_heads": 3}, "num_key_value_heads"),
])
def test_unsupported_configs_say_why(extra, word):
    with pytest.raises(RaceError, match=word):
        spec_from_config({**MISTRAL, **extra}, "x")


def test_bad_files_are_race_errors(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(RaceError, match="not valid JSON"):
        spec_for(str(bad))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RaceError, match="no config.json"):
        spec_for(str(empty))
