"""Energy per phase (issue 40, parts 2 and 4): NVML readings at the ledger's own phase boundaries
(RaceLedger), never a total across a counter reset, "not measured" and why in one line where no
counter exists (this CPU machine); MLPerf power logs integrated as mlcommons/logging's result
summarizer does; and the validator rules that hold energy and hours to the hardware table:
ENERGY-001 (joules above board power x seconds), ENERGY-002/003/004, ROOF-001/002."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from suite.errors import RaceError
from suite.validate import validate_report

ROOT = Path(__file__).resolve().parents[1]
MLPERF = ROOT / "tests" / "fixtures" / "mlperf"


def _ids(findings):
    return {f.rule_id for f in findings if f.severity == "error"}


@pytest.fixture(scope="module")
def mlperf_run(tmp_path_factory):
    """MLPerf's GRPO reference log (GBS1024, seed 1: 256 GB300, seconds per phase) imported with
    its node power logs, as `race import mlperf LOG --cell CELL --power DIR` does."""
    from suite.cli import main

    out = tmp_path_factory.mktemp("mlperf") / "run"
    assert main(["import", "mlperf", str(MLPERF / "GBS1024_seed_1.out"), "--cell",
                 str(MLPERF / "run-qwen35-397b-grpo.yaml"), "--out", str(out), "--power", str(MLPERF / "power")]) == 0
    return out


def _copy(run: Path, dest: Path) -> tuple[dict, Path]:
    shutil.copytree(run, dest)
    return json.loads((dest / "report.json").read_text()), dest


def test_mlperf_power_logs_integrate_as_the_result_summarizer_does(mlperf_run):
    from suite.integrations.mlperf_power import node_energy

    n0, n1 = node_energy(MLPERF / "power" / "node_0.txt"), node_energy(MLPERF / "power" / "node_1.txt")
    # sum of watts x 1 s between readings from the start (README: 34,000 J and 33,600 J), conversion_eff 1.0
    assert (n0.joules, n1.joules, n0.readings, n0.host) == (34000.0, 33600.0, 6, "node_0")
    doc = json.loads((mlperf_run / "report.json").read_text())
    assert doc["schema_version"] == "1.5"
    assert doc["cost"]["energy"] == {"measured": True, "method": "mlperf-power", "scope": "nodes", "devices": 2,
                                     "total_joules": 67600.0, "window_seconds": 6.0}
    assert validate_report(doc, base_dir=mlperf_run, file="report.json") == []


def test_a_power_log_without_its_start_is_refused(tmp_path):
    from suite.integrations.mlperf_power import node_energy

    bad = tmp_path / "node_0.txt"
    bad.write_text("".join(line for line in (MLPERF / "power" / "node_0.txt").read_text().splitlines(True)
                           if "power_measurement_start" not in line))
    with pytest.raises(RaceError, match="no power_measurement_start"):
        node_energy(bad)


def _with_step_energy(doc: dict, folder: Path, watts: float) -> dict:
    """The run's ledger with joules per phase at `watts` a GPU (metrics as RaceLedger writes them),
    the report's cost.energy their sums and its ledger digest the new file's."""
    from suite.record.energy import METRICS

    ledger = folder / doc["ledger"]["path"]
    n = doc["hardware"]["count"]
    recs = [json.loads(x) for x in ledger.read_text().splitlines()]
    sums = dict.fromkeys(METRICS, 0.0)
    for r in recs:
        for ph, key in METRICS.items():
            j = round(watts * n * r.get("seconds", {}).get(ph, 0.0), 3)
            r.setdefault("metrics", {})[key] = j
            sums[ph] += j
    data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs).encode()
    ledger.write_bytes(data)
    doc["ledger"]["sha256"] = hashlib.sha256(data).hexdigest()
    doc["cost"] = {"hardware": {"table": "hardware-v1", "name": "GB300", "tdp_watts": 1400.0},
                   "energy": {"measured": True, "method": "nvml", "joules": {k: round(v, 3) for k, v in sums.items()},
                              "devices": n, "steps": len(recs), "skipped": 0}}
    return doc


def test_measured_energy_is_accepted_and_above_board_power_refused_by_energy_001(mlperf_run, tmp_path):
    doc, folder = _copy(mlperf_run, tmp_path / "ok")
    doc = _with_step_energy(doc, folder, watts=1000.0)        # under GB300's 1,400 W
    assert validate_report(doc, base_dir=folder, file="report.json") == []
    # A forger who edits ledger and report consistently still meets the board power.
    doc, folder = _copy(mlperf_run, tmp_path / "hot")
    doc = _with_step_energy(doc, folder, watts=1500.0)
    findings = validate_report(doc, base_dir=folder, file="report.json")
    assert _ids(findings) == {"ENERGY-001"}
    assert {f.path for f in findings} == {"$.cost.energy.joules.rollout", "$.cost.energy.joules.update"}
    # The report's energy must be its ledger's: raising only the report is ENERGY-004 as well.
    doc, folder = _copy(mlperf_run, tmp_path / "edited")
    doc = _with_step_energy(doc, folder, watts=1000.0)
    doc["cost"]["energy"]["joules"]["update"] *= 1.2
    assert _ids(validate_report(doc, base_dir=folder, file="report.json")) == {"ENERGY-004"}
    # ...and its own figures cannot raise the table's power.
    doc["cost"]["energy"]["joules"]["update"] /= 1.2
    doc["cost"]["hardware"]["tdp_watts"] = 2000.0
    assert _ids(validate_report(doc, base_dir=folder, file="report.json")) == {"ENERGY-003"}


def test_energy_without_bounding_hardware_and_forged_peaks_and_seconds(mlperf_run, tmp_path):
    doc, folder = _copy(mlperf_run, tmp_path / "r")
    doc = _with_step_energy(doc, folder, watts=1000.0)
    hw = dict(doc["hardware"])
    doc["hardware"]["accelerator"] = "Acme X1"                     # unknown: no power bound
    assert "ENERGY-002" in _ids(validate_report(doc, base_dir=folder, file="report.json"))
    doc["hardware"] = {**hw, "peak_flops": 5e15}                    # twice GB300's dense bf16
    assert "ROOF-001" in _ids(validate_report(doc, base_dir=folder, file="report.json"))
    doc["hardware"] = hw
    doc["totals"]["seconds"]["update"] = 1.0                        # 1.3e19 FLOPs in a second
    assert "ROOF-002" in _ids(validate_report(doc, base_dir=folder, file="report.json"))


def test_published_run_with_nodes_energy_over_its_window_is_refused(mlperf_run, tmp_path):
    doc, folder = _copy(mlperf_run, tmp_path / "w")
    doc["cost"]["energy"]["total_joules"] = 2 * 1400 * 256 * 6.0 * 1.01      # above twice the boards' power
    findings = validate_report(doc, base_dir=folder, file="report.json")
    assert _ids(findings) == {"ENERGY-001"} and findings[0].path == "$.cost.energy.total_joules"


def test_without_a_counter_energy_is_not_measured_in_one_line(tmp_path):
    from suite.record.energy import run_line
    from suite.train.energy import Unmeasured, open_meter, write_sidecar

    meter = open_meter()                      # this machine: no NVIDIA driver (or pynvml absent)
    assert isinstance(meter, Unmeasured) and "\n" not in meter.reason
    write_sidecar(tmp_path, meter)
    line = run_line(tmp_path)
    assert line.startswith("energy: not measured: ") and "\n" not in line and meter.reason in line


def test_zeus_windows_are_asked_for_by_name_and_missing_zeus_is_said(monkeypatch):
    from suite.train.energy import Unmeasured, ZeusMeter, open_meter

    monkeypatch.setenv("RACE_ENERGY", "zeus")
    m = open_meter()
    assert isinstance(m, Unmeasured) and "zeus" in m.reason.lower()

    class Windows:      # ZeusMonitor's begin_window/end_window contract (Measurement.total_energy, joules)
        def __init__(self):
            self.open = []

        def begin_window(self, key):
            self.open.append(key)

        def end_window(self, key):
            assert self.open.pop() == key
            return type("Measurement", (), {"total_energy": 2.5})()

    z = ZeusMeter(Windows(), 1)
    assert [z.read(), z.read(), z.read()] == [0, 2500, 5000]          # a counter in millijoules


class ClockMeter:
    """NVML cannot run here: a counter driven by the clock (`watts` constant) stands in for
    nvmlDeviceGetTotalEnergyConsumption, with a reset (the driver reloading) after `reset_after`
    readings. Everything else -- where RaceLedger reads it, how a step's joules split and are
    refused across a reset, the report and its rules -- is the real code."""

    def __init__(self, watts: float, reset_after: int | None = None):
        import time

        self.watts, self.reset_after, self.n, self.t0, self.time = watts, reset_after, 0, time.perf_counter(), time

    def read(self):
        self.n += 1
        mj = int((self.time.perf_counter() - self.t0) * self.watts * 1000)
        return mj - 10 ** 12 if self.reset_after is not None and self.n > self.reset_after else mj + 10 ** 12

    def info(self):
        return {"measured": True, "method": "nvml", "devices": 1, "names": ["NVIDIA H100 80GB HBM3"]}


def test_race_ledger_records_joules_at_its_phase_boundaries_and_skips_a_reset(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from suite.record.energy import METRICS, SKIPPED
    from suite.record.ledger import read_ledger
    from suite.train import energy
    from suite.train.cell import load_cell
    from suite.train.run import build_trainer
    from tiny_policy import make_policy, write_cell

    torch.set_num_threads(1)
    policy = make_policy(tmp_path / "policy")
    # The counter resets (goes backwards) during the second step: that step's energy is left out, whole.
    meter = ClockMeter(watts=300.0, reset_after=12)
    monkeypatch.setattr(energy, "open_meter", lambda: meter)
    cell = load_cell(write_cell(tmp_path / "cell.yaml", policy))
    (tmp_path / "run").mkdir()
    trainer, ledger, _ = build_trainer(cell, tmp_path / "run", max_steps=2, progress=False)
    trainer.train()
    recs = read_ledger(ledger.ledger_path).records
    assert len(recs) == 2
    skipped = [r["step"] for r in recs if r["metrics"].get(SKIPPED)]
    assert skipped == [2] and all(k not in recs[1]["metrics"] for k in METRICS.values())
    for r in recs[:1]:
        m, s = r["metrics"], r["seconds"]
        for ph, key in METRICS.items():     # the same intervals as the seconds, 1 ms of slack per boundary
            assert m[key] == pytest.approx(300.0 * s[ph], abs=300.0 * 0.004), (r["step"], ph)
    assert recs[0]["metrics"][METRICS["rollout"]] > 0
    report = ledger.write_report()
    doc = json.loads(Path(report).read_text())
    e = doc["cost"]["energy"]
    assert doc["schema_version"] == "1.5" and e["measured"] and (e["steps"], e["skipped"]) == (1, 1)
    assert e["joules"]["update"] == pytest.approx(sum(r["metrics"].get(METRICS["update"], 0) for r in recs), abs=0.01)
    # The devices NVML named are the table's H100-SXM: the report carries them as its hardware (the
    # devices read, the ledger's seconds), and the energy rules hold it to 700 W a board.
    assert doc["cost"]["hardware"]["name"] == "H100-SXM" and doc["hardware"]["count"] == 1
    assert doc["hardware"]["wall_seconds"] == pytest.approx(sum(doc["totals"]["seconds"].values()))
    # The stand-in counter names H100s while the run trained on this CPU: its update runs far below
    # any H100's utilization floor, and PHYS-012 says so; the energy rules find nothing wrong.
    assert _ids(validate_report(doc, base_dir=Path(report).parent, file="report.json")) == {"PHYS-012"}
    doc["cost"]["energy"]["joules"]["update"] = 800.0 * doc["totals"]["seconds"]["update"]   # above 700 W
    assert _ids(validate_report(doc, base_dir=Path(report).parent, file="report.json")) == \
        {"ENERGY-001", "ENERGY-004", "PHYS-012"}


def test_energy_that_cannot_be_bounded_or_is_one_node_of_many_is_not_measured(mlperf_run, tmp_path):
    from suite.record.energy import SIDECAR, attach

    doc, folder = _copy(mlperf_run, tmp_path / "r")
    doc = _with_step_energy(doc, folder, watts=900.0)
    ledger = folder / doc["ledger"]["path"]
    base = {k: v for k, v in doc.items() if k != "cost"}
    for info, why in (({"names": ["Acme X1"], "devices": 4, "world_size": 4}, None),
                      ({"names": ["NVIDIA GB300"], "devices": 4, "world_size": 256}, "4 device(s) of one node")):
        (folder / SIDECAR).write_text(json.dumps({"measured": True, "method": "nvml", **info}))
        d = json.loads(json.dumps(base))
        if why is None:
            d.pop("hardware")        # no declared hardware and devices the table does not know
        attach(d, ledger)
        e = d["cost"]["energy"]
        assert e["measured"] is False and (why or "not in the hardware table") in e["reason"]
        assert "joules" not in e and validate_report(d, base_dir=folder, file="report.json") == []
