"""Acceptance: the three logs that verl and SkyRL wrote during real runs (../shared/engine-logs/,
beside the checkout; never copied into it) import with `race import auto` into reports that
`race validate --strict` accepts, and their completion tokens per step are what the log itself
states: verl's response_length/mean x the step's sequences, SkyRL's avg_response_length lines x
its 'Number of sequences'. The PPO log's critic is refused by name. The run descriptions, with the
source of each number, are tests/fixtures/engine-logs/cell-*.yaml."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from suite.cli import main

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT.parent / "shared" / "engine-logs"
CELLS = ROOT / "tests" / "fixtures" / "engine-logs"
LOGIC = LOGS / "verl" / "logic-rl-formula-wandb-m950nfkl-output.log"
DSTACK = LOGS / "verl" / "dstack-configs-verl_demo-ppo-qwen2.5-7b-gsm8k-2x8gpu.first200steps.log"
SKYRL = LOGS / "skyrl" / "skyrl-demo-colab-gsm8k-qwen2.5-0.5b.log"

pytestmark = pytest.mark.skipif(not LOGS.is_dir(), reason=f"the engines' logs are not beside the checkout ({LOGS})")


def _import(tmp_path, log, cell, capsys):
    out = tmp_path / "out"
    assert main(["import", "auto", str(log), "--cell", str(CELLS / cell), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert main(["validate", "--strict", str(out / "report.json")]) == 0
    ledger = [json.loads(x) for x in (out / "ledger.jsonl").read_text().splitlines()]
    return json.loads((out / "report.json").read_text()), ledger, printed


def test_verl_grpo_console_log(tmp_path, capsys):
    doc, ledger, printed = _import(tmp_path, LOGIC, "cell-verl-logic-rl-grpo.yaml", capsys)
    assert "'verl-console' log" in printed and "utilization" in printed
    # What the log states, read here with a plain regex: step:N lines' response_length/mean.
    stated = {int(m.group(1)): float(re.search(r"response_length/mean:([0-9.]+)", m.group(0)).group(1))
              for m in re.finditer(r"(?m)^step:(\d+) - .*$", LOGIC.read_text(encoding="utf-8"))
              if "response_length/mean" in m.group(0)}
    assert sorted(stated) == list(range(1, 10))
    sequences = 64      # 4 prompts x K 16: the cell's, an assumption the report records
    assert [r["step"] for r in ledger] == sorted(stated)
    for r in ledger:
        assert r["tokens"]["rollout_completion"] == round(stated[r["step"]] * sequences)
    assert {a["field"]: a["value"] for a in doc["provenance"]["assumptions"]}["sequences per step"] == sequences
    assert doc["run"]["engine"]["name"] == "verl" and doc["provenance"]["steps"] == 9


def test_skyrl_console_log(tmp_path, capsys):
    doc, ledger, printed = _import(tmp_path, SKYRL, "cell-skyrl-gsm8k.yaml", capsys)
    assert "'skyrl-console' log" in printed
    text = re.sub(r"\x1b\[[0-9;]*m", "", SKYRL.read_text(encoding="utf-8"))
    lengths = [float(x) for x in re.findall(r"avg_response_length: ([0-9.]+)", text)]
    sequences = [int(x) for x in re.findall(r"Number of sequences: (\d+)", text)]
    # The log begins inside step 182 (the notebook kept its last 5,000 lines): 183..233 are whole.
    assert len(lengths) == len(ledger) == 51 and set(sequences) == {64}
    assert [r["tokens"]["rollout_completion"] for r in ledger] == [round(x * 64) for x in lengths]
    assert [r["metrics"]["log/step"] for r in ledger] == list(range(183, 234))
    # generate/avg_num_tokens (characters in this skyrl-train) was not what the tokens came from.
    assert doc["provenance"]["source"]["fields"] == ["avg_response_length"]
    assert ledger[0]["tokens"]["rollout_completion"] != round(577.2969 * 64)


def test_verl_ppo_log_with_a_critic_is_refused_by_name(tmp_path, capsys):
    rc = main(["import", "auto", str(DSTACK), "--cell", str(CELLS / "cell-verl-dstack-ppo.yaml"),
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 2
    assert "PPO critic (" in err[0] and "critic/vf_loss" in err[0] and "timing_s/update_critic" in err[0]
    assert not (tmp_path / "out" / "report.json").exists()
