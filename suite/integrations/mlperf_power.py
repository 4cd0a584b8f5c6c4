"""MLPerf power logs into a report's energy: `race import mlperf LOG --cell CELL --power DIR`.

An MLPerf Training power submission keeps one MLLOG file per node and per run
(`results/<system>/<benchmark>/power/result_N/node_K.txt`, as
mlcommons/logging's mlperf_logging/mllog/examples/power/power_measurement.py writes them):
`power_measurement_start` (INTERVAL_START), `conversion_eff` (the AC/DC conversion coefficient),
one `power_reading` per sample (watts, `metadata.host`), `power_measurement_stop` (INTERVAL_END).
The energy of a node is what mlcommons/logging's result summarizer computes
(mlperf_logging/result_summarizer/result_summarizer.py, `_compute_power_node`): each reading
times the milliseconds since the previous one, from the start to the stop, times the conversion
coefficient -- kept here over the measured window itself (the summarizer rescales it to the
time to train). The nodes' energies add up.

The readings are whole nodes at the wall (CPUs, memory, fans, conversion losses included) with
no phase boundaries: the report gets `cost.energy` with `scope: nodes`, `total_joules` and
`window_seconds`, never a split by phase it cannot know.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import RaceError
from .mlperf import read_mllog

LOG_FORMAT = "mlperf"
"""The log format whose runs carry these power logs (race import --power)."""

START, STOP, READING, EFF = "power_measurement_start", "power_measurement_stop", "power_reading", "conversion_eff"


@dataclass(frozen=True)
class NodeEnergy:
    """One node's measured energy."""

    host: str
    joules: float
    start_ms: float
    stop_ms: float
    readings: int
    conversion_eff: float


def _value(ev: dict, where: str) -> float:
    v = ev.get("value")
    v = v.get("value") if isinstance(v, dict) else v
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v < 0:
        raise RaceError(f"{where}: {ev.get('key')} value {v!r} is not a non-negative number",
                        "power_reading values are watts (power_measurement.py writes them as numbers)")
    return float(v)


def node_energy(path: str | Path) -> NodeEnergy:
    """The energy of one node's power log, integrated as the result summarizer does."""
    path = Path(path)
    _, _, events = read_mllog(path, keep=frozenset({START, STOP, READING, EFF}))
    events = sorted((e for e in events if isinstance(e.get("time_ms"), (int, float))), key=lambda e: e["time_ms"])
    start = next((e["time_ms"] for e in events if e["key"] == START), None)
    if start is None:
        raise RaceError(f"{path}: no {START} event", "a node's power log starts with power_measurement_start "
                        "(the result summarizer refuses it too)")
    stop = next((e["time_ms"] for e in events if e["key"] == STOP), None)
    eff, prev, agg, n, last, host = 1.0, start, 0.0, 0, start, None
    for e in events:
        if e["key"] == EFF:
            eff = _value(e, str(path))
        elif e["key"] == READING and e["time_ms"] >= start and (stop is None or e["time_ms"] <= stop):
            agg += _value(e, str(path)) * (e["time_ms"] - prev)
            prev = last = e["time_ms"]
            n += 1
            host = host or (e.get("metadata") or {}).get("host")
    if not n:
        raise RaceError(f"{path}: no power_reading between the measurement's start and stop",
                        "pass the node_*.txt files of the run's power folder")
    stop = stop if stop is not None else last
    if stop <= start:
        raise RaceError(f"{path}: the measurement stops before it starts", "check the log's time_ms values")
    return NodeEnergy(str(host or path.stem), eff * agg / 1000.0, float(start), float(stop), n, eff)


def power_files(where: str | Path) -> list[Path]:
    """node_*.txt of a power result folder (or the one file given)."""
    p = Path(where)
    files = sorted(p.glob("node_*.txt")) if p.is_dir() else [p]
    if not files or not all(f.is_file() for f in files):
        raise RaceError(f"no MLPerf node power logs at {p}", "pass a power/result_N folder holding node_*.txt, or one file")
    return files


def energy_section(where: str | Path) -> dict:
    """The report's `cost.energy` from a run's node power logs."""
    nodes = [node_energy(f) for f in power_files(where)]
    start, stop = min(n.start_ms for n in nodes), max(n.stop_ms for n in nodes)
    return {"measured": True, "method": "mlperf-power", "scope": "nodes", "devices": len(nodes),
            "total_joules": round(sum(n.joules for n in nodes), 3), "window_seconds": (stop - start) / 1000.0}


def attach_power(report_path: str | Path, where: str | Path) -> dict:
    """Write the energy of the power logs at `where` into the report at `report_path` (its
    version raised to the one that holds `cost`); returns the section."""
    from ..record.report import update_report

    section = energy_section(where)

    def change(doc: dict) -> None:
        doc.setdefault("cost", {})["energy"] = section

    update_report(report_path, change)
    return section


__all__ = ["NodeEnergy", "node_energy", "power_files", "energy_section", "attach_power"]
