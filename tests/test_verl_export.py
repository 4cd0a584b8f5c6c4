"""`race export verl`: the overrides compose against verl's packaged config, and say what the cell says."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from suite.integrations import verl
from suite.train.cell import load_cell
from suite.cli import main
from suite.errors import RaceError

FIX = Path(__file__).parent / "fixtures" / "verl"
CELL = FIX / "cell-qwen1.5b-r64.yaml"
FIX_GSM8K = Path(__file__).parent / "fixtures" / "gsm8k_head.jsonl"  # rows 0-1 of openai/gsm8k main test

needs_verl = pytest.mark.skipif(
    not os.environ.get("CI") and (importlib.util.find_spec("verl") is None or importlib.util.find_spec("hydra") is None),
    reason="verl config not installed (pip install -e '.[verl]' && pip install --no-deps verl==0.9.1); required in CI")


def _cell(**changes):
    c = load_cell(CELL, check_paths=False)
    return c.with_changes(**changes) if changes else c


@needs_verl
def test_reference_cell_composes_against_verl_config():
    cfg = verl.compose(verl.launch_overrides(_cell(), cluster=verl.Cluster(n_gpus_per_node=8)))
    arr = cfg["actor_rollout_ref"]
    assert cfg["algorithm"]["adv_estimator"] == "grpo"
    assert arr["rollout"]["n"] == 2 and arr["rollout"]["name"] == "vllm"
    assert cfg["data"]["train_batch_size"] == 64 and cfg["data"]["max_response_length"] == 2048
    assert arr["actor"]["ppo_mini_batch_size"] == 64 and arr["actor"]["ppo_micro_batch_size_per_gpu"] == 16
    assert arr["actor"]["ppo_epochs"] == 1 and arr["actor"]["use_kl_loss"] is False
    assert arr["model"]["lora_rank"] == 64 and arr["model"]["lora_alpha"] == 128
    assert arr["model"]["target_modules"] == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert cfg["trainer"]["logger"] == ["console", "file"]
    fn = cfg["reward"]["custom_reward_function"]
    assert fn == {"path": str(verl.REWARD_MODULE), "name": "compute_score_sparse"}
    # verl's own interpolations still point at the values we set.
    assert arr["actor"]["rollout_n"] == "${oc.select:actor_rollout_ref.rollout.n,1}"


@needs_verl
def test_prm_cell_uses_verl_reward_model_and_beta_turns_on_kl_loss():
    c = _cell(reward=type(_cell().reward)("prm", {"model_path": "/ckpt/Qwen2.5-Math-PRM-7B"}), beta=0.04,
              num_iterations=2, lora_rank=0)
    cfg = verl.compose(verl.launch_overrides(c))
    rm = cfg["reward"]["reward_model"]
    assert rm["enable"] is True and rm["model_path"] == "/ckpt/Qwen2.5-Math-PRM-7B"
    assert cfg["reward"]["custom_reward_function"]["path"] is None
    actor = cfg["actor_rollout_ref"]["actor"]
    assert actor["use_kl_loss"] is True and actor["kl_loss_coef"] == 0.04 and actor["ppo_epochs"] == 2
    assert cfg["actor_rollout_ref"]["model"]["lora_rank"] == 0  # full fine-tuning


@needs_verl
def test_unknown_key_is_refused_by_verl_schema():
    with pytest.raises(RaceError, match="lora_rnk"):
        verl.compose(["actor_rollout_ref.model.lora_rnk=8"])


def test_cli_prints_command_with_file_logger(capsys):
    assert main(["export", "verl", str(CELL), "--metrics", "run/metrics.jsonl"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("VERL_FILE_LOGGER_PATH=run/metrics.jsonl python3 -m verl.trainer.main_ppo")
    assert "actor_rollout_ref.rollout.n=2" in out and "'trainer.logger=[console,file]'" in out


def test_cli_refuses_gpus_that_do_not_split_the_batch(capsys):
    assert main(["export", "verl", str(CELL), "--gpus-per-node", "3"]) == 2
    assert "do not split over 3 GPUs" in capsys.readouterr().err


def test_verl_reward_function_scores_like_the_suite():
    from suite.integrations import verl_reward

    good = "3 + 4 = 7\n\n\\boxed{7}"
    assert verl_reward.compute_score_sparse("race/arith", good, "7", {}) == 1.0
    assert verl_reward.compute_score_sparse("race/arith", good, "8", {}) == 0.0
    assert verl_reward.compute_score_structured("race/arith", good, "8", {}) == pytest.approx(0.3)


def test_write_data_converts_the_cell_dataset_to_verl_parquet(tmp_path, capsys):
    import pyarrow.parquet as pq

    from suite.integrations import verl_reward

    src = tmp_path / "train.jsonl"
    src.write_text('{"question": "Ann has 2 pens. Ann finds 3 more. How many pens?", '
                   '"solution": "2 + 3 = 5\\n\\n\\\\boxed{5}", "answer": "5"}\n')
    cell = tmp_path / "cell.yaml"
    cell.write_text(CELL.read_text().replace("data/polaris-53k.jsonl", "train.jsonl"))
    assert main(["export", "verl", str(cell), "--write-data", str(tmp_path / "v"), "--overrides-only"]) == 0
    out = capsys.readouterr().out
    assert f"data.train_files={(tmp_path / 'v' / 'train.parquet').resolve()}" in out
    (row,) = pq.read_table(tmp_path / "v" / "train.parquet").to_pylist()
    assert row["prompt"] == [{"role": "user", "content": "Ann has 2 pens. Ann finds 3 more. How many pens?"}]
    assert row["reward_model"]["ground_truth"] == "5"
    gold = row["extra_info"]["solution"]
    assert verl_reward.compute_score_dense(row["data_source"], gold, "5", row["extra_info"]) == 1.0
    assert verl_reward.compute_score_dense(row["data_source"], "2 + 3 = 6\n\n\\boxed{6}", "5", row["extra_info"]) == 0.0
    # GSM8K rows as published (openai/gsm8k main): the gold answer is the number after '####'.
    src.write_text(FIX_GSM8K.read_text())
    assert main(["export", "verl", str(cell), "--write-data", str(tmp_path / "g"), "--overrides-only"]) == 0
    rows = pq.read_table(tmp_path / "g" / "train.parquet").to_pylist()
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["18", "3"]
    assert "<<" not in rows[0]["extra_info"]["solution"] and "####" not in rows[0]["extra_info"]["solution"]
