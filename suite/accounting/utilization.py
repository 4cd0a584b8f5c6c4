"""Utilization: the FLOP/s each phase achieved, and the machine's ceiling it is a fraction of.

A ledger (and the report built from it) holds FLOPs and wall seconds per phase; their quotient
is the phase's achieved rate, derived wherever it is shown, never stored. Utilization needs a
ceiling: the fp32 matmul rate this machine reaches with the torch threads the run used, measured
by `probe` (`race bench --calibrate` stores it in the calibration file, and the reference-cell
benchmarks measure it in the same run as the cells), or an accelerator's declared peak.

    from suite.accounting.utilization import achieved, stored_ceiling, utilization
    rates = achieved(report.flops, report.seconds)     # {"rollout": 1.1e10, "update": ..., "total": ...}
    ceiling = stored_ceiling(threads=1)                # None until `race bench --calibrate` ran here
    if ceiling:
        shares = utilization(rates, ceiling.flops_per_second)   # {"rollout": 0.25, ...}
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping

from ..errors import RaceError
from .work import PHASES

#: Square fp32 matmul sizes the probe tries; the ceiling is the best rate among them.
PROBE_SIZES = (256, 512, 1024)
CALIBRATION_VERSION = 1


@dataclass(frozen=True)
class Ceiling:
    """The rate a machine's matmuls reach: what utilization is a fraction of."""

    flops_per_second: float
    """fp32 matmul FLOP/s (1 multiply-add = 2 FLOPs)."""
    threads: int
    """torch threads it was measured with (a run is compared with the ceiling of its own threads)."""
    machine: str
    """Machine kind, python-<cores>core-<cpu|gpu>."""
    size: int = 0
    """Square matmul size that reached it (0: declared, not measured)."""
    measured: str = ""
    """UTC time of the measurement (RFC 3339)."""
    load: float | None = None
    """1-minute load average when it was measured (a shared machine's ceiling drops under load)."""
    source: str = "probe"
    """"probe" (measured here) or "declared" (an accelerator's peak)."""


def machine_kind() -> str:
    """This machine's kind: python-<cores>core-<cpu|gpu> (e.g. python-2core-cpu). GPU: torch
    sees CUDA, or (where torch is not imported yet, e.g. a grid's driver) an NVIDIA device node
    exists: importing torch only to name the machine costs seconds."""
    import sys

    if "torch" in sys.modules:
        gpu = sys.modules["torch"].cuda.is_available()
    else:
        gpu = any(Path("/dev").glob("nvidia[0-9]*"))
    return f"python-{os.cpu_count() or 1}core-{'gpu' if gpu else 'cpu'}"


# ------------------------------------------------------------------------------ achieved rates


def achieved(flops: Mapping[str, int], seconds: Mapping[str, float] | None) -> dict[str, float | None]:
    """FLOP/s per phase and for the phases together ("total": their FLOPs over their seconds).
    None where a phase did no FLOPs (a rule reward) or has no seconds recorded."""
    seconds = seconds or {}
    out: dict[str, float | None] = {}
    for ph in PHASES:
        f, s = flops.get(ph, 0), seconds.get(ph)
        out[ph] = f / s if f and s else None
    f = sum(flops.get(ph, 0) for ph in PHASES)
    s = sum(seconds.get(ph, 0.0) for ph in PHASES)
    out["total"] = f / s if f and s else None
    return out


def utilization(rates: Mapping[str, float | None], ceiling: float | None) -> dict[str, float | None]:
    """Each rate as a fraction of `ceiling` FLOP/s (None where the rate or the ceiling is unknown)."""
    return {k: (r / ceiling if r is not None and ceiling else None) for k, r in rates.items()}


# ------------------------------------------------------------------------------ the probe


def probe(threads: int = 1, *, sizes: tuple[int, ...] = PROBE_SIZES, seconds: float = 0.5) -> Ceiling:
    """Measure the fp32 matmul ceiling with `threads` torch threads: each size multiplied
    back to back for about seconds / len(sizes), its rate the FLOPs done over the time taken;
    the ceiling is the best size's rate. A sustained rate, not the best of short bursts: on a
    shared machine it drops with the CPU share this process gets, as a run measured at the same
    time does (which is what makes it a same-run reference). The threads setting is restored."""
    import torch

    if threads < 1:
        raise RaceError(f"threads must be >= 1, got {threads}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    best, best_size = 0.0, 0
    try:
        gen = torch.Generator().manual_seed(0)
        for n in sizes:
            a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
            a @ b  # warm the kernels and caches
            calls, t0 = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - t0) < seconds / len(sizes):
                a @ b
                calls += 1
            rate = 2 * n ** 3 * calls / elapsed
            if rate > best:
                best, best_size = rate, n
    finally:
        torch.set_num_threads(before)
    return Ceiling(flops_per_second=best, threads=threads, machine=machine_kind(), size=best_size,
                   measured=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), load=_load())


def _load() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


# ------------------------------------------------------------------------------ the calibration file


def calibration_path() -> Path:
    """Where ceilings are stored: $RACE_CALIBRATION, else $XDG_CACHE_HOME/race/calibration.json
    (~/.cache/race/calibration.json): a property of the machine, not of a checkout."""
    if os.environ.get("RACE_CALIBRATION"):
        return Path(os.environ["RACE_CALIBRATION"])
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "race" / "calibration.json"


def _read(path: Path, *, remeasured: bool = False) -> list[dict]:
    """The ceilings stored in the calibration file. One that is not strict JSON (a duplicate key)
    is a RaceError naming it, except for `race bench --calibrate` (`remeasured`), which measures
    again and rewrites it. Another version's file, or rows of another shape, hold no ceiling."""
    from .. import jsonstrict

    if not path.is_file():
        return []
    try:
        doc = jsonstrict.read(path, hint="measure the machine again: race bench --calibrate (it rewrites the file)")
    except RaceError:
        if remeasured:
            return []
        raise
    rows = doc.get("ceilings") if isinstance(doc, dict) and doc.get("version") == CALIBRATION_VERSION else None
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def save_ceiling(ceiling: Ceiling, path: str | os.PathLike | None = None) -> Path:
    """Store a ceiling in the calibration file (atomically), replacing the one of the same
    machine kind and threads."""
    from ..atomic import write_json_atomic

    path = Path(path) if path else calibration_path()
    keep = [r for r in _read(path, remeasured=True) if (r.get("machine"), r.get("threads")) != (ceiling.machine, ceiling.threads)]
    rows = sorted([*keep, asdict(ceiling)], key=lambda r: (str(r.get("machine")), int(r.get("threads") or 0)))
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_json_atomic(path, {"version": CALIBRATION_VERSION, "ceilings": rows})


def stored_ceiling(threads: int, machine: str | None = None,
                   path: str | os.PathLike | None = None) -> Ceiling | None:
    """The stored ceiling of this machine kind (or `machine`) at `threads`, or None."""
    machine = machine or machine_kind()
    for r in _read(Path(path) if path else calibration_path()):
        if r.get("machine") == machine and r.get("threads") == threads:
            try:
                return Ceiling(**r)
            except TypeError:
                return None
    return None
