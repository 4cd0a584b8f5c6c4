"""The CI lane of the reference-cell gate (issue 8): the fast cell (policy-s, sparse rule reward,
LoRA, 2 steps) trained for real and judged against the stored baseline of this machine kind
(FLOPs, tokens and steps exact); two runs give identical counts; switching gradient
checkpointing off (one more/less forward in the engine's update) without refreshing the baseline
fails the gate naming the figure that moved, and restoring it passes; a missing or corrupt
baseline is one clear message with the command that creates it. The full suite with the probe
evaluation and timings is `race bench` (docs/benchmarks.md)."""

from __future__ import annotations

import json

import pytest

from benchmarks import gate as bench
from suite.cli import main

KIND = "python-2core-cpu"
FAST = next(c for c in bench.REFERENCE_CELLS.values() if c.fast)


def doc(info: dict, median: float = 10.0) -> dict:
    """A one-benchmark document in pytest-benchmark's JSON shape."""
    return {"benchmarks": [{"name": f"test_reference_cell[{info['cell']}]", "extra_info": info,
                            "stats": {"median": median, "min": median, "max": median, "mean": median,
                                      "rounds": 1}}]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Figures of the fast cell: twice as shipped, once with gradient checkpointing off."""
    import torch

    torch.set_num_threads(bench.BENCH_THREADS)
    root = tmp_path_factory.mktemp("gate")
    cells = {"a": FAST, "b": FAST, "no_gc": FAST.with_engine(gradient_checkpointing=False)}
    out = {}
    for key, bc in cells.items():
        bench.train(bc, root / key)
        out[key] = bench.figures(bc, root / key, probe=False)
    return out


def test_fast_lane_matches_the_stored_baseline(runs):
    stored = bench.load_baseline(bench.baseline_path(KIND), KIND)
    result = bench.compare(stored, doc(runs["a"]), slower_pct=None, only=bench.CI_FIGURES)
    assert result.compared == (FAST.name,)
    assert not result.failed, ("\n" + bench.format_table(result) + "\nif the change is deliberate, refresh the "
                               "baseline: race bench --update-baseline (and commit it)")
    base = next(b for b in stored["benchmarks"] if b["extra_info"]["cell"] == FAST.name)["extra_info"]
    assert runs["a"]["flops"] == base["flops"] and runs["a"]["tokens"] == base["tokens"]


def test_two_runs_give_identical_flops_and_tokens(runs):
    a, b = runs["a"], runs["b"]
    assert a["steps"] == b["steps"] == FAST.steps
    assert a["flops"] == b["flops"] and a["tokens"] == b["tokens"]
    assert a["flops"]["rollout"] > 0 and a["tokens"]["rollout_completion"] > 0
    assert a["final_reward"] == b["final_reward"]


def test_engine_pass_change_fails_the_gate_and_restoring_passes(runs, tmp_path, capsys):
    # Checkpointing changes only the update's passes: the same tokens, fewer update FLOPs.
    assert runs["no_gc"]["tokens"] == runs["a"]["tokens"]
    assert runs["no_gc"]["flops"]["update"] < runs["a"]["flops"]["update"]
    baseline = tmp_path / "baseline.json"
    bench.write_baseline(baseline, doc(runs["a"]))
    changed, restored = tmp_path / "changed.json", tmp_path / "restored.json"
    changed.write_text(json.dumps(doc(runs["no_gc"])))
    restored.write_text(json.dumps(doc(runs["b"])))

    assert main(["bench", "--compare", str(changed), "--baseline", str(baseline), "--no-time"]) == 1
    table = capsys.readouterr().out
    failing = [ln.split()[1] for ln in table.splitlines() if "FAIL" in ln and ln.startswith(FAST.name)]
    assert "flops.update" in failing and not any(f.startswith("tokens.") for f in failing), table
    assert "engine.gradient_checkpointing (unset) -> False" in table  # the setting that moved it

    assert main(["bench", "--compare", str(restored), "--baseline", str(baseline), "--no-time"]) == 0
    assert "FAIL" not in capsys.readouterr().out


def test_missing_or_corrupt_baseline_is_one_clear_message(tmp_path, capsys):
    missing = tmp_path / "none.json"
    assert main(["bench", "--fast", "--baseline", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "race bench --update-baseline --machine" in err and str(missing) in err
    assert "Traceback" not in err
    for text, why in (("{not json", "corrupt"), ('{"benchmarks": [{"name": "x"}]}', "extra_info.cell"),
                      ("[]", "benchmarks")):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        assert main(["bench", "--fast", "--baseline", str(bad)]) == 2
        err = capsys.readouterr().err
        assert why in err and "recreate it with: race bench --update-baseline" in err and "Traceback" not in err


# ---- the gate's judgement on its own (no training) ---------------------------------------------

INFO = {"cell": "c", "flops": {"rollout": 100, "update": 200, "reward": 0}, "tokens": {"update": 50},
        "steps": 2, "final_reward": 0.5, "probe": {"pass@1": 0.5, "process_judge": 0.4},
        "versions": {"trl": "1.16.0", "torch": "2.13.0"}, "settings": {"mu": 1}}


def _with(**changes) -> dict:
    """INFO with changes; nested keys spelled a__b."""
    info = json.loads(json.dumps(INFO))
    for key, value in changes.items():
        *path, last = key.split("__")
        d = info
        for p in path:
            d = d[p]
        d[last] = value
    return info


def _timed(seconds: float, reference_seconds: float) -> dict:
    """INFO as a run whose cell took `seconds` while the same-run reference took `reference_seconds`."""
    return _with(time={"seconds": seconds, "ratio": seconds / reference_seconds})


def test_time_check_judges_reference_units_and_only_slowdowns_fail():
    base = doc(_timed(10.0, 0.25), 10.0)  # 40 reference units
    # A loaded (or slower) machine: the cell and its reference slowed down together -> passes.
    assert not bench.compare(base, doc(_timed(25.0, 0.625), 25.0), slower_pct=100).failed
    for seconds, fails in ((10.0, False), (19.9, False), (20.5, True), (3.0, False)):
        result = bench.compare(base, doc(_timed(seconds, 0.25), seconds), slower_pct=100)
        assert result.failed == fails
        assert [r.figure for r in result.rows] == ["time (reference units)"]
    # A baseline without a same-run calibration cannot judge time: it says how to refresh it.
    (row,) = bench.compare(doc(INFO), doc(_timed(10.0, 0.25)), slower_pct=100).rows
    assert not row.ok and "race bench --update-baseline" in row.note


def test_calibration_and_rates_of_a_cell():
    from suite.accounting.utilization import Ceiling

    cal = bench.calibration(Ceiling(40e9, 1, "m"), Ceiling(60e9, 1, "m"))
    assert cal["flops_per_second"] == 50e9 and cal["reference_seconds"] == bench.REFERENCE_FLOPS / 50e9
    assert bench.time_figures(4.0, cal)["ratio"] == 4.0 / cal["reference_seconds"]
    info = _with(rate={"rollout": 5e9, "update": 20e9}, utilization={"rollout": 0.1, "update": 0.4},
                 calibration=cal, time=bench.time_figures(4.0, cal))
    table = bench.format_rates(doc(info))
    assert "5.00" in table and "20.00" in table and "10%" in table and "40%" in table and "50.00" in table
    # Rates, utilization and the calibration are recorded, never judged.
    assert not bench.compare(doc(INFO), doc(info), slower_pct=None).rows


def test_tolerances_and_version_notes():
    within = bench.compare(doc(INFO), doc(_with(final_reward=0.54, probe__process_judge=0.44)), slower_pct=None)
    assert not within.failed and [r.figure for r in within.rows] == ["final_reward", "probe.process_judge"]
    moved = bench.compare(doc(INFO), doc(_with(final_reward=0.6)), slower_pct=None)
    assert [r.figure for r in moved.failures] == ["final_reward"]
    upgraded = _with(flops__update=210, versions__trl="1.17.0")
    result = bench.compare(doc(INFO), doc(upgraded), slower_pct=None)
    (row,) = result.failures
    assert row.figure == "flops.update" and row.change == "+10 (+5.0%)" and "version trl 1.16.0 -> 1.17.0" in row.note
    assert "flops.update" in bench.format_table(result) and "trl 1.16.0 -> 1.17.0" in bench.format_table(result)
    # A cell the baseline has never seen fails (its figures cannot be judged).
    assert bench.compare(doc(INFO), doc(_with(cell="new")), slower_pct=None).failed


def test_fast_refresh_keeps_the_other_cells(tmp_path):
    old = {"benchmarks": doc(INFO)["benchmarks"] + doc(_with(cell="d"))["benchmarks"]}
    new = doc(_with(flops__update=300))
    path = bench.write_baseline(tmp_path / "b.json", bench.merged(old, new))
    stored = bench.load_baseline(path)
    by_cell = {b["extra_info"]["cell"]: b["extra_info"] for b in stored["benchmarks"]}
    assert by_cell["c"]["flops"]["update"] == 300 and "d" in by_cell
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]  # no temp file left behind
