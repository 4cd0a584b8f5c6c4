"""Studies: a fractional design of IsoFLOP grids that answers the source paper's claims, run as one
resumable job (suite.pipeline.studyrun) and analysed into findings (suite.analysis.findings).

A study file (tasks/studies/*.yaml) declares once what its grids share — the cell fields, the
models, reward systems, allocations, seeds, band and evaluation — and then *blocks* (or it
`extends` another study file and replaces some of its keys): each block
picks models, budgets, rewards and allocations from those, says which claims (a)-(f) it answers
and why, and becomes one suite.analysis.grid Grid. A full cross of every axis would cost days on two
cores; blocks let a study run only the cells a claim needs (docs/findings.md has the claim ->
cells table of the shipped study). A cell two blocks share (same id) is run once.

    from suite.analysis import study
    s = study.load("tasks/studies/paper.yaml")             # checked: schemas/study-v1.schema.json
    sp = study.plan(s)                                     # every block planned; cells merged
    print(study.plan_text(sp, study.calibrate("runs/calibration")))   # with a measured cost estimate
    # running it: suite.pipeline.studyrun.run(sp, "runs/study"), or `race study FILE --out DIR`

**Cost.** `calibrate` reads cells that have already run (their reports' per-phase FLOPs and
seconds, and the train / evaluation wall seconds suite.record.timing keeps in timing.json) and fits,
per model, seconds per FLOP of each phase (the reward phase per reward system, by rollouts for
rule rewards, which cost 0 FLOPs), a per-run overhead and the evaluation's seconds. `estimate`
prices each planned cell with them: what the study will cost on the machine the calibration
ran on, before it runs.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .. import jsonstrict
from ..errors import RaceError
from ..record import schemas
from .findings import CLAIMS, Settings
from .grid import EvalPlan, Grid, PlannedCell, budget_tag, expand, grid_from_dict, prompt_stats_of, read_yaml
from .grid import plan as plan_cells

#: The validation budget must be at least this multiple of the pilot budget (issue: >= 4x).
MIN_HOLDOUT_RATIO = 4
#: A study folder's record of the study, its plan and the sessions that ran it (suite.pipeline.studyrun).
STUDY_FILE = "study.json"


@dataclass(frozen=True)
class Block:
    """One block of a study: a grid and the claims it answers."""

    name: str
    """Block name."""
    grid: Grid
    """The block's grid."""
    claims: tuple[str, ...]
    """Claim ids (suite.analysis.findings.CLAIMS) the block's cells answer."""
    why: str
    """One sentence: what the block's cells contribute."""


@dataclass(frozen=True)
class Study:
    """A study file, checked."""

    name: str
    """Study name (defaults to the file's stem)."""
    description: str
    """What the study asks."""
    blocks: tuple[Block, ...]
    """Its blocks, in file order."""
    pilot: int
    """Pilot budget: RACE diagnoses the cells of this budget."""
    validation: int
    """Held-out validation budget (>= MIN_HOLDOUT_RATIO x pilot): RACE's calls are checked on it."""
    analysis: Mapping[str, Any] = field(default_factory=dict)
    """suite.analysis.findings.Settings fields (replicates, seed, level, race_replicates)."""
    source: str | None = None
    """The study file."""


@dataclass(frozen=True)
class StudyPlan:
    """A study as it will run."""

    study: Study
    """The study."""
    cells: tuple[PlannedCell, ...]
    """Every distinct planned cell, in block order."""
    blocks: Mapping[str, tuple[str, ...]]
    """Block name -> ids of its cells."""
    evaluation: EvalPlan
    """The evaluation plan every block shares."""


# ---------------------------------------------------------------- loading


def _pick(shared: Mapping[str, Any], chosen: Any, what: str, where: str) -> dict:
    """The entries of a shared mapping a block names (all of them when it names none)."""
    if chosen is None:
        return dict(shared)
    names = [chosen] if isinstance(chosen, str) else list(chosen)
    missing = [n for n in names if n not in shared]
    if missing:
        raise RaceError(f"{where}: {what} {missing[0]!r} is not declared at the top of the study",
                        f"declared {what}s: {', '.join(shared) or 'none'}")
    return {n: shared[n] for n in names}


def study_from_dict(d: Any, *, name: str | None = None, base: str | os.PathLike | None = None,
                    source: str | None = None) -> Study:
    """A Study from a mapping (a parsed study file): checked against schemas/study-v1.schema.json,
    each block's grid against grid-v1, then what the schemas cannot say (declared names, claim
    ids, the RACE budgets). Every problem raises RaceError naming the key."""
    where = f"study {source or name or ''}".strip()
    d = schemas.numbers_parsed(d, schemas.STUDY)
    schemas.check_spec(d, schemas.STUDY, where)
    sname = str(d.get("name") or name or "study")
    shared = {k: d[k] for k in ("cell", "band", "eval", "engine_profile") if k in d}
    blocks = []
    for bname, b in d["blocks"].items():
        bwhere = f"{where} block {bname}"
        claims = tuple(b.get("claims") or ())
        unknown = [c for c in claims if c not in CLAIMS]
        if unknown:
            raise RaceError(f"{bwhere}: unknown claim {unknown[0]!r}", f"claims: {', '.join(CLAIMS)}")
        g = {**shared, "name": f"{sname}-{bname}", "budgets": b["budgets"],
             "models": _pick(d["models"], b.get("models"), "model", bwhere),
             "rewards": _pick(d["rewards"], b.get("rewards"), "reward", bwhere),
             "allocations": _pick(d["allocations"], b.get("allocations"), "allocation", bwhere),
             "seeds": b.get("seeds", d.get("seeds", [0]))}
        blocks.append(Block(str(bname), grid_from_dict(g, name=f"{sname}-{bname}", base=base, source=source),
                            claims, str(b.get("why") or "")))
    race = d.get("race") or {}
    budgets = sorted({x for blk in blocks for x in blk.grid.budgets})
    pilot, validation = int(race.get("pilot", budgets[0])), int(race.get("validation", budgets[-1]))
    for what, b in (("pilot", pilot), ("validation", validation)):
        if b not in budgets:
            raise RaceError(f"{where}: race.{what} {budget_tag(b)} is not a budget of any block",
                            f"block budgets: {', '.join(budget_tag(x) for x in budgets)}")
    if validation < MIN_HOLDOUT_RATIO * pilot:
        raise RaceError(f"{where}: the validation budget {budget_tag(validation)} is less than "
                        f"{MIN_HOLDOUT_RATIO}x the pilot budget {budget_tag(pilot)}",
                        "RACE is validated on a held-out budget at least 4x the pilot's")
    return Study(sname, str(d.get("description") or ""), tuple(blocks), pilot, validation,
                 dict(d.get("analysis") or {}), source)


def load(path: str | os.PathLike) -> Study:
    """Read and check a study file (and the file it `extends`). RaceError naming it when missing
    or malformed."""
    p, data = read_yaml(path, "study")
    return study_from_dict(_extended(p, data), name=p.stem, base=p.parent.resolve(), source=str(p))


def _extended(path: Path, data: Any, chain: tuple[Path, ...] = ()) -> Any:
    """A study file's mapping with `extends: FILE` resolved: FILE's keys (relative to this file's
    folder, itself possibly extending another), each key given here replacing FILE's whole value."""
    if not isinstance(data, dict) or "extends" not in data:
        return data
    ref = data["extends"]
    here = path.resolve()
    if not isinstance(ref, str):
        raise RaceError(f"study {path}: extends must name a study file, got {ref!r}", "extends: paper.yaml")
    target = (here.parent / ref).resolve()
    if target in (*chain, here):
        raise RaceError(f"study {path}: extends {ref} leads back to itself", "extend a file that does not extend this one")
    base_path, base = read_yaml(target, "study")
    base = _extended(base_path, base, (*chain, here))
    if not isinstance(base, dict):
        raise RaceError(f"study {path}: extends {ref}, which is not a study mapping")
    return {**base, **{k: v for k, v in data.items() if k != "extends"}}


# ---------------------------------------------------------------- planning


def plan(s: Study) -> StudyPlan:
    """Plan every block (suite.analysis.grid: expand, plan) and merge their cells. Blocks take every cell
    field from the study's shared declarations, so a cell id two blocks share is the same cell and
    runs once. Budgets are never raised (a grid's raise_budgets): the study's conditions must
    meet at the budgets it names, so a cell that cannot reach its band is refused by name."""
    cells: dict[str, Any] = {}
    blocks: dict[str, tuple[str, ...]] = {}
    stats: dict = {}
    for b in s.blocks:
        expanded = expand(b.grid)
        stats.update(prompt_stats_of(c for c in expanded if (c.spec.tokenizer or c.spec.policy, c.spec.dataset)
                                     not in stats))  # one tokenization per (tokenizer, dataset) for the study
        for pc in plan_cells(expanded, stats, engine=b.grid.engine_profile):
            cells.setdefault(pc.cell.id, pc)
        blocks[b.name] = tuple(c.id for c in expanded)
    return StudyPlan(s, tuple(cells.values()), blocks, s.blocks[0].grid.evaluation)


def claim_cells(sp: StudyPlan) -> dict[str, tuple[str, ...]]:
    """Claim id -> the ids of the cells that answer it (from the blocks' `claims`)."""
    out: dict[str, list[str]] = {c: [] for c in CLAIMS}
    for b in sp.study.blocks:
        for c in b.claims:
            out[c] += [i for i in sp.blocks[b.name] if i not in out[c]]
    return {c: tuple(ids) for c, ids in out.items()}


# ---------------------------------------------------------------- cost


@dataclass(frozen=True)
class Rates:
    """Seconds per unit of work on the machine a calibration ran on, per model (and reward)."""

    phase: Mapping[tuple[str, str], float]
    """(model, rollout|update) -> seconds per FLOP."""
    reward: Mapping[tuple[str, str], tuple[str, float]]
    """(model, reward system) -> ("flops" | "completions", seconds per unit)."""
    overhead: Mapping[str, float]
    """Model -> train wall seconds beyond the phases (start-up, checkpoints, saving)."""
    evaluation: Mapping[tuple[str, str], float]
    """(model, reward system) -> evaluation wall seconds (the native reward's scorer included)."""
    per_problem: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """(model, reward system) -> end-of-run evaluation seconds per problem scored (over every
    target), for plans that score another number of problems than the measured cells."""
    curve_per_problem: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """(model, reward system) -> seconds per problem scored at a point along the run (timing's
    `curve` stage over the report's curve points); the end's rate stands in where none was measured."""
    cells: tuple[str, ...] = ()
    """The measured cells behind the rates."""
    load: tuple[float, float] | None = None
    """Lowest and highest 1-minute load average when the measured stages started."""


def calibrate(directory: str | os.PathLike) -> Rates:
    """Rates from every cell under `directory` with a report and a timing.json (suite.record.timing):
    run folders, or an export that packed them (suite.analysis.evidence.PACKED)."""
    from ..record.timing import TIMING_FILE
    from .evidence import timed_reports

    root = Path(directory)
    sums: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])
    over: dict[str, list[float]] = defaultdict(list)
    evals: dict[tuple, list[float]] = defaultdict(list)
    scored: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])      # seconds, problems
    along: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])
    reward_unit: dict[tuple, str] = {}
    names, loads = [], []
    if not root.is_dir():
        raise RaceError(f"--calibrate {root}: no such folder", "name a study or grid output, or an export")
    for name, rep, timing in timed_reports(root):
        if not {"train_seconds", "eval_seconds"} & set(timing):
            continue
        model, system = rep.model, rep.reward_system
        flops, secs = rep.flops, rep.seconds
        if "train_seconds" in timing and not timing.get("train_resumed"):
            for ph in ("rollout", "update"):
                sums[model, ph][0] += secs[ph]
                sums[model, ph][1] += flops[ph]
            unit = "flops" if flops["reward"] else "completions"
            reward_unit[model, system] = unit
            sums[model, "reward", system][0] += secs["reward"]
            sums[model, "reward", system][1] += flops["reward"] if unit == "flops" else rep.completions
            over[model].append(timing["train_seconds"] - sum(secs.values()))
            loads += [x[0] for x in [timing.get("train_load_average")] if x]
        if "eval_seconds" in timing:
            evals[model, system].append(timing["eval_seconds"])
            loads += [x[0] for x in [timing.get("eval_load_average")] if x]
            n = _problems(rep.doc.get("evaluations"))
            if n:
                scored[model, system][0] += timing["eval_seconds"]
                scored[model, system][1] += n
        if "curve_seconds" in timing:
            n = sum(_problems(pt.get("evaluations")) for pt in (rep.doc.get("curve") or {}).get("points") or [])
            if n:
                along[model, system][0] += timing["curve_seconds"]
                along[model, system][1] += n
        names.append(name)
    if not names:
        raise RaceError(f"{root}: no measured cells (report.json with a {TIMING_FILE} beside it)",
                        "run a few cells of the study with `race grid` or `race study` first")
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return Rates(
        phase={k: s / f for k, (s, f) in sums.items() if len(k) == 2 and f},
        reward={(m, r): (reward_unit[m, r], s / n) for (m, _, r), (s, n) in
                ((k, v) for k, v in sums.items() if len(k) == 3) if n},
        overhead={m: mean(v) for m, v in over.items()},
        evaluation={k: mean(v) for k, v in evals.items()},
        per_problem={k: sec / n for k, (sec, n) in scored.items()},
        curve_per_problem={k: sec / n for k, (sec, n) in along.items()},
        cells=tuple(names), load=(min(loads), max(loads)) if loads else None)


def _problems(rows) -> int:
    """Problems an evaluation scored over its targets: the n of its pass@1 rows."""
    return sum(int(r.get("n") or 0) for r in rows or () if isinstance(r, dict) and r.get("metric") == "pass@1")


def estimate(pc, rates: Rates, ev: EvalPlan | None = None) -> float | None:
    """Predicted wall seconds (train + evaluate) of one planned cell, None when the rates lack
    its model or reward system. With the plan's evaluation `ev`, evaluation is priced per problem
    scored (its targets' sizes or limit, and, with eval.curve, step 0 and a snapshot every
    `every` planned steps on the curve's subset); else at the measured cells' mean."""
    c = pc.cell
    system = c.spec.reward.system
    per_gen = sum(pc.step_flops.values())
    gens = c.budget / per_gen
    key = (c.model, system)
    try:
        train = sum(rates.phase[c.model, ph] * pc.step_flops[ph] * gens for ph in ("rollout", "update"))
        unit, rate = rates.reward[key]
        train += rate * (pc.step_flops["reward"] * gens if unit == "flops" else c.spec.generation_batch * gens)
        train += rates.overhead[c.model]
        if ev is None or key not in rates.per_problem:
            return train + rates.evaluation[key]
    except KeyError:
        return None
    evaluation = rates.per_problem[key] * ev.problems()
    if ev.curve:
        points = 1 + max(pc.steps - 1, 0) // ev.curve.every         # step 0 and the snapshots before the end
        evaluation += rates.curve_per_problem.get(key, rates.per_problem[key]) * points * ev.curve_problems()
    return train + evaluation


# ---------------------------------------------------------------- presentation of a plan


def plan_text(sp: StudyPlan, rates: Rates | None = None, workers: int = 1) -> str:
    """The plan as text: blocks, the claim -> cells table, every cell (with its estimated wall
    seconds when `rates` are given) and the total (also divided among `workers` one-thread
    workers, which run each cell about as fast as one worker does)."""
    s = sp.study
    lines = [f"study {s.name}: {len(sp.cells)} cells in {len(s.blocks)} blocks; RACE pilot {budget_tag(s.pilot)} -> "
             f"validation {budget_tag(s.validation)} FLOPs", ""]
    for b in s.blocks:
        g = b.grid
        lines.append(f"block {b.name}: {len(sp.blocks[b.name])} cells ({len(g.models)} models x {len(g.budgets)} "
                     f"budgets x {len(g.rewards)} rewards x {len(g.allocations)} allocations x {len(g.seeds)} seeds); "
                     f"claims {', '.join(b.claims) or '-'}" + (f" — {b.why}" if b.why else ""))
    lines += ["", "claim -> cells: " + "; ".join(f"({c}) {len(ids)}" for c, ids in claim_cells(sp).items()), ""]
    head = f"{'cell':<44}{'budget':>9}{'steps':>7}{'p':>7}{'reward':>8}" + (f"{'est. s':>9}" if rates else "")
    lines += [head, "-" * len(head)]
    total, missing = 0.0, 0
    for pc in sp.cells:
        est = estimate(pc, rates, sp.evaluation) if rates else None
        total += est or 0.0
        missing += rates is not None and est is None
        lines.append(f"{pc.cell.id:<44}{pc.cell.budget:>9.2e}{pc.steps:>7}{pc.update_share:>7.3f}{pc.reward_share:>8.3f}"
                     + ((f"{est:>9.0f}" if est is not None else f"{'?':>9}") if rates else ""))
    if rates:
        load = f", load average {rates.load[0]:.1f}-{rates.load[1]:.1f}" if rates.load else ""
        lines += ["", f"estimated wall time: {total:.0f} s = {total / 3600:.2f} h with one worker"
                      + (f", about {total / workers / 3600:.2f} h on {workers}" if workers > 1 else "")
                      + f" (calibrated on {len(rates.cells)} measured cells{load})"
                  + (f"; {missing} cells not priced (no measured cell of their model and reward)" if missing else "")]
        by: dict[tuple, list[float]] = defaultdict(list)
        for pc in sp.cells:
            est = estimate(pc, rates, sp.evaluation)
            if est is not None:
                by[pc.cell.model, pc.cell.reward, pc.cell.budget].append(est)
        lines += ["per model, reward and budget: " + "; ".join(
            f"{m} {r} {budget_tag(b)}: {len(v)} x {sum(v) / len(v):.0f} s" for (m, r, b), v in sorted(by.items()))]
    return "\n".join(lines)


# ---------------------------------------------------------------- a study folder


def read_study_json(directory: str | os.PathLike) -> dict | None:
    """The study.json of a study folder (or an exported one), None when there is none."""
    p = Path(directory) / STUDY_FILE
    if not p.is_file():
        return None
    return jsonstrict.read(p, hint="rerun the study command to rewrite it")


def findings_settings(doc: Mapping | None, **overrides) -> Settings:
    """The findings' Settings (suite.analysis.findings): defaults, then a study folder's study.json
    (`doc`: its analysis settings and RACE budgets), then `overrides` that are not None."""
    kw: dict = {}
    if doc:
        kw.update(doc["study"].get("analysis") or {})
        kw.update(pilot=doc["study"]["race"]["pilot"], validation=doc["study"]["race"]["validation"])
    kw.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**kw)

