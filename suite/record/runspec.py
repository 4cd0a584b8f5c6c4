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
from ..numbers import parse_number

if TYPE_CHECKING:  # accounting's types; imported lazily at run time
    from ..accounting import Adapter, GRPOSettings

REWARD_KINDS = ("rule", "orm", "prm", "judge")


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


_RUN_SPEC_KEYS = {"policy", "adapter", "grpo", "reward", "engine", "accounting", "budget", "label",
                  "seed", "id", "evaluations"}
_HINT = "see docs/report.md for the run spec format"


def _need(d: Mapping, key: str, where: str):
    if not isinstance(d, Mapping):
        raise RaceError(f"run spec: {where} must be a mapping", _HINT)
    if key not in d:
        raise RaceError(f"run spec: {where} lacks required field {key!r}", _HINT)
    return d[key]


def _int(x, what: str) -> int:
    """An integer from YAML/JSON that may write big numbers as 1.5e18 or '1.5e18'."""
    try:
        v = parse_number(x)
    except ValueError as e:
        raise RaceError(f"run spec: {what} = {x!r} is {e}", _HINT) from None
    if v < 0:
        raise RaceError(f"run spec: {what} = {x!r} is negative", _HINT)
    return int(v)


def _run_spec_from_dict(d: Mapping[str, Any]) -> RunSpec:
    from ..accounting import Adapter, GRPOSettings

    if not isinstance(d, Mapping):
        raise RaceError("run spec must be a mapping", _HINT)
    unknown = set(d) - _RUN_SPEC_KEYS
    if unknown:
        raise RaceError(f"run spec: unknown field {sorted(unknown)[0]!r}", f"known fields: {', '.join(sorted(_RUN_SPEC_KEYS))}")
    policy = _need(d, "policy", "the spec")
    ad = dict(_need(d, "adapter", "the spec"))
    kind = ad.pop("type", None) or ad.pop("kind", None) or ("lora" if ad.get("rank") else "full")
    if ad.get("targets") is not None:
        ad["targets"] = tuple(ad["targets"])
    else:
        ad.pop("targets", None)
    ad["rank"] = ad.get("rank") or 0
    ad["alpha"] = float(ad.get("alpha") or 0.0)
    try:
        adapter = Adapter(kind=kind, **ad)
        grpo = GRPOSettings(**dict(_need(d, "grpo", "the spec")))
    except TypeError as e:
        raise RaceError(f"run spec: {e}", _HINT) from None
    rw = d.get("reward")
    if rw is None:
        raise RaceError("run spec lacks required field 'reward'", "e.g. reward: {system: sparse} or {system: prm, kind: prm, model: Qwen2.5-Math-PRM-7B}")
    if isinstance(rw, str):
        rw = {"system": rw}
    model = rw.get("model")
    reward = RewardSpec(system=str(_need(rw, "system", "reward")), kind=rw.get("kind") or ("prm" if model else "rule"),
                        model=None if model is None else str(model))
    if reward.kind not in REWARD_KINDS:
        raise RaceError(f"run spec: reward kind {reward.kind!r} is not one of {', '.join(REWARD_KINDS)}", _HINT)
    if (reward.kind == "rule") != (reward.model is None):
        raise RaceError(f"run spec: reward kind {reward.kind!r} " + ("needs a model" if reward.model is None else "takes no model"),
                        "rule rewards have model: null; orm/prm/judge name their model")
    en = d.get("engine") or {}
    if isinstance(en, str):
        en = {"name": en}
    name = str(en.get("name", "trl"))
    engine = EngineSpec(name=name, version=str(en.get("version") or _installed_version(name)))
    acc = d.get("accounting") or {}
    attention = acc.get("attention", "causal")
    if attention not in ("causal", "full"):
        raise RaceError(f"run spec: attention {attention!r} is not causal or full", _HINT)
    bd = d.get("budget") or {}
    if not isinstance(bd, Mapping):
        bd = {"flops": bd}
    band = bd.get("band")
    if band is not None:
        if isinstance(band, Mapping):
            band = (band.get("low"), band.get("high"))
        if len(band) != 2:
            raise RaceError("run spec: budget.band must be [low, high]", _HINT)
        band = (_int(band[0], "budget.band low"), _int(band[1], "budget.band high"))
    budget = Budget(flops=None if bd.get("flops") is None else _int(bd["flops"], "budget.flops"), band=band)
    evals = d.get("evaluations") or ()
    if not isinstance(evals, (list, tuple)):
        raise RaceError("run spec: evaluations must be a list of {target, metric, value, n}", _HINT)
    return RunSpec(policy=str(policy), adapter=adapter, grpo=grpo, reward=reward, engine=engine,
                   engine_profile=str(acc.get("engine_profile", "trl")), attention=attention, budget=budget,
                   label=str(d.get("label") or ""), seed=d.get("seed"), id=None if d.get("id") is None else str(d["id"]),
                   evaluations=tuple(dict(e) for e in evals))


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


__all__ = ["RewardSpec", "EngineSpec", "Budget", "RunSpec", "REWARD_KINDS", "load_run_spec"]
