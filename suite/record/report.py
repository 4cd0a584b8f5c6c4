"""The compute-allocation report v1: built from a ledger, read, changed and written through
this one module (nothing else parses or writes report.json).

The JSON Schema `schemas/report-v1.schema.json` is the contract; this module follows it.

- `build_report(ledger, spec)` streams the ledger once (constant memory), sums tokens, work,
  FLOPs and seconds per phase, hashes the file, and writes the identity of everything needed
  to recompute the FLOPs (policy and reward-model specs, adapter, GRPO settings, engine
  profile, attention convention).
- `read_report(path)` reads one strictly (size limit, UTF-8, no NaN, no duplicate keys) and,
  by default, checks it against the schema; `Report` is what it returns: the document with
  typed access to what readers use (every report reader -- frontiers, the site, the
  quickstart summary, the benchmark figures -- reads its numbers through it).
- `write_report(path, doc)` and `update_report(path, change)` write atomically, schema-checked.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .. import __version__, jsonstrict
from ..accounting import PHASES, TOKEN_KEYS
from ..atomic import write_json_atomic
from ..errors import RaceError
from . import schemas
from .ledger import utc_now
from .runspec import RunSpec

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
        """totals.seconds: wall seconds per phase."""
        return dict(self.get("totals.seconds"))

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
    def ledger(self) -> dict:
        """The ledger section: path (relative to the report), sha256, records."""
        return self.get("ledger")

    # ---- how it scored ------------------------------------------------------------------------

    @property
    def evaluations(self) -> tuple[Evaluation, ...]:
        """Every evaluation row, in order."""
        evals = self.get("evaluations")
        if not isinstance(evals, list):
            raise RaceError(f"{self.name}: evaluations must be a list", CHECK_HINT)
        out = []
        for i, e in enumerate(evals):
            where = f"{self.name} evaluations[{i}]"
            if not isinstance(e, dict):
                raise RaceError(f"{where}: not an object", CHECK_HINT)
            judge = e.get("judge")
            out.append(Evaluation(target=str(self.get("target", e, where)), metric=str(self.get("metric", e, where)),
                                  value=float(self.number("value", e, where)),
                                  judge=str(judge.get("name", "")) if isinstance(judge, dict) else ""))
        return tuple(out)

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
    RaceError for one that breaks the schema."""
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


def write_report(path: str | os.PathLike, doc: Mapping[str, Any]) -> Path:
    """Check `doc` against the report schema and write it to `path` atomically."""
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


def build_report(ledger_path: str | os.PathLike, run_spec: RunSpec | Mapping[str, Any], *,
                 report_dir: str | os.PathLike | None = None, created: str | None = None,
                 evaluations: list[Mapping[str, Any]] | None = None, notes: str | None = None, warn=None) -> dict:
    """Build a report v1 dict from a ledger and its run spec, streaming the ledger once.

    The ledger path is stored relative to `report_dir` (default: the ledger's folder). A torn
    last line is left out of the totals and reported through `warn(message)` (default: a
    Python warning); a malformed line or a step that does not increase raises RaceError.
    `evaluations` (rows {target, metric, value, n, ...}) are added to the spec's own; `notes`
    (how the numbers were obtained) goes into run.notes. The result is checked against the
    report schema before it is returned."""
    from ..accounting import METHOD, VERSION
    from ..accounting.modelspec import load_spec
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
    if notes is not None:
        run["notes"] = notes
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
        "totals": totals_from(s.flops, s.tokens, s.work, s.records, s.seconds),
        "ledger": {"path": rel, "sha256": s.sha256, "records": s.records},
        "evaluations": [dict(e) for e in spec.evaluations] + [dict(e) for e in (evaluations or ())],
    }
    schemas.check_report(doc)
    return doc


__all__ = ["Evaluation", "Report", "UnreadableReport", "read_report", "write_report", "update_report",
           "model_entry", "totals_from", "build_report"]
