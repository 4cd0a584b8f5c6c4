"""Model specs: exact parameter counts against the real Hugging Face model (meta device, no
weights), config.json from a path (Qwen2, Llama, Mistral), and clear errors."""

import json

import pytest

from suite.errors import RaceError
from suite.modelspec import ModelSpec, catalog_names, load_spec, spec_from_config

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

CATALOG = ["Qwen2.5-0.5B-Instruct", "Qwen2.5-1.5B-Instruct", "Qwen2.5-3B-Instruct", "Qwen2.5-7B-Instruct",
           "Qwen2.5-Math-PRM-7B"]


def hf_param_count(spec: ModelSpec) -> int:
    from suite.measure import build_model

    return sum(p.numel() for p in build_model(spec, "meta").parameters())


def test_catalog_lists_the_paper_models():
    assert catalog_names() == sorted(CATALOG)


@pytest.mark.parametrize("name", CATALOG)
def test_catalog_param_counts_equal_the_hf_model(name):
    spec = load_spec(name)
    assert spec.params_total == hf_param_count(spec)


def test_catalog_facts_of_the_paper_models():
    s15, s7 = load_spec("Qwen2.5-1.5B-Instruct"), load_spec("Qwen2.5-7B-Instruct")
    assert s15.params_total == 1_543_714_304
    assert (s15.hidden_size, s15.num_layers, s15.num_heads, s15.num_kv_heads, s15.intermediate_size,
            s15.vocab_size, s15.tie_embeddings, s15.qkv_bias) == (1536, 28, 12, 2, 8960, 151936, True, True)
    assert (s7.hidden_size, s7.num_heads, s7.num_kv_heads, s7.intermediate_size, s7.vocab_size,
            s7.tie_embeddings) == (3584, 28, 4, 18944, 152064, False)
    # Qwen's model cards: 1.31B and 6.53B non-embedding parameters.
    assert round(s15.params_non_embedding / 1e9, 2) == 1.31
    assert round(s7.params_non_embedding / 1e9, 2) == 6.53


def test_prm_is_a_backbone_with_a_two_layer_score_head():
    prm = load_spec("Qwen2.5-Math-PRM-7B")
    assert not prm.has_lm_head
    assert prm.score_head == ((3584, 3584), (3584, 2))
    backbone = load_spec("Qwen2.5-7B-Instruct")
    # same backbone as the 7B policy, minus the LM head, plus Linear(h,h)+Linear(h,2) with biases
    assert prm.params_total == backbone.params_total - 152064 * 3584 + 3584 * 3584 + 3584 + 3584 * 2 + 2


def test_names_are_case_insensitive_and_accept_hub_ids():
    assert load_spec("qwen2.5-1.5b-instruct") == load_spec("Qwen/Qwen2.5-1.5B-Instruct")


def test_unknown_name_lists_closest_catalog_names():
    with pytest.raises(RaceError) as e:
        load_spec("Qwen2.5-7B-Instuct")
    assert "Qwen2.5-7B-Instruct" in e.value.hint


def test_round_trip_through_json():
    for name in CATALOG:
        spec = load_spec(name)
        again = ModelSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
        assert again == spec and again.params_total == spec.params_total
    with pytest.raises(RaceError, match="unknown field"):
        ModelSpec.from_dict({**load_spec(CATALOG[0]).to_dict(), "bogus": 1})
    d = load_spec(CATALOG[0]).to_dict()
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
    spec = load_spec(str(folder))  # a folder
    assert spec == load_spec(str(folder / "config.json"))  # or the file itself
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
        load_spec(str(path))


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
        load_spec(str(bad))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RaceError, match="no config.json"):
        load_spec(str(empty))
