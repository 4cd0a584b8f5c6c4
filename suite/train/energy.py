"""Energy per phase from the GPUs' own counters: NVML's total energy (millijoules since the
driver loaded, nvmlDeviceGetTotalEnergyConsumption, Volta and later), read at the same phase
boundaries the ledger's seconds are taken at.

    meter = open_meter()            # a Meter, or Unmeasured(reason) -- never an error
    mark = meter.read()             # millijoules summed over the devices, or None
    ...                             # Meter.between(a, b): joules from a to b, None across a reset

Rules kept: a counter that goes backwards (a driver reload resets it) or a device that cannot be
read makes that step's energy missing, never a partial total (the ledger counts such steps in
`energy/skipped`); without pynvml, an NVIDIA driver or a counter, the run's report says "not
measured" and why, in one line. NVML refreshes the counter every 20-100 ms: a phase shorter than
that reads as 0 J or as the next phase's share; whole runs add up.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ..record.energy import METRICS, SIDECAR, SKIPPED


@dataclass(frozen=True)
class Unmeasured:
    """No counter to read, and why (one line)."""

    reason: str

    def read(self) -> None:
        return None

    def info(self) -> dict:
        return {"measured": False, "reason": self.reason}


@dataclass(frozen=True)
class Meter:
    """NVML handles of the devices this process uses."""

    handles: tuple
    names: tuple[str, ...]

    def read(self) -> int | None:
        """Millijoules summed over the devices, or None when any cannot be read."""
        import pynvml

        try:
            return sum(int(pynvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self.handles)
        except pynvml.NVMLError:
            return None

    @staticmethod
    def between(a: int | None, b: int | None) -> float | None:
        """Joules from reading a to reading b; None when either is missing or the counter went
        backwards (a reset: never a partial total)."""
        if a is None or b is None or b < a:
            return None
        return (b - a) / 1000.0

    def info(self) -> dict:
        return {"measured": True, "method": "nvml", "devices": len(self.handles), "names": list(self.names)}


class ZeusMeter:
    """Zeus measurement windows (zeus.monitor.ZeusMonitor: NVIDIA through NVML, AMD through amdsmi)
    made into a counter: each read ends the open window and begins the next, and the counter is
    the windows' energy so far. Zeus handles its devices' counters; a window it cannot measure
    makes the reading None (the step is left out)."""

    def __init__(self, monitor, devices: int):
        self.monitor, self.devices, self.n, self.total_mj = monitor, devices, 0, 0

    def read(self) -> int | None:
        try:
            if self.n:
                m = self.monitor.end_window(f"race-{self.n}")
                self.total_mj += int(round(float(m.total_energy) * 1000))
            self.n += 1
            self.monitor.begin_window(f"race-{self.n}")
        except Exception:           # zeus raises its own errors for windows it could not measure
            self.n = 0
            return None
        return self.total_mj

    def info(self) -> dict:
        return {"measured": True, "method": "zeus", "devices": self.devices, "names": []}


def open_zeus() -> ZeusMeter | Unmeasured:
    """Zeus windows over every GPU Zeus sees, or Unmeasured naming what is missing."""
    try:
        from zeus.monitor import ZeusMonitor
    except ImportError:
        return Unmeasured("zeus is not installed (pip install zeus; RACE_ENERGY=zeus asks for it)")
    try:
        monitor = ZeusMonitor()
        devices = len(getattr(monitor, "gpu_indices", []) or [])
    except Exception as e:
        return Unmeasured(f"Zeus found no GPU energy to measure ({type(e).__name__}: {e})")
    return ZeusMeter(monitor, devices) if devices else Unmeasured("Zeus found no GPU")


def _visible(pynvml) -> list:
    """Handles of the devices CUDA_VISIBLE_DEVICES names (indices or GPU-/MIG- UUIDs), else all."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None or env.strip() == "":
        return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    out = []
    for item in (x.strip() for x in env.split(",") if x.strip()):
        out.append(pynvml.nvmlDeviceGetHandleByIndex(int(item)) if item.isdigit()
                   else pynvml.nvmlDeviceGetHandleByUUID(item))
    return out


def open_meter() -> Meter | ZeusMeter | Unmeasured:
    """A meter over this process's GPUs, or Unmeasured naming what is missing: NVML's counters,
    or Zeus windows where RACE_ENERGY=zeus."""
    if os.environ.get("RACE_ENERGY", "").lower() == "zeus":
        return open_zeus()
    try:
        import pynvml
    except ImportError:
        return Unmeasured("pynvml is not installed (pip install 'race-suite[energy]', nvidia-ml-py)")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return Unmeasured(f"no NVIDIA driver to read energy from (NVML: {e})")
    try:
        handles = _visible(pynvml)
        if not handles:
            return Unmeasured("no GPU visible to this process")
        names = tuple(str(pynvml.nvmlDeviceGetName(h)) for h in handles)
        for h in handles:
            pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    except pynvml.NVMLError as e:
        return Unmeasured(f"the GPU has no total-energy counter NVML can read ({e})")
    except ValueError as e:
        return Unmeasured(f"CUDA_VISIBLE_DEVICES names no device NVML knows ({e})")
    return Meter(tuple(handles), names)


def write_sidecar(folder: str | os.PathLike, meter) -> Path:
    """energy.json beside the ledger: the meter's method and devices, or the reason there is none."""
    from ..atomic import write_json_atomic

    world = int(os.environ.get("WORLD_SIZE") or 1)     # torchrun / accelerate: processes of the run
    return write_json_atomic(Path(folder) / SIDECAR, {**meter.info(), "world_size": world})


def step_metrics(joules: dict[str, float | None] | None) -> dict[str, float]:
    """A step's ledger metrics: joules per phase, or energy/skipped = 1 when any is missing."""
    if not joules or any(v is None for v in joules.values()):
        return {SKIPPED: 1.0}
    return {METRICS[ph]: round(max(0.0, v), 3) for ph, v in joules.items()}


__all__ = ["Meter", "ZeusMeter", "Unmeasured", "open_meter", "open_zeus", "write_sidecar", "step_metrics", "METRICS", "SKIPPED", "SIDECAR"]
