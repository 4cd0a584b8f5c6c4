"""The run spec: everything about a run that its ledger does not say (model, adapter, GRPO
settings, reward, engine, accounting convention, budget, identity), read from YAML or JSON.
`race report LEDGER --spec SPEC` and the integrations hand it to suite.record.report.build_report.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class EngineSpec:
    """The training engine that ran the steps (name and version)."""

    name: str = "trl"
    version: str = "unknown"


@dataclass(frozen=True)
class Budget:
    """Declared training FLOP budget and optional IsoFLOP band (low, high)."""

    flops: int | None = None
    band: tuple[int, int] | None = None


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
    engine_profile: str = "trl"  # accounting engine profile (suite.accounting.ENGINES)
    attention: str = "causal"  # attention FLOP convention: causal | full
    budget: Budget = Budget()
    label: str = ""
    seed: int | None = None
    id: str | None = None  # run id; defaults to the label or the ledger's folder name
    evaluations: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)

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


def _run_spec_from_dict(d: Mapping[str, Any]) -> RunSpec:
    from ..accounting import Adapter, GRPOSettings

    if isinstance(d, Mapping):
        d = {k: v for k, v in _plain(d).items() if v is not None}      # null: not given
    d = schemas.numbers_parsed(d, schemas.RUN_SPEC)
    schemas.check_spec(d, schemas.RUN_SPEC, "run spec")
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
    name = str(en.get("name", "trl"))
    engine = EngineSpec(name=name, version=str(en.get("version") or _installed_version(name)))
    acc = d.get("accounting") or {}
    bd = d.get("budget") if isinstance(d.get("budget"), Mapping) else {"flops": d.get("budget")}
    band = bd.get("band")
    if isinstance(band, Mapping):
        band = (band["low"], band["high"])
    return RunSpec(policy=d["policy"], adapter=adapter, grpo=grpo, reward=reward, engine=engine,
                   engine_profile=str(acc.get("engine_profile", "trl")), attention=acc.get("attention", "causal"),
                   budget=Budget(flops=None if bd.get("flops") is None else int(bd["flops"]),
                                 band=None if band is None else (int(band[0]), int(band[1]))),
                   label=str(d.get("label") or ""), seed=d.get("seed"), id=None if d.get("id") is None else str(d["id"]),
                   evaluations=tuple(dict(e) for e in d.get("evaluations") or ()))


def _installed_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except (PackageNotFoundError, ValueError):
        return "unknown"


def load_run_spec(path: str | os.PathLike) -> RunSpec:
    """Read a run spec from a YAML or JSON file (a `race run` cell spec's run part)."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise RaceError(f"cannot read run spec {p}: {e.strerror or e}", "check the path") from None
    except UnicodeDecodeError:
        raise RaceError(f"run spec {p} is not UTF-8 text") from None
    try:
        d = yaml.safe_load(text)  # YAML is a superset of JSON
    except yaml.YAMLError as e:
        raise RaceError(f"run spec {p} is not valid YAML/JSON: {str(e).splitlines()[0]}") from None
    return RunSpec.from_dict(d)


__all__ = ["RewardSpec", "EngineSpec", "Budget", "RunSpec", "load_run_spec"]
