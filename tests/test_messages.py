"""Messages that used to mislead (issue 17, "Messages that mislead"): each now names the real
problem and the fix. Every test checks the wording's key words."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from suite.cli import main
from suite.errors import RaceError
from suite.paths import schemas
from suite.validate import validate_report

VALID = schemas() / "examples" / "valid"
SPARSE = VALID / "paper-qwen1.5b-lora64-sparse.json"


def _doc() -> dict:
    return json.loads(SPARSE.read_text())


def test_shares_given_as_percents_are_called_percents():
    doc = _doc()
    doc["totals"]["shares"]["rollout"] = 61.1
    (f,) = [f for f in validate_report(doc) if f.rule_id == "SCHEMA-002"]
    assert f.path == "$.totals.shares.rollout"
    assert "fractions" in f.hint and "not percents" in f.hint and "0.611" in f.hint
    assert "10^30" not in f.hint and "unit mistake" not in f.hint


def test_a_ledger_given_to_race_report_without_spec_says_so(tmp_path, capsys):
    ledger = tmp_path / "ledger.jsonl"
    shutil.copy(VALID / _doc()["ledger"]["path"], ledger)
    assert main(["report", str(ledger)]) == 2
    err = capsys.readouterr().err
    assert "is a ledger" in err and "--spec" in err and "trailing data" not in err
    renamed = tmp_path / "steps.json"            # a ledger under another name: read its first line
    shutil.copy(ledger, renamed)
    assert main(["report", str(renamed)]) == 2
    assert "is a ledger" in capsys.readouterr().err


def test_race_report_help_names_race_eval():
    race = Path(sys.executable).parent / "race"
    out = subprocess.run([str(race), "report", "--help"], capture_output=True, text=True).stdout
    assert "race evaluate" not in out and "race eval" in out and "--estimate" in out


def test_phys_003_names_the_declared_and_the_recomputed_figure():
    doc = json.loads((schemas() / "examples" / "invalid" / "lora-priced-as-full.json").read_text())
    (f,) = [f for f in validate_report(doc) if f.rule_id == "PHYS-003"]
    declared, recomputed = f"{doc['totals']['flops']['update']:,}", None
    assert f"declared {declared}" in f.message and "recomputed for the report's adapter (LoRA r=64)" in f.message
    recomputed = f.message.split("the update is ")[1].split(" ")[0]
    assert recomputed != declared and f.message.count(declared) == 1      # no number printed twice
    assert "full fine-tuning" in f.message


def test_race_report_refuses_a_mispriced_report_and_writes_nothing(tmp_path, capsys):
    """A ledger priced under one engine profile, described under another: PHYS-001, exit 1."""
    import yaml

    doc = _doc()
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(VALID / doc["ledger"]["path"], run / "ledger.jsonl")
    cell = {"policy": "Qwen2.5-1.5B-Instruct", "reward": "sparse", "lora_rank": 64, "lora_alpha": 128, "K": 2,
            "prompts_per_step": 16, "max_completion_tokens": 2048, "engine": {"profile": "verl"}}
    (run / "cell.yaml").write_text(yaml.safe_dump(cell))
    assert main(["report", str(run / "ledger.jsonl"), "--spec", str(run / "cell.yaml"), "-o", str(run / "r.json")]) == 1
    err = capsys.readouterr().err
    assert "PHYS-001" in err and "nothing was written" in err and "engine profile" in err
    assert not (run / "r.json").exists()
    cell["engine"]["profile"] = "trl"                  # described as it was priced: written, exit 0
    (run / "cell.yaml").write_text(yaml.safe_dump(cell))
    assert main(["report", str(run / "ledger.jsonl"), "--spec", str(run / "cell.yaml"), "-o", str(run / "r.json")]) == 0
    assert json.loads((run / "r.json").read_text())["provenance"]["method"] == "measured"


def test_an_empty_ledger_is_refused_by_race_report(tmp_path, capsys):
    import yaml

    (tmp_path / "ledger.jsonl").write_bytes(b"")
    (tmp_path / "cell.yaml").write_text(yaml.safe_dump({"policy": "Qwen2.5-1.5B-Instruct", "reward": "sparse"}))
    assert main(["report", str(tmp_path / "ledger.jsonl"), "--spec", str(tmp_path / "cell.yaml"),
                 "-o", str(tmp_path / "report.json")]) == 1
    err = capsys.readouterr().err
    assert "PROV-001" in err and "no step records" in err and not (tmp_path / "report.json").exists()


def test_eval_of_a_run_trained_with_its_own_reward_function_names_the_override(tmp_path):
    from suite.evaluate.runs import run_models

    doc = copy.deepcopy(_doc())
    doc["reward"]["system"] = "correct"             # the TRL doc example's Python reward function
    (tmp_path / "report.json").write_text(json.dumps(doc))
    with pytest.raises(RaceError) as e:
        run_models(tmp_path)
    assert "'correct'" in e.value.message and "cannot rerun" in e.value.message
    assert "--native-reward" in e.value.hint and "sparse" in e.value.hint
