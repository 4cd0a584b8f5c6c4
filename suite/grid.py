"""IsoFLOP pilot grids: a declarative YAML file expands into cells, every cell is planned into
its budget's IsoFLOP band, then run (suite.run), then evaluated (suite.evaluate).

    from suite import grid
    g = grid.load("tasks/grids/quickstart.yaml")      # Grid: the declaration, checked
    gp = grid.plan_grid(g)                             # expand, fit budgets, plan: pure arithmetic
    results = grid.run(gp.cells, "runs/pilot")         # resumable; one worker by default

**Steps absorb the budget.** An allocation fixes the knobs that decide what one GRPO step
costs and how it splits (LoRA rank, K, mu, prompts per step, completion length, ...); every
cell then trains until its budget is spent (suite.run's stop rule: stop before the step whose
cost bound would cross the budget). So cells of one budget differ in how many update steps
they buy — a larger model buys fewer — and in their update share p, never in what they spend.

**The band.** A cell of budget B lands in [B * (1 - band), B]: the stop rule leaves at most one
step's cost bound unspent. The planner checks that bound against the band for every cell and
refuses the grid, naming each cell that cannot be guaranteed to land, before anything runs —
unless the grid allows `raise_budgets`: then a budget is raised, by at most that factor, to the
first one every cell can reach, and the plan says so (`fit`).
See docs/quickstart.md for the file format.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .errors import RaceError

#: Default relative width of an IsoFLOP band: cells of budget B land in [0.75 B, B].
DEFAULT_BAND = 0.25
#: Top-level keys of a grid file.
GRID_KEYS = ("name", "description", "cell", "models", "budgets", "band", "raise_budgets", "allocations",
             "rewards", "seeds", "eval", "engine_profile")
#: Cell fields a grid sets itself; the `cell:` block and allocations may not.
GRID_OWNED = ("name", "policy", "reward", "budget_flops", "budget", "seed", "label")
#: Knobs that would stop a cell before its budget is spent, so it could miss its band.
FORBIDDEN_KNOBS = ("max_steps",)
#: Where each cell's run folder goes inside the grid's output folder.
CELLS_DIR = "cells"
PLAN_FILE = "grid.json"


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


@dataclass(frozen=True)
class Grid:
    """A grid file, checked. Expanded by `expand`; nothing here touches a model."""

    name: str
    """Grid name (defaults to the file's stem)."""
    description: str
    """One paragraph on what the grid asks."""
    cell: Mapping[str, Any]
    """Cell fields shared by every cell (suite.cell field names: dataset, prompts_per_step, ...)."""
    models: Mapping[str, str]
    """Model name -> policy folder."""
    budgets: tuple[int, ...]
    """Training FLOP budgets; each is one IsoFLOP band."""
    band: float
    """Relative band width: a cell of budget B must land in [B * (1 - band), B]."""
    allocations: Mapping[str, Mapping[str, Any]]
    """Allocation label -> cell knobs (lora_rank, group_size/K, num_iterations/mu, ...)."""
    rewards: Mapping[str, Mapping[str, Any]]
    """Reward name -> {system: ..., options...} (suite.rewards)."""
    seeds: tuple[int, ...]
    """Trainer seeds; every seed of one allocation carries the same label."""
    evaluation: EvalPlan
    """How cells are evaluated."""
    raise_budgets: float = 1.0
    """Largest factor the planner may raise a budget by so that every cell can reach its band
    (`fit`); 1.0: never raise, refuse the grid instead."""
    engine_profile: str = "trl-cpu"
    """Accounting profile the plan assumes (the run picks trl-cpu on CPU, trl on CUDA)."""
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
    """suite.cell.CellSpec of the cell."""


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


def _flops(v: Any, what: str, where: str) -> int:
    try:
        if isinstance(v, bool):
            raise ValueError
        x = float(v)
        if not math.isfinite(x) or x < 1 or not x.is_integer():
            raise ValueError
        return int(x)
    except (TypeError, ValueError):
        raise RaceError(f"{where}: {what} must be a positive whole number of FLOPs, got {v!r}",
                        "write budgets like 3e11") from None


def _mapping(v: Any, what: str, where: str, *, allow_list: bool = False) -> dict:
    """A YAML mapping; a list of names becomes {name: name} when allowed."""
    if allow_list and isinstance(v, list):
        if not all(isinstance(x, str) for x in v):
            raise RaceError(f"{where}: {what} as a list must hold names only")
        return {x: x for x in v}
    if not isinstance(v, Mapping) or not v:
        raise RaceError(f"{where}: {what} must be a non-empty mapping",
                        "see docs/quickstart.md for the grid file format")
    return {str(k): val for k, val in v.items()}


def grid_from_dict(d: Any, *, name: str | None = None, base: str | os.PathLike | None = None,
                   source: str | None = None) -> Grid:
    """Check a grid mapping (a parsed grid file). Every problem raises RaceError naming the key."""
    where = _where(source or name)
    if not isinstance(d, Mapping):
        raise RaceError(f"{where}: a grid file must be a YAML mapping", "see docs/quickstart.md")
    unknown = sorted(set(d) - set(GRID_KEYS))
    if unknown:
        import difflib

        close = difflib.get_close_matches(str(unknown[0]), GRID_KEYS, n=1)
        raise RaceError(f"{where}: unknown key {unknown[0]!r}",
                        f"did you mean {close[0]!r}?" if close else f"grid keys: {', '.join(GRID_KEYS)}")
    for k in ("models", "budgets", "allocations", "rewards"):
        if d.get(k) is None:
            raise RaceError(f"{where}: required key {k!r} is missing",
                            "a grid needs models, budgets, allocations and rewards")
    cell = dict(d.get("cell") or {})
    for k in cell:
        if k in GRID_OWNED or k in FORBIDDEN_KNOBS:
            raise RaceError(f"{where}: `cell:` may not set {k!r}", _owned_hint(k))
    models = {k: str(v) for k, v in _mapping(d["models"], "models", where).items()}
    budgets = d["budgets"] if isinstance(d["budgets"], list) else [d["budgets"]]
    budgets = tuple(_flops(b, "every budget", where) for b in budgets)
    if not budgets or len(set(budgets)) != len(budgets):
        raise RaceError(f"{where}: budgets must be a non-empty list of distinct FLOP counts")
    band = d.get("band", DEFAULT_BAND)
    if isinstance(band, bool) or not isinstance(band, (int, float)) or not 0 < band < 1:
        raise RaceError(f"{where}: band must be a fraction in (0, 1), got {band!r}",
                        "band 0.25 means a cell of budget B must land in [0.75 B, B]")
    raise_by = d.get("raise_budgets", 1.0)
    if isinstance(raise_by, bool) or not isinstance(raise_by, (int, float)) or not 1 <= raise_by <= 10:
        raise RaceError(f"{where}: raise_budgets must be a factor in [1, 10], got {raise_by!r}",
                        "raise_budgets 1.25 lets the planner raise a budget up to 1.25x so every cell reaches its "
                        "band; 1 (the default) refuses such a grid instead")
    allocations = {}
    for label, knobs in _mapping(d["allocations"], "allocations", where).items():
        knobs = dict(knobs or {})
        for k in knobs:
            if k in GRID_OWNED or k in FORBIDDEN_KNOBS:
                raise RaceError(f"{where}: allocation {label!r} may not set {k!r}", _owned_hint(k))
        allocations[label] = knobs
    rewards = {}
    for rname, r in _mapping(d["rewards"], "rewards", where, allow_list=True).items():
        r = {"system": r} if isinstance(r, str) else dict(r or {})
        if "system" not in r:
            r["system"] = rname
        rewards[rname] = r
    seeds = d.get("seeds", [0])
    seeds = seeds if isinstance(seeds, list) else [seeds]
    if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds) \
            or len(set(seeds)) != len(seeds):
        raise RaceError(f"{where}: seeds must be a list of distinct non-negative integers, got {d.get('seeds')!r}")
    ev = dict(d.get("eval") or {})
    bad = sorted(set(ev) - {"targets", "limit", "batch_size", "judge"})
    if bad:
        raise RaceError(f"{where}: unknown eval key {bad[0]!r}", "eval keys: targets, limit, batch_size, judge")
    targets = ev.get("targets", list(EvalPlan.targets))
    targets = tuple([targets] if isinstance(targets, str) else targets)
    from .evaluate import target

    for t in targets:
        target(t)
    limit = ev.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise RaceError(f"{where}: eval.limit must be a positive integer, got {limit!r}")
    batch = ev.get("batch_size", EvalPlan.batch_size)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise RaceError(f"{where}: eval.batch_size must be a positive integer, got {batch!r}")
    judge = ev.get("judge")
    if judge is not None:
        judge = _path(str(judge), base, where, "eval.judge")
    from .accounting import get_engine

    profile = str(d.get("engine_profile", "trl-cpu"))
    get_engine(profile)
    for label in list(models) + list(allocations) + list(rewards):
        if not label or any(ch in label for ch in "/\\ ") or label.startswith("."):
            raise RaceError(f"{where}: name {label!r} cannot be part of a folder name",
                            "use letters, digits, '-' and '_' in model, allocation and reward names")
    return Grid(name=str(d.get("name") or name or "grid"), description=str(d.get("description") or ""),
                cell=cell, models=models, budgets=budgets, band=float(band), raise_budgets=float(raise_by),
                allocations=allocations,
                rewards=rewards, seeds=tuple(seeds), evaluation=EvalPlan(targets, limit, batch, judge),
                engine_profile=profile, base=None if base is None else str(base), source=source)


def _path(value: str, base, where: str, what: str) -> str:
    """An existing path, relative ones against the grid file's folder, then the checkout."""
    p = Path(os.path.expanduser(value))
    if not p.is_absolute():
        from .paths import home

        p = next((c / p for c in (Path(base) if base else None, home()) if c is not None and (c / p).exists()), p)
    if not p.exists():
        raise RaceError(f"{where}: {what} path {value} does not exist")
    return str(p.resolve())


def _owned_hint(key: str) -> str:
    if key in FORBIDDEN_KNOBS:
        return "steps absorb the budget in a grid: every cell trains until its budget is spent"
    return ("the grid sets it per cell from models, budgets, rewards, allocations and seeds; "
            "move it to the matching grid key")


def load(path: str | os.PathLike) -> Grid:
    """Read and check a grid file. A missing file or bad YAML raises RaceError naming it."""
    import yaml

    p = Path(path)
    if not p.is_file():
        from .paths import tasks

        shipped = sorted(str(x) for x in (tasks() / "grids").glob("*.yaml")) if (tasks() / "grids").is_dir() else []
        raise RaceError(f"grid file {path} does not exist",
                        ("shipped grids: " + ", ".join(shipped)) if shipped else None)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise RaceError(f"grid {p}: not valid YAML" + (f" at line {mark.line + 1}" if mark else ""),
                        "check indentation and colons") from None
    return grid_from_dict(data, name=p.stem, base=p.parent.resolve(), source=str(p))


# ---------------------------------------------------------------- expansion


def budget_tag(flops: int) -> str:
    """A short, folder-safe budget name: 300000000000 -> 3e11, 250000000000 -> 2.5e11."""
    mant, exp = f"{flops:.6e}".split("e")
    return f"{mant.rstrip('0').rstrip('.')}e{int(exp)}"


def expand(g: Grid, *, check_paths: bool = True) -> list[GridCell]:
    """Every cell: models x budgets x rewards x allocations x seeds, in that order."""
    from dataclasses import replace

    from .cell import cell_from_dict

    base = Path(g.base) if g.base else None
    # One checked CellSpec per model x reward x allocation; budgets and seeds (checked by
    # grid_from_dict) only change fields no other check depends on.
    specs = {}
    for model, policy in g.models.items():
        for rname, reward in g.rewards.items():
            for label, knobs in g.allocations.items():
                d = {**g.cell, **knobs, "policy": policy, "reward": dict(reward),
                     "budget_flops": g.budgets[0], "seed": g.seeds[0], "label": label}
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
    """Longest and mean prompt of a dataset under its tokenizer's chat template (what suite.run
    bounds the budget with)."""
    from transformers import AutoTokenizer

    from .run import load_rows, prompt_messages

    tok = AutoTokenizer.from_pretrained(tokenizer)
    rows = load_rows(dataset)
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
    """ModelSpec of the cell's reward model, None for rule rewards (nothing is loaded)."""
    key = (spec.reward.system, tuple(sorted((k, str(v)) for k, v in spec.reward.options.items())))
    if key not in cache:
        from .modelspec import load_spec
        from .rewards import get_reward_system

        r = get_reward_system(spec.reward.system, **dict(spec.reward.options))
        cache[key] = load_spec(r.model_path) if getattr(r, "kind", "rule") != "rule" else None
    return cache[key]


def step_bound(policy, adapter, settings, *, max_prompt_tokens: int, engine: str, attention: str,
               reward_model=None) -> int:
    """Upper bound on one step's FLOPs, the bound suite.run stops on
    (suite.trl_callback.step_cost_bound, recomputed here without importing transformers so
    planning stays fast; tests check the two agree)."""
    from .accounting import phase_flops, work_from_lengths

    n = settings.group_size * settings.prompts_per_step
    reward = [2 * (max_prompt_tokens + settings.max_completion_tokens)] * n if reward_model is not None else None
    work = work_from_lengths([max_prompt_tokens] * n, [settings.max_completion_tokens] * n, settings, engine,
                             reward, iterations=1, generation=True, policy=policy, reward_model=reward_model)
    return sum(phase_flops(work, policy, adapter, settings, reward_model, engine, attention).values())


def _step_costs(cells: Sequence[GridCell], stats: Mapping[tuple[str, str], PromptStats],
                engine: str) -> list[tuple[int, dict]]:
    """(step cost bound, expected FLOPs per phase of one generation batch) per cell, from
    suite.accounting alone (pure; no model is loaded)."""
    from .accounting import step_flops
    from .modelspec import load_spec

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
            policy = specs.get(s.policy) or specs.setdefault(s.policy, load_spec(s.policy))
            reward_model = _reward_model(s, rewards)
            st = stats[_stats_key(s)]
            bound = step_bound(policy, adapter, settings, max_prompt_tokens=st.longest, engine=engine,
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
         engine: str = "trl-cpu") -> list[PlannedCell]:
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
    cell cannot reach its band even after raising."""
    engine = engine or g.engine_profile
    cells = expand(g)
    stats = prompt_stats_of(cells)
    fitted, notes = fit(g, cells, stats, engine=engine)
    if notes:
        cells = expand(fitted)
    return GridPlan(fitted, tuple(plan(cells, stats, engine=engine)), tuple(notes))


def plan_table(planned: Sequence[PlannedCell]) -> str:
    """The plan as a fixed-width text table."""
    head = f"{'cell':<40}{'budget':>9}{'FLOPs/gen':>12}{'steps':>7}{'p':>7}{'reward':>8}"
    lines = [head, "-" * len(head)]
    for pc in planned:
        lines.append(f"{pc.cell.id:<40}{pc.cell.budget:>9.2e}{sum(pc.step_flops.values()):>12.3e}{pc.steps:>7}"
                     f"{pc.update_share:>7.3f}{pc.reward_share:>8.3f}")
    lines.append("FLOPs/gen: one generation batch and its mu updates; steps: expected optimizer steps the budget "
                 "buys (steps absorb the budget); p: planned update share; reward: planned reward FLOP share.")
    return "\n".join(lines)


# ---------------------------------------------------------------- running


def evaluated(report: Path, ev: EvalPlan) -> bool:
    """True when `report` exists and holds pass@1 rows for every target of `ev` at its limit."""
    if not report.is_file():
        return False
    try:
        doc = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    from .evaluate import result_name, target

    have = {(e.get("target"), e.get("metric")) for e in doc.get("evaluations") or [] if isinstance(e, dict)}
    for t in ev.targets:
        n = min(ev.limit or target(t).size, target(t).size)
        if (result_name(t, n), "pass@1") not in have:
            return False
    return True


def _declare_band(report: Path, band: tuple[int, int]) -> None:
    """Write the grid's IsoFLOP band into the run's report (budget.band), atomically."""
    from .atomic import write_json_atomic

    doc = json.loads(report.read_text(encoding="utf-8"))
    want = {"low": band[0], "high": band[1]}
    if (doc.get("budget") or {}).get("band") != want:
        doc.setdefault("budget", {})["band"] = want
        write_json_atomic(report, doc)


class _LogTo:
    """Send this process's stdout/stderr (fds 1 and 2, so library and C-level output too) to
    a log file while a cell runs: the grid's progress bar stays readable."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        import sys

        sys.stdout.flush(), sys.stderr.flush()
        self.saved = (os.dup(1), os.dup(2))
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(self.fd, 1), os.dup2(self.fd, 2)
        return self

    def __exit__(self, *exc):
        import sys

        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(self.saved[0], 1), os.dup2(self.saved[1], 2)
        for fd in (*self.saved, self.fd):
            os.close(fd)


def run_and_evaluate(spec, out: str, band: tuple[int, int], ev: EvalPlan, threads: int | None = None,
                     log: bool = True) -> dict:
    """One grid job (module level so worker processes can import it): train the cell into
    `out` (resuming from its checkpoint when a ledger is already there), declare its band in
    the report, then evaluate it. Each stage is skipped when its output exists. Returns the
    report's totals."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = out / "report.json"
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    import contextlib

    with (_LogTo(out / "log.txt") if log else contextlib.nullcontext()):
        if not report.is_file():
            from .run import run_cell

            resume = (out / "ledger.jsonl").is_file() and (out / "cell.yaml").is_file()
            run_cell(spec, out, resume=resume, progress=False, threads=threads)
        _declare_band(report, band)
        if not evaluated(report, ev):
            from .evaluate import evaluate_run

            evaluate_run(out, targets=ev.targets, limit=ev.limit, batch_size=ev.batch_size, judge=ev.judge)
    doc = json.loads(report.read_text(encoding="utf-8"))
    return {"totals": doc.get("totals"), "steps": (doc.get("ledger") or {}).get("steps")}


@dataclass(frozen=True)
class GridResult:
    """What `run` did."""

    out: Path
    """The grid's output folder."""
    ran: tuple[str, ...]
    """Cells run (or finished) now."""
    skipped: tuple[str, ...]
    """Cells already finished and evaluated before this call."""
    failed: Mapping[str, str] = field(default_factory=dict)
    """Cell id -> first line of its error (the full text in the cell's error.txt)."""


def cell_dir(out: str | os.PathLike, cell: GridCell) -> Path:
    """The run folder of a cell inside the grid's output folder."""
    return Path(out) / CELLS_DIR / cell.id


def _spent(report: Path) -> int:
    try:
        return int(json.loads(report.read_text(encoding="utf-8"))["totals"]["flops"]["total"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def write_plan(planned: Sequence[PlannedCell], out: Path, g: Grid | None = None) -> Path:
    """out/grid.json: the grid's declaration and every planned cell (atomic)."""
    from .atomic import write_json_atomic

    doc = {"grid": None if g is None else {"name": g.name, "source": g.source, "band": g.band,
                                           "budgets": list(g.budgets), "engine_profile": g.engine_profile,
                                           "eval": {"targets": list(g.evaluation.targets),
                                                    "limit": g.evaluation.limit}},
           "absorbs_budget": "steps",
           "cells": [pc.to_dict() for pc in planned]}
    return write_json_atomic(out / PLAN_FILE, doc)


def run(planned: Sequence[PlannedCell], out: str | os.PathLike, ev: EvalPlan, *, workers: int = 1,
        executor: str = "local", threads: int | None = None, progress: bool = True,
        grid: Grid | None = None, address: str | None = None, gpus_per_cell: float = 0.0) -> GridResult:
    """Run and evaluate every planned cell into out/cells/<id>/ through suite.executors
    (`address` and `gpus_per_cell`: the ray executor's cluster and per-cell GPU reservation).
    Finished cells (a report with evaluations for every target) are skipped; a cell that
    crashed resumes from its checkpoint. A failed cell does not stop the others; failures are
    returned (and their tracebacks written to the cell's error.txt)."""
    from .executors import Job, Resources, run_jobs

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_plan(planned, out, grid)
    threads = threads or max(1, (os.cpu_count() or 1) // max(1, workers))
    done = [pc for pc in planned if evaluated(cell_dir(out, pc.cell) / "report.json", ev)]
    todo = [pc for pc in planned if pc not in done]
    total_budget = sum(pc.cell.budget for pc in planned)
    spent = sum(_spent(cell_dir(out, pc.cell) / "report.json") for pc in done)
    jobs = [Job(key=pc.cell.id, fn=run_and_evaluate,
                args=(pc.cell.spec, str(cell_dir(out, pc.cell)), pc.cell.band, ev, threads),
                resources=Resources(cpus=threads, gpus=gpus_per_cell)) for pc in todo]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(planned), initial=len(done), unit="cell", desc=f"grid {grid.name if grid else out.name}",
                   dynamic_ncols=True)
        bar.set_postfix_str(f"FLOPs {spent:.3g}/{total_budget:.3g}")
    ran, failed = [], {}
    try:
        options = {"workers": workers} if executor == "local" else {"address": address}
        for r in (run_jobs(jobs, executor, **options) if jobs else ()):
            folder = out / CELLS_DIR / r.key
            if r.ok:
                ran.append(r.key)
                spent += _spent(folder / "report.json")
                (folder / "error.txt").unlink(missing_ok=True)
            else:
                failed[r.key] = (r.error or "failed").splitlines()[0]
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "error.txt").write_text(r.error or "failed", encoding="utf-8")
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"FLOPs {spent:.3g}/{total_budget:.3g}" + (f", {len(failed)} failed" if failed else ""))
    finally:
        if bar is not None:
            bar.close()
    return GridResult(out, tuple(ran), tuple(pc.cell.id for pc in done), failed)
