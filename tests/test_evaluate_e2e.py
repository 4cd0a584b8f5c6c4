"""End to end on the embedded default: a short GRPO cell trains a LoRA on the shipped policy
(`race run`'s run_cell), then `race eval` scores its adapter on both embedded targets with all
three metrics, offline, and `race eval --base` scores the untouched policy as the reference
row. The adapter's pass@1 must differ from the base model's in the direction the training
reward moved. Slow: it trains (about a minute on 2 cores)."""

from __future__ import annotations

import json

import pytest

from suite import evaluate as ev

pytestmark = pytest.mark.slow

LIMIT = 100  # problems per target: enough to see a GRPO gain of a few points, short on 2 cores
STEPS = 40


def _training_rewards(run_dir) -> list[float]:
    """Mean training reward per optimizer step, from TRL's log in the last checkpoint."""
    states = sorted(run_dir.glob("checkpoints/checkpoint-*/trainer_state.json"),
                    key=lambda p: int(p.parent.name.split("-")[1]))
    history = json.loads(states[-1].read_text())["log_history"]
    return [h["reward"] for h in history if "reward" in h]


def test_adapter_pass1_moves_with_its_training_reward(tmp_path, monkeypatch, capsys):
    import torch

    from suite.cell import cell_from_dict
    from suite.cli import main
    from suite.paths import home
    from suite.run import run_cell

    torch.set_num_threads(2)
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    policy = ev._embedded_model("policy-s")
    cell = cell_from_dict({"policy": str(policy), "dataset": "tasks/arith/data/train.jsonl", "reward": "sparse",
                           "budget_flops": 10**15, "max_steps": STEPS, "lora_rank": 16, "learning_rate": 3e-4,
                           "seed": 0}, name="e2e", base=home())
    run = run_cell(cell, tmp_path / "run", progress=False, threads=2).out
    rewards = _training_rewards(run)
    k = len(rewards) // 4
    moved = sum(rewards[-k:]) / k - sum(rewards[:k]) / k
    assert moved != 0

    assert main(["eval", str(run), "--limit", str(LIMIT)]) == 0
    assert main(["eval", "--base", str(policy), "--out", str(tmp_path / "base"), "--limit", str(LIMIT),
                 "--native-reward", "sparse"]) == 0
    capsys.readouterr()

    report = json.loads((run / "report.json").read_text())
    adapter = {(r["target"], r["metric"]): r for r in report["evaluations"]}
    base = {(r["target"], r["metric"]): r
            for r in json.loads((tmp_path / "base" / "evaluations.json").read_text())["evaluations"]}
    for t in ev.DEFAULT_TARGETS:
        name = f"{t}:first-{LIMIT}"
        for m in ev.METRICS:
            assert adapter[name, m]["n"] == LIMIT
        assert adapter[name, "process_judge"]["judge"]["name"] == "prm"
        delta = adapter[name, "pass@1"]["value"] - base[name, "pass@1"]["value"]
        assert delta != 0 and (delta > 0) == (moved > 0), (t, delta, moved)
        assert (run / "eval" / f"{t}.samples.jsonl").is_file()
        # The tool switched the hub off itself: embedded targets never touch the network.
        assert json.loads((run / "eval" / f"{t}.results.json").read_text())["hub_offline"] is True

    from suite.validate import validate_report

    assert [f for f in validate_report(report) if f.severity == "error"] == []
