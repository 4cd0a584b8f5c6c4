"""The compute-allocation report v1: read, changed and written through this one module (the
validator, suite.validate.runner, parses untrusted reports itself, to turn a malformed one into
findings; suite.record.build makes new ones).

The JSON Schema `schemas/report-v1.schema.json` is the contract; this module follows it.

- `read_report(path)` reads one strictly (size limit, UTF-8, no NaN, no duplicate keys) and,
  by default, checks it against the schema; `Report` is what it returns: the document with
  typed access to what readers use (every report reader -- frontiers, the site, the
  quickstart summary, the benchmark figures -- reads its numbers through it).
- `write_report(path, report)` and `update_report(path, change)` write atomically, schema-checked.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import jsonstrict
from ..accounting import PHASES
from ..atomic import write_json_atomic
from ..errors import RaceError
from . import schemas
from .runspec import Hardware

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


__all__ = ["Evaluation", "Report", "UnreadableReport", "read_report", "write_report", "update_report"]
