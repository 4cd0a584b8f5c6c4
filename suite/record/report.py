# Over 500 lines: the one module that reads and writes report.json: the typed Report, built from a ledger or from means.
"""The compute-allocation report v1: built from a ledger, read, changed and written through
this one module (the validator, suite.validate.runner, parses untrusted reports itself, to turn
a malformed one into findings; nothing else parses or writes report.json).

The JSON Schema `schemas/report-v1.schema.json` is the contract; this module follows it.

- `build_report(ledger, spec, provenance=...)` streams the ledger once (constant memory), sums
  tokens, work, FLOPs and seconds per phase, hashes the file, and writes the identity of
  everything needed to recompute the FLOPs (policy and reward-model specs, adapter, GRPO
  settings, engine profile, attention convention), with how the ledger was made (no default).
  It returns a `Report`, as `build_estimate` and `read_report` do.
- `read_report(path)` reads one strictly (size limit, UTF-8, no NaN, no duplicate keys) and,
  by default, checks it against the schema; `Report` is what it returns: the document with
  typed access to what readers use (every report reader -- frontiers, the site, the
  quickstart summary, the benchmark figures -- reads its numbers through it).
- `write_report(path, report)` and `update_report(path, change)` write atomically, schema-checked.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .. import __version__, jsonstrict
from ..accounting import PHASES, TOKEN_KEYS, reward_tokens_of
from ..atomic import write_json_atomic
from ..errors import RaceError
from . import schemas
from .ledger import utc_now
from .runspec import Hardware, RunSpec

if TYPE_CHECKING:  # accounting's types; imported lazily at run time
    from ..accounting.modelspec import ModelSpec

CHECK_HINT = "check it with `race validate`"


# ---------------------------------------------------------------------------------------------
# Reading: one typed view of a report


@dataclass(frozen=True)
class Evaluation:
    """One row of a report's `evaluations`."""

    target: str
    """Evaluation set (`target`, e.g. arith-easy-250 or arith-easy-250:first-32)."""
    metric: str
    """Metric name (`metric`: pass@1, process_judge, native_reward, ...)."""
    value: float
    """Its value (higher is better)."""
    judge: str = ""
    """Name of the judge model for judged metrics, "" otherwise."""


@dataclass(frozen=True)
class CurvePoint:
    """One scored snapshot of a report's `curve` (1.2): the step, the cumulative FLOPs per phase
    at it, and its evaluation rows."""

    step: int
    """Optimizer steps done (0: the policy before training)."""
    flops: dict
    """Cumulative FLOPs per phase up to the step: rollout, update, reward, total."""
    evaluations: tuple[Evaluation, ...]
    """Its scores (targets named TARGET:first-N when a subset was scored)."""


class UnreadableReport(RaceError):
    """A report file that cannot be read as strict JSON. `kind` is jsonstrict's kind of problem
    (syntax, nan, duplicate-key, size, ...) or "io"; `reason` says it without the file name."""

    def __init__(self, name: str, kind: str, reason: str, hint: str | None):
        super().__init__(f"cannot read {name}: {reason}" if kind == "io" else f"{name}: {reason}", hint)
        self.kind, self.reason = kind, reason


class Report:
    """A report v1 document as read: `doc` (the parsed JSON), `name` (how messages name it),
    `path` and `data` (the file and its bytes, when read from one).

    Accessors read the document as the schema gives it. On a document nobody checked, a field
    that is missing or of the wrong kind is a RaceError naming it and the file, never a
    KeyError."""

    __slots__ = ("doc", "name", "path", "data")

    def __init__(self, doc: Any, name: str = "report.json", path: Path | None = None, data: bytes | None = None):
        if not isinstance(doc, dict):
            raise RaceError(f"{name}: not a report (top level is not an object)", CHECK_HINT)
        self.doc, self.name, self.path, self.data = doc, name, path, data

    # ---- fields, by dotted name -------------------------------------------------------------

    def get(self, dotted: str, node: Any = None, where: str | None = None) -> Any:
        """The value at a dotted path (of `node`, default the document)."""
        cur = self.doc if node is None else node
        for key in dotted.split("."):
            if not isinstance(cur, dict) or key not in cur:
                raise RaceError(f"{where or self.name}: report has no field {dotted!r}", CHECK_HINT)
            cur = cur[key]
        return cur

    def number(self, dotted: str, node: Any = None, where: str | None = None) -> float | int:
        """A finite number at a dotted path."""
        v = self.get(dotted, node, where)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise RaceError(f"{where or self.name}: {dotted} must be a finite number, found {v!r}", CHECK_HINT)
        return v

    def _section(self, name: str) -> dict:
        v = self.doc.get(name)
        return v if isinstance(v, dict) else {}

    # ---- the run ------------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        """run.id."""
        return str(self.get("run.id"))

    @property
    def label(self) -> str:
        """run.label, "" when absent."""
        label = self._section("run").get("label")
        return label.strip() if isinstance(label, str) else ""

    @property
    def allocation(self) -> str:
        """The allocation label: run.label, else one made of LoRA rank, K and mu."""
        g = self._section("grpo")
        return self.label or f"r{self.lora_rank or 0}-K{g.get('group_size', '?')}-mu{g.get('num_iterations', '?')}"

    @property
    def seed(self) -> int | None:
        """run.seed."""
        return self._section("run").get("seed")

    @property
    def engine(self) -> str:
        """The engine that ran the steps: "name version"."""
        return f"{self.get('run.engine.name')} {self.get('run.engine.version')}"

    # ---- what was trained, and how it was counted ---------------------------------------------

    @property
    def model(self) -> str:
        """policy.name."""
        return str(self.get("policy.name"))

    @property
    def params_total(self) -> int:
        """policy.params_total."""
        return int(self.number("policy.params_total"))

    @property
    def priced_by(self) -> dict[str, str | None]:
        """The path that priced each model: {"policy": "recipe" or "traced", "reward": the reward
        model's, None for rule rewards} (a spec with priced_by traced, else the recipe)."""
        from ..accounting.specs import priced_by

        model = self._section("reward").get("model")
        return {"policy": priced_by(self.get("policy.spec")),
                "reward": priced_by(model.get("spec")) if isinstance(model, dict) else None}

    def model_spec(self, which: str = "policy"):
        """The spec of the policy (`which` "policy") or the reward model ("reward"; None for rule
        rewards), read back: a ModelSpec, or a TracedSpec traced again from its config (needs torch;
        suite.accounting.stored.spec_from_dict). RaceError for one that cannot be read."""
        from ..accounting.stored import spec_from_dict

        if which not in ("policy", "reward"):
            raise RaceError(f"model_spec: which must be policy or reward, not {which!r}")
        node = self.get("policy") if which == "policy" else self._section("reward").get("model")
        if node is None:
            return None
        try:
            return spec_from_dict(self.get("spec", node, f"{self.name} {which}"), str(self.get("name", node)))
        except RaceError as e:
            raise type(e)(f"{self.name}: {which} spec: {e.message}", e.hint) from None

    @property
    def reward_system(self) -> str:
        """reward.system."""
        return str(self.get("reward.system"))

    @property
    def reward_kind(self) -> str:
        """reward.kind: rule, orm, prm or judge."""
        return str(self.get("reward.kind"))

    @property
    def reward_model(self) -> str | None:
        """reward.model.name: the reward model's name, None for rule rewards."""
        model = self._section("reward").get("model")
        return str(model["name"]) if isinstance(model, dict) and "name" in model else None

    @property
    def adapter_type(self) -> str:
        """adapter.type: lora or full."""
        return str(self.get("adapter.type"))

    @property
    def lora_rank(self) -> int | None:
        """adapter.rank; None for full fine-tuning (or when absent)."""
        rank = self._section("adapter").get("rank")
        return rank if isinstance(rank, int) and not isinstance(rank, bool) else None

    @property
    def group_size(self) -> int:
        """grpo.group_size (K)."""
        return self.get("grpo.group_size")

    @property
    def num_iterations(self) -> int:
        """grpo.num_iterations (mu): optimizer steps per generation batch."""
        return int(self.number("grpo.num_iterations"))

    @property
    def accounting(self) -> dict:
        """The accounting section: method, version, engine_profile, attention."""
        return self.get("accounting")

    # ---- what it spent ------------------------------------------------------------------------

    @property
    def steps(self) -> int:
        """totals.steps."""
        return int(self.number("totals.steps"))

    @property
    def flops(self) -> dict[str, int]:
        """totals.flops: rollout, update, reward and total."""
        return dict(self.get("totals.flops"))

    @property
    def total_flops(self) -> int:
        """C_total (totals.flops.total)."""
        return int(self.number("totals.flops.total"))

    @property
    def shares(self) -> dict[str, float]:
        """totals.shares: each phase's share of the total."""
        return dict(self.get("totals.shares"))

    @property
    def update_share(self) -> float:
        """p = C_update / C_total (totals.update_share)."""
        return float(self.number("totals.update_share"))

    @property
    def reward_share(self) -> float:
        """Reward FLOPs / total (totals.shares.reward)."""
        return float(self.number("totals.shares.reward"))

    @property
    def tokens(self) -> dict[str, int]:
        """totals.tokens per phase."""
        return dict(self.get("totals.tokens"))

    @property
    def seconds(self) -> dict[str, float]:
        """totals.seconds: wall seconds per phase; {} when the report records none."""
        return dict(self._section("totals").get("seconds") or {})

    @property
    def completions(self) -> int:
        """Rollouts generated (totals.work["count.completions"])."""
        work = self.get("totals.work")
        n = work.get("count.completions") if isinstance(work, dict) else None
        if isinstance(n, bool) or not isinstance(n, int):   # the key has a dot: not a dotted path
            raise RaceError(f"{self.name}: totals.work has no count.completions", CHECK_HINT)
        return n

    @property
    def budget_flops(self) -> int | None:
        """budget.flops, None when not declared."""
        b = self._section("budget").get("flops")
        return b if isinstance(b, int) and not isinstance(b, bool) else None

    @property
    def band(self) -> tuple[int, int] | None:
        """The declared IsoFLOP band (budget.band) as (low, high), None when not declared."""
        band = self._section("budget").get("band")
        if not isinstance(band, dict):
            return None
        return int(self.number("low", band)), int(self.number("high", band))

    @property
    def ledger(self) -> dict | None:
        """The ledger section: path (relative to the report), sha256, records; None for an
        estimate, which has no ledger."""
        if "ledger" not in self.doc and self.provenance_method == "estimated":
            return None
        return self.get("ledger")

    @property
    def ledger_path(self) -> str | None:
        """ledger.path (relative to the report's folder); None when the report has no ledger."""
        path = self._section("ledger").get("path")
        return path if isinstance(path, str) else None

    def with_ledger_path(self, path: str) -> dict:
        """A copy of the document whose ledger.path is `path` (its sha256 and records unchanged):
        the report as stored in another folder, its ledger copied beside it under that name."""
        if not isinstance(self.doc.get("ledger"), dict):
            raise RaceError(f"{self.name}: the report has no ledger to move", CHECK_HINT)
        return {**self.doc, "ledger": {**self.doc["ledger"], "path": path}}

    # ---- how it was obtained ------------------------------------------------------------------

    @property
    def provenance(self) -> dict:
        """The provenance section; {} for a version 1.0 report, which has none."""
        return self._section("provenance")

    @property
    def provenance_method(self) -> str | None:
        """provenance.method (measured, imported, estimated); None when the report does not say."""
        m = self.provenance.get("method")
        return m if isinstance(m, str) else None

    @property
    def declared_steps(self) -> int:
        """Optimizer steps the run took: provenance.steps when stated, else totals.steps."""
        s = self.provenance.get("steps")
        return s if isinstance(s, int) and not isinstance(s, bool) else self.steps

    @property
    def reference_cell(self) -> str | None:
        """provenance.reference_cell: the suite reference cell the run was made from, if any."""
        c = self.provenance.get("reference_cell")
        return c if isinstance(c, str) else None

    @property
    def hardware(self) -> Hardware | None:
        """The hardware section, None when absent."""
        h = self.doc.get("hardware")
        if not isinstance(h, dict):
            return None
        try:
            return Hardware(**h)
        except TypeError:
            raise RaceError(f"{self.name}: hardware section is malformed", CHECK_HINT) from None

    @property
    def notes(self) -> str:
        """run.notes, "" when absent."""
        n = self._section("run").get("notes")
        return n.strip() if isinstance(n, str) else ""

    # ---- how it scored ------------------------------------------------------------------------

    @property
    def evaluations(self) -> tuple[Evaluation, ...]:
        """Every evaluation row, in order."""
        evals = self.get("evaluations")
        if not isinstance(evals, list):
            raise RaceError(f"{self.name}: evaluations must be a list", CHECK_HINT)
        return self._rows(evals, f"{self.name} evaluations")

    def _rows(self, evals: list, name: str) -> tuple[Evaluation, ...]:
        out = []
        for i, e in enumerate(evals):
            where = f"{name}[{i}]"
            if not isinstance(e, dict):
                raise RaceError(f"{where}: not an object", CHECK_HINT)
            judge = e.get("judge")
            out.append(Evaluation(target=str(self.get("target", e, where)), metric=str(self.get("metric", e, where)),
                                  value=float(self.number("value", e, where)),
                                  judge=str(judge.get("name", "")) if isinstance(judge, dict) else ""))
        return tuple(out)

    @property
    def curve(self) -> tuple[CurvePoint, ...]:
        """The scored snapshots along the run (`curve.points`, by step); () when there are none."""
        c = self.doc.get("curve")
        if c is None:
            return ()
        points = self.get("points", c, f"{self.name} curve") if isinstance(c, dict) else None
        if not isinstance(points, list):
            raise RaceError(f"{self.name}: curve.points must be a list", CHECK_HINT)
        out = []
        for i, p in enumerate(points):
            where = f"{self.name} curve.points[{i}]"
            flops = self.get("flops", p, where) if isinstance(p, dict) else None
            rows = self.get("evaluations", p, where) if isinstance(p, dict) else None
            if not isinstance(flops, dict) or not isinstance(rows, list):
                raise RaceError(f"{where}: needs step, flops and evaluations", CHECK_HINT)
            out.append(CurvePoint(step=int(self.number("step", p, where)),
                                  flops={k: int(self.number(k, flops, where)) for k in (*PHASES, "total")},
                                  evaluations=self._rows(rows, where)))
        return tuple(sorted(out, key=lambda x: x.step))

    def scores(self) -> dict[tuple[str, str], float]:
        """(target, metric) -> value; the first row wins where one repeats."""
        out: dict[tuple[str, str], float] = {}
        for e in self.evaluations:
            out.setdefault((e.target, e.metric), e.value)
        return out


def read_report(path: str | os.PathLike, *, check: bool = True, name: str | None = None,
                max_bytes: int = jsonstrict.MAX_DOCUMENT_BYTES) -> Report:
    """Read a report file strictly (size limit, UTF-8, no NaN, no duplicate keys) and, when
    `check`, against the report schema. `name` is how messages name the file (default: the
    path as given). Raises UnreadableReport (a RaceError) for a file that is not strict JSON,
    RaceError for one that breaks the schema.

    Returns the Report.
    """
    path = Path(path)
    name = name or str(path)
    try:
        data = jsonstrict.read_bytes(path, max_bytes=max_bytes)
        doc = jsonstrict.loads(data)
    except jsonstrict.JSONInputError as e:
        raise UnreadableReport(name, e.kind, e.message, e.hint) from None
    except OSError as e:
        raise UnreadableReport(name, "io", e.strerror or str(e), "check the path") from None
    report = Report(doc, name, path, data)
    problems = schemas.report_problems(doc) if check else None
    if problems:
        raise RaceError(f"{name} does not match the report v1 schema: {problems}", CHECK_HINT)
    return report


# ---------------------------------------------------------------------------------------------
# Writing


def write_report(path: str | os.PathLike, report: "Report | Mapping[str, Any]") -> Path:
    """Check a report (a `Report`, or its document) against the report schema and write it to
    `path` atomically.

    Returns the path written.
    """
    doc = report.doc if isinstance(report, Report) else report
    schemas.check_report(doc)
    return write_json_atomic(path, doc)


def update_report(path: str | os.PathLike, change: Callable[[dict], Any], *,
                  check: Callable[[dict], None] | None = None) -> Report:
    """Read the report at `path`, let `change(doc)` edit the document in place, and write it
    back atomically when it changed (schema-checked; `check(doc)` may refuse it first with a
    RaceError of its own). Returns the report as written."""
    import copy

    report = read_report(path, check=False)
    doc = copy.deepcopy(report.doc)
    change(doc)
    if doc.get("schema_version") in schemas.SUPPORTED_VERSIONS[1:]:   # a traced judge added: the version that holds it
        doc["schema_version"] = schemas.version_for(doc, doc["schema_version"])
    if doc != report.doc:
        if check is not None:
            check(doc)
        write_report(path, doc)
    return Report(doc, report.name, report.path)


def model_entry(spec: "ModelSpec", name: str | None = None) -> dict:
    """A report `model` object: name (default: the spec's), spec and exact parameter counts (and,
    for mixture-of-experts models, the active parameters a token runs through)."""
    entry = {"name": name or spec.name, "spec": spec.to_dict(), "params_total": spec.params_total,
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


@dataclass(frozen=True)
class Provenance:
    """How a report's numbers were obtained: the report's `provenance` section (docs/report.md,
    "Provenance"); the validator's PROV rules hold each method to what it implies."""

    method: str
    """measured (a live per-step ledger), imported (rebuilt from an engine's log of per-step
    means) or estimated (totals from mean lengths and a step count; no ledger)."""
    recorder: str | None = None
    """What wrote the numbers: race RaceLedger (TRL callback), race import verl, ..."""
    steps: int | None = None
    """Optimizer steps the run took, as its engine counted them."""
    source: Mapping[str, Any] | None = None
    """imported: {engine, file, fields} of the log."""
    means: Mapping[str, Any] | None = None
    """estimated: {prompt_tokens, completion_tokens, reward_tokens} every step was priced from."""
    reference_cell: str | None = None
    """The suite reference cell the run was made from, if any."""
    assumptions: tuple[Mapping[str, Any], ...] | None = None
    """What the log did not say and the report assumed: [{field, value, why, low?, high?}]."""

    def to_report(self) -> dict:
        """The `provenance` section (fields not given are left out)."""
        out = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in self.__dict__.items() if v is not None}
        if self.assumptions is not None:
            out["assumptions"] = [dict(a) for a in self.assumptions]
        return out


@dataclass(frozen=True)
class Means:
    """The aggregate numbers of a paper's setup table an estimate is priced from."""

    prompt_tokens: float
    """Mean prompt tokens per completion."""
    completion_tokens: float
    """Mean generated tokens per completion."""
    reward_tokens: float | None = None
    """Mean tokens a reward model scores per completion; None: prompt + completion + environment
    (model rewards, `scored`) or nothing (rule rewards)."""
    environment_tokens: float = 0
    """Multi-turn: mean environment/tool tokens per completion (prefill); completion_tokens are
    then the policy's own."""
    turns: float = 1
    """Multi-turn: mean policy turns per rollout."""
    kept_share: float | None = None
    """Share of the generated completions the update trained on (None: all)."""

    def scored(self) -> float:
        """Mean tokens a reward model scores per completion: `reward_tokens`, else every token of
        the sequence it is priced over (`reward_tokens_of`: the prompt, the completion and a
        multi-turn rollout's environment tokens)."""
        if self.reward_tokens is not None:
            return self.reward_tokens
        return reward_tokens_of(self.prompt_tokens, self.completion_tokens + self.environment_tokens)


def _model_spec(x: "str | ModelSpec") -> "ModelSpec":
    """The spec of a run description's model: a spec object as given, else the spec of a catalog
    name or config folder of any family (the analytic recipe, else the traced path)."""
    from ..accounting.specs import Spec, spec_for

    if isinstance(x, Spec):  # a recipe's ModelSpec or a TracedSpec
        return x
    return spec_for(x)


def _document(spec: RunSpec, totals: dict, provenance: Provenance, *, run_id: str, created: str | None,
              times: tuple[str, str] | None, evaluations, notes: str | None, ledger: dict | None,
              sources: dict | None = None) -> dict:
    """The report v1 document around its totals: identity, specs, accounting convention,
    budget, provenance, hardware, evaluations, the share of the policy's pretraining compute
    (and a published run's sources); schema-checked before it is returned."""
    from ..accounting import METHOD, VERSION
    from ..accounting.pretraining import share_of_pretraining

    policy = _model_spec(spec.policy)
    reward_model = _model_spec(spec.reward.model) if spec.reward.model else None
    run = {"id": run_id, "label": spec.label, "seed": spec.seed, "created": created or utc_now()}
    if times:
        run["started"], run["finished"] = times
    run["engine"] = {"name": spec.engine.name, "version": spec.engine.version}
    run["suite_version"] = __version__
    notes = notes if notes is not None else spec.notes
    if notes is not None:
        run["notes"] = notes
    if provenance.steps is None and spec.steps is not None:
        provenance = replace(provenance, steps=spec.steps)
    if provenance.reference_cell is None and spec.reference_cell:
        provenance = replace(provenance, reference_cell=spec.reference_cell)
    doc = {
        "$schema": schemas.REPORT_ID,
        "schema_version": schemas.REPORT_VERSION,
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
        "totals": totals,
    }
    if ledger is not None:
        doc["ledger"] = ledger
    doc["provenance"] = provenance.to_report()
    if spec.hardware is not None:
        doc["hardware"] = spec.hardware.to_report()
    doc["evaluations"] = [dict(e) for e in spec.evaluations] + [dict(e) for e in (evaluations or ())]
    doc["pretraining"] = share_of_pretraining(totals["flops"]["total"], policy)
    if sources is not None:
        doc["sources"] = sources
    ro = rollouts_section(totals, spec)
    if ro is not None:
        doc["rollouts"] = ro
    doc["schema_version"] = schemas.version_for(doc)
    schemas.check_report(doc)
    return doc


def rollouts_section(totals: Mapping[str, Any], spec: RunSpec) -> dict | None:
    """The report's `rollouts` section (1.2), from the summed work (count.completions,
    count.discarded, count.rollout_env) and what the run description says (spec.rollouts:
    turns, reasons, off-policy lag, how updates consume a batch); None for a plain run.
    Discarded completions' rollout FLOPs are their share of the rollout FLOPs (every completion
    priced at the step's means)."""
    work, desc = totals.get("work") or {}, dict(spec.rollouts or {})
    generated = int(work.get("count.completions", 0))
    discarded = int(work.get("count.discarded", 0))
    env = int(work.get("count.rollout_env", 0))
    if not (desc or discarded or env) or not generated:
        return None
    out: dict[str, Any] = {"generated": generated, "trained": generated - discarded, "discarded": discarded,
                           "discarded_share": discarded / generated,
                           "discarded_rollout_flops": round(totals["flops"]["rollout"] * discarded / generated)}
    if desc.get("reasons"):
        out["reasons"] = list(desc["reasons"])
    if env:
        out["multi_turn"] = {"environment_tokens": env, "turns": float(desc.get("turns") or 1)}
        if desc.get("max_turns"):
            out["multi_turn"]["max_turns"] = int(desc["max_turns"])
    if desc.get("off_policy"):
        out["off_policy"] = dict(desc["off_policy"])
    up = desc.get("updates")
    if up:
        mu = spec.grpo.num_iterations
        steps = int(up.get("optimizer_steps_per_generation") or (mu if up["kind"] == "epochs" else 1))
        out["updates"] = {"kind": up["kind"], "optimizer_steps_per_generation": steps, "passes_per_token": mu}
    return out


def build_report(ledger_path: str | os.PathLike, run_spec: RunSpec | Mapping[str, Any], *, provenance: Provenance,
                 report_dir: str | os.PathLike | None = None, created: str | None = None,
                 evaluations: list[Mapping[str, Any]] | None = None, notes: str | None = None,
                 warn=None) -> Report:
    """Build a report v1 from a ledger and its run spec, streaming the ledger once.

    `provenance` says how the ledger was made (measured: a live per-step ledger; imported:
    rebuilt from an engine's log), always by the caller: the strongest claim is never a
    default. Its steps default to the spec's declared steps. The ledger path is stored relative
    to `report_dir` (default: the ledger's folder). A torn last line is left out of the totals
    and reported through `warn(message)` (default: a Python warning); a malformed line or a step
    that does not increase raises RaceError. `evaluations` (rows {target, metric, value, n, ...})
    are added to the spec's own; `notes` goes into run.notes (default: the spec's). The
    document is checked against the report schema before the Report is returned.

    Args: `ledger_path`, the ledger.jsonl; `run_spec`, its RunSpec (or the mapping of one).
    Returns the Report.
    """
    if not isinstance(provenance, Provenance) or provenance.method == "estimated":
        raise RaceError("build_report needs the provenance of its ledger: Provenance('measured', ...) or "
                        "Provenance('imported', ...)", "an estimate has no ledger: build_estimate")
    from .ledger import LedgerSummary

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
    base = Path(report_dir) if report_dir is not None else ledger_path.parent
    rel = Path(os.path.relpath(ledger_path.resolve(), base.resolve())).as_posix()
    doc = _document(spec, totals_from(s.flops, s.tokens, s.work, s.records, s.seconds), provenance,
                    run_id=spec.id or spec.label or ledger_path.resolve().parent.name or "run",
                    created=created, times=(s.first_time, s.last_time) if s.first_time else None,
                    evaluations=evaluations, notes=notes,
                    ledger={"path": rel, "sha256": s.sha256, "records": s.records})
    from .energy import attach

    attach(doc, ledger_path)      # cost.energy when the run read its GPUs' energy counters (1.5)
    return Report(doc)


def _estimate(spec: RunSpec, means: Means) -> tuple[dict, dict]:
    """Work and per-phase FLOPs of an estimate: every declared step priced as a step of `means`."""
    from ..accounting import phase_flops, step_flops

    policy = _model_spec(spec.policy)
    reward_model = _model_spec(spec.reward.model) if spec.reward.model else None
    try:
        n = spec.grpo.group_size * spec.grpo.prompts_per_step
        one = step_flops(policy, spec.adapter, spec.grpo, means.prompt_tokens, means.completion_tokens,
                         engine=spec.engine_profile, attention=spec.attention, reward_model=reward_model,
                         reward_tokens=means.reward_tokens, environment_tokens=means.environment_tokens,
                         turns=means.turns, kept=None if means.kept_share is None else n * means.kept_share)
    except RaceError as e:
        raise RaceError(f"estimate: {e.message}", e.hint or "check the mean lengths against max_completion_tokens") \
            from None
    work = {k: v * spec.steps for k, v in one.work.items()}     # FLOPs are linear in work
    return work, phase_flops(work, policy, spec.adapter, spec.grpo, reward_model, spec.engine_profile, spec.attention)


def build_estimate(run_spec: RunSpec, means: Means | None = None, *, created: str | None = None,
                   evaluations: list[Mapping[str, Any]] | None = None,
                   stages: list[tuple[str, RunSpec, Means]] | None = None) -> Report:
    """A report from aggregate numbers (a paper's setup table): every one of the spec's
    declared `steps` priced by suite.accounting as a step of `means` lengths (work_from_means,
    the same formulas as a ledger's), marked `provenance.method = estimated`, with no ledger. A
    published run (spec.sources) gets its `sources` section: each number's source, the
    assumptions and the estimate's range over them (suite.record.sources).

    A staged run (`stages`: [(name, stage spec, stage means)], in order) is priced stage by
    stage: its totals are the sum of the stages' (each its own K, prompts per step, caps, mu,
    means), its `stages` section lists each, its grpo section is the last stage's, its
    provenance means are the step-weighted means of the stages, and `run_spec` gives what the
    whole run shares (identity, hardware, sources).

    Args: `run_spec` (its `steps` declared, unless staged), `means` (Means; None when staged),
    `created`, `evaluations` as for build_report, `stages`. Returns the Report (schema-checked).
    """
    from ..accounting import tokens_from_work

    stage_rows = None
    if stages:
        spec, means, work, flops, stage_rows, price = _staged(run_spec, stages)
    else:
        spec = run_spec
        if not spec.steps:
            raise RaceError("an estimate needs the number of optimizer steps the run took",
                            "add `steps: N` to the run description (the setup table's step count)")
        work, flops = _estimate(spec, means)

        def price(s, m):
            return sum(_estimate(s, m)[1].values())
    reward_tokens = means.scored() if spec.reward.model else None
    # Everything a step was priced from (WORK-007 prices it again): what real runs do, when set.
    shape = {"environment_tokens": means.environment_tokens, "turns": means.turns} if means.environment_tokens else {}
    if means.kept_share is not None:
        shape["kept_share"] = means.kept_share
    prov = Provenance("estimated", recorder="race report --estimate", steps=spec.steps,
                      means={"prompt_tokens": means.prompt_tokens, "completion_tokens": means.completion_tokens,
                             "reward_tokens": reward_tokens, **shape})
    sources = None
    if spec.sources is not None:
        from .sources import section

        sources = section(spec, means, sum(flops.values()), price)
    doc = _document(spec, totals_from(flops, tokens_from_work(work), work, spec.steps), prov,
                    run_id=spec.id or spec.label or "estimate", created=created, times=None,
                    evaluations=evaluations, notes=None, ledger=None, sources=sources)
    if stage_rows is not None:
        doc["stages"] = stage_rows
        schemas.check_report(doc)
    return Report(doc)


def _weighted(stages: list[tuple[str, RunSpec, Means]], field: str) -> float | None:
    vals = [(s.steps, getattr(m, field)) for _, s, m in stages]
    if any(v is None for _, v in vals):
        return None
    return sum(n * v for n, v in vals) / sum(n for n, _ in vals)


def _same_setup(stages: list[tuple[str, RunSpec, Means]]) -> None:
    """A stage row records its steps, K, prompts per step, cap, mu, means and hardware; every
    other setting that moves FLOPs is the report's (its last stage's), so a stage may not change it."""
    last = stages[-1][1]
    row = ("group_size", "prompts_per_step", "max_completion_tokens", "num_iterations")
    for name, s, _ in stages:
        diff = [k for k in ("policy", "adapter", "reward", "engine_profile", "attention") if getattr(s, k) != getattr(last, k)]
        diff += [f"grpo.{k}" for k, v in s.grpo.to_dict().items() if k not in row and v != getattr(last.grpo, k)]
        if diff:
            raise RaceError(f"estimate: stage {name} changes {', '.join(diff)}, which a stage row does not record",
                            "a stage may change its steps, K, prompts per step, cap, mu, means and hardware; "
                            "price runs of other settings as separate estimates")


def _staged(run_spec: RunSpec, stages: list[tuple[str, RunSpec, Means]]):
    """(spec, means, work, flops, stages section, price) of a staged estimate."""
    from ..accounting import add_work, tokens_from_work

    rows, works, flops = [], [], dict.fromkeys(PHASES, 0)
    for name, s, m in stages:
        if not s.steps:
            raise RaceError(f"estimate: stage {name} needs its number of optimizer steps", "add `steps: N` to the stage")
        w, f = _estimate(s, m)
        works.append(w)
        for ph in PHASES:
            flops[ph] += f[ph]
        g = s.grpo
        mrow = {"prompt_tokens": m.prompt_tokens, "completion_tokens": m.completion_tokens}
        if m.environment_tokens:
            mrow["environment_tokens"], mrow["turns"] = m.environment_tokens, m.turns
        if m.kept_share is not None:
            mrow["kept_share"] = m.kept_share
        if s.reward.model:      # what the stage's reward model scored (ST-004 prices the row again)
            mrow["reward_tokens"] = m.scored()
        row = {"name": name, "steps": s.steps,
               "grpo": {"group_size": g.group_size, "prompts_per_step": g.prompts_per_step,
                        "max_completion_tokens": g.max_completion_tokens, "num_iterations": g.num_iterations},
               "means": mrow, "flops": {**{ph: int(f[ph]) for ph in PHASES}, "total": int(sum(f.values()))},
               "tokens": {k: int(v) for k, v in tokens_from_work(w).items()}}
        if s.hardware is not None and s.hardware != run_spec.hardware:
            row["hardware"] = s.hardware.to_report()
        rows.append(row)
    _same_setup(stages)
    steps = sum(s.steps for _, s, _ in stages)
    means = Means(_weighted(stages, "prompt_tokens"), _weighted(stages, "completion_tokens"),
                  _weighted(stages, "reward_tokens"), environment_tokens=_weighted(stages, "environment_tokens") or 0,
                  turns=_weighted(stages, "turns") or 1)
    last = stages[-1][1]
    spec = replace(last, steps=steps, hardware=run_spec.hardware, sources=run_spec.sources, id=run_spec.id,
                   label=run_spec.label, evaluations=run_spec.evaluations, notes=run_spec.notes,
                   rollouts=run_spec.rollouts)

    def price(s, m):
        """A staged run priced with the whole run's values moved to `s`, `m` (the sources' ends):
        each stage's steps and means scaled by the same factor (a mean at most its stage's cap),
        K/B/mu/beta set on every stage."""
        total = 0
        for _, st, sm in stages:
            g = st.grpo
            for k in ("prompts_per_step", "group_size", "num_iterations", "beta"):
                if getattr(s.grpo, k) != getattr(spec.grpo, k):
                    g = replace(g, **{k: getattr(s.grpo, k)})
            n = max(1, round(st.steps * s.steps / steps))
            mm = replace(sm, **{k: getattr(sm, k) * getattr(m, k) / getattr(means, k)
                                for k in ("prompt_tokens", "completion_tokens", "reward_tokens")
                                if getattr(sm, k) is not None and getattr(means, k)})
            cap = st.grpo.max_completion_tokens - sm.environment_tokens   # a stage's mean stays under its cap
            mm = replace(mm, completion_tokens=min(mm.completion_tokens, cap))
            total += sum(_estimate(replace(st, grpo=g, steps=n), mm)[1].values())
        return total
    return spec, means, add_work(*works), flops, rows, price


__all__ = ["Evaluation", "Report", "UnreadableReport", "read_report", "write_report", "update_report",
           "model_entry", "totals_from", "Provenance", "Means", "build_report", "build_estimate"]
