"""The run spec: everything about a run that its ledger does not say (model, adapter, GRPO
settings, reward, engine, accounting convention, budget, identity, declared steps, hardware),
read from YAML or JSON. People usually write a cell YAML instead (suite.train.cell: the one run
description every command takes), which becomes a RunSpec; this module also reads the older
run-spec files (`grpo: {...}`, `adapter: {...}`). suite.record.report builds reports from it.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import RaceError
from . import schemas

if TYPE_CHECKING:  # accounting's types; imported lazily at run time
    from ..accounting import Adapter, GRPOSettings



@dataclass(frozen=True)
class RewardSpec:
    """The reward system: `kind` rule (0 FLOPs) or a model (orm, prm, judge) named by `model`
    (catalog name or config path; None for rule rewards)."""

    system: str
    kind: str = "rule"
    model: str | None = None


OWN_ENGINE = "trl"
"""The engine the suite's own runs train with (suite.train drives TRL's GRPOTrainer); the default
engine of a run description and a run spec. Every other engine name lives in tasks/engines/."""
OWN_PROFILE = "trl"
"""The accounting profile of the suite's own runs on a CUDA device (suite.train picks by device)."""
OWN_CPU_PROFILE = "trl-cpu"
"""The profile of the suite's own runs on a CPU (the pilot grids and studies run here)."""


@dataclass(frozen=True)
class EngineSpec:
    """The training engine that ran the steps (name and version)."""

    name: str = OWN_ENGINE
    version: str = "unknown"


@dataclass(frozen=True)
class Budget:
    """Declared training FLOP budget and optional IsoFLOP band (low, high)."""

    flops: int | None = None
    band: tuple[int, int] | None = None


@dataclass(frozen=True)
class Hardware:
    """The report's optional `hardware` section: the accelerators a run held and for how long
    (Epoch AI's hardware method). Utilization = FLOPs / (peak_flops x accelerator_seconds);
    per phase, achieved FLOP/s = phase FLOPs / phase seconds (totals.seconds) and its
    utilization that over peak_flops x count."""

    accelerator: str
    """Accelerator model, e.g. NVIDIA H100 SXM."""
    count: int
    """Accelerators the run used."""
    peak_flops: float
    """Dense peak FLOP/s of one accelerator in `dtype` (datasheet, no structured sparsity)."""
    dtype: str | None = None
    """Number format the peak is quoted for (bf16, fp16, ...)."""
    wall_seconds: float | None = None
    """Training wall-clock seconds; give it or accelerator_hours."""
    accelerator_hours: float | None = None
    """Accelerator-hours of training (count x wall hours)."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "hardware") -> "Hardware":
        """Checked against the report schema's `hardware` section; RaceError naming the field."""
        d = {k: v for k, v in d.items() if v is not None} if isinstance(d, Mapping) else d
        return cls(**schemas.report_section(d, "hardware", where))

    @property
    def accelerator_seconds(self) -> float:
        """count x wall_seconds, else accelerator_hours x 3600."""
        if self.wall_seconds is not None:
            return self.count * self.wall_seconds
        return 3600.0 * float(self.accelerator_hours or 0.0)

    def utilization(self, flops: float) -> float:
        """flops / (peak_flops x accelerator_seconds): the share of the peak the claim implies."""
        return flops / (self.peak_flops * self.accelerator_seconds)

    def to_report(self) -> dict:
        """The report's `hardware` section (fields not given are left out)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class RunSpec:
    """Everything about a run that the ledger does not say: model, adapter, GRPO settings,
    reward, engine, accounting convention, budget, identity. Load with RunSpec.from_dict or
    load_run_spec(path) (YAML or JSON)."""

    policy: str  # catalog name or path to a config.json (or its folder)
    adapter: "Adapter"
    grpo: "GRPOSettings"
    reward: RewardSpec
    engine: EngineSpec = EngineSpec()
    engine_profile: str = OWN_PROFILE  # accounting engine profile (suite.accounting.ENGINES)
    attention: str = "causal"  # attention FLOP convention: causal | full
    budget: Budget = Budget()
    label: str = ""
    seed: int | None = None
    id: str | None = None  # run id; defaults to the label or the ledger's folder name
    evaluations: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    steps: int | None = None  # optimizer steps the run took, as declared (provenance.steps)
    hardware: Hardware | None = None  # accelerators and time, for the hardware cross-check
    notes: str | None = None  # free text for run.notes
    reference_cell: str | None = None  # the suite reference cell the run was made from
    sources: Mapping[str, Any] | None = None  # a published run: {published, facts, assumed} (record.sources)
    rollouts: Mapping[str, Any] | None = None  # multi-turn, discards, off-policy, updates (the cell's `rollouts`)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunSpec":
        """Parse a run spec mapping; a missing or wrong field raises RaceError naming it."""
        return _run_spec_from_dict(d)


def _plain(x: Any) -> Any:
    """A run spec as JSON data (tuples become lists), the shape its schema describes."""
    if isinstance(x, Mapping):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _run_spec_from_dict(d: Mapping[str, Any], base: Path | None = None) -> RunSpec:
    from ..accounting import Adapter, GRPOSettings

    if isinstance(d, Mapping):
        d = {k: v for k, v in _plain(d).items() if v is not None}      # null: not given
    d = schemas.numbers_parsed(d, schemas.RUN_SPEC)
    schemas.check_spec(d, schemas.RUN_SPEC, "run spec")
    d["policy"] = beside(d["policy"], base)
    if isinstance(d["reward"], Mapping) and d["reward"].get("model"):
        d["reward"] = {**d["reward"], "model": beside(d["reward"]["model"], base)}
    ad = {k: v for k, v in d["adapter"].items() if v is not None}
    kind = ad.pop("type", None) or ad.pop("kind", None) or ("lora" if ad.get("rank") else "full")
    if "targets" in ad:
        ad["targets"] = tuple(ad["targets"])
    adapter = Adapter(kind=kind, rank=ad.get("rank") or 0, alpha=float(ad.get("alpha") or 0.0),
                      **({"targets": ad["targets"]} if "targets" in ad else {}))
    grpo = GRPOSettings(**d["grpo"])
    rw = {"system": d["reward"]} if isinstance(d["reward"], str) else d["reward"]
    model = rw.get("model")
    reward = RewardSpec(system=rw["system"], kind=rw.get("kind") or ("prm" if model else "rule"), model=model)
    if (reward.kind == "rule") != (reward.model is None):
        raise RaceError(f"run spec: reward kind {reward.kind!r} " + ("needs a model" if reward.model is None else "takes no model"),
                        "rule rewards have model: null; orm/prm/judge name their model")
    en = {"name": d["engine"]} if isinstance(d.get("engine"), str) else d.get("engine") or {}
    name = str(en.get("name", OWN_ENGINE))
    engine = EngineSpec(name=name, version=str(en.get("version") or installed_version(name)))
    acc = d.get("accounting") or {}
    bd = d.get("budget") if isinstance(d.get("budget"), Mapping) else {"flops": d.get("budget")}
    band = bd.get("band")
    if isinstance(band, Mapping):
        band = (band["low"], band["high"])
    return RunSpec(policy=d["policy"], adapter=adapter, grpo=grpo, reward=reward, engine=engine,
                   engine_profile=str(acc.get("engine_profile", OWN_PROFILE)), attention=acc.get("attention", "causal"),
                   budget=Budget(flops=None if bd.get("flops") is None else int(bd["flops"]),
                                 band=None if band is None else (int(band[0]), int(band[1]))),
                   label=str(d.get("label") or ""), seed=d.get("seed"), id=None if d.get("id") is None else str(d["id"]),
                   evaluations=tuple(dict(e) for e in d.get("evaluations") or ()), steps=d.get("steps"),
                   hardware=Hardware.from_dict(d["hardware"], "run spec: hardware") if d.get("hardware") else None,
                   notes=d.get("notes"), reference_cell=d.get("reference_cell"), sources=d.get("sources"),
                   rollouts=dict(d["rollouts"]) if d.get("rollouts") else None)


def beside(value: str, base: Path | None) -> str:
    """A model named relative to a spec file: the path beside the file when one exists there
    (relative paths resolve from the file's own folder), else the value as given (a catalog
    name, a hub id, or a path relative to the current folder)."""
    p = Path(os.path.expanduser(str(value)))
    if base is not None and not p.is_absolute() and (base / p).exists():
        return str((base / p).resolve())
    return str(value)


def installed_version(dist: str) -> str:
    """The installed version of a distribution (the engine's), "unknown" when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except (PackageNotFoundError, ValueError):
        return "unknown"


def read_yaml(path: str | os.PathLike, what: str = "run spec") -> Any:
    """A YAML or JSON file (YAML is a superset of JSON) parsed; one clear line when it cannot be."""
    import yaml

    p = Path(path)
    try:
        if p.is_file() and p.stat().st_size > 4 * 1024 * 1024:
            raise RaceError(f"{what} {p} is over the 4 MiB a YAML file may be", "cells and specs are a few kilobytes")
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise RaceError(f"cannot read {what} {p}: {e.strerror or e}", "check the path") from None
    except UnicodeDecodeError:
        raise RaceError(f"{what} {p} is not UTF-8 text") from None
    from ..yamlstrict import loads

    try:
        return loads(text, f"{what} {p}")      # no anchors, aliases or duplicate keys
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise RaceError(f"{what} {p}: not valid YAML{where}", "check indentation and colons") from None


def is_run_spec(d: Any) -> bool:
    """True for the older run-spec shape (`grpo: {...}` and `adapter: {...}` sections), which a
    cell never has."""
    return isinstance(d, Mapping) and ("grpo" in d or "adapter" in d)


def load_run_spec(path: str | os.PathLike) -> RunSpec:
    """Read a run spec from a YAML or JSON file; models named by relative paths resolve from
    the file's own folder."""
    p = Path(path)
    return _run_spec_from_dict(read_yaml(p), base=p.parent.resolve())


__all__ = ["RewardSpec", "EngineSpec", "Budget", "Hardware", "RunSpec", "load_run_spec", "read_yaml", "is_run_spec",
           "installed_version", "beside", "OWN_ENGINE", "OWN_PROFILE", "OWN_CPU_PROFILE"]
