"""A run's energy in its report: the `cost.energy` section (report 1.5) from the joules per phase
its ledger's steps carry (metrics energy/rollout_J, energy/update_J, energy/reward_J, written by
RaceLedger from the GPUs' counters) and the sidecar energy.json beside the ledger (how they were
measured, or why not). Never a guess: no readings, "not measured" and the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

SIDECAR = "energy.json"
"""Beside the ledger: {measured, method, devices} or {measured: false, reason}."""
METRICS = {"rollout": "energy/rollout_J", "update": "energy/update_J", "reward": "energy/reward_J"}
"""The ledger metrics holding a step's joules per phase."""
SKIPPED = "energy/skipped"
"""1 in a step's metrics when its energy was left out (a counter reset or an unreadable device)."""
NO_SIDECAR = "no energy counter was read during the run (its ledger carries no energy readings)"


def sums(records: Iterable[Mapping]) -> tuple[dict[str, float], int, int]:
    """(joules per phase, steps with readings, steps skipped) over ledger records."""
    joules = dict.fromkeys(METRICS, 0.0)
    steps = skipped = 0
    for rec in records:
        m = rec.get("metrics") or {}
        if m.get(SKIPPED):
            skipped += 1
        elif all(isinstance(m.get(k), (int, float)) for k in METRICS.values()):
            steps += 1
            for ph, k in METRICS.items():
                joules[ph] += float(m[k])
    return joules, steps, skipped


def section(ledger_path: str | Path, records: Iterable[Mapping]) -> dict:
    """The report's `cost.energy`: measured joules per phase, or not measured and why."""
    info = sidecar(Path(ledger_path).parent) or {}
    joules, steps, skipped = sums(records)
    if steps:
        out = {"measured": True, "method": info.get("method", "nvml"),
               "joules": {ph: round(v, 3) for ph, v in joules.items()},
               "devices": int(info.get("devices") or 1), "steps": steps, "skipped": skipped}
        return out
    reason = info.get("reason") if isinstance(info.get("reason"), str) and not info.get("measured") else None
    if skipped and not reason:
        reason = f"every step's energy was left out ({skipped} steps: a counter reset or an unreadable device)"
    return {"measured": False, "reason": (reason or NO_SIDECAR)[:500]}


def describe(energy: Mapping | None) -> str:
    """One line: the joules per phase, or "not measured" and why."""
    if not energy:
        return "energy: not measured (the report has no cost.energy section)"
    if not energy.get("measured"):
        return f"energy: not measured: {energy.get('reason')}"
    if "joules" not in energy:
        return (f"energy: {energy['total_joules'] / 3.6e6:.4g} kWh over {energy['window_seconds']:,.0f} s from "
                f"{energy.get('method')} ({energy.get('devices')} {energy.get('scope', 'accelerators')}; not split by "
                "phase: the readings have no phase boundaries)")
    j = energy["joules"]
    total = sum(j.values())
    return (f"energy: {total / 3.6e6:.4g} kWh ({', '.join(f'{ph} {v / 3.6e6:.4g}' for ph, v in j.items())}) from "
            f"{energy.get('method')} over {energy.get('devices')} device(s)")


def sidecar(folder: str | Path) -> dict | None:
    """The energy.json a run left in `folder`, None when there is none (or it is unreadable)."""
    from .. import jsonstrict

    side = Path(folder) / SIDECAR
    if not side.is_file():
        return None
    try:
        doc = jsonstrict.read(side, hint="it is written by RaceLedger")
    except Exception:       # a damaged sidecar says nothing: the ledger's readings decide
        return None
    return doc if isinstance(doc, dict) else None


def attach(doc: dict, ledger_path: str | Path) -> None:
    """Add `cost.energy` to a report built from a ledger whose run read its GPUs' counters (and
    name the version that holds it, 1.5), with `cost.hardware` (the table entry the devices are)
    and, where the run description declared none, the `hardware` the run measured on (the devices
    read, the ledger's seconds). Energy that cannot be bounded or is not the whole run's -- devices
    the hardware table does not know, one node of a multi-process run -- is recorded as not
    measured, with the reason. A run without a counter keeps its report as it was: its
    energy.json says why, and `run_line` prints it."""
    from ..accounting.hardware import match
    from . import schemas
    from .ledger import LedgerReader

    info = sidecar(Path(ledger_path).parent)
    if not info or not info.get("measured"):
        return
    energy = section(ledger_path, LedgerReader(Path(ledger_path)))
    names = [str(n) for n in info.get("names") or []]
    acc = match(names[0]) if names else None
    devices, world = int(info.get("devices") or 1), int(info.get("world_size") or 1)
    cost: dict = {}
    if energy["measured"] and world > devices:
        energy = {"measured": False, "reason": f"energy was read on {devices} device(s) of one node while the run had "
                                               f"{world} processes: not the whole run's"}
    elif energy["measured"] and acc is None and "hardware" not in doc:
        energy = {"measured": False, "reason": f"the devices ({names[0] if names else 'unnamed'}) are not in the hardware "
                                               "table, so their energy cannot be bounded: add them to "
                                               "suite/accounting/catalog/hardware.yaml"}
    elif energy["measured"] and acc is not None:
        cost["hardware"] = acc.to_report()
        if "hardware" not in doc:
            wall = sum(float(v) for v in (doc.get("totals", {}).get("seconds") or {}).values())
            if wall > 0:
                doc["hardware"] = {"accelerator": acc.name, "count": devices, "peak_flops": acc.peak_flops,
                                   "dtype": "bf16", "wall_seconds": wall}
    doc["cost"] = {**doc.get("cost", {}), **cost, "energy": energy}
    doc["schema_version"] = schemas.version_for(doc, doc.get("schema_version") or schemas.REPORT_VERSION)


def run_line(folder: str | Path, report: Mapping | None = None) -> str:
    """One line on a run's energy: the report's measured joules, else "not measured" and why."""
    energy = (report or {}).get("cost", {}).get("energy") if report else None
    if energy:
        return describe(energy)
    info = sidecar(folder)
    reason = info.get("reason") if info and not info.get("measured") else None
    return describe({"measured": False, "reason": reason or NO_SIDECAR})


__all__ = ["SIDECAR", "METRICS", "SKIPPED", "sums", "section", "describe", "sidecar", "attach", "run_line"]
