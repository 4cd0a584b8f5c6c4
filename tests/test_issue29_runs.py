"""Issue 29, item 7: `race import trl` declares TRL's global_step as the run's steps (a log that
stops short is refused by PROV-002, not imported as a shorter run), and `race submit` refuses a
second submission of one run (same run id and ledger) naming the first."""

from __future__ import annotations

import json
import shutil

import pytest

from suite import paths
from suite.cli import main
from suite.errors import RaceError
from suite.integrations import importers
from suite.site import leaderboard as lb
from suite.train.cell import load_cell
from suite.validate import validate_path

FIX = paths.home() / "tests" / "fixtures"
TRL_STATE = FIX / "trl" / "trainer_state.json"
TRL_CELL = FIX / "trl" / "cell-trl-qwen0.5b.yaml"
VALID = paths.schemas() / "examples" / "valid"


def _state(tmp_path, global_step):
    state = json.loads(TRL_STATE.read_text())
    state["global_step"] = global_step
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps(state))
    return p


def test_import_trl_declares_global_step(tmp_path):
    """Issue: global_step 1000 with logs to step 6 imported as a clean 6-step report."""
    out = tmp_path / "short"
    assert main(["import", "trl", str(_state(tmp_path, 1000)), "--cell", str(TRL_CELL), "--out", str(out)]) == 0
    doc = json.loads((out / "report.json").read_text())
    assert doc["provenance"]["steps"] == 1000
    assert "PROV-002" in {f.rule_id for f in validate_path(out / "report.json")}
    whole = tmp_path / "whole"
    assert main(["import", "trl", str(_state(tmp_path, 6)), "--cell", str(TRL_CELL), "--out", str(whole)]) == 0
    assert validate_path(whole / "report.json") == []


def test_import_trl_refuses_global_step_below_the_log(tmp_path):
    with pytest.raises(RaceError, match="global_step 4 is below the last logged step 6"):
        importers.import_trl(_state(tmp_path, 4), load_cell(TRL_CELL, check_paths=False), tmp_path / "out")


def test_submit_refuses_the_same_run_with_its_notes_edited(tmp_path, capsys):
    """Issue: the same run submitted five times with only its notes edited was listed six times."""
    doc = json.loads((VALID / "paper-qwen1.5b-lora64-sparse.json").read_text())
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(VALID / doc["ledger"]["path"], run / doc["ledger"]["path"])
    subs = tmp_path / "subs"
    subs.mkdir()
    (run / "report.json").write_text(json.dumps(doc))
    first = lb.submit(run / "report.json", subs)
    for i in range(5):
        doc["run"]["notes"] = f"edited {i}"
        (run / "report.json").write_text(json.dumps(doc))
        with pytest.raises(lb.SubmissionRefused, match=f"duplicate of {first.id}.json .*the same run") as e:
            lb.submit(run / "report.json", subs)
        assert first.id in e.value.message
    assert main(["submit", str(run / "report.json"), "--submissions", str(subs)]) == 1
    assert first.id in capsys.readouterr().err
    assert [p.name for p in subs.glob("*.json")] == [f"{first.id}.json"]
    doc["run"]["id"] = "another-run-on-the-same-ledger"            # a different run id is a different run
    (run / "report.json").write_text(json.dumps(doc))
    assert lb.submit(run / "report.json", subs).id != first.id
