"""One door for every model (issue 39): recipe and traced specs implement one protocol, one
catalog lookup covers both catalogs, and every command that names a model takes it through
`spec_for` -- `race plan` and `race flops --list-models` included."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from suite.accounting import Adapter
from suite.accounting.specs import (CATALOG_DIR, PATH_RECIPE, PATH_TRACED, TRACED_CATALOG, Spec, catalog_names, lookup,
                                    priced_by, spec_for)
from suite.errors import RaceError

ROOT = Path(__file__).resolve().parents[1]
GPT2 = {"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 2, "vocab_size": 128, "n_positions": 64}
"""A decoder with no recipe: priced by the traced path."""


def test_the_catalog_is_both_folders_behind_one_lookup():
    recipe = sorted(p.stem for p in CATALOG_DIR.glob("*.json"))
    traced = sorted(p.stem for p in TRACED_CATALOG.glob("*.json"))
    assert recipe and traced and not set(recipe) & set(traced)
    assert catalog_names() == sorted(recipe + traced)
    assert catalog_names(PATH_RECIPE) == recipe and catalog_names(PATH_TRACED) == traced
    hit = lookup("zai-org/glm-4.5-air")     # hub prefix and case ignored
    assert hit.name == "GLM-4.5-Air" and hit.priced_by == PATH_TRACED and hit.path == TRACED_CATALOG / "GLM-4.5-Air.json"
    assert lookup("Qwen/qwen2.5-1.5b-instruct").priced_by == PATH_RECIPE
    assert lookup("no-such-model") is None
    with pytest.raises(RaceError, match="unknown model 'GLM-4.5-Aire'") as e:
        spec_for("GLM-4.5-Aire")
    assert "GLM-4.5-Air" in e.value.hint


def test_recipe_and_traced_specs_answer_the_same_questions():
    pytest.importorskip("torch")
    recipe, traced = spec_for("Qwen2.5-0.5B-Instruct"), spec_for(GPT2, "tiny-gpt2")
    lora = Adapter.from_rank(4, targets=("all-linear",))
    for spec, path in ((recipe, PATH_RECIPE), (traced, PATH_TRACED)):
        assert isinstance(spec, Spec) and spec.priced_by == path == priced_by(spec) == priced_by(spec.to_dict())
        costs = spec.costs(lora, rg0=True, gc=True)
        assert set(costs) == {"fwd", "base", "bwd", "recompute"} and costs["fwd"]["tok"] > costs["base"]["tok"] > 0
        answer = spec.lora(lora)
        assert answer.units and answer.trainable == lora.trainable_params(spec) > 0
        assert spec.lora(Adapter(kind="full")).trainable == spec.params_total
        assert spec_for(spec.to_hf_config(), spec.name).params_total == spec.params_total
    assert priced_by(None) is None


def test_no_spec_is_asked_which_kind_it_is():
    """No `getattr(spec, "traced", ...)` branches; one priced_by function; costs imports no work."""
    src = {p: p.read_text(encoding="utf-8") for p in (ROOT / "suite").rglob("*.py")}
    assert [p.name for p, s in src.items() if re.search(r"""getattr\(\w+, ["']traced["']""", s)] == []
    assert [p.name for p, s in src.items() if re.search(r"^def priced_by\(", s, re.M)] == ["specs.py"]
    assert not re.search(r"^from \.work import", src[ROOT / "suite" / "accounting" / "costs.py"], re.M)


def test_plan_and_list_models_take_traced_catalog_entries(capsys, tmp_path):
    """`race plan --models` prices a model by the traced path as any other (a tiny config folder
    here: GLM-4.5-Air goes through the same spec_for, only slower), and `race flops --list-models`
    lists every catalog entry, the traced ones marked."""
    pytest.importorskip("torch")
    from suite.cli.main import main

    (tmp_path / "tiny-gpt2").mkdir()
    (tmp_path / "tiny-gpt2" / "config.json").write_text(json.dumps(GPT2))
    plan = ["plan", "--budget", "1e15", "--models", f"Qwen2.5-0.5B-Instruct,{tmp_path / 'tiny-gpt2'}",
            "--prompt-tokens", "16", "--completion-tokens", "16", "--json"]
    assert main(plan) == 2      # the default targets (q_proj, ...) name no GPT-2 module: one line, no internal error
    err = capsys.readouterr().err
    assert "LoRA targets q_proj, k_proj" in err and "adapt nothing in tiny-gpt2 (gpt2)" in err and "internal" not in err
    assert main([*plan, "--lora-targets", "all-linear"]) == 0
    rows = {r["model"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert set(rows) == {"Qwen2.5-0.5B-Instruct", "tiny-gpt2"} and rows["tiny-gpt2"]["steps"] > rows["Qwen2.5-0.5B-Instruct"]["steps"] > 0
    assert main(["flops", "--list-models"]) == 0
    listed = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert list(listed) == catalog_names()
    assert all(", traced" in listed[n] for n in catalog_names(PATH_TRACED))
