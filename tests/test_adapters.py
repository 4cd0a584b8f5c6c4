"""One conversion from a PEFT config to the accounting's Adapter (suite.accounting.adapter):
the TRL callback reads it off a live PEFT model, the evaluation off the saved
adapter_config.json; both give the same Adapter, and both refuse what cannot be counted."""

from __future__ import annotations

import json

import pytest

from suite.accounting import PROJECTIONS, Adapter
from suite.accounting.adapter import adapter_from_peft
from suite.errors import RaceError


def test_no_config_is_full_fine_tuning():
    assert adapter_from_peft(None) == Adapter(kind="full")


def test_target_lists_and_strings():
    a = adapter_from_peft({"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["v_proj", "q_proj"]})
    assert a == Adapter(kind="lora", rank=8, alpha=16.0, targets=("q_proj", "v_proj"))
    assert adapter_from_peft({"r": 4, "target_modules": "all-linear"}).targets == PROJECTIONS


@pytest.mark.parametrize("config, needle", [
    ({"peft_type": "LORA", "r": 8, "target_modules": ["q_proj", "lm_head"]}, "lm_head"),
    ({"peft_type": "LORA", "r": 8, "target_modules": ["q_proj"], "rank_pattern": {"q_proj": 4}}, "ranks differ"),
    ({"peft_type": "LORA", "r": 8, "target_modules": ["q_proj"], "layers_to_transform": [0]}, "some layers"),
    ({"peft_type": "IA3", "target_modules": ["q_proj"]}, "IA3"),
])
def test_what_cannot_be_counted_is_refused(config, needle):
    with pytest.raises(RaceError, match=needle):
        adapter_from_peft(config)


def test_live_model_and_saved_config_give_the_same_adapter(tmp_path):
    """Training (the callback, from the modules PEFT adapted) and evaluation (from the saved
    adapter_config.json) convert the same adapter alike."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from suite.train.trlsetup import adapter_of

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                         num_key_value_heads=1, intermediate_size=64))
    for targets in (["q_proj", "down_proj"], "all-linear"):
        peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=targets, lora_dropout=0.0))
        live = adapter_of(peft_model)
        peft_model.save_pretrained(tmp_path / str(targets))
        saved = json.loads((tmp_path / str(targets) / "adapter_config.json").read_text())
        assert adapter_from_peft(saved) == live
        assert live.rank == 4 and set(live.targets) == ({"q_proj", "down_proj"} if targets != "all-linear"
                                                          else set(PROJECTIONS))
        model = peft_model.unload()
