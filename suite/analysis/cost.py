"""Time and money of a run before (and after) it runs: each phase's roofline floor on the chosen
accelerators, divided by a roofline efficiency fitted on runs that state their time.

The efficiency of a run is its floor over its seconds (suite.accounting.roofline: a phase cannot
beat its FLOPs at peak, nor a decode its bytes at memory bandwidth). Runs that state time
calibrate it:
- runs with seconds per phase (imported engine logs, MLPerf, measured ledgers on a GPU) give one
  efficiency per phase;
- published runs that state only accelerator-hours give one efficiency for the whole run (the sum
  of the floors over the stated wall time), which stands for every phase.
A phase's efficiency is taken log-normal over the records that speak for it (its own and the
whole-run ones); the prediction is floor / efficiency at the geometric mean, and its range the
80% prediction interval (Student t, n - 1 degrees of freedom, sqrt(1 + 1/n)), widened by the
run's own FLOPs range when its numbers are assumptions. The records are stored in
tasks/cost/calibration.json (tools/cost.py regenerates it from leaderboard/submissions and the
MLPerf fixtures); leave-one-out drops a run's own records before fitting.

It is an estimate with its spread, not a promise: the calibration is a dozen runs of the field.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Iterable, Mapping

from ..errors import RaceError

PHASES = ("rollout", "update", "reward")
LEVEL = 0.8
"""Coverage of the efficiency's prediction interval."""
CALIBRATION_VERSION = 1


@dataclass(frozen=True)
class Shape:
    """What a run's floors depend on, besides the accelerators."""

    flops: dict
    """FLOPs per phase."""
    decode_iterations: float
    """Decode steps in sequence: steps x mean completion tokens, summed over stages."""
    kv_pairs: float
    """Query-key pairs of the rollouts (each reads a cached key and value)."""
    spec: object
    """The policy's ModelSpec (weights and KV width)."""


@dataclass(frozen=True)
class Record:
    """One calibration point: a phase (or a whole run) whose floors and seconds are known."""

    source: str
    """published | mlperf | imported | measured."""
    run: str
    regime: str
    """dense | moe: the model class (records are pooled within it)."""
    accelerator: str
    gpus: int
    phase: str
    """rollout, update, reward, or run (the phases together)."""
    rollout_floor: float
    """Floor seconds of the rollouts in what `seconds` covers (0 for an update record)."""
    compute_floor: float
    """Floor seconds of the update and reward passes in it (0 for a rollout record)."""
    seconds: float

    @property
    def efficiency(self) -> float:
        """Floors over seconds: the share of the roofline the whole of it reached."""
        return (self.rollout_floor + self.compute_floor) / self.seconds


def shape_of_report(report) -> Shape:
    """The shape of a report (suite.record.report.Report): stages summed when it has them."""
    from ..accounting.stored import spec_from_dict

    spec = spec_from_dict(report.doc["policy"]["spec"])
    work = report.get("totals.work")
    stages = report.doc.get("stages")
    if isinstance(stages, list) and stages:
        iters = sum(s["tokens"]["rollout_completion"] / (s["grpo"]["group_size"] * s["grpo"]["prompts_per_step"])
                    for s in stages)
    else:
        iters = report.steps * report.tokens["rollout_completion"] / max(1, report.completions)
    pairs = work.get("rollout.decode_pairs") or work.get("rollout.attn_causal", 0)
    flops = {ph: report.flops.get(ph, 0) for ph in PHASES}
    return Shape(flops, float(iters), float(pairs), spec)


def shape_of_step(step, steps: int, completion_tokens: float, spec) -> Shape:
    """The shape of `steps` GRPO steps priced by suite.accounting.step_flops."""
    return Shape({ph: step.flops.get(ph, 0) * steps for ph in PHASES}, steps * float(completion_tokens),
                 float(step.work.get("rollout.decode_pairs") or step.work.get("rollout.attn_causal", 0)) * steps, spec)


def floors(shape: Shape, acc, gpus: int) -> dict:
    from ..accounting.roofline import phase_floors

    return phase_floors(shape.flops, decode_iterations=shape.decode_iterations, kv_pairs=shape.kv_pairs,
                        spec=shape.spec, acc=acc, gpus=gpus)


def records_of_report(report, source: str) -> list[Record]:
    """The calibration records a report gives: per phase when it records seconds per phase (and
    is not an estimate), else one for the whole run when its hardware states the hours; none when
    its accelerator is not in the hardware table."""
    from ..accounting.hardware import match

    hw = report.hardware
    acc = match(hw.accelerator) if hw else None
    if acc is None:
        return []
    shape = shape_of_report(report)
    fl = floors(shape, acc, hw.count)
    regime = "moe" if shape.spec.is_moe else "dense"
    secs = report.seconds
    if report.provenance_method != "estimated" and any(secs.get(ph) for ph in PHASES):
        return [Record(source, report.run_id, regime, acc.name, hw.count, ph,
                       fl[ph].seconds if ph == "rollout" else 0.0, 0.0 if ph == "rollout" else fl[ph].seconds,
                       float(secs[ph])) for ph in PHASES if report.flops.get(ph) and secs.get(ph)]
    wall = hw.accelerator_seconds / hw.count
    return [Record(source, report.run_id, regime, acc.name, hw.count, "run", fl["rollout"].seconds,
                   fl["update"].seconds + fl["reward"].seconds, wall)]


# ------------------------------------------------------------------------------ the stored calibration


def calibration_path():
    from .. import paths

    return paths.tasks() / "cost" / "calibration.json"


def read_calibration(path=None) -> list[Record]:
    """The stored calibration records (tasks/cost/calibration.json)."""
    from .. import jsonstrict

    doc = jsonstrict.read(path or calibration_path(), hint="regenerate it: python tools/cost.py")
    if not isinstance(doc, dict) or doc.get("version") != CALIBRATION_VERSION:
        raise RaceError("tasks/cost/calibration.json is not a version-1 calibration", "regenerate it: python tools/cost.py")
    return [Record(**{k: r[k] for k in Record.__dataclass_fields__}) for r in doc["records"]]


def calibration_doc(records: Iterable[Record]) -> dict:
    """The calibration file's document (records sorted; efficiency shown for readers)."""
    rows = sorted(records, key=lambda r: (r.source, r.run, r.phase))
    return {"version": CALIBRATION_VERSION,
            "about": "roofline efficiency (floor seconds / seconds) of runs that state time; tools/cost.py "
                     "regenerates it, suite.analysis.cost fits it",
            "records": [{**asdict(r), "efficiency": round(r.efficiency, 6)} for r in rows]}


# ------------------------------------------------------------------------------ fit and predict


@dataclass(frozen=True)
class Efficiency:
    """The fitted roofline efficiencies: of the rollouts (decode, mostly memory bound) and of the
    compute-bound passes (update and reward), and the spread of what they predict."""

    rollout: float
    compute: float
    n: int
    """Records fitted."""
    sd: float
    """Residual standard deviation of log seconds."""
    factor: float
    """The prediction interval's half-width as a factor: seconds x / factor .. x factor."""
    regime: str
    """The records' model class, or "all" where the class had too few."""


def fit(records: Iterable[Record], *, regime: str = "dense", exclude: str | None = None,
        level: float = LEVEL) -> Efficiency:
    """Least squares in log seconds: a record's seconds ~ rollout_floor / e_rollout +
    compute_floor / e_compute, over the records of `regime` (all records when it has fewer than
    four), leaving out run `exclude`."""
    import numpy as np
    from scipy.optimize import least_squares
    from scipy.stats import t

    pool = [r for r in records if r.run != exclude]
    same = [r for r in pool if r.regime == regime]
    rows, used = (same, regime) if len(same) >= 4 else (pool, "all")
    n = len(rows)
    if n < 4:
        raise RaceError(f"only {n} calibration record(s)", "the fit needs at least 4 runs that state time")
    R = np.array([r.rollout_floor for r in rows])
    U = np.array([r.compute_floor for r in rows])
    T = np.log([r.seconds for r in rows])

    def res(x):
        return np.log(np.exp(x[0]) * R + np.exp(x[1]) * U) - T

    sol = least_squares(res, [1.0, 2.0])
    sd = float(np.sqrt((sol.fun ** 2).sum() / (n - 2)))
    factor = math.exp(t.ppf(0.5 + level / 2, n - 2) * sd * math.sqrt(1 + 1 / n))
    return Efficiency(float(np.exp(-sol.x[0])), float(np.exp(-sol.x[1])), n, sd, factor, used)


@dataclass(frozen=True)
class Prediction:
    """Wall seconds per phase (central, low, high) on `gpus` x `accelerator`."""

    accelerator: str
    gpus: int
    phases: dict
    """phase -> {floor_seconds, bound, efficiency, seconds, low, high}."""
    fit: Efficiency

    def total(self, key: str) -> float:
        return sum(p[key] for p in self.phases.values())

    def accelerator_hours(self, key: str = "seconds") -> float:
        return self.total(key) * self.gpus / 3600.0

    def to_dict(self, price: float | None = None) -> dict:
        out = {"accelerator": self.accelerator, "gpus": self.gpus, "phases": self.phases,
               "wall_hours": {k: self.total(k) / 3600.0 for k in ("seconds", "low", "high")},
               "accelerator_hours": {k: self.accelerator_hours(k) for k in ("seconds", "low", "high")},
               "fit": {**asdict(self.fit), "level": LEVEL}}
        if price is not None:
            out["price"] = {"per_accelerator_hour": price, "basis": "declared (--price-per-gpu-hour)",
                            "cost": {k: price * v for k, v in out["accelerator_hours"].items()},
                            "by_phase": {ph: {k: price * p[k] * self.gpus / 3600.0 for k in ("seconds", "low", "high")}
                                         for ph, p in self.phases.items()}}
        return out


def predict(shape: Shape, acc, gpus: int, records: list[Record], *, exclude: str | None = None,
            flops_range: tuple[float, float] = (1.0, 1.0)) -> Prediction:
    """Seconds per phase of a run of `shape` on `gpus` x `acc`: its floors over the fitted
    efficiencies, the range the prediction interval (times `flops_range` at the low and high
    ends: a run whose numbers are assumptions, its FLOPs range over its total)."""
    if gpus < 1:
        raise RaceError(f"--gpus must be >= 1, got {gpus}")
    fl = floors(shape, acc, gpus)
    e = fit(records, regime="moe" if shape.spec.is_moe else "dense", exclude=exclude)
    phases = {}
    for ph in PHASES:
        f = fl[ph]
        eff = e.rollout if ph == "rollout" else e.compute
        mid = f.seconds / eff
        phases[ph] = {"floor_seconds": f.seconds, "bound": f.bound, "efficiency": eff, "seconds": mid,
                      "low": mid * flops_range[0] / e.factor, "high": mid * flops_range[1] * e.factor}
    return Prediction(acc.name, gpus, phases, e)


def predict_report(report, records: list[Record], *, leave_one_out: bool = False) -> dict:
    """{stated, predicted, low, high} accelerator-hours of a report that states its hardware,
    predicted from its FLOPs and shape (without its own records when `leave_one_out`)."""
    from ..accounting.hardware import accelerator

    hw = report.hardware
    if hw is None:
        raise RaceError(f"{report.name}: the report has no hardware section", "predicting hours needs the accelerators "
                        "and their count (hardware: accelerator, count, peak_flops)")
    acc = accelerator(hw.accelerator)
    rng = (report.doc.get("sources") or {}).get("range", {}).get("flops")
    total = report.total_flops
    scale = (rng["low"] / total, rng["high"] / total) if rng and total else (1.0, 1.0)
    p = predict(shape_of_report(report), acc, hw.count, records, exclude=report.run_id if leave_one_out else None,
                flops_range=scale)
    stated = hw.accelerator_seconds / 3600.0 if (hw.wall_seconds or hw.accelerator_hours) else None
    lo, mid, hi = (p.accelerator_hours(k) for k in ("low", "seconds", "high"))
    return {"run": report.run_id, "accelerator": acc.name, "gpus": hw.count, "stated": stated, "predicted": mid,
            "low": lo, "high": hi, "inside": None if stated is None else lo <= stated <= hi,
            "error": None if stated is None else mid / stated - 1, "leave_one_out": leave_one_out,
            "phases": p.phases}


def leave_one_out(reports, records: list[Record]) -> list[dict]:
    """predict_report of every report with a run record, each without its own."""
    runs = {r.run for r in records if r.source == "published"}
    return [predict_report(r, records, leave_one_out=True) for r in reports if r.run_id in runs]


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


__all__ = ["Shape", "Record", "Efficiency", "Prediction", "shape_of_report", "shape_of_step", "records_of_report",
           "read_calibration", "calibration_doc", "fit", "predict", "predict_report", "leave_one_out", "median",
           "LEVEL"]
