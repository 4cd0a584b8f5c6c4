"""The compute-allocation report v1: built from a ledger plus the run spec that produced it.

The JSON Schema `schemas/report-v1.schema.json` is the contract; this module follows it.
`build_report(ledger, spec)` streams the ledger once (constant memory), sums tokens, work,
FLOPs and seconds per phase, hashes the file, and writes the identity of everything needed to
recompute the FLOPs (policy and reward-model specs, adapter, GRPO settings, engine profile,
attention convention).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from . import __version__
from .errors import RaceError
from .ledger import PHASES, TOKEN_KEYS, utc_now

if TYPE_CHECKING:  # A's types; imported lazily at run time
    from .accounting import Adapter, GRPOSettings
    from .modelspec import ModelSpec

SCHEMA_VERSION = "1.0"
SUPPORTED_VERSIONS = ("1.0",)
SCHEMA_FILE = "report-v1.schema.json"
SCHEMA_ID = "https://race-suite.org/schemas/report/v1.json"
ACCOUNTING_METHOD = "race-analytic"
REWARD_KINDS = ("rule", "orm", "prm", "judge")


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
        v = float(x) if not isinstance(x, int) else x
    except (TypeError, ValueError):
        raise RaceError(f"run spec: {what} = {x!r} is not a number", _HINT) from None
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        raise RaceError(f"run spec: {what} = {x!r} is not finite", _HINT)
    if v < 0:
        raise RaceError(f"run spec: {what} = {x!r} is negative", _HINT)
    return int(v)


def _run_spec_from_dict(d: Mapping[str, Any]) -> RunSpec:
    from .accounting import Adapter, GRPOSettings

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


def model_entry(spec: "ModelSpec") -> dict:
    """A report `model` object: name, spec and exact parameter counts (and, for mixture-of-
    experts models, the active parameters a token runs through)."""
    entry = {"name": spec.name, "spec": spec.to_dict(), "params_total": spec.params_total,
             "params_non_embedding": spec.params_non_embedding}
    if spec.is_moe:
        entry["params_active"] = spec.params_active
    return entry


def totals_from(flops: Mapping[str, int], tokens: Mapping[str, int], work: Mapping[str, int], steps: int,
                seconds: Mapping[str, float] | None = None) -> dict:
    """The report's `totals` section from summed per-phase numbers: adds total, shares and
    the update share p = C_update / C_total."""
    f = {p: int(flops[p]) for p in PHASES}
    total = sum(f.values())
    out = {"steps": steps, "flops": {**f, "total": total},
           "shares": {p: (f[p] / total if total else 0.0) for p in PHASES},
           "update_share": f["update"] / total if total else 0.0,
           "tokens": {k: int(tokens[k]) for k in TOKEN_KEYS}, "work": dict(work)}
    if seconds:
        out["seconds"] = {k: float(v) for k, v in seconds.items()}
    return out


def build_report(ledger_path: str | os.PathLike, run_spec: RunSpec | Mapping[str, Any], *,
                 report_dir: str | os.PathLike | None = None, created: str | None = None,
                 evaluations: list[Mapping[str, Any]] | None = None, warn=None) -> dict:
    """Build a report v1 dict from a ledger and its run spec, streaming the ledger once.

    The ledger path is stored relative to `report_dir` (default: the ledger's folder). A torn
    last line is left out of the totals and reported through `warn(message)` (default: a
    Python warning); a malformed line or a step that does not increase raises RaceError.
    `evaluations` (rows {target, metric, value, n, ...}) are added to the spec's own. The
    result is checked against the report schema before it is returned."""
    from .accounting import METHOD, VERSION
    from .ledger import LedgerSummary
    from .modelspec import load_spec

    spec = run_spec if isinstance(run_spec, RunSpec) else RunSpec.from_dict(run_spec)
    ledger_path = Path(ledger_path)
    if not ledger_path.is_file():
        raise RaceError(f"ledger {ledger_path} not found", "pass the ledger.jsonl a run wrote")
    s = LedgerSummary.scan(ledger_path, strict=True)
    if s.error:
        raise RaceError(s.error)
    if s.torn is not None:
        msg = f"ledger {ledger_path}: {s.torn}"
        if warn is None:
            import warnings

            warnings.warn(msg, stacklevel=2)
        else:
            warn(msg)
    policy = load_spec(spec.policy)
    reward_model = load_spec(spec.reward.model) if spec.reward.model else None
    base = Path(report_dir) if report_dir is not None else ledger_path.parent
    rel = Path(os.path.relpath(ledger_path.resolve(), base.resolve())).as_posix()
    run = {"id": spec.id or spec.label or ledger_path.resolve().parent.name or "run",
           "label": spec.label, "seed": spec.seed, "created": created or utc_now()}
    if s.first_time:
        run["started"], run["finished"] = s.first_time, s.last_time
    run["engine"] = {"name": spec.engine.name, "version": spec.engine.version}
    run["suite_version"] = __version__
    doc = {
        "$schema": SCHEMA_ID,
        "schema_version": SCHEMA_VERSION,
        "run": run,
        "policy": model_entry(policy),
        "adapter": spec.adapter.to_report(policy),
        "grpo": spec.grpo.to_report(),
        "reward": {"system": spec.reward.system, "kind": spec.reward.kind,
                   "model": model_entry(reward_model) if reward_model else None},
        "accounting": {"method": METHOD, "version": VERSION, "engine_profile": spec.engine_profile,
                       "attention": spec.attention, "flop_convention": "1 multiply-add = 2 FLOPs"},
        "budget": {"flops": spec.budget.flops,
                   "band": None if spec.budget.band is None else {"low": spec.budget.band[0], "high": spec.budget.band[1]}},
        "totals": totals_from(s.flops, s.tokens, s.work, s.records, s.seconds),
        "ledger": {"path": rel, "sha256": s.sha256, "records": s.records},
        "evaluations": [dict(e) for e in spec.evaluations] + [dict(e) for e in (evaluations or ())],
    }
    check_report_schema(doc)
    return doc


def check_report_schema(doc: Mapping[str, Any]) -> None:
    """Raise RaceError naming the first schema violations of a report we are about to write."""
    from .validate.schema_rules import json_path, report_validator

    errs = sorted(report_validator().iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    if errs:
        first = "; ".join(f"{json_path(e.absolute_path)}: {e.message}" for e in errs[:3])
        raise RaceError(f"the report would not match the v1 schema: {first}",
                        "check the run spec's evaluations and budget (docs/report.md)")
