"""Reports whose policy or reward model is priced by the traced path (issues 28 and 32): a model
with no analytic recipe is carried in the report's model block as its Hugging Face config
(`spec.priced_by: traced`, report 1.3), written, read back typed and validated by tracing the
config again -- estimated, measured and imported. Forgeries (counts edited, a shrunk config under
a real model's name, FLOPs scaled consistently) are refused by rule ID; without torch the validator
says it cannot vouch for a traced model (PHYS-010) instead of passing it; hostile configs are
refused before any model is built.

Cheap by construction: GPT-2 and GLM-4.5 configs two layers deep and 32 wide, traced on the meta
device (coefficients cached in a folder of this module's own)."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")

from suite.cli import main  # noqa: E402
from suite.validate import validate_report  # noqa: E402

FIX = Path(__file__).parent / "fixtures"
GPT2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 32, "n_layer": 2, "n_head": 2,
        "vocab_size": 128, "n_positions": 64}
GPT2_RM = {**GPT2, "architectures": ["GPT2ForSequenceClassification"], "num_labels": 1}
CELL = """name: {name}
policy: {policy}
reward: {reward}
lora_rank: 4
lora_targets: [c_attn, c_proj]
group_size: 2
prompts_per_step: 2
max_completion_tokens: 32
steps: 3
mean_prompt_tokens: 10
mean_completion_tokens: 20
engine: {{name: trl, version: 1.16.0, profile: trl}}
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Config folders of a GPT-2 policy and a GPT-2 sequence-classification reward model (no
    recipe: traced; their coefficients cached in the session's folder, tests/conftest.py)."""
    root = tmp_path_factory.mktemp("traced-reports")
    for name, cfg in (("gpt2-tiny", GPT2), ("gpt2-rm", GPT2_RM)):
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(cfg))
    return root


@pytest.fixture(scope="module")
def estimate(models):
    """`race report --estimate` of a cell whose policy and reward model are both config folders of
    a family with no recipe: the report as written (schema 1.3)."""
    cell = models / "est.yaml"
    cell.write_text(CELL.format(name="gpt2-est", policy="gpt2-tiny",
                                reward="{system: my-orm, kind: orm, model: gpt2-rm}"))
    assert main(["report", "--estimate", str(cell), "-o", str(models / "est.json")]) == 0
    return json.loads((models / "est.json").read_text())


def _ids(doc, **kw) -> set[str]:
    return {f.rule_id for f in validate_report(doc, **kw) if f.severity == "error"}


def test_an_estimate_of_traced_models_is_written_read_and_validated(models, estimate):
    from suite.accounting.traced import TracedSpec
    from suite.accounting.specs import spec_for
    from suite.record.report import read_report

    report = read_report(models / "est.json")        # strict JSON + the 1.3 schema
    assert report.doc["schema_version"] == "1.3"
    assert report.priced_by == {"policy": "traced", "reward": "traced"}
    spec = report.model_spec("policy")
    assert isinstance(spec, TracedSpec) and spec == spec_for(models / "gpt2-tiny")      # the config, traced again
    assert report.doc["policy"]["spec"] == {"priced_by": "traced", "name": "gpt2-tiny", "model_type": "gpt2",
                                             "config": GPT2}
    assert report.params_total == spec.params_total and report.model_spec("reward").has_lm_head is False
    assert report.doc["adapter"]["trainable_params"] == spec.lora(report_adapter(report))[1]
    assert report.flops["reward"] > 0
    assert main(["validate", "--strict", str(models / "est.json")]) == 0


def report_adapter(report):
    from suite.accounting import Adapter

    a = report.doc["adapter"]
    return Adapter(kind="lora", rank=a["rank"], alpha=a["alpha"], targets=tuple(a["targets"]))


def test_a_measured_and_an_imported_report_of_a_traced_policy_validate(models, tmp_path):
    """Measured: a ledger priced step by step (LedgerWriter, real lengths) and its run description
    naming the config folder; imported: `race import trl` of a TRL log with a cell that does."""
    from suite import (LedgerWriter, Provenance, build_report, phase_flops, tokens_from_work, work_from_lengths,
                       write_report)
    from suite.accounting.specs import spec_for
    from suite.train.cell import load_run_description

    (tmp_path / "cell.yaml").write_text(CELL.format(name="gpt2-run", policy=models / "gpt2-tiny", reward="sparse"))
    spec = load_run_description(tmp_path / "cell.yaml")
    policy, settings = spec_for(spec.policy), spec.grpo
    with LedgerWriter(tmp_path / "ledger.jsonl") as w:
        for step in (1, 2, 3):
            work = work_from_lengths([7, 12], [20 + step, 3, 32, 9], settings, "trl", policy=policy)
            w.append(step, tokens=tokens_from_work(work), work=work,
                     flops=phase_flops(work, policy, spec.adapter, settings, engine="trl"))
    built = build_report(tmp_path / "ledger.jsonl", spec, provenance=Provenance("measured", recorder="test"))
    write_report(tmp_path / "report.json", built)
    assert built.doc["schema_version"] == "1.3" and built.priced_by["policy"] == "traced"
    assert main(["validate", "--strict", str(tmp_path / "report.json")]) == 0

    cell = (FIX / "trl" / "cell-trl-qwen0.5b.yaml").read_text().replace(
        "policy: Qwen2.5-0.5B-Instruct", f"policy: {models / 'gpt2-tiny'}\nlora_targets: [c_attn]")
    (tmp_path / "trl.yaml").write_text(cell)
    assert main(["import", "trl", str(FIX / "trl" / "trainer_state.json"), "--cell", str(tmp_path / "trl.yaml"),
                 "--out", str(tmp_path / "imported")]) == 0
    doc = json.loads((tmp_path / "imported" / "report.json").read_text())
    assert doc["policy"]["spec"]["priced_by"] == "traced" and doc["provenance"]["method"] == "imported"
    assert main(["validate", "--strict", str(tmp_path / "imported" / "report.json")]) == 0


def _scaled(doc, k):
    """The totals multiplied by k, consistently (shares and p unchanged)."""
    out = copy.deepcopy(doc)
    out["totals"]["flops"] = {p: v * k for p, v in doc["totals"]["flops"].items()}
    return out


def test_consistent_forgeries_of_a_traced_report_are_refused(models, estimate):
    assert _ids(estimate) == set()
    # parameter counts edited (both, consistently): the config, traced again, has other counts
    forged = copy.deepcopy(estimate)
    forged["policy"]["params_total"] *= 2
    forged["policy"]["params_non_embedding"] = forged["policy"]["params_total"] - 4096
    assert "PHYS-006" in _ids(forged)
    # every FLOP scaled by 3 (totals, shares and p agree with each other): the trace prices the work
    assert "PHYS-001" in _ids(_scaled(estimate, 3))
    # the config widened (more FLOPs claimed for the same work), counts left: FLOPs and counts disagree
    forged = copy.deepcopy(estimate)
    forged["policy"]["spec"]["config"]["n_embd"] = 64
    assert {"PHYS-001", "PHYS-006"} <= _ids(forged)
    # a traced spec of a family with a recipe: one form per model
    forged = copy.deepcopy(estimate)
    forged["policy"]["spec"]["config"]["model_type"] = forged["policy"]["spec"]["model_type"] = "qwen2"
    assert "PHYS-006" in _ids(forged)
    # a traced spec in a report that claims an older version
    forged = copy.deepcopy(estimate)
    forged["schema_version"] = "1.2"
    assert "SCHEMA-002" in _ids(forged)


def test_a_shrunk_config_under_a_real_models_name_is_refused(models, monkeypatch):
    """GLM-4.5-Air's name (a traced catalog entry) on a config whose widths were shrunk, the
    report priced consistently from the shrunk config: only the catalog check can see it (PHYS-007,
    with and without torch). Its 64 experts, 2 a token, also hold the rollout floor to what a token
    runs: PHYS-002 leaves a traced policy to PHYS-001 (all 64 would put the floor above the truth)."""
    from dataclasses import replace

    from suite.accounting.specs import lookup
    from suite.accounting.specs import spec_for
    from suite.record.build import Means, build_estimate
    from suite.train.cell import load_run_description

    catalog = json.loads(lookup("GLM-4.5-Air").path.read_text())
    shrunk = {k: v for k, v in catalog.items() if not k.startswith("_")}
    shrunk.update(hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=16, num_hidden_layers=2, n_routed_experts=64, num_experts_per_tok=2,
                  vocab_size=128)
    (models / "glm.yaml").write_text(CELL.format(name="glm-forged", policy="Qwen2.5-0.5B-Instruct", reward="sparse")
                                     .replace("lora_targets: [c_attn, c_proj]", "lora_targets: [q_proj, v_proj]"))
    run = load_run_description(models / "glm.yaml")
    doc = build_estimate(replace(run, policy=spec_for(shrunk, "GLM-4.5-Air")), Means(10, 20)).doc
    found = [f for f in validate_report(doc) if f.severity == "error"]
    assert [f.rule_id for f in found] == ["PHYS-007"], found
    assert "spec differs from catalog model 'GLM-4.5-Air'" in found[0].message and "hidden_size 32 vs 4096" in \
        found[0].message
    # the catalog's own config under the name satisfies the rule (asked of it alone: pricing the real
    # 106B config's work would trace it, ~2 min here the first time)
    from suite.validate.context import ReportContext
    from suite.validate.physics import catalog_identity

    ok = copy.deepcopy(doc)
    ok["policy"]["spec"]["config"] = json.loads(spec_for("GLM-4.5-Air").config)
    assert list(catalog_identity(ReportContext(ok, "ok.json", None))) == []
    assert len(list(catalog_identity(ReportContext(doc, "forged.json", None)))) == 1
    # the light core sees the name too: refused by the catalog check, and not vouched for
    from suite.accounting import stored

    with monkeypatch.context() as m:
        for mod in ("torch", "transformers"):
            m.setitem(sys.modules, mod, None)
        stored._traced.cache_clear()
        assert _ids(doc) == {"PHYS-007", "PHYS-010"}


def test_without_torch_a_traced_report_is_refused_with_its_rule_and_hint(models, estimate, monkeypatch, capsys):
    """The light core (no torch, no transformers) cannot re-derive a traced model's FLOPs: one
    PHYS-010 error per traced model naming the train extra, no traceback, never a pass -- the
    honest report and a consistently forged one read the same there."""
    from suite.accounting import stored

    for mod in ("torch", "transformers"):
        monkeypatch.setitem(sys.modules, mod, None)
    stored._traced.cache_clear()
    assert not stored.traced_available()
    findings = validate_report(estimate)
    assert [(f.rule_id, f.path) for f in findings] == [("PHYS-010", "$.policy.spec"), ("PHYS-010", "$.reward.model.spec")]
    assert "needs torch and transformers" in findings[0].message and "race-suite[train]" in findings[0].hint
    assert _ids(_scaled(estimate, 3)) == {"PHYS-010"}          # a forgery is not passed either
    assert main(["validate", str(models / "est.json")]) == 1
    err = capsys.readouterr()
    assert "PHYS-010" in err.out and "Traceback" not in err.out + err.err


def test_hostile_traced_configs_are_refused_before_any_model_is_built(models, estimate, monkeypatch):
    """Sizes over the schema's maxima, layers x experts, an oversized config and more traced
    models than a report may carry: each refused with a rule ID, fast (no model of those sizes is
    ever built: building one fails the test)."""
    import time

    from suite.accounting import traced
    from suite.limits import MAX_TRACED_MODELS

    deep = copy.deepcopy(estimate)
    deep["policy"]["spec"]["config"]["n_layer"] = 10 ** 6
    many = copy.deepcopy(estimate)
    many["policy"]["spec"]["config"].update(model_type="olmoe", num_hidden_layers=1024, num_experts=65536)
    many["policy"]["spec"]["model_type"] = "olmoe"
    big = copy.deepcopy(estimate)
    big["policy"]["spec"]["config"]["padding"] = ["x" * 60] * 1200
    unknown = copy.deepcopy(estimate)       # a model type transformers does not know
    unknown["policy"]["spec"]["config"]["model_type"] = unknown["policy"]["spec"]["model_type"] = "gpt2_nonesuch"
    real = traced._build

    def build(cfg, *a, **k):
        if "padding" in cfg or max(cfg.get(key, 0) for key in ("n_layer", "num_experts")) > 1000:
            pytest.fail(f"a hostile config was built: {cfg}")
        return real(cfg, *a, **k)

    monkeypatch.setattr(traced, "_build", build)
    t0 = time.perf_counter()
    for doc, words in ((deep, "num_hidden_layers"), (many, "layers x"), (big, "bytes"), (unknown, "gpt2_nonesuch")):
        found = [f for f in validate_report(doc) if f.path == "$.policy.spec"]
        assert [f.rule_id for f in found] == ["PHYS-006"] and words in found[0].message, found
    assert time.perf_counter() - t0 < 5
    monkeypatch.undo()

    # a config transformers builds but whose own code fails (top-8 of 4 experts): named, not a traceback
    from suite.accounting.specs import lookup

    glm = {k: v for k, v in json.loads(lookup("GLM-4.5-Air").path.read_text()).items() if k[0] != "_"}
    glm.update(hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_attention_heads=2,
               num_key_value_heads=1, head_dim=16, num_hidden_layers=2, n_routed_experts=4, vocab_size=128)
    broken = copy.deepcopy(estimate)
    broken["policy"]["spec"].update(model_type="glm4_moe", config=glm)
    broken["adapter"]["targets"] = ["q_proj"]
    found = [f for f in validate_report(broken) if f.rule_id in ("PHYS-001", "INTERNAL-001")]
    assert [f.rule_id for f in found] == ["PHYS-001"] and "code fails on its config" in found[0].message, found

    judged = copy.deepcopy(estimate)      # one traced judge per evaluation row, each a distinct config
    for i in range(MAX_TRACED_MODELS + 1):
        judge = copy.deepcopy(estimate["reward"]["model"])
        judge["spec"]["config"]["n_positions"] = 64 + i
        judged["evaluations"].append({"target": f"t{i}", "metric": "process_judge", "value": 0.5, "n": 1,
                                      "judge": judge})
    found = [f for f in validate_report(judged) if f.rule_id == "PHYS-010"]
    assert [f.path for f in found] == [f"$.evaluations[{MAX_TRACED_MODELS - 1}].judge.spec",
                                       f"$.evaluations[{MAX_TRACED_MODELS}].judge.spec"]


def test_race_run_plans_a_cell_whose_policy_is_a_traced_family(tmp_path, capsys):
    """`race run --plan` (everything `race run` checks and prices before a model loads) on a cell
    whose policy is a GPT-2 folder: read through spec_for, its LoRA on c_attn priced by the trace."""
    from suite.paths import home
    from tools import embedded

    tok = embedded.load_tokenizer()
    folder = tmp_path / "gpt2-policy"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**GPT2, "vocab_size": len(tok)}))
    tok.save_pretrained(folder)
    cell = tmp_path / "cell.yaml"
    cell.write_text(f"policy: {folder}\ndataset: {home() / 'tests/fixtures/gsm8k_head.jsonl'}\nreward: sparse\n"
                    "budget_flops: 1e12\nlora_rank: 4\nlora_targets: [c_attn]\ngroup_size: 2\nprompts_per_step: 2\n"
                    "max_completion_tokens: 16\n")
    assert main(["run", str(cell), "--plan"]) == 0
    out = capsys.readouterr().out
    assert "policy gpt2-policy (" in out and "one step costs at most" in out and "nothing was trained" in out
