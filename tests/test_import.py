"""`race import verl|trl`: foreign logs become a ledger and a report that passes `race validate`,
priced with LoRA-correct FLOPs, with verl's own figure beside ours."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.integrations import importers
from suite.train.cell import load_cell
from suite.cli import main
from suite.errors import RaceError
from suite.validate import validate_path

FIX = Path(__file__).parent / "fixtures"
VERL_LOG = FIX / "verl" / "metrics-qwen1.5b-r64.jsonl"
VERL_CELL = FIX / "verl" / "cell-qwen1.5b-r64.yaml"
TRL_STATE = FIX / "trl" / "trainer_state.json"
TRL_CELL = FIX / "trl" / "cell-trl-qwen0.5b.yaml"


def _log_lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_verl_log_imports_to_a_valid_report_with_lora_correct_update(tmp_path):
    assert main(["import", "verl", str(VERL_LOG), "--cell", str(VERL_CELL), "--out", str(tmp_path)]) == 0
    assert validate_path(tmp_path / "report.json") == []
    doc = json.loads((tmp_path / "report.json").read_text())
    lines = [x["data"] for x in _log_lines(VERL_LOG) if x["step"] > 0]
    assert doc["run"]["engine"] == {"name": "verl", "version": "0.9.1"}
    assert doc["accounting"]["engine_profile"] == "verl"
    assert doc["totals"]["steps"] == len(lines) == 3
    # Token totals are the log's own: every sequence once through the update.
    assert doc["totals"]["tokens"]["update"] == pytest.approx(sum(d["perf/total_num_tokens"] for d in lines), abs=3)
    assert doc["totals"]["flops"]["reward"] == 0 and doc["adapter"]["rank"] == 64

    cmp = json.loads((tmp_path / "comparison.json").read_text())
    ours_train, verl6n = cmp["ours"]["update_train"], cmp["verl_estimator_update"]
    # verl prices the LoRA update at 6N per token: well above our forward+backward.
    assert ours_train < verl6n
    assert 1.45 < verl6n / ours_train < 1.8
    # verl's own perf/mfu/actor, turned back into FLOPs, agrees with its estimator on these means.
    assert cmp["verl_mfu_update"] == pytest.approx(verl6n, rel=0.05)


def test_verl_figure_ignores_the_adapter_ours_drops_by_the_lora_factor(tmp_path):
    cell = load_cell(VERL_CELL, check_paths=False)
    lora = importers.import_verl(VERL_LOG, cell, tmp_path / "lora").comparison
    full = importers.import_verl(VERL_LOG, cell.with_changes(lora_rank=0), tmp_path / "full").comparison
    assert lora.verl_estimator_update == full.verl_estimator_update  # same 6N for r=64 and full FT
    factor = full.ours["update_train"] / lora.ours["update_train"]
    # LoRA skips the frozen weights' gradients: about a third of a full fine-tune's 6N.
    assert 1.3 < factor < 1.5
    assert lora.ratio() == pytest.approx(full.ratio() * factor)


def test_verl_log_missing_a_metric_names_it_and_the_setting(capsys, tmp_path):
    log = FIX / "verl" / "metrics-missing-response-length.jsonl"
    assert main(["import", "verl", str(log), "--cell", str(VERL_CELL), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "'response_length/mean'" in err and "trainer.logger=[console,file]" in err
    assert not (tmp_path / "report.json").exists()


def test_verl_log_from_another_cell_is_refused(tmp_path):
    cell = load_cell(VERL_CELL, check_paths=False).with_changes(group_size=4)
    with pytest.raises(RaceError, match="implies 128.0 sequences per step"):
        importers.import_verl(VERL_LOG, cell, tmp_path)


def test_existing_ledger_is_not_overwritten_without_force(tmp_path):
    cell = load_cell(VERL_CELL, check_paths=False)
    importers.import_verl(VERL_LOG, cell, tmp_path)
    with pytest.raises(RaceError, match="already exists"):
        importers.import_verl(VERL_LOG, cell, tmp_path)
    assert importers.import_verl(VERL_LOG, cell, tmp_path, force=True).doc["totals"]["steps"] == 3


def test_trl_trainer_state_imports_with_tokens_matching_num_tokens(tmp_path):
    assert main(["import", "trl", str(TRL_STATE), "--cell", str(TRL_CELL), "--out", str(tmp_path)]) == 0
    assert validate_path(tmp_path / "report.json") == []
    doc = json.loads((tmp_path / "report.json").read_text())
    hist = [e for e in json.loads(TRL_STATE.read_text())["log_history"] if "num_tokens" in e]
    tok = doc["totals"]["tokens"]
    assert tok["rollout_prompt"] + tok["rollout_completion"] == pytest.approx(hist[-1]["num_tokens"], abs=3)
    # logging_steps=2, mu=1: each entry covers two generations of 8 x 4 completions.
    ledger = [json.loads(x) for x in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [r["step"] for r in ledger] == [2, 4, 6]
    assert all(r["work"]["count.completions"] == 64 for r in ledger)
    assert doc["run"]["engine"]["name"] == "trl" and doc["accounting"]["engine_profile"] == "trl"


def test_trl_state_without_num_tokens_names_it(tmp_path):
    state = json.loads(TRL_STATE.read_text())
    for e in state["log_history"]:
        e.pop("num_tokens", None)
    bad = tmp_path / "trainer_state.json"
    bad.write_text(json.dumps(state))
    with pytest.raises(RaceError, match="no 'num_tokens'") as e:
        importers.import_trl(bad, load_cell(TRL_CELL, check_paths=False), tmp_path / "out")
    assert "logging_steps" in e.value.hint


def test_verl_log_with_repeated_steps_is_refused(tmp_path):
    lines = VERL_LOG.read_text().splitlines()
    log = tmp_path / "resumed.jsonl"
    log.write_text("\n".join(lines + lines[2:3]) + "\n")  # step 2 logged again after step 3
    with pytest.raises(RaceError, match="step 2 does not follow step 3") as e:
        importers.read_verl_log(log)
    assert "VERL_FILE_LOGGER_PATH" in e.value.hint


def test_torn_last_line_of_a_killed_verl_run_is_ignored(tmp_path):
    text = VERL_LOG.read_text()
    log = tmp_path / "killed.jsonl"
    log.write_text(text + text.splitlines()[3][:57])  # the 4th step half-written, no newline
    assert [s.step for s in importers.read_verl_log(log)] == [1, 2, 3]
