"""IsoFLOP pilot grids, declared and planned: a grid file (schemas/grid-v1.schema.json)
expands into cells, and every cell is planned into its budget's IsoFLOP band from the
accounting alone (nothing here touches a model). suite.pipeline.gridrun runs the plan.

    from suite.analysis import grid
    from suite.pipeline import gridrun
    g = grid.load("tasks/grids/quickstart.yaml")      # Grid: the declaration, checked
    gp = grid.plan_grid(g)                             # expand, fit budgets, plan: pure arithmetic
    results = gridrun.run(gp.cells, "runs/pilot", g.evaluation)   # resumable; one worker by default

**Steps absorb the budget.** An allocation fixes the knobs that decide what one GRPO step
costs and how it splits (LoRA rank, K, mu, prompts per step, completion length, ...); every
cell then trains until its budget is spent (a run's stop rule: stop before the step whose
cost bound, suite.accounting.step_cost_bound, would cross the budget). So cells of one budget differ in how many update steps
they buy — a larger model buys fewer — and in their update share p, never in what they spend.

**The band.** A cell of budget B lands in [B * (1 - band), B]: the stop rule leaves at most one
step's cost bound unspent. The planner checks that bound against the band for every cell and
refuses the grid, naming each cell that cannot be guaranteed to land, before anything runs —
unless the grid allows `raise_budgets`: then a budget is raised, by at most that factor, to the
first one every cell can reach, and the plan says so (`fit`).
See docs/quickstart.md for the file format.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..errors import RaceError
from ..record import runspec, schemas

#: Default relative width of an IsoFLOP band: cells of budget B land in [0.75 B, B].
DEFAULT_BAND = 0.25


@dataclass(frozen=True)
class CurvePlan:
    """Scores along every run of a grid (`eval.curve`): snapshots every `every` optimizer steps,
    each scored on the first `limit` problems of each target."""

    every: int
    """Optimizer steps between scored snapshots (the cells' engine.snapshot_every)."""
    limit: int = 100
    """Problems per target at each point (suite.evaluate.curve)."""


@dataclass(frozen=True)
class EvalPlan:
    """How every cell of a grid is evaluated (suite.evaluate)."""

    targets: tuple[str, ...] = ("arith-easy-250", "arith-hard-250")
    """Evaluation targets (suite.evaluate.TARGETS)."""
    limit: int | None = None
    """Score only the first N problems of each target (rows named TARGET:first-N)."""
    batch_size: int = 64
    """Generation batch size of the HF backend."""
    judge: str | None = None
    """Process-judge PRM folder; None: suite.evaluate's default (the embedded PRM)."""
    curve: CurvePlan | None = None
    """Scores along the run too (None: only at the end)."""

    def problems(self) -> int:
        """Problems one end-of-run evaluation scores, over every target."""
        from ..evaluate.targets import target

        return sum(min(self.limit or target(t).size, target(t).size) for t in self.targets)

    def curve_problems(self) -> int:
        """Problems one point along the run scores, over every target (0 without a curve)."""
        from ..evaluate.targets import target

        return sum(min(self.curve.limit, target(t).size) for t in self.targets) if self.curve else 0


@dataclass(frozen=True)
class Grid:
    """A grid file, checked. Expanded by `expand`; nothing here touches a model."""

    name: str
    """Grid name (defaults to the file's stem)."""
    description: str
    """One paragraph on what the grid asks."""
    cell: Mapping[str, Any]
    """Cell fields shared by every cell (suite.train.cell field names: dataset, prompts_per_step, ...)."""
    models: Mapping[str, str]
    """Model name -> policy folder."""
    budgets: tuple[int, ...]
    """Training FLOP budgets; each is one IsoFLOP band."""
    band: float
    """Relative band width: a cell of budget B must land in [B * (1 - band), B]."""
    allocations: Mapping[str, Mapping[str, Any]]
    """Allocation label -> cell knobs (lora_rank, group_size, num_iterations, ...), under their
    canonical names (a grid file may use the cell's aliases: K, mu, ...)."""
    rewards: Mapping[str, Mapping[str, Any]]
    """Reward name -> {system: ..., options...} (suite.train.rewards)."""
    seeds: tuple[int, ...]
    """Trainer seeds; every seed of one allocation carries the same label."""
    evaluation: EvalPlan
    """How cells are evaluated."""
    raise_budgets: float = 1.0
    """Largest factor the planner may raise a budget by so that every cell can reach its band
    (`fit`); 1.0: never raise, refuse the grid instead."""
    engine_profile: str = runspec.OWN_CPU_PROFILE
    """Accounting profile the plan assumes (the suite's own runs' CPU profile; suite.train picks by device)."""
    base: str | None = None
    """Folder relative paths are resolved against (the grid file's folder)."""
    source: str | None = None
    """The grid file."""


@dataclass(frozen=True)
class GridCell:
    """One cell of an expanded grid: its coordinates and its CellSpec."""

    id: str
    """Unique cell id: <model>-<budget>-<reward>-<allocation>-s<seed>."""
    model: str
    """Model name (a key of Grid.models)."""
    budget: int
    """Training FLOP budget."""
    band: tuple[int, int]
    """(low, high) FLOPs the cell must land in."""
    reward: str
    """Reward name (a key of Grid.rewards)."""
    allocation: str
    """Allocation label (run.label of the report)."""
    seed: int
    """Trainer seed."""
    spec: Any
    """suite.train.cell.CellSpec of the cell."""


@dataclass(frozen=True)
class PromptStats:
    """Prompt lengths of a (tokenizer, dataset) pair after the chat template, in tokens."""

    longest: int
    """Longest prompt (the run's cost bound uses it)."""
    mean: float
    """Mean prompt length (the expected step cost uses it)."""


@dataclass(frozen=True)
class PlannedCell:
    """A cell with what its budget buys. FLOPs are exact integers of suite.accounting."""

    cell: GridCell
    """The cell."""
    step_bound: int
    """Upper bound on one step's FLOPs (longest prompt, every completion at max length): the run's stop rule."""
    step_flops: Mapping[str, int]
    """Expected FLOPs per phase of one generation batch and its mu updates (mean prompt,
    completions at max length)."""
    steps: int
    """Expected optimizer (update) steps the budget buys: budget * mu // (FLOPs of a generation batch and its mu updates)."""
    min_steps: int
    """Optimizer steps the stop rule guarantees (budget // step_bound)."""

    @property
    def update_share(self) -> float:
        """Planned p = update / total of one step."""
        total = sum(self.step_flops.values())
        return self.step_flops["update"] / total if total else 0.0

    @property
    def reward_share(self) -> float:
        """Planned reward FLOPs / total of one step (0 for rule rewards)."""
        total = sum(self.step_flops.values())
        return self.step_flops["reward"] / total if total else 0.0

    def to_dict(self) -> dict:
        """JSON form (grid.json)."""
        c = self.cell
        return {"id": c.id, "model": c.model, "budget": c.budget, "band": {"low": c.band[0], "high": c.band[1]},
                "reward": c.reward, "allocation": c.allocation, "seed": c.seed,
                "step_bound": self.step_bound, "step_flops": dict(self.step_flops), "steps": self.steps,
                "min_steps": self.min_steps, "update_share": self.update_share, "reward_share": self.reward_share,
                "cell": c.spec.to_dict()}


# ---------------------------------------------------------------- loading


def _where(source: str | None) -> str:
    return f"grid {source}" if source else "grid"


def grid_from_dict(d: Any, *, name: str | None = None, base: str | os.PathLike | None = None,
                   source: str | None = None) -> Grid:
    """A Grid from a mapping (a parsed grid file): checked against schemas/grid-v1.schema.json,
    then the names it refers to (evaluation targets, the engine profile, the judge's folder).
    Every problem raises RaceError naming the key."""
    where = _where(source or name)
    d = schemas.numbers_parsed(d, schemas.GRID)
    schemas.check_spec(d, schemas.GRID, where)
    budgets = tuple(d["budgets"] if isinstance(d["budgets"], list) else [d["budgets"]])
    from ..train.cell import canonical_fields

    # Canonical names before cell fields and an allocation's knobs merge (K over group_size).
    allocations = {str(label): canonical_fields(knobs or {}, f"{where}: allocation {label}")
                   for label, knobs in d["allocations"].items()}
    rewards = {}
    for rname, r in (d["rewards"].items() if isinstance(d["rewards"], Mapping) else ((x, x) for x in d["rewards"])):
        r = {"system": r} if isinstance(r, str) else dict(r or {})
        r.setdefault("system", rname)
        rewards[str(rname)] = r
    seeds = d.get("seeds", [0])
    ev = dict(d.get("eval") or {})
    targets = ev.get("targets", list(EvalPlan.targets))
    targets = tuple([targets] if isinstance(targets, str) else targets)
    from ..evaluate.targets import target

    for t in targets:
        target(t)
    judge = ev.get("judge")
    if judge is not None:
        judge = _path(str(judge), base, where, "eval.judge")
    from ..accounting import get_engine

    profile = str(d.get("engine_profile", runspec.OWN_CPU_PROFILE))
    get_engine(profile)
    return Grid(name=str(d.get("name") or name or "grid"), description=str(d.get("description") or ""),
                cell=canonical_fields(d.get("cell") or {}, f"{where}: cell"), models={str(k): str(v) for k, v in d["models"].items()},
                budgets=tuple(int(b) for b in budgets), band=float(d.get("band", DEFAULT_BAND)),
                raise_budgets=float(d.get("raise_budgets", 1.0)), allocations=allocations, rewards=rewards,
                seeds=tuple(seeds if isinstance(seeds, list) else [seeds]),
                evaluation=EvalPlan(targets, ev.get("limit"), ev.get("batch_size", EvalPlan.batch_size), judge,
                                    CurvePlan(**ev["curve"]) if ev.get("curve") else None),
                engine_profile=profile, base=None if base is None else str(base), source=source)


def _path(value: str, base, where: str, what: str) -> str:
    """An existing path, relative ones against the grid file's folder, then the checkout."""
    p = Path(os.path.expanduser(value))
    if not p.is_absolute():
        from ..paths import home

        p = next((c / p for c in (Path(base) if base else None, home()) if c is not None and (c / p).exists()), p)
    if not p.exists():
        raise RaceError(f"{where}: {what} path {value} does not exist")
    return str(p.resolve())


def read_yaml(path: str | os.PathLike, kind: str) -> tuple[Path, Any]:
    """The parsed YAML of a `kind` file ("grid", "study"); a missing file (with the shipped ones
    of tasks/<kind>s/ named) or bad YAML raises RaceError naming it."""
    import yaml

    from ..paths import shipped
    from ..yamlstrict import load     # no anchors, aliases or duplicate keys

    p = shipped(path)           # tasks/grids/X.yaml also names the shipped grid outside a checkout
    if not p.is_file():
        from ..paths import tasks

        folder = tasks() / f"{kind}s"
        shipped = sorted(str(x) for x in folder.glob("*.yaml")) if folder.is_dir() else []
        raise RaceError(f"{kind} file {path} does not exist",
                        (f"shipped {kind} files: " + ", ".join(shipped)) if shipped else None)
    try:
        return p, load(p, f"{kind} {p}")
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise RaceError(f"{kind} {p}: not valid YAML" + (f" at line {mark.line + 1}" if mark else ""),
                        "check indentation and colons") from None


def load(path: str | os.PathLike) -> Grid:
    """Read and check a grid file (`path`, tasks/grids/*.yaml); returns the Grid. A missing file
    or bad YAML raises RaceError naming it."""
    p, data = read_yaml(path, "grid")
    return grid_from_dict(data, name=p.stem, base=p.parent.resolve(), source=str(p))


# ---------------------------------------------------------------- expansion


def budget_tag(flops: int) -> str:
    """A short, folder-safe budget name: 300000000000 -> 3e11, 250000000000 -> 2.5e11."""
    mant, exp = f"{flops:.6e}".split("e")
    return f"{mant.rstrip('0').rstrip('.')}e{int(exp)}"


def expand(g: Grid, *, check_paths: bool = True) -> list[GridCell]:
    """Every cell: models x budgets x rewards x allocations x seeds, in that order."""
    from dataclasses import replace

    from ..train.cell import cell_from_dict

    base = Path(g.base) if g.base else None
    # One checked CellSpec per model x reward x allocation; budgets and seeds (checked by
    # grid_from_dict) only change fields no other check depends on.
    specs = {}
    for model, policy in g.models.items():
        for rname, reward in g.rewards.items():
            for label, knobs in g.allocations.items():
                d = {**g.cell, **knobs, "policy": policy, "reward": dict(reward),
                     "budget_flops": g.budgets[0], "seed": g.seeds[0], "label": label}
                if g.evaluation.curve:      # every cell keeps the snapshots its curve is scored at
                    d["engine"] = {**dict(d.get("engine") or {}), "snapshot_every": g.evaluation.curve.every}
                specs[model, rname, label] = cell_from_dict(d, name=f"{model}-{rname}-{label}", base=base,
                                                            source=g.source, check_paths=check_paths)
    out = []
    for model in g.models:
        for budget in g.budgets:
            band = (round(budget * (1 - g.band)), budget)
            for rname in g.rewards:
                for label in g.allocations:
                    for seed in g.seeds:
                        cid = f"{model}-{budget_tag(budget)}-{rname}-{label}-s{seed}"
                        spec = replace(specs[model, rname, label], name=cid, budget_flops=budget, seed=seed)
                        out.append(GridCell(cid, model, budget, band, rname, label, seed, spec))
    return out


# ---------------------------------------------------------------- planning


def prompt_stats(tokenizer: str, dataset: str) -> PromptStats:
    """Longest and mean prompt of a dataset under its tokenizer's chat template (what suite.train.run
    bounds the budget with)."""
    from transformers import AutoTokenizer

    from ..train.datasets import load, prompt_messages

    tok = AutoTokenizer.from_pretrained(tokenizer)
    rows = load(dataset)
    enc = tok.apply_chat_template([prompt_messages(r["question"]) for r in rows], add_generation_prompt=True,
                                  tokenize=True, return_dict=True)
    lengths = [len(x) for x in enc["input_ids"]]
    return PromptStats(max(lengths), sum(lengths) / len(lengths))


def prompt_stats_of(cells: Iterable[GridCell]) -> dict[tuple[str, str], PromptStats]:
    """PromptStats per distinct (tokenizer, dataset) of the cells (one tokenization each)."""
    out: dict[tuple[str, str], PromptStats] = {}
    for c in cells:
        key = _stats_key(c.spec)
        if key not in out:
            out[key] = prompt_stats(*key)
    return out


def _stats_key(spec) -> tuple[str, str]:
    return (spec.tokenizer or spec.policy, spec.dataset)


def _reward_model(spec, cache: dict):
    """Spec of the cell's reward model (any family), None for rule rewards (nothing is loaded)."""
    key = (spec.reward.system, tuple(sorted((k, str(v)) for k, v in spec.reward.options.items())))
    if key not in cache:
        from ..accounting.specs import spec_for
        from ..train.rewards import get_reward_system

        r = get_reward_system(spec.reward.system, **dict(spec.reward.options))
        cache[key] = spec_for(r.model_path) if getattr(r, "kind", "rule") != "rule" else None
    return cache[key]


def _step_costs(cells: Sequence[GridCell], stats: Mapping[tuple[str, str], PromptStats],
                engine: str) -> list[tuple[int, dict]]:
    """(step cost bound, expected FLOPs per phase of one generation batch) per cell, from
    suite.accounting alone (pure; no model is loaded; a family with no recipe is traced on the meta device)."""
    from ..accounting import step_cost_bound, step_flops
    from ..accounting.specs import spec_for

    specs: dict[str, Any] = {}
    rewards: dict = {}
    costs: dict[tuple, tuple[int, dict]] = {}  # seeds and budgets share a step's cost: compute it once
    out = []
    for c in cells:
        s = c.spec
        adapter, settings = s.adapter(), s.settings()
        key = (s.policy, adapter, settings, s.attention, _stats_key(s), s.reward.system,
               tuple(sorted((k, str(v)) for k, v in s.reward.options.items())))
        if key not in costs:
            policy = specs.get(s.policy) or specs.setdefault(s.policy, spec_for(s.policy))
            reward_model = _reward_model(s, rewards)
            st = stats[_stats_key(s)]
            bound = step_cost_bound(policy, adapter, settings, max_prompt_tokens=st.longest, engine=engine,
                                    attention=s.attention, reward_model=reward_model)
            exp = step_flops(policy, adapter, settings, st.mean, s.max_completion_tokens, engine, s.attention,
                             reward_model)
            costs[key] = (bound, dict(exp.flops))
        out.append(costs[key])
    return out


def _round_up(x: float) -> int:
    """The smallest number of two significant digits >= x: 4.39e10 -> 4.4e10."""
    unit = 10 ** max(int(math.floor(math.log10(x))) - 1, 0)
    return int(math.ceil(x / unit) * unit)


def fit(g: Grid, cells: Sequence[GridCell], stats: Mapping[tuple[str, str], PromptStats], *,
        engine: str | None = None) -> tuple[Grid, list[str]]:
    """The grid with each budget raised, by at most `g.raise_budgets`, to the first budget at which
    every cell of it can reach its band, and one note per raised budget saying why. Budgets that
    need more than that are left alone, for `plan` to refuse with its hint."""
    if g.raise_budgets <= 1:
        return g, []
    need: dict[int, tuple[float, str]] = {}
    for c, (bound, _) in zip(cells, _step_costs(cells, stats, engine or g.engine_profile)):
        low, high = c.band
        if bound > high - low and bound / g.band > need.get(c.budget, (0.0, ""))[0]:
            need[c.budget] = (bound / g.band, c.id)
    budgets, notes = list(g.budgets), []
    for i, b in enumerate(g.budgets):
        if b not in need or need[b][0] > b * g.raise_budgets:
            continue
        new = _round_up(need[b][0])
        while new - round(new * (1 - g.band)) < need[b][0] * g.band:  # the band's low end rounds
            new += 10 ** max(len(str(new)) - 2, 0)
        if new in budgets:
            raise RaceError(f"{_where(g.source)}: budget {budget_tag(b)} would be raised to {budget_tag(new)}, "
                            f"which the grid already has", "drop one of the two budgets")
        budgets[i] = new
        notes.append(f"budget {budget_tag(b)} raised to {budget_tag(new)} ({new / b:.2f}x, raise_budgets allows "
                     f"{g.raise_budgets:g}x): one step of {need[b][1]} may cost up to {need[b][0] * g.band:.3g} "
                     f"FLOPs, more than the band {g.band:g} of {budget_tag(b)} leaves")
    if not notes:
        return g, []
    from dataclasses import replace

    return replace(g, budgets=tuple(budgets)), notes


def plan(cells: Sequence[GridCell], stats: Mapping[tuple[str, str], PromptStats], *,
         engine: str = runspec.OWN_CPU_PROFILE) -> list[PlannedCell]:
    """What each cell's budget buys, from suite.accounting alone (pure; no model is loaded).
    Raises RaceError naming every cell that cannot be guaranteed to land in its band."""
    planned, misses = [], []
    for c, (bound, flops) in zip(cells, _step_costs(cells, stats, engine)):
        s = c.spec
        per_step = sum(flops.values())
        low, high = c.band
        if bound > high - low:
            misses.append((c, bound))
        steps = c.budget * s.num_iterations // per_step  # mu optimizer steps share one generation
        planned.append(PlannedCell(c, bound, flops, steps, c.budget // bound))
    if misses:
        names = ", ".join(f"{c.id} (one step up to {b:.3g} FLOPs, band width {c.band[1] - c.band[0]:.3g})"
                          for c, b in misses[:6])
        more = f" and {len(misses) - 6} more" if len(misses) > 6 else ""
        worst = max(b / (c.band[1] - c.band[0]) for c, b in misses)
        source = next((c.spec.source for c, _ in misses if getattr(c.spec, "source", None)), None)
        raise RaceError(
            (f"grid {source}: " if source else "")
            + f"{len(misses)} of {len(cells)} cells cannot be sure to reach their IsoFLOP band: {names}{more}",
            f"the run stops up to one step short of its budget; raise the budgets about {worst:.1f}x (or let the "
            f"planner do it: raise_budgets: {math.ceil(worst * 20) / 20:g}), widen `band`, or make those steps "
            f"cheaper (fewer prompts_per_step, smaller K, shorter max_completion_tokens)")
    return planned


@dataclass(frozen=True)
class GridPlan:
    """A grid as it will run: budgets after `fit`, every cell planned, and what the planner changed."""

    grid: Grid
    """The grid with its budgets as planned (raised where `raise_budgets` allows)."""
    cells: tuple[PlannedCell, ...]
    """Every cell with what its budget buys."""
    notes: tuple[str, ...] = ()
    """One line per budget the planner raised, with the reason."""


def plan_grid(g: Grid, *, engine: str | None = None) -> GridPlan:
    """Expand, fit and plan a grid: what `race grid` and `race quickstart` run. RaceError when a
    cell cannot reach its band even after raising.

    Args: `g`, the Grid (load_grid); `engine`, the engine profile to price with. Returns the
    GridPlan (cells, the planned grid, notes on raised budgets).
    """
    engine = engine or g.engine_profile
    cells = expand(g)
    stats = prompt_stats_of(cells)
    fitted, notes = fit(g, cells, stats, engine=engine)
    if notes:
        cells = expand(fitted)
    return GridPlan(fitted, tuple(plan(cells, stats, engine=engine)), tuple(notes))


def plan_table(planned: Sequence[PlannedCell]) -> str:
    """The plan as a fixed-width text table.

    Args: `planned`, the planned cells (plan_grid(...).cells). Returns the table.
    """
    head = f"{'cell':<40}{'budget':>9}{'FLOPs/gen':>12}{'steps':>7}{'p':>7}{'reward':>8}"
    lines = [head, "-" * len(head)]
    for pc in planned:
        lines.append(f"{pc.cell.id:<40}{pc.cell.budget:>9.2e}{sum(pc.step_flops.values()):>12.3e}{pc.steps:>7}"
                     f"{pc.update_share:>7.3f}{pc.reward_share:>8.3f}")
    lines.append("FLOPs/gen: one generation batch and its mu updates; steps: expected optimizer steps the budget "
                 "buys (steps absorb the budget); p: planned update share; reward: planned reward FLOP share.")
    return "\n".join(lines)
