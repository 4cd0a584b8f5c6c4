"""The passes an engine runs, as its engine file says them, charged to its imports.

AReaL, ROLL and SkyRL time an old-policy log-prob pass in their logs (timeperf/recompute_logp,
time/old_log_probs, timing/fwd_logprobs_values_reward); their own profiles charge it, where the
generic profile they were priced under before charged it only when mu > 1. A log that times a
pass its profile does not charge (or the reverse) is refused, naming the profile that agrees.
The same run described to verl and to SkyRL (the same passes, read from their code) prices the
same. Logs are laid out as the engines' logging code writes them (repository @ commit, file):
- AReaL @ 4aef98d8, areal/trainer/rl_trainer.py: record_timing("recompute_logp") only inside
  `if config.actor.should_compute_prox_logp()`; stats_tracker exports ppo_actor/<stat>/avg; the
  wandb history CSV has one column per key and _step.
- ROLL @ 8eb27cc2, roll/pipeline/rlvr/rlvr_pipeline.py: metrics_mgr.add_metric("time/old_log_probs",
  ...) every step; roll/utils/tracking.py StdoutTracker: 'metrics_tag: ' + json.dumps({step, metrics}).
- SkyRL @ a9564572, skyrl/train/trainer.py: Timer("fwd_logprobs_values_reward") around the
  policy/ref/critic forwards; generate/* from generators/utils.py.
- slime @ 624b824a, slime/observability/train_metric_utils.py log_perf_data: perf/<timer>_time
  for the timers run in that rollout (reset after each), log_probs only when actor.py computes it.
- verl @ b178a3cd, verl/utils/tracking.py FileLogger: {"step": N, "data": {...}} per line.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from suite.accounting import ENGINES
from suite.errors import RaceError
from suite.integrations.keymaps import import_log, log_entry
from suite.train.cell import cell_from_dict
from suite.validate import validate_report

K, B = 4, 2
N = K * B
CELL = {"name": "engine-passes", "policy": "Qwen2.5-0.5B-Instruct", "reward": "sparse", "lora_rank": 16,
        "group_size": K, "prompts_per_step": B, "max_completion_tokens": 4096, "mean_prompt_tokens": 120}
MEANS = {1: (120.0, 300.0), 2: (120.0, 340.0), 3: (120.0, 380.0)}   # step -> prompt, completion mean


def _csv(path: Path, rows: list[dict]) -> Path:
    cols = ["_step", "_runtime"] + sorted({k for r in rows for k in r} - {"_step"})
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for i, r in enumerate(rows):
            w.writerow({"_runtime": 10.0 * i, **r})
    return path


def areal(tmp: Path, recompute: bool = True) -> Path:
    return _csv(tmp / "areal.csv", [{"_step": s, "ppo_actor/prompt_len/avg": p, "ppo_actor/seq_len/avg": p + c,
                                     "timeperf/rollout": 24.0, "timeperf/train_step": 10.0,
                                     **({"timeperf/recompute_logp": 2.0} if recompute else {})}
                                    for s, (p, c) in MEANS.items()])


def roll(tmp: Path) -> Path:
    with open(tmp / "roll.log", "w") as f:
        for s, (p, c) in MEANS.items():
            m = {"token/prompt_length/mean": p, "token/response_length/mean": c, "time/step_generate": 21.0,
                 "time/ref_log_probs_values": 0.0, "time/old_log_probs": 2.0, "time/step_train": 9.0}
            f.write(f"[2026-12-01 10:0{s}:00] [tracking.py (161)] [INFO] [DRIVER 0 / 1][PID 7] metrics_tag: "
                    + json.dumps({"step": s, "metrics": m}) + "\n")
    return tmp / "roll.log"


def skyrl(tmp: Path) -> Path:
    return _csv(tmp / "skyrl.csv", [{"_step": s, "generate/avg_num_tokens": c, "generate/avg_assistant_tokens": c,
                                     "timing/generate": 25.0, "timing/fwd_logprobs_values_reward": 3.0,
                                     "timing/policy_train": 9.0, "timing/step": 40.0} for s, (p, c) in MEANS.items()])


def slime(tmp: Path, log_probs: bool) -> Path:
    rows = []
    for s, (p, c) in MEANS.items():
        rows.append({"_step": 2 * s - 1, "rollout/step": s, "rollout/response_len/mean": c, "perf/rollout_time": 20.0})
        rows.append({"_step": 2 * s, "rollout/step": s, "perf/actor_train_time": 8.0, "perf/step_time": 35.0,
                     **({"perf/log_probs_time": 2.0} if log_probs else {})})
    return _csv(tmp / "slime.csv", rows)


def verl(tmp: Path) -> Path:
    with open(tmp / "verl.jsonl", "w") as f:
        f.write(json.dumps({"step": 0, "data": {"val-core/arith/acc/mean@1": 0.4}}) + "\n")
        for s, (p, c) in MEANS.items():
            f.write(json.dumps({"step": s, "data": {"prompt_length/mean": p, "response_length/mean": c,
                                                    "perf/total_num_tokens": N * (p + c), "timing_s/gen": 25.0,
                                                    "timing_s/old_log_prob": 1.0, "timing_s/ref": 1.0,
                                                    "timing_s/update_actor": 9.0, "timing_s/step": 40.0}}) + "\n")
    return tmp / "verl.jsonl"


def _import(name, log, tmp, cell=None, **kw):
    cell = cell_from_dict(CELL if cell is None else cell, check_paths=False)
    if name == "skyrl":     # its generate/*_num_tokens counted characters before 0.3.1: read with the version
        kw.setdefault("engine_version", "0.3.1")
    return import_log(log_entry(name), log, cell, tmp / f"out-{name}-{kw.get('engine_profile', '')}", **kw).doc


@pytest.mark.parametrize("name,write", [("areal", areal), ("roll", roll), ("skyrl", skyrl)])
def test_imports_charge_the_old_policy_pass_their_logs_time(name, write, tmp_path):
    doc = _import(name, write(tmp_path), tmp_path)
    profile = doc["accounting"]["engine_profile"]
    assert profile == name and ENGINES[profile].engine == name and doc["grpo"]["num_iterations"] == 1
    work = doc["totals"]["work"]
    # mu = 1: one old-policy forward over every trained sequence, as the log's timer says it ran
    assert work["update.old.tokens"] == work["update.train.tokens"] == 3 * N * 120 + N * (300 + 340 + 380)
    assert work["update.old.lm_head"] == work["update.train.lm_head"] > 0
    assert validate_report(doc) == []
    assert not ENGINES["generic"].old_policy_pass(cell_from_dict(CELL, check_paths=False).settings())  # before: 0


def test_a_profile_that_disagrees_with_the_log_is_refused_naming_the_one_that_agrees(tmp_path):
    log = areal(tmp_path, recompute=False)              # recompute_logprob off: no recompute_logp timer
    with pytest.raises(RaceError, match=r"never times the old-policy log-prob forward \('timeperf/recompute_logp'\), "
                                        r"but profile 'areal' charges it") as e:
        _import("areal", log, tmp_path)
    assert "--engine-profile areal-no-recompute" in e.value.hint
    doc = _import("areal", log, tmp_path, engine_profile="areal-no-recompute")
    assert doc["totals"]["work"]["update.old.tokens"] == 0 and validate_report(doc) == []
    # slime at mu = 1 reuses the training forward's log-probs; a log that times them ran the pass
    assert _import("slime", slime(tmp_path, log_probs=False), tmp_path)["totals"]["work"]["update.old.tokens"] == 0
    with pytest.raises(RaceError, match="profile 'slime' does not charge it") as e:
        _import("slime", slime(tmp_path, log_probs=True), tmp_path)
    assert "--engine-profile slime-recompute" in e.value.hint
    doc = _import("slime", slime(tmp_path, log_probs=True), tmp_path, engine_profile="slime-recompute")
    assert doc["totals"]["work"]["update.old.tokens"] > 0 and validate_report(doc) == []
    with pytest.raises(RaceError, match="the log never times the reference"):    # beta 0.04 says a ref pass ran
        _import("slime", slime(tmp_path, log_probs=False), tmp_path, cell={**CELL, "beta": 0.04})


@pytest.mark.parametrize("mu,beta", [(1, 0.0), (2, 0.04)])
def test_the_same_run_described_to_verl_and_to_skyrl_prices_the_same_passes_the_same_way(mu, beta, tmp_path):
    cell = {**CELL, "num_iterations": mu, "beta": beta}
    a = _import("verl", verl(tmp_path), tmp_path, cell=cell)
    b = _import("skyrl", skyrl(tmp_path), tmp_path, cell=cell)
    assert (a["accounting"]["engine_profile"], b["accounting"]["engine_profile"]) == ("verl", "skyrl")
    assert a["totals"]["work"] == b["totals"]["work"] and a["totals"]["flops"] == b["totals"]["flops"]
    work = a["totals"]["work"]
    assert work["update.old.tokens"] * mu == work["update.train.tokens"] > 0      # old pass every step, both
    assert (work["update.ref.tokens"] > 0) == (beta > 0)                          # reference iff beta
    assert validate_report(a) == [] and validate_report(b) == []


def test_an_import_is_priced_under_its_engines_own_profile_or_refused_before_writing(tmp_path, capsys):
    from suite.cli import main

    log = skyrl(tmp_path)
    cell = tmp_path / "run.json"
    cell.write_text(json.dumps(CELL))
    for other in ("generic", "verl"):          # useful work only, or another engine's (equal) facts: not skyrl's
        code = main(["import", "skyrl", str(log), "--cell", str(cell), "--out", str(tmp_path / other),
                     "--engine-profile", other])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and f"profile '{other}' is not one of skyrl's own (skyrl)" in err[0], err
        assert not (tmp_path / other / "report.json").exists()
