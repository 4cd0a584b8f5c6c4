"""Issue 44, items 3 and 4: imports refuse logs that contradict themselves (suite/integrations/
sanity.py), the engine's own MFU is checked against the imported tokens (PROV-004), and every
input that once gave "internal error" gets one line naming the problem, exit 2.

Logs are the project's fixtures as the engines' loggers write them: verl's file logger
(tests/fixtures/verl, from verl's own tracking code), the MLPerf 6.1 reference logs
(tests/fixtures/mlperf, mlcommons/training @ aa344c7), CSV exports as wandb writes them
(tests/test_keymaps.py)."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from suite.cli import main
from suite.errors import RaceError
from suite.integrations import importers
from suite.integrations.mlperf import import_mlperf
from suite.train.cell import load_cell
from suite.validate import validate_path, validate_report

FIX = Path(__file__).parent / "fixtures"
VERL_LOG = FIX / "verl" / "metrics-qwen1.5b-r64.jsonl"
VERL_CELL = FIX / "verl" / "cell-qwen1.5b-r64.yaml"
MLPERF = FIX / "mlperf" / "GBS256_seed_1-steps1-3.out"
MLPERF_CELL = FIX / "mlperf" / "run-qwen35-397b-grpo.yaml"


def _verl_lines():
    return [json.loads(x) for x in VERL_LOG.read_text().splitlines()]


def _write(path: Path, lines) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _one_line_exit_2(capsys, argv, *needles):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    first = err.strip().splitlines()[0]
    for n in needles:
        assert n in first, first
    return first


# ---- logs that contradict themselves ------------------------------------------------------------

@pytest.mark.parametrize("edit, needle", [
    # a mean below its own minimum (the verl case: response mean halved, min kept)
    (lambda d: d.update({"response_length/mean": d["response_length/min"] / 2}), "below the step's own minimum"),
    (lambda d: d.update({"response_length/mean": d["response_length/max"] + 10}), "above the step's own maximum"),
    (lambda d: d.update({"prompt_length/mean": d["prompt_length/min"] - 5}), "prompt length"),
    # below clip_ratio x cap: 6.25% of 2,048-token completions clipped puts the mean at 128 at least
    (lambda d: d.update({"response_length/mean": 120.0, "response_length/min": 100}), "response_length/clip_ratio"),
    (lambda d: d.update({"response_length/min": 3000}), "is above 'response_length/max'"),
])
def test_verl_log_that_contradicts_itself_is_refused_naming_step_and_field(tmp_path, capsys, edit, needle):
    lines = _verl_lines()
    edit(lines[2]["data"])
    log = _write(tmp_path / "m.jsonl", lines)
    first = _one_line_exit_2(capsys, ["import", "verl", str(log), "--cell", str(VERL_CELL), "--out", str(tmp_path / "o")],
                             "step 2", needle)
    assert "m.jsonl" in first
    assert not (tmp_path / "o" / "report.json").exists()


def test_clip_ratio_bound_at_its_boundary(tmp_path):
    """The mean may sit exactly at clip_ratio x cap + (1 - clip_ratio) x 1 (the clipped
    completions at the cap, the rest one token each), not a token below."""
    from suite.integrations.importers import Step
    from suite.integrations.sanity import check_step

    r, cap = 0.0625, 2048
    floor = r * cap + (1 - r)
    check_step(Step(1, 100.0, floor, metrics={"response_length/clip_ratio": r}), cap=cap)
    with pytest.raises(RaceError, match="below what 'response_length/clip_ratio'"):
        check_step(Step(1, 100.0, floor - 1.0, metrics={"response_length/clip_ratio": r}), cap=cap)
    with pytest.raises(RaceError, match="sequences a step"):
        check_step(Step(1, 100.0, 50.0, sequences=0.0))
    with pytest.raises(RaceError, match="field 'reward' = 'high'"):
        check_step(Step(1, 100.0, 50.0, metrics={"reward": "high"}))


def test_trl_log_mean_above_its_max_is_refused(tmp_path):
    state = json.loads((FIX / "trl" / "trainer_state.json").read_text())
    e = state["log_history"][1]
    e["completions/max_length"], e["completions/min_length"] = e["completions/mean_length"] / 2, 1.0
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps(state))
    with pytest.raises(RaceError, match=r"step \d+: mean completion length .* above the step's own maximum"):
        importers.import_trl(p, load_cell(FIX / "trl" / "cell-trl-qwen0.5b.yaml", check_paths=False), tmp_path / "o")


def test_mlperf_log_cut_after_step_1_is_refused_by_its_own_block_stop(tmp_path):
    """The issue's case: per-step stats deleted after step 1, the block_stop markers left: it
    imported as a 1-step run (-83%)."""
    text = MLPERF.read_text().splitlines(keepends=True)
    train = [i for i, x in enumerate(text) if '"tracked_stats"' in x and '"samples_count"' in x]
    cut = [x for i, x in enumerate(text) if i not in train[2:]]     # step 1's two lines kept
    log = tmp_path / "cut.out"
    log.write_text("".join(cut))
    with pytest.raises(RaceError, match="block_stop markers reach step 3, but its per-step stats stop at step 1"):
        import_mlperf(log, load_cell(MLPERF_CELL, check_paths=False), tmp_path / "o")


# ---- the engine's own MFU (PROV-004) -------------------------------------------------------------

def _halved_verl_log(tmp_path: Path, f: float = 0.5) -> Path:
    """verl's log with every response length scaled by f and everything that follows from it
    scaled consistently (min, max, total tokens, throughput, tokens-per-ms): the run's MFU and
    seconds stay what verl measured."""
    lines = copy.deepcopy(_verl_lines())
    for x in lines:
        d = x["data"]
        if "response_length/mean" not in d:
            continue
        n = round(d["perf/total_num_tokens"] / (d["prompt_length/mean"] + d["response_length/mean"]))
        for k in ("response_length/mean", "response_length/max", "response_length/min"):
            d[k] = d[k] * f
        d["response_length/clip_ratio"] = 0.0
        total = round(n * (d["prompt_length/mean"] + d["response_length/mean"]))
        d["perf/throughput"] *= total / d["perf/total_num_tokens"]
        d["perf/total_num_tokens"] = total
    return _write(tmp_path / "halved.jsonl", lines)


def test_consistently_halved_verl_log_is_refused_by_the_mfu_cross_check(tmp_path, capsys):
    cell = load_cell(VERL_CELL, check_paths=False)
    ok = importers.import_verl(VERL_LOG, cell, tmp_path / "ok").comparison
    assert ok.verl_mfu_update / ok.verl_estimator_update == pytest.approx(1.0, abs=0.05)
    log = _halved_verl_log(tmp_path)
    first = _one_line_exit_2(capsys, ["import", "verl", str(log), "--cell", str(VERL_CELL), "--out", str(tmp_path / "o")],
                             "the engine's own MFU", "implies")
    assert "x; at most 1.2x" in first
    assert not (tmp_path / "o" / "report.json").exists()
    # a 10% edit stays inside the estimator's own spread (sum of L^2 vs the mean's): not what this rule sees
    importers.import_verl(_halved_verl_log(tmp_path, 0.9), cell, tmp_path / "near")


def test_prov_004_reads_the_comparison_beside_an_imported_report(tmp_path):
    res = importers.import_verl(VERL_LOG, load_cell(VERL_CELL, check_paths=False), tmp_path)
    assert validate_path(tmp_path / "report.json") == []
    cmp = json.loads(res.comparison_path.read_text())
    for scale, refused in ((1.19, False), (1.21, True), (1 / 1.21, True)):
        bad = dict(cmp, verl_mfu_update=cmp["verl_estimator_update"] * scale)
        res.comparison_path.write_text(json.dumps(bad))
        ids = {f.rule_id for f in validate_path(tmp_path / "report.json")}
        assert ("PROV-004" in ids) == refused, (scale, ids)


# ---- inputs that gave "internal error" ---------------------------------------------------------

def test_mllog_key_as_a_list_and_a_time_as_a_string_are_one_line(tmp_path, capsys):
    text = MLPERF.read_text()
    a = tmp_path / "a.out"
    a.write_text(text.replace('"key": "submission_benchmark"', '"key": ["submission_benchmark"]', 1))
    assert a.read_text() != text
    _one_line_exit_2(capsys, ["import", "mlperf", str(a), "--cell", str(MLPERF_CELL), "--out", str(tmp_path / "oa")],
                     "field 'key'", "is not a string", "a.out:")
    b = tmp_path / "b.out"
    b.write_text(text.replace('"train_step_time": ', '"train_step_time": "', 1).replace(
        '"policy_training_time"', '", "policy_training_time"', 1))
    assert b.read_text() != text
    _one_line_exit_2(capsys, ["import", "mlperf", str(b), "--cell", str(MLPERF_CELL), "--out", str(tmp_path / "ob")],
                     "field 'value.train_step_time'", "is not a non-negative number")


def test_csv_field_over_128_kib_and_a_sequence_count_of_0_are_one_line(tmp_path, capsys):
    from test_keymaps import CELL, TRUTH, nemo_rl, prime_rl

    cell = tmp_path / "cell.json"
    cell.write_text(json.dumps(CELL))
    log = nemo_rl(tmp_path, {s: (p, c, 0.0) for s, (p, c, _) in TRUTH.items()})
    lines = log.read_text().splitlines()
    lines[2] = lines[2] + ',"' + "x" * (130 * 1024) + '"'
    log.write_text("\n".join(lines) + "\n")
    _one_line_exit_2(capsys, ["import", "nemo-rl", str(log), "--cell", str(cell), "--out", str(tmp_path / "o1")],
                     "nemo-rl.csv:3", "field larger than field limit")
    jl = prime_rl(tmp_path, TRUTH)
    rows = [json.loads(x) for x in jl.read_text().splitlines()]
    rows[1]["progress/rollouts"] = 0
    _write(jl, rows)
    _one_line_exit_2(capsys, ["import", "prime-rl", str(jl), "--cell", str(cell), "--out", str(tmp_path / "o2")],
                     "step 2", "field 'progress/rollouts' = 0 sequences")


def test_stage_hardware_is_accepted_as_documented(tmp_path):
    """stages[].hardware (schema: a stage's accelerators) once gave INTERNAL-001, and race
    report --estimate wrote nothing."""
    home = Path(__file__).parents[1]
    spec = (home / "leaderboard" / "published" / "deepscaler-1.5b.yaml").read_text()
    staged = spec.replace("  - {name: 8k, group_size: 8,", "  - {name: 8k, hardware: {accelerator: NVIDIA A100 80GB, "
                          "count: 8, dtype: bf16, peak_flops: 3.12e14, accelerator_hours: 900}, group_size: 8,")
    assert staged != spec
    (tmp_path / "ds.yaml").write_text(staged)
    assert main(["report", "--estimate", str(tmp_path / "ds.yaml"), "--out", str(tmp_path / "r.json")]) == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["stages"][0]["hardware"]["count"] == 8
    assert validate_report(doc) == []
    doc["stages"][0]["hardware"]["count"] = "eight"
    ids = {f.rule_id for f in validate_report(doc)}
    assert ids == {"SCHEMA-002"}, ids


def test_an_mlperf_log_past_the_step_bound_is_refused_while_read(tmp_path, monkeypatch):
    """limits.MAX_IMPORT_STEPS: a log over the bound is refused at the first step past it, in
    bounded time and memory, however long the log (a 200,000-step log: 4.9 s, 63 MB RSS,
    docs/benchmarks.md). Here a log of bound + 1,000 steps with the bound lowered to 2,000."""
    import re

    from suite import limits

    monkeypatch.setattr(limits, "MAX_IMPORT_STEPS", 2000)
    src = MLPERF.read_text().splitlines()
    head = [x for x in src if '"tracked_stats"' not in x and not any(k in x for k in ("block_stop", "eval_", "run_stop"))]
    a, b = [x for x in src if '"tracked_stats"' in x and '"samples_count"' in x][:2]
    log = tmp_path / "long.out"
    with open(log, "w") as f:
        f.write("\n".join(head) + "\n")
        for s in range(1, 3001):
            f.write(re.sub(r'"step": \d+', f'"step": {s}', a) + "\n" + re.sub(r'"step": \d+', f'"step": {s}', b) + "\n")
    t = time.perf_counter()
    with pytest.raises(RaceError, match="more than 2,000 training steps"):
        import_mlperf(log, load_cell(MLPERF_CELL, check_paths=False), tmp_path / "o")
    assert time.perf_counter() - t < 20
