"""Issue 28: no model family refused. Configs as transformers itself writes them are read under
every spelling (attribute_map aliases); a decoder with no recipe is priced by tracing the real HF
code (suite.accounting.traced) within 1% of FlopCounterMode, and the report names the path."""

import dataclasses
import json

import pytest

from suite.accounting.modelspec import ATTRIBUTE_MAP, FAMILIES, load_spec, spec_from_config

from test_families import HELD_OUT, OWN, config

transformers = pytest.importorskip("transformers")


def test_attribute_map_table_is_transformers_own():
    """The light core's alias table (no transformers import) is each config class's attribute_map."""
    for model_type in FAMILIES:
        want = dict(transformers.CONFIG_MAPPING[model_type].attribute_map)
        assert ATTRIBUTE_MAP.get(model_type, {}) == want, model_type


def test_configs_saved_by_transformers_read_as_hub_configs(tmp_path):
    """AutoConfig.for_model(...).save_pretrained(dir) writes attribute names (Qwen3-MoE:
    num_local_experts, not num_experts): every supported family's folder gives the same spec,
    hence the same FLOPs, as the hub-shaped dict."""
    from transformers import AutoConfig

    seen = 0
    every = {"llama": {"mlp_bias": True}, "qwen2": {}, **OWN}  # llama, qwen2: tests/test_accounting.py's
    for n, src in enumerate((every, HELD_OUT)):
        for model_type, extra in sorted(src.items()):
            cfg = config(model_type, extra)
            folder = tmp_path / f"{model_type}-{n}"
            AutoConfig.for_model(**cfg).save_pretrained(folder)
            written = json.loads((folder / "config.json").read_text())
            got = dataclasses.replace(load_spec(str(folder)), name=model_type)
            assert got == spec_from_config(cfg, model_type), (model_type, sorted(set(written) - set(cfg)))
            seen += 1
    assert set(FAMILIES) == set(every) and seen == len(every) + len(HELD_OUT)  # every family written and read
    assert "num_experts" not in json.loads((tmp_path / "qwen3_moe-0" / "config.json").read_text())
    spec = load_spec(str(tmp_path / "qwen3_moe-0"))
    assert spec.num_experts == OWN["qwen3_moe"]["num_experts"]
