"""Building a report v1: from a ledger (`build_report`) or from aggregate numbers (`build_estimate`),
with its provenance; suite.record.report reads, writes and changes what these build.

- `build_report(ledger, spec, provenance=...)` streams the ledger once (constant memory), sums
  tokens, work, FLOPs and seconds per phase, hashes the file, and writes the identity of
  everything needed to recompute the FLOPs (policy and reward-model specs, adapter, GRPO
  settings, engine profile, attention convention), with how the ledger was made (no default).
- `build_estimate(spec, means)` prices a run that left no ledger from its means (one setup, or
  stages each priced from its own row).
Both return a schema-checked `Report`; `model_entry` and `totals_from` are the report's model
block and totals, for callers that assemble one themselves.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from .. import __version__
from ..accounting import PHASES, TOKEN_KEYS, reward_tokens_of
from ..errors import RaceError
from . import schemas
from .ledger import utc_now
from .report import Report
from .runspec import RunSpec

if TYPE_CHECKING:  # accounting's types; imported lazily at run time
    from ..accounting.modelspec import ModelSpec


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
    from .summary import LedgerSummary

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


__all__ = ["model_entry", "totals_from", "Provenance", "Means", "rollouts_section", "build_report", "build_estimate"]
