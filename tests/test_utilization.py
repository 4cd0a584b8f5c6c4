"""Utilization (issue 21): achieved FLOP/s per phase from FLOPs and seconds, the matmul ceiling
probe, the calibration file it is stored in, the grid's throughput table, and the achieved rates
in the paper table's row model."""

from __future__ import annotations

import json

import pytest

from suite.accounting.utilization import (Ceiling, achieved, calibration_path, machine_kind, probe, save_ceiling,
                                          stored_ceiling, utilization)


def test_achieved_rates_per_phase_and_total():
    rates = achieved({"rollout": 4e9, "update": 30e9, "reward": 0}, {"rollout": 2.0, "update": 1.5, "reward": 0.5})
    assert rates["rollout"] == 2e9 and rates["update"] == 20e9
    assert rates["reward"] is None          # a rule reward does no FLOPs: nothing to rate
    assert rates["total"] == 34e9 / 4.0     # every phase's FLOPs over every phase's seconds
    assert achieved({"rollout": 1, "update": 1, "reward": 0}, None) == dict.fromkeys(rates)
    assert utilization(rates, 40e9) == {"rollout": 0.05, "update": 0.5, "reward": None, "total": 34e9 / 4.0 / 40e9}
    assert utilization(rates, None) == dict.fromkeys(rates)


def test_probe_rate_is_the_matmul_flops_over_the_time_they_took(monkeypatch):
    """The probe's arithmetic on a clock that ticks 2**-10 s per reading: each size gets
    seconds / len(sizes) = 5 ticks of real matmuls (5 calls, stopped at the 6th tick); its rate is
    2 n^3 FLOPs per call over the 6 ticks, the ceiling the best size's. The matmuls run with the
    probe's threads, and the caller's threads come back."""
    import time

    import torch

    ticks, seen = iter(range(10**6)), []

    def clock():
        seen.append(torch.get_num_threads())
        return next(ticks) * 2.0 ** -10

    monkeypatch.setattr(time, "perf_counter", clock)
    torch.set_num_threads(2)
    try:
        c = probe(1, sizes=(64, 128), seconds=0.01)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)
    assert (c.size, c.threads, c.source, c.machine) == (128, 1, "probe", machine_kind())
    assert c.flops_per_second == 2 * 128 ** 3 * 5 / (6 * 2.0 ** -10)
    assert set(seen) == {1}
    with pytest.raises(Exception, match="threads must be >= 1"):
        probe(0)


def test_calibration_file_round_trip(tmp_path, monkeypatch):
    path = tmp_path / "cal.json"
    monkeypatch.setenv("RACE_CALIBRATION", str(path))
    assert calibration_path() == path and stored_ceiling(1) is None
    one = Ceiling(50e9, 1, machine_kind(), 512, "2026-12-01T00:00:00Z", 0.5)
    save_ceiling(one)
    save_ceiling(Ceiling(90e9, 2, machine_kind(), 1024))
    save_ceiling(Ceiling(60e9, 1, machine_kind(), 1024))       # replaces the 1-thread ceiling
    assert stored_ceiling(1).flops_per_second == 60e9 and stored_ceiling(2).flops_per_second == 90e9
    assert stored_ceiling(1, machine="python-64core-gpu") is None
    assert len(json.loads(path.read_text())["ceilings"]) == 2
    from suite.errors import RaceError

    for damaged in ("{not json", '{"version": 1, "version": 2, "ceilings": []}'):
        path.write_text(damaged)              # unreadable, or a duplicate key: one line naming the file
        with pytest.raises(RaceError, match=f"{path.name}: not valid JSON") as e:
            stored_ceiling(1)
        assert "race bench --calibrate" in e.value.hint
        save_ceiling(one)                     # which measures again and replaces it
        assert stored_ceiling(1) == one


def test_throughput_table_of_reports(tmp_path):
    from race_helpers import make_report

    from suite.analysis.throughput import cell_rates, table

    doc = make_report()
    doc["totals"]["seconds"] = {"rollout": 2.0, "update": 4.0, "reward": 0.5}
    f = tmp_path / "report.json"
    f.write_text(json.dumps(doc))
    flops = doc["totals"]["flops"]
    (row,) = cell_rates({"a": f, "missing": tmp_path / "none.json"}, ceiling=flops["update"] / 4.0 / 0.4,
                        job_seconds={"a": 9.75})
    assert row.rates["rollout"] == flops["rollout"] / 2.0 and row.step_seconds == 6.5
    assert row.utilization["update"] == pytest.approx(0.4)
    text = table([row], ceiling=flops["update"] / 4.0 / 0.4, wall=13.0, workers=2)
    assert f"{flops['rollout'] / 2.0 / 1e9:.2f}" in text and "40%" in text
    assert ("grid wall 13.0 s (2 workers) = 2.00x the cells' step seconds (6.5 s); jobs (train and evaluate) "
            "9.8 s") in text
    assert "race bench --calibrate" in table([row])  # no ceiling: says how to get one


def test_paper_table_rows_carry_achieved_rates():
    from race_helpers import make_report

    from suite.site import tables

    doc = make_report()
    doc["totals"]["seconds"] = {"rollout": 2.0, "update": 4.0}
    rows = tables.table_rows([("a", doc), ("b", make_report())])
    assert rows[0].flops_per_second["update"] == doc["totals"]["flops"]["update"] / 4.0
    assert rows[1].flops_per_second["update"] is None      # no seconds recorded: no rate
    md = tables.render_table(rows, "markdown")
    assert "achieved GFLOP/s (rollout / update / reward)" in md and "| — / — / — |" in md
    record = json.loads(tables.render_table(rows, "json"))["rows"][0]
    assert record["flops_per_second"]["rollout"] == doc["totals"]["flops"]["rollout"] / 2.0
