"""`race import ENGINE LOG --cell CELL` with the shipped key maps (tasks/engines/*.yaml): each map
imports a log laid out as its engine's own logging code writes it, and a renamed key fails with
one line naming the key and the map.

Layouts, as read from each engine's code (repository @ commit, file):
- NeMo-RL @ 7ea279ab, nemo_rl/algorithms/grpo.py: logger.log_metrics(metrics, step, prefix="train")
  and (timing_metrics, prefix="timing/train"); wandb history CSV (_step, one column per key).
- prime-rl @ 559b4477, src/prime_rl/monitors/file.py: {"step": N, "time": t, **metrics} per line,
  orchestrator.py's progress/, time/, off_policy/ keys.
- slime @ 624b824a, slime/observability/{rollout_metrics,train_metric_utils}.py: rollout data and
  perf data in two wandb.log calls, each carrying rollout/step (two CSV rows per step); a timer is
  logged only in the steps its pass ran (log_perf_data resets them).
- SkyRL @ a9564572, skyrl/train/generators/utils.py (generate/*) and trainer.py (timing/*), one
  tracker.log per global_step.
- OpenRLHF @ 3c3be623, openrlhf/utils/logging_utils.py: {"train/<k>": v, "train/global_step": s}.
- ROLL @ 8eb27cc2, roll/utils/tracking.py StdoutTracker: logger.info('metrics_tag: ' +
  json.dumps({'step': step, 'metrics': values})) inside the job's log lines.
- AReaL @ 4aef98d8, areal/utils/stats_tracker.py: <scope>/<stat>/avg and timeperf/<timer>.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from suite.accounting import ENGINES
from suite.cli import main
from suite.errors import RaceError
from suite.integrations.keymaps import KEY_MAPS, import_metric_log, load_key_map
from suite.train.cell import cell_from_dict
from suite.validate import validate_report

N = 8  # prompts_per_step 2 x K 4
CELL = {"name": "engine-log", "policy": "Qwen2.5-0.5B-Instruct", "reward": "sparse", "lora_rank": 16,
        "group_size": 4, "prompts_per_step": 2, "max_completion_tokens": 4096, "mean_prompt_tokens": 120}
# Per step: (prompt mean, completion mean, environment mean) the logs below encode.
TRUTH = {1: (120.0, 300.0, 0.0), 2: (120.0, 340.0, 0.0), 3: (120.0, 380.0, 0.0)}


def _csv(path: Path, rows: list[dict]) -> Path:
    cols = ["_step", "_runtime", "_timestamp"] + sorted({k for r in rows for k in r} - {"_step"})
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for i, r in enumerate(rows):
            w.writerow({"_runtime": 10.0 * i, "_timestamp": 1.78e9 + i, **r})   # absent keys: empty cells
    return path


def nemo_rl(tmp, truth):
    rows = [{"_step": s, "train/mean_prompt_length": p, "train/mean_gen_tokens_per_sample": c,
             "train/mean_env_tokens_per_sample": e, "train/global_valid_seqs": 6, "train/reward": 0.5,
             "timing/train/generation": 30.0, "timing/train/policy_and_reference_logprobs": 4.0,
             "timing/train/policy_training": 10.0, "timing/train/reward_calculation": 1.0,
             "timing/train/total_step_time": 50.0} for s, (p, c, e) in truth.items()]
    return _csv(tmp / "nemo-rl.csv", [{"_step": 0, "validation/accuracy": 0.3}] + rows)


def prime_rl(tmp, truth):
    with open(tmp / "metrics.jsonl", "w") as f:
        for s, (p, c, e) in truth.items():
            f.write(json.dumps({"step": s, "time": 1.78e9 + s, "progress/input_tokens": N * (p + e),
                                "progress/output_tokens": N * c, "progress/rollouts": N, "progress/tokens": N * (p + c + e),
                                "time/step": 40.0, "off_policy/max": 2.0, "off_policy/mean": 0.75,
                                "off_policy/dropped": 0.0}) + "\n")
    return tmp / "metrics.jsonl"


def slime(tmp, truth):
    rows = []
    for s, (p, c, e) in truth.items():
        rows.append({"_step": 2 * s - 1, "rollout/step": s, "rollout/response_len/mean": c,
                     "rollout/truncated_ratio": 0.0, "perf/rollout_time": 20.0})
        # one optimizer step per rollout: slime reuses the training forward's log-probs, so there is no
        # log_probs timer (actor.py can_reuse_log_probs_in_loss; train_metric_utils.log_perf_data logs the timers run)
        rows.append({"_step": 2 * s, "rollout/step": s, "perf/actor_train_time": 8.0, "perf/step_time": 35.0})
    return _csv(tmp / "slime.csv", rows)


def skyrl(tmp, truth):
    return _csv(tmp / "skyrl.csv", [{"_step": s, "generate/avg_num_tokens": c + e, "generate/avg_assistant_tokens": c,
                                     "timing/generate": 25.0, "timing/fwd_logprobs_values_reward": 3.0,
                                     "timing/policy_train": 9.0, "timing/step": 40.0}
                                    for s, (p, c, e) in truth.items()])


def openrlhf(tmp, truth):
    return _csv(tmp / "openrlhf.csv", [{"_step": s - 1, "train/global_step": s, "train/response_length": c,
                                        "train/total_length": p + c, "train/reward": 0.4,
                                        "train/timing/generation": 22.0, "train/timing/make_experience": 5.0,
                                        "train/timing/ppo_train": 11.0, "train/timing/step_total": 39.0}
                                       for s, (p, c, e) in truth.items()])


def roll(tmp, truth):
    with open(tmp / "roll.log", "w") as f:
        f.write("[2026-12-01 10:00:00] [INFO] pipeline started\n")
        for s, (p, c, e) in truth.items():
            metrics = {"token/prompt_length/mean": p, "token/response_length/mean": c, "time/step_generate": 21.0,
                       "time/old_log_probs": 2.0, "time/step_train": 9.0}
            f.write(f"[2026-12-01 10:0{s}:00] [INFO] [rlvr_pipeline.py:822] metrics_tag: "
                    + json.dumps({"step": s, "metrics": metrics}) + "\n")
    return tmp / "roll.log"


def areal(tmp, truth):
    return _csv(tmp / "areal.csv", [{"_step": s, "ppo_actor/prompt_len/avg": p, "ppo_actor/seq_len/avg": p + c,
                                     "timeperf/rollout": 24.0, "timeperf/recompute_logp": 2.0,
                                     "timeperf/train_step": 10.0} for s, (p, c, e) in truth.items()])


WRITERS = {"nemo-rl": nemo_rl, "prime-rl": prime_rl, "slime": slime, "skyrl": skyrl, "openrlhf": openrlhf,
           "roll": roll, "areal": areal}
MULTI_TURN = {"nemo-rl", "skyrl", "prime-rl"}   # logs that carry environment tokens


def test_every_shipped_map_has_a_log_test():
    assert set(KEY_MAPS) >= set(WRITERS)


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_shipped_map_imports_its_engines_log(name, tmp_path):
    truth = {s: (p, c, 60.0 if name in MULTI_TURN else 0.0) for s, (p, c, _) in TRUTH.items()}
    log = WRITERS[name](tmp_path, truth)
    # SkyRL's generate/avg_num_tokens counted characters before skyrl-train 0.3.1: read only with the version.
    version = "0.3.1" if name == "skyrl" else None
    res = import_metric_log(log, KEY_MAPS[name], cell_from_dict(CELL, check_paths=False), tmp_path / "out",
                            engine_version=version)
    doc = res.doc
    assert validate_report(doc) == []
    assert doc["run"]["engine"]["name"] == KEY_MAPS[name].engine and doc["totals"]["steps"] == 3
    tok = doc["totals"]["tokens"]
    kept = 6 if name == "nemo-rl" else N
    # One prefill per prompt where the profile shares it among the K completions (nemo-rl: vLLM prefix caching).
    prefills = N if ENGINES[KEY_MAPS[name].profile].prefill_per_completion else 2
    if name == "prime-rl":   # prompt and environment tokens come lumped as input tokens: all prefill as prompt
        assert tok["rollout_prompt"] == 3 * prefills * (120 + 60)
    else:
        assert tok["rollout_prompt"] == 3 * prefills * 120
    assert tok["rollout_completion"] == N * (300 + 340 + 380)
    env = doc["totals"]["work"].get("count.rollout_env", 0)
    assert env == (3 * N * 60 if name in ("nemo-rl", "skyrl") else 0)
    assert tok["update"] == pytest.approx(kept * sum(120 + c + 60 * (name in MULTI_TURN) for _, c, _ in TRUTH.values()),
                                          abs=3)
    assert set(doc["totals"]["seconds"]) >= {"update"} or name == "prime-rl"
    if name == "prime-rl":
        assert doc["rollouts"]["off_policy"] == {"max_lag": 2, "mean_lag": 0.75}
    if name == "nemo-rl":
        assert doc["rollouts"]["discarded"] == 3 * 2 and doc["totals"]["seconds"]["rollout"] == 90.0


def test_renamed_key_fails_with_one_line_naming_key_and_map(tmp_path, capsys):
    log = openrlhf(tmp_path, TRUTH)
    log.write_text(log.read_text().replace("train/response_length", "train/response_len"))
    cell = tmp_path / "cell.json"
    cell.write_text(json.dumps(CELL))
    assert main(["import", "openrlhf", str(log), "--cell", str(cell), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "key 'train/response_length' of key map 'openrlhf'" in err[0] and "openrlhf.yaml" in err[0]
    assert "Traceback" not in "\n".join(err)


def test_a_users_own_map_needs_no_code(tmp_path):
    own = tmp_path / "mine.yaml"
    own.write_text("name: mine\nengine: mine\nprofile: generic\nlogger: my logger\nstep: it\n"
                   "source: {repo: me/mine, commit: \"" + "ab" * 20 + "\", files: [train.py]}\n"
                   "tokens: {prompt: p, completion: c}\n")
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"it": s, "p": p, "c": c}) + "\n" for s, (p, c, _) in TRUTH.items()))
    doc = import_metric_log(log, load_key_map(own), cell_from_dict(CELL, check_paths=False), tmp_path / "o").doc
    assert doc["totals"]["tokens"]["rollout_completion"] == N * 1020 and validate_report(doc) == []
    own.write_text(own.read_text().replace("step: it", "stepp: it"))
    with pytest.raises(RaceError, match="mine.yaml"):
        load_key_map(own)
