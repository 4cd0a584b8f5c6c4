"""Provenance in every report, and what each method implies: an empty ledger, a ledger that
misses declared steps, and means dressed as a measurement are refused with their rule IDs;
imports say which log and fields they read; estimates carry no ledger; the hardware
cross-check catches claims no accelerator could deliver; version 1.0 reports stay valid; and
one run description (the cell YAML) serves report, estimate and import, its relative paths
resolved from its own folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from suite.cli import main
from suite.paths import schemas
from suite.validate import validate_path
from suite.record.schemas import REPORT_VERSION

EXAMPLES = schemas() / "examples"
FIX = Path(__file__).parent / "fixtures"
TRL_STATE = FIX / "trl" / "trainer_state.json"
TRL_CELL = FIX / "trl" / "cell-trl-qwen0.5b.yaml"
VERL_LOG = FIX / "verl" / "metrics-qwen1.5b-r64.jsonl"
VERL_CELL = FIX / "verl" / "cell-qwen1.5b-r64.yaml"

PAPER = {"name": "paper-run", "policy": "Qwen2.5-1.5B-Instruct", "reward": {"system": "sparse", "kind": "rule"},
         "lora_rank": 64, "K": 2, "prompts_per_step": 64, "max_completion_tokens": 2048,
         "engine": {"name": "trl", "version": "1.16.0", "profile": "trl"},
         "steps": 100, "mean_prompt_tokens": 200, "mean_completion_tokens": 700}


def _estimate(tmp_path, capsys, **changes) -> tuple[int, dict | None, str]:
    spec = {**PAPER, **changes}
    (tmp_path / "paper.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "report.json"
    out.unlink(missing_ok=True)
    code = main(["report", "--estimate", str(tmp_path / "paper.yaml"), "-o", str(out)])
    return code, json.loads(out.read_text()) if out.exists() else None, capsys.readouterr().err


@pytest.mark.parametrize("name,rule", [("empty-ledger", "PROV-001"), ("fewer-records-than-steps", "PROV-002"),
                                       ("identical-records", "PROV-003")])
def test_race_validate_refuses_with_the_rule_id(name, rule, capsys):
    assert main(["validate", str(EXAMPLES / "invalid" / f"{name}.json")]) == 1
    assert rule in capsys.readouterr().out


def test_a_version_1_0_report_stays_valid(capsys):
    old = EXAMPLES / "valid" / "v1.0-paper-qwen1.5b-lora64-sparse.json"
    doc = json.loads(old.read_text())
    assert doc["schema_version"] == "1.0" and "provenance" not in doc
    assert main(["validate", "--strict", str(old)]) == 0
    new = json.loads((EXAMPLES / "valid" / "paper-qwen1.5b-lora64-sparse.json").read_text())
    assert new["schema_version"] == REPORT_VERSION and new["provenance"]["method"] == "measured"
    del new["provenance"]                                   # 1.1 requires it; 1.0 never had it
    (rid,) = {f.rule_id for f in __import__("suite.validate", fromlist=["x"]).validate_report(new)}
    assert rid == "SCHEMA-002"


def test_means_written_as_a_ledger_are_refused_as_a_measurement(tmp_path, capsys):
    """The old workaround: a ledger of identical lines from the setup table, built into a report."""
    src = (EXAMPLES / "valid" / "paper-qwen1.5b-lora64-sparse.ledger.jsonl").read_text().splitlines()[0]
    first = json.loads(src)
    (tmp_path / "ledger.jsonl").write_text("".join(json.dumps({**first, "step": i}) + "\n" for i in range(1, 41)))
    (tmp_path / "cell.yaml").write_text(yaml.safe_dump({**PAPER, "prompts_per_step": 16, "lora_alpha": 128}))
    assert main(["report", str(tmp_path / "ledger.jsonl"), "--spec", str(tmp_path / "cell.yaml"),
                 "-o", str(tmp_path / "report.json")]) == 1
    err = capsys.readouterr().err
    assert "PROV-003" in err and "means" in err and "--estimate" in err


def test_a_hand_written_trainer_state_imports_as_imported_and_identical_means_are_refused(tmp_path, capsys):
    state = json.loads(TRL_STATE.read_text())
    entries = [e for e in state["log_history"] if "num_tokens" in e]
    step_tokens = entries[0]["num_tokens"]
    for i, e in enumerate(entries):                 # the setup table's means, copied to every entry
        e.update({k: entries[0][k] for k in e if k not in ("step", "num_tokens", "epoch")},
                 num_tokens=step_tokens * (i + 1))
    hand = tmp_path / "trainer_state.json"
    hand.write_text(json.dumps(state))
    assert main(["import", "trl", str(hand), "--cell", str(TRL_CELL), "--out", str(tmp_path / "imp")]) == 0
    doc = json.loads((tmp_path / "imp" / "report.json").read_text())
    assert doc["provenance"]["method"] == "imported" and doc["provenance"]["source"]["file"] == "trainer_state.json"
    capsys.readouterr()
    assert main(["validate", str(tmp_path / "imp" / "report.json")]) == 1
    assert "PROV-003" in capsys.readouterr().out


def test_imports_say_which_log_and_fields_they_read(tmp_path):
    assert main(["import", "verl", str(VERL_LOG), "--cell", str(VERL_CELL), "--out", str(tmp_path / "v")]) == 0
    prov = json.loads((tmp_path / "v" / "report.json").read_text())["provenance"]
    assert prov["method"] == "imported" and prov["recorder"] == "race import verl"
    assert prov["source"] == {"engine": "verl", "file": VERL_LOG.name,
                              "fields": ["prompt_length/mean", "response_length/mean", "perf/total_num_tokens"]}
    assert main(["import", "trl", str(TRL_STATE), "--cell", str(TRL_CELL), "--out", str(tmp_path / "t")]) == 0
    doc = json.loads((tmp_path / "t" / "report.json").read_text())
    # logging_steps=2: three log entries, six optimizer steps, all of them accounted for.
    assert doc["totals"]["steps"] == 3 and doc["provenance"]["steps"] == 6
    assert validate_path(tmp_path / "t" / "report.json") == []
    from suite.site.render import row_from_report

    row = row_from_report(doc, id="t")
    assert (row.steps, row.provenance) == (6, "imported (trl)")


def test_one_run_description_with_paths_relative_to_its_own_folder(tmp_path, monkeypatch):
    """`race import --cell` used to resolve a cell's relative model path from the current folder."""
    from suite.accounting.specs import CATALOG_DIR, spec_for

    (tmp_path / "exp" / "models" / "small").mkdir(parents=True)
    shutil.copy(CATALOG_DIR / "Qwen2.5-0.5B-Instruct.json", tmp_path / "exp" / "models" / "small" / "config.json")
    cell = yaml.safe_load(TRL_CELL.read_text())
    cell["policy"] = "models/small"                     # relative to the cell's folder
    (tmp_path / "exp" / "cell.yaml").write_text(yaml.safe_dump(cell))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["import", "trl", str(TRL_STATE), "--cell", "../exp/cell.yaml", "--out", "imp"]) == 0
    doc = json.loads((elsewhere / "imp" / "report.json").read_text())
    assert doc["policy"]["params_total"] == spec_for("Qwen2.5-0.5B-Instruct").params_total
    # The same file is a run description for race report and for race export.
    assert main(["export", "verl", "../exp/cell.yaml", "--overrides-only"]) == 0

def test_a_measured_report_over_an_imported_ledger_misses_steps(tmp_path, capsys):
    """race report --spec says measured: one record per step. A TRL import logged every second
    step, so the same ledger as a measurement lacks three steps (and the description's pricing
    is right: no physics finding)."""
    assert main(["import", "trl", str(TRL_STATE), "--cell", str(TRL_CELL), "--out", str(tmp_path)]) == 0
    assert main(["report", str(tmp_path / "ledger.jsonl"), "--spec", str(TRL_CELL), "-o",
                 str(tmp_path / "again.json")]) == 1
    err = capsys.readouterr().err
    assert "PROV-002" in err and "steps run to step 6" in err and "PHYS" not in err


def test_an_estimate_is_priced_like_a_ledger_of_those_means(tmp_path, capsys):
    from suite.accounting import Adapter, GRPOSettings, phase_flops, work_from_means
    from suite.accounting.specs import spec_for

    code, doc, _ = _estimate(tmp_path, capsys)
    assert code == 0 and "ledger" not in doc
    g = GRPOSettings(group_size=2, prompts_per_step=64, max_completion_tokens=2048)
    one = phase_flops(work_from_means(200, 700, g, "trl"), spec_for("Qwen2.5-1.5B-Instruct"), Adapter.from_rank(64),
                      g, engine="trl")
    assert doc["totals"]["flops"]["update"] == 100 * one["update"]
    assert doc["provenance"] == {"method": "estimated", "recorder": "race report --estimate", "steps": 100,
                                 "means": {"prompt_tokens": 200.0, "completion_tokens": 700.0, "reward_tokens": None}}
    assert validate_path(tmp_path / "report.json") == []
    # A reward model outside the suite, named by its catalog spec: charged, and still clean.
    code, doc, _ = _estimate(tmp_path, capsys, reward={"system": "my-orm", "kind": "orm", "model": "Qwen2.5-Math-PRM-7B"})
    assert code == 0 and doc["reward"]["model"]["name"] == "Qwen2.5-Math-PRM-7B" and doc["totals"]["flops"]["reward"] > 0
    assert validate_path(tmp_path / "report.json") == []


def test_estimate_mistakes_are_one_line_each(tmp_path, capsys):
    spec = dict(PAPER)
    del spec["steps"]
    code, _, err = _estimate(tmp_path, capsys, **{k: v for k, v in spec.items()}, steps=None)
    assert code == 2 and "an estimate needs steps" in err
    code, _, err = _estimate(tmp_path, capsys, max_completion_tokens=512)
    assert code == 2 and "700" in err and "max_completion_tokens=512" in err
    code, _, err = _estimate(tmp_path, capsys, hardware={"accelerator": "H100", "count": 8, "peak_flops": 9.89e14})
    assert code == 2 and "wall_seconds" in err
    code, _, err = _estimate(tmp_path, capsys, reward="my-orm")
    assert code == 2 and "unknown reward system 'my-orm'" in err and "kind" in err


@pytest.mark.parametrize("utilization,code,rule", [(3.0, 1, "PHYS-009"), (0.8, 0, "PLAUS-005"), (0.1, 0, None)])
def test_the_hardware_cross_check(tmp_path, capsys, utilization, code, rule):
    """The claim over what 8 accelerators deliver at peak in the time given: above 1 refused,
    above 0.7 flagged."""
    _, doc, _ = _estimate(tmp_path, capsys)
    seconds = doc["totals"]["flops"]["total"] / (9.89e14 * 8 * utilization)
    hw = {"accelerator": "NVIDIA H100 SXM", "count": 8, "dtype": "bf16", "peak_flops": 9.89e14, "wall_seconds": seconds}
    got, doc, err = _estimate(tmp_path, capsys, hardware=hw)
    assert got == code, err
    if rule == "PHYS-009":
        assert doc is None and "PHYS-009" in err and "implied utilization 3" in err
    else:
        assert (rule or "PLAUS") in err if rule else "PLAUS-005" not in err
        assert doc["hardware"]["wall_seconds"] == pytest.approx(seconds)
