"""The compute-allocation report v1: built from a ledger plus the run spec that produced it.

The JSON Schema `schemas/report-v1.schema.json` is the contract; this module follows it.
`build_report(ledger, spec)` streams the ledger once (constant memory), sums tokens, work,
FLOPs and seconds per phase, hashes the file, and writes the identity of everything needed to
recompute the FLOPs (policy and reward-model specs, adapter, GRPO settings, engine profile,
attention convention). `write_json_atomic` is the one way the suite writes JSON files.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from . import __version__
from .errors import RaceError
from .ledger import PHASES, TOKEN_KEYS, LedgerReader, utc_now

if TYPE_CHECKING:  # A's types; imported lazily at run time
    from .accounting import Adapter, GRPOSettings
    from .modelspec import ModelSpec

SCHEMA_VERSION = "1.0"
SUPPORTED_VERSIONS = ("1.0",)
SCHEMA_FILE = "report-v1.schema.json"
SCHEMA_ID = "https://race-suite.org/schemas/report/v1.json"
ACCOUNTING_METHOD = "race-analytic"
REWARD_KINDS = ("rule", "orm", "prm", "judge")


def write_json_atomic(path: str | os.PathLike, obj: Any, *, indent: int | None = 2) -> Path:
    """Write `obj` as JSON to `path` atomically: a temp file in the same folder, fsync, then
    os.replace, so readers never see a half-written file. NaN/Infinity are refused."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(obj, indent=indent, allow_nan=False, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


# ---------------------------------------------------------------------------------------------
# Run spec: what `race run` knows about a run before it starts.

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


def _need(d: Mapping, key: str, where: str):
    if key not in d:
        raise RaceError(f"run spec: {where} lacks required field {key!r}",
                        "see docs/report.md for the run spec format")
    return d[key]


def _run_spec_from_dict(d: Mapping[str, Any]) -> RunSpec:
    from .accounting import Adapter, GRPOSettings

    if not isinstance(d, Mapping):
        raise RaceError("run spec must be a mapping", "see docs/report.md for the run spec format")
    unknown = set(d) - _RUN_SPEC_KEYS
    if unknown:
        raise RaceError(f"run spec: unknown field {sorted(unknown)[0]!r}",
                        f"known fields: {', '.join(sorted(_RUN_SPEC_KEYS))}")
    policy = _need(d, "policy", "the spec")
    ad = dict(_need(d, "adapter", "the spec"))
    kind = ad.pop("type", None) or ad.pop("kind", None) or ("lora" if ad.get("rank") else "full")
    try:
        adapter = Adapter(kind=kind, **ad)
        grpo = GRPOSettings(**dict(_need(d, "grpo", "the spec")))
    except TypeError as e:
        raise RaceError(f"run spec: {e}", "see docs/report.md for the run spec format") from None
    rw = d.get("reward") or {}
    if isinstance(rw, str):
        rw = {"system": rw}
    reward = RewardSpec(system=_need(rw, "system", "reward"), kind=rw.get("kind", "rule" if not rw.get("model") else "prm"),
                        model=rw.get("model"))
    if reward.kind not in REWARD_KINDS:
        raise RaceError(f"run spec: reward kind {reward.kind!r} is not one of {', '.join(REWARD_KINDS)}")
    if (reward.kind == "rule") != (reward.model is None):
        raise RaceError(f"run spec: reward kind {reward.kind!r} " + ("needs a model" if reward.model is None else "takes no model"),
                        "rule rewards have model: null; orm/prm/judge name their model")
    en = d.get("engine") or {}
    engine = EngineSpec(**en) if isinstance(en, Mapping) else EngineSpec(name=str(en))
    acc = d.get("accounting") or {}
    bd = d.get("budget") or {}
    if not isinstance(bd, Mapping):
        bd = {"flops": bd}
    band = bd.get("band")
    budget = Budget(flops=None if bd.get("flops") is None else int(float(bd["flops"])),
                    band=None if band is None else (int(float(band[0])), int(float(band[1]))))
    attention = acc.get("attention", "causal")
    if attention not in ("causal", "full"):
        raise RaceError(f"run spec: attention {attention!r} is not causal or full")
    return RunSpec(policy=str(policy), adapter=adapter, grpo=grpo, reward=reward, engine=engine,
                   engine_profile=acc.get("engine_profile", "trl"), attention=attention, budget=budget,
                   label=str(d.get("label", "")), seed=d.get("seed"), id=d.get("id"),
                   evaluations=tuple(d.get("evaluations") or ()))


def load_run_spec(path: str | os.PathLike) -> RunSpec:
    """Read a run spec from YAML or JSON."""
    raise NotImplementedError  # filled in below once accounting lands


def build_report(ledger_path: str | os.PathLike, run_spec: RunSpec | Mapping[str, Any], *,
                 report_dir: str | os.PathLike | None = None, created: str | None = None) -> dict:
    """Build a report v1 dict from a ledger and its run spec. The ledger path is stored
    relative to `report_dir` (default: the ledger's folder)."""
    raise NotImplementedError
