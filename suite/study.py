"""Studies: a fractional design of IsoFLOP grids that answers the source paper's claims, run as one
resumable job and analysed into findings (suite.findings).

A study file (tasks/studies/*.yaml) declares once what its grids share — the cell fields, the
models, reward systems, allocations, seeds, band and evaluation — and then *blocks*: each block
picks models, budgets, rewards and allocations from those, says which claims (a)-(f) it answers
and why, and becomes one suite.grid Grid. A full cross of every axis would cost days on two
cores; blocks let a study run only the cells a claim needs (docs/findings.md has the claim ->
cells table of the shipped study). A cell two blocks share (same id) is run once.

    from suite import study
    s = study.load("tasks/studies/paper.yaml")
    sp = study.plan(s)                                     # every block planned; cells merged
    print(study.plan_text(sp, study.calibrate("runs/calibration")))   # with a measured cost estimate
    study.run(sp, "runs/study")                             # resumable; then `race findings runs/study`

**Cost.** `calibrate` reads cells that have already run (their reports' per-phase FLOPs and
seconds, and the train / evaluation wall seconds suite.grid records in timing.json) and fits,
per model, seconds per FLOP of each phase (the reward phase per reward system, by rollouts for
rule rewards, which cost 0 FLOPs), a per-run overhead and the evaluation's seconds. `estimate`
prices each planned cell with them: what the study will cost on the machine the calibration
ran on, before it runs.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import RaceError

#: Top-level keys of a study file.
STUDY_KEYS = ("name", "description", "cell", "models", "rewards", "allocations", "seeds", "band", "eval",
              "engine_profile", "blocks", "race", "analysis")
#: Keys of one block.
BLOCK_KEYS = ("models", "budgets", "rewards", "allocations", "seeds", "claims", "why")
#: The validation budget must be at least this multiple of the pilot budget (issue: >= 4x).
MIN_HOLDOUT_RATIO = 4
STUDY_FILE = "study.json"


@dataclass(frozen=True)
class Block:
    """One block of a study: a grid and the claims it answers."""

    name: str
    """Block name."""
    grid: Any
    """suite.grid.Grid of the block."""
    claims: tuple[str, ...]
    """Claim ids (suite.findings.CLAIMS) the block's cells answer."""
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
    """suite.findings.Settings fields (replicates, seed, level, race_replicates)."""
    source: str | None = None
    """The study file."""


@dataclass(frozen=True)
class StudyPlan:
    """A study as it will run."""

    study: Study
    """The study."""
    cells: tuple[Any, ...]
    """Every distinct planned cell (suite.grid.PlannedCell), in block order."""
    blocks: Mapping[str, tuple[str, ...]]
    """Block name -> ids of its cells."""
    evaluation: Any
    """suite.grid.EvalPlan shared by every block."""


# ---------------------------------------------------------------- loading


def _pick(shared: Mapping[str, Any], chosen: Any, what: str, where: str) -> dict:
    """The entries of a shared mapping a block names (all of them when it names none)."""
    if chosen is None:
        return dict(shared)
    names = [chosen] if isinstance(chosen, str) else list(chosen)
    missing = [n for n in names if n not in shared]
    if missing:
        raise RaceError(f"{where}: {what} {missing[0]!r} is not declared at the top of the study",
                        f"declared {what}: {', '.join(shared) or 'none'}")
    return {n: shared[n] for n in names}


def study_from_dict(d: Any, *, name: str | None = None, base: str | os.PathLike | None = None,
                    source: str | None = None) -> Study:
    """Check a parsed study file; every problem raises RaceError naming the key."""
    from .findings import CLAIMS
    from .grid import budget_tag, grid_from_dict

    where = f"study {source or name or ''}".strip()
    if not isinstance(d, Mapping):
        raise RaceError(f"{where}: a study file must be a YAML mapping", "see docs/findings.md")
    unknown = sorted(set(d) - set(STUDY_KEYS))
    if unknown:
        raise RaceError(f"{where}: unknown key {unknown[0]!r}", f"study keys: {', '.join(STUDY_KEYS)}")
    blocks_in = d.get("blocks")
    if not isinstance(blocks_in, Mapping) or not blocks_in:
        raise RaceError(f"{where}: `blocks` must map block names to their models, budgets, rewards and allocations",
                        "see docs/findings.md")
    sname = str(d.get("name") or name or "study")
    shared = {k: d[k] for k in ("cell", "band", "eval", "engine_profile") if k in d}
    blocks = []
    for bname, b in blocks_in.items():
        bwhere = f"{where} block {bname}"
        if not isinstance(b, Mapping):
            raise RaceError(f"{bwhere}: a block must be a mapping", f"block keys: {', '.join(BLOCK_KEYS)}")
        bad = sorted(set(b) - set(BLOCK_KEYS))
        if bad:
            raise RaceError(f"{bwhere}: unknown key {bad[0]!r}", f"block keys: {', '.join(BLOCK_KEYS)}")
        if not b.get("budgets"):
            raise RaceError(f"{bwhere}: `budgets` is required", "e.g. budgets: [8.0e11]")
        claims = tuple(str(c) for c in (b.get("claims") or ()))
        for c in claims:
            if c not in CLAIMS:
                raise RaceError(f"{bwhere}: unknown claim {c!r}", f"claims: {', '.join(CLAIMS)}")
        g = {**shared, "name": f"{sname}-{bname}", "budgets": b["budgets"],
             "models": _pick(d.get("models") or {}, b.get("models"), "model", bwhere),
             "rewards": _pick(d.get("rewards") or {}, b.get("rewards"), "reward", bwhere),
             "allocations": _pick(d.get("allocations") or {}, b.get("allocations"), "allocation", bwhere),
             "seeds": b.get("seeds", d.get("seeds", [0]))}
        blocks.append(Block(str(bname), grid_from_dict(g, name=f"{sname}-{bname}", base=base, source=source),
                            claims, str(b.get("why") or "")))
    race = d.get("race") or {}
    budgets = sorted({x for blk in blocks for x in blk.grid.budgets})
    try:
        pilot = int(float(race.get("pilot", budgets[0])))
        validation = int(float(race.get("validation", budgets[-1])))
    except (TypeError, ValueError):
        raise RaceError(f"{where}: race.pilot and race.validation must be FLOP budgets", "e.g. pilot: 8.0e11") from None
    for what, b in (("pilot", pilot), ("validation", validation)):
        if b not in budgets:
            raise RaceError(f"{where}: race.{what} {budget_tag(b)} is not a budget of any block",
                            f"block budgets: {', '.join(budget_tag(x) for x in budgets)}")
    if validation < MIN_HOLDOUT_RATIO * pilot:
        raise RaceError(f"{where}: the validation budget {budget_tag(validation)} is less than "
                        f"{MIN_HOLDOUT_RATIO}x the pilot budget {budget_tag(pilot)}",
                        "RACE is validated on a held-out budget at least 4x the pilot's")
    analysis = dict(d.get("analysis") or {})
    from .findings import Settings

    bad = sorted(set(analysis) - {"replicates", "seed", "level", "race_replicates"})
    if bad:
        raise RaceError(f"{where}: unknown analysis key {bad[0]!r}", "analysis keys: replicates, seed, level, "
                                                                     "race_replicates")
    for k, v in analysis.items():
        ok = (0 < v < 1) if k == "level" else (v >= 0 if k == "seed" else v >= 1)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (k != "level" and v != int(v)) or not ok:
            raise RaceError(f"{where}: analysis.{k} must be " + ("a fraction in (0, 1)" if k == "level" else
                            "a non-negative integer" if k == "seed" else "a positive integer") + f", got {v!r}")
    Settings(**analysis)
    return Study(sname, str(d.get("description") or ""), tuple(blocks), pilot, validation, analysis, source)


def load(path: str | os.PathLike) -> Study:
    """Read and check a study file. RaceError naming it when missing or malformed."""
    import yaml

    p = Path(path)
    if not p.is_file():
        from .paths import tasks

        shipped = sorted(str(x) for x in (tasks() / "studies").glob("*.yaml")) if (tasks() / "studies").is_dir() else []
        raise RaceError(f"study file {path} does not exist", ("shipped studies: " + ", ".join(shipped)) if shipped else None)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise RaceError(f"study {p}: not valid YAML" + (f" at line {mark.line + 1}" if mark else ""),
                        "check indentation and colons") from None
    return study_from_dict(data, name=p.stem, base=p.parent.resolve(), source=str(p))


# ---------------------------------------------------------------- planning


def plan(s: Study) -> StudyPlan:
    """Plan every block (suite.grid: expand, plan) and merge their cells. Blocks take every cell
    field from the study's shared declarations, so a cell id two blocks share is the same cell and
    runs once. Budgets are never raised (suite.grid's raise_budgets): the study's conditions must
    meet at the budgets it names, so a cell that cannot reach its band is refused by name."""
    from .grid import expand, plan as plan_cells, prompt_stats_of

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
    from .findings import CLAIMS

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
    cells: tuple[str, ...] = ()
    """The measured cells behind the rates."""
    load: tuple[float, float] | None = None
    """Lowest and highest 1-minute load average when the measured stages started."""


def calibrate(directory: str | os.PathLike) -> Rates:
    """Rates from every cell under `directory` with a report and a timing.json (suite.grid)."""
    from .grid import TIMING_FILE

    root = Path(directory)
    sums: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])
    over: dict[str, list[float]] = defaultdict(list)
    evals: dict[tuple, list[float]] = defaultdict(list)
    reward_unit: dict[tuple, str] = {}
    names, loads = [], []
    for t in sorted(root.rglob(TIMING_FILE)):
        rep = t.parent / "report.json"
        if not rep.is_file():
            continue
        timing, doc = json.loads(t.read_text()), json.loads(rep.read_text())
        if "train_seconds" not in timing and "eval_seconds" not in timing:
            continue
        model, system = doc["policy"]["name"], doc["reward"]["system"]
        flops, secs = doc["totals"]["flops"], doc["totals"]["seconds"]
        if "train_seconds" in timing and not timing.get("train_resumed"):
            for ph in ("rollout", "update"):
                sums[model, ph][0] += secs[ph]
                sums[model, ph][1] += flops[ph]
            unit = "flops" if flops["reward"] else "completions"
            reward_unit[model, system] = unit
            sums[model, "reward", system][0] += secs["reward"]
            sums[model, "reward", system][1] += flops["reward"] if unit == "flops" else \
                doc["totals"]["work"]["count.completions"]
            over[model].append(timing["train_seconds"] - sum(secs.values()))
            loads += [x[0] for x in [timing.get("train_load_average")] if x]
        if "eval_seconds" in timing:
            evals[model, system].append(timing["eval_seconds"])
            loads += [x[0] for x in [timing.get("eval_load_average")] if x]
        names.append(t.parent.name)
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
        cells=tuple(names), load=(min(loads), max(loads)) if loads else None)


def estimate(pc, rates: Rates) -> float | None:
    """Predicted wall seconds (train + evaluate) of one planned cell, None when the rates lack
    its model or reward system."""
    c = pc.cell
    system = c.spec.reward.system
    per_gen = sum(pc.step_flops.values())
    gens = c.budget / per_gen
    try:
        train = sum(rates.phase[c.model, ph] * pc.step_flops[ph] * gens for ph in ("rollout", "update"))
        unit, rate = rates.reward[c.model, system]
        train += rate * (pc.step_flops["reward"] * gens if unit == "flops" else c.spec.generation_batch * gens)
        return train + rates.overhead[c.model] + rates.evaluation[c.model, system]
    except KeyError:
        return None


# ---------------------------------------------------------------- presentation of a plan


def plan_text(sp: StudyPlan, rates: Rates | None = None) -> str:
    """The plan as text: blocks, the claim -> cells table, every cell (with its estimated wall
    seconds when `rates` are given) and the total."""
    from .grid import budget_tag

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
        est = estimate(pc, rates) if rates else None
        total += est or 0.0
        missing += rates is not None and est is None
        lines.append(f"{pc.cell.id:<44}{pc.cell.budget:>9.2e}{pc.steps:>7}{pc.update_share:>7.3f}{pc.reward_share:>8.3f}"
                     + ((f"{est:>9.0f}" if est is not None else f"{'?':>9}") if rates else ""))
    if rates:
        load = f", load average {rates.load[0]:.1f}-{rates.load[1]:.1f}" if rates.load else ""
        lines += ["", f"estimated wall time: {total:.0f} s = {total / 3600:.2f} h with one worker (calibrated on "
                      f"{len(rates.cells)} measured cells{load})"
                  + (f"; {missing} cells not priced (no measured cell of their model and reward)" if missing else "")]
        by: dict[tuple, list[float]] = defaultdict(list)
        for pc in sp.cells:
            est = estimate(pc, rates)
            if est is not None:
                by[pc.cell.model, pc.cell.reward, pc.cell.budget].append(est)
        lines += ["per model, reward and budget: " + "; ".join(
            f"{m} {r} {budget_tag(b)}: {len(v)} x {sum(v) / len(v):.0f} s" for (m, r, b), v in sorted(by.items()))]
    return "\n".join(lines)


# ---------------------------------------------------------------- running


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    from . import __version__

    out = {"race": __version__, "python": platform.python_version()}
    for dist in ("torch", "transformers", "trl", "peft", "lm_eval", "math-verify", "numpy"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def _machine() -> dict:
    return {"platform": platform.platform(), "processor": platform.machine(), "cpus": os.cpu_count()}


def _portable(obj, prefix: str):
    """obj with every string path under the checkout written relative to it: study.json is
    committed with a study's results and must not carry one machine's folders."""
    if isinstance(obj, dict):
        return {k: _portable(v, prefix) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_portable(v, prefix) for v in obj]
    return obj[len(prefix):] if isinstance(obj, str) and obj.startswith(prefix) else obj


def write_study_json(sp: StudyPlan, out: Path, sessions: Sequence[dict] = ()) -> Path:
    """out/study.json: the study, its blocks and claims, the planned cells and every session
    that ran it (machine, versions, wall time). Atomic."""
    from .atomic import write_json_atomic

    s = sp.study
    ev = sp.evaluation
    doc = {"study": {"name": s.name, "source": s.source, "description": s.description,
                     "race": {"pilot": s.pilot, "validation": s.validation}, "analysis": dict(s.analysis)},
           "blocks": [{"name": b.name, "claims": list(b.claims), "why": b.why, "cells": list(sp.blocks[b.name])}
                      for b in s.blocks],
           "claims": {c: len(ids) for c, ids in claim_cells(sp).items()},
           "eval": {"targets": list(ev.targets), "limit": ev.limit, "batch_size": ev.batch_size, "judge": ev.judge},
           "cells": [pc.to_dict() for pc in sp.cells],
           "sessions": list(sessions)}
    from .paths import home

    return write_json_atomic(out / STUDY_FILE, _portable(doc, str(home()) + os.sep))


def read_study_json(directory: str | os.PathLike) -> dict | None:
    """The study.json of a study folder (or an exported one), None when there is none."""
    p = Path(directory) / STUDY_FILE
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except ValueError:
        raise RaceError(f"{p}: not valid JSON", "rerun the study command to rewrite it") from None


def run(sp: StudyPlan, out: str | os.PathLike, *, workers: int = 1, executor: str = "local",
        threads: int | None = None, progress: bool = True, address: str | None = None,
        gpus_per_cell: float = 0.0):
    """Run and evaluate every cell of the study into out/cells/ (suite.grid.run: finished cells
    are skipped, a killed cell resumes from its checkpoint) and record the session (start, end,
    wall seconds, cells run, machine, versions) in out/study.json. Returns suite.grid.GridResult."""
    from .grid import run as run_grid

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    old = read_study_json(out) or {}
    sessions = list(old.get("sessions") or [])
    write_study_json(sp, out, sessions)
    started, t0 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.perf_counter()
    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    # One torch thread per cell unless told: the tiny models gain nothing from more, and more
    # threads per process oversubscribe a 2-core machine (suite.quickstart measured ~10x slower).
    threads = threads or 1
    result = run_grid(sp.cells, out, sp.evaluation, workers=workers, executor=executor, threads=threads,
                      progress=progress, grid=None, address=address, gpus_per_cell=gpus_per_cell)
    sessions.append({"started": started, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "wall_seconds": round(time.perf_counter() - t0, 1), "load_average_at_start": load,
                     "ran": len(result.ran), "skipped": len(result.skipped), "failed": sorted(result.failed),
                     "workers": workers, "executor": executor, "threads": threads,
                     "machine": _machine(), "versions": _versions()})
    write_study_json(sp, out, sessions)
    return result
