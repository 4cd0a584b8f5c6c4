"""Cells: the one run description every command takes, declared in a YAML file
(tasks/cells/*.yaml; schemas/cell-v1.schema.json).

A cell names the policy, tokenizer, dataset and reward system, the adapter (LoRA rank 0 means
full fine-tuning), the GRPO knobs (K, prompts per step, max completion tokens, mu, beta,
learning rate, temperature, seed), the FLOP budget and a free allocation label. `race run`
trains it; `race report --spec`, `race import --cell` and `race export` read the same file, and
`race report --estimate` prices it from the setup table's aggregate numbers (`steps`,
`mean_prompt_tokens`, `mean_completion_tokens`; optional `hardware`). Relative paths are resolved
against the cell file's folder, then against the suite's home (the checkout); a policy or
reward model that is no path there stays a name (a catalog model, a hub id).

    from suite.train.cell import load_cell
    cell = load_cell("tasks/cells/s-sparse.yaml")
    cell.settings()        # accounting.GRPOSettings
    cell.adapter()         # accounting.Adapter
    cell.run_spec()        # record.runspec.RunSpec: what a report says about the run
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from ..atomic import write_text_atomic
from ..errors import RaceError
from ..numbers import parse_number
from ..record import schemas

DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

@dataclass(frozen=True)
class RewardChoice:
    """The reward system and its constructor options (e.g. model_path for a PRM)."""

    system: str
    """Name in suite.train.rewards.REWARD_SYSTEMS (sparse, structured, dense, proxy_prm, prm), or
    any name of a reward outside the suite when `kind` says what it is (reports and estimates)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Keyword options for the reward system's constructor."""
    kind: str | None = None
    """A reward outside the suite: rule (0 FLOPs), orm, prm or judge (a model scores)."""
    model: str | None = None
    """A reward outside the suite: its model, a catalog name or config path."""


@dataclass(frozen=True)
class CellSpec:
    """A GRPO cell. Units: tokens, FLOPs; paths absolute after load_cell()."""

    name: str
    """Cell id (defaults to the YAML file's stem)."""
    policy: str
    """Folder of the policy model (HF format); for reports and estimates also a catalog name."""
    reward: RewardChoice
    """Reward system and its options."""
    dataset: str | None = None
    """Training data (race run needs it): .jsonl, .json or .parquet problems in the embedded format or
    as GSM8K, MATH-500, Polaris-53K or MATH publish them (suite.train.datasets)."""
    budget_flops: int | None = None
    """Training FLOP budget: the run stops before the step that would exceed it (race run needs it)."""
    tokenizer: str | None = None
    """Tokenizer folder; None means the policy folder."""
    lora_rank: int = 16
    """LoRA rank r; 0 means full fine-tuning."""
    lora_alpha: float | None = None
    """LoRA alpha; None means 2 * rank."""
    lora_targets: tuple[str, ...] = DEFAULT_TARGETS
    """Projections the LoRA adapts."""
    group_size: int = 8
    """K: completions per prompt (TRL num_generations)."""
    prompts_per_step: int = 8
    """Prompts per generation batch."""
    max_completion_tokens: int = 48
    """Longest completion sampled (TRL max_completion_length)."""
    num_iterations: int = 1
    """mu: optimizer steps per generation batch (TRL num_iterations)."""
    beta: float = 0.0
    """KL coefficient (a reference forward runs when > 0)."""
    learning_rate: float = 2e-4
    """Optimizer learning rate (TRL's own default, 1e-6, barely moves a LoRA)."""
    temperature: float = 1.0
    """Sampling temperature of the rollouts."""
    seed: int = 0
    """Seed of the trainer (data order, sampling, adapter init)."""
    label: str = ""
    """Free allocation label, e.g. the paper's a100 / a180."""
    attention: str = "causal"
    """Attention FLOP convention of the ledger: causal or full."""
    max_steps: int | None = None
    """Optional cap on optimizer steps (the budget usually decides)."""
    engine: Mapping[str, Any] = field(default_factory=dict)
    """Engine options (`engine` in schemas/cell-v1.schema.json lists them)."""
    steps: int | None = None
    """Optimizer steps the run took, as declared (reports: provenance.steps; estimates: required)."""
    mean_prompt_tokens: float | None = None
    """Estimates: mean prompt tokens per completion (the setup table's)."""
    mean_completion_tokens: float | None = None
    """Estimates: mean generated tokens per completion."""
    mean_reward_tokens: float | None = None
    """Estimates with a reward model: mean tokens it scores per completion (default prompt + completion)."""
    hardware: Mapping[str, Any] | None = None
    """Accelerators and time for the report's hardware cross-check (its `hardware` section)."""
    notes: str | None = None
    """Free text for the report's run.notes."""
    evaluations: tuple[Mapping[str, Any], ...] = ()
    """Evaluation rows {target, metric, value, n, ...} for the report."""
    reference_cell: str | None = None
    """Set for the suite's own reference cells and grids (tasks/): the leaderboard separates them."""
    published: Mapping[str, Any] | None = None
    """A published run re-accounted: {title, url, year, reconstructed} of its publication."""
    sources: Mapping[str, Any] | None = None
    """Published runs: setup field -> {url, where} it was read from."""
    assumed: Mapping[str, Any] | None = None
    """Published runs: setup field -> {low, high, why} where the sources are silent."""
    rollouts: Mapping[str, Any] | None = None
    """What the rollouts were: {environment_tokens, turns, kept_share, reasons, off_policy, updates}
    (multi-turn, discarded rollouts, off-policy lag; the report's `rollouts` section)."""
    stages: tuple[Mapping[str, Any], ...] | None = None
    """Estimates of a staged run: each stage's overrides {name, steps, group_size, ...}, in order."""
    source: str | None = None
    """The YAML file this cell came from."""

    # ---- what the accounting needs --------------------------------------------------------

    @property
    def generation_batch(self) -> int:
        """Completions per generation: prompts_per_step * K."""
        return self.prompts_per_step * self.group_size

    @property
    def steps_per_generation(self) -> int | None:
        """TRL steps_per_generation (engine.steps_per_generation): slices of a generation batch,
        one per micro-step; None: one generation batch per optimizer step."""
        v = self.engine.get("steps_per_generation")
        return None if v is None else int(v)

    @property
    def micro_batch(self) -> int:
        """Sequences per forward/backward pass (default: the whole generation batch, or one
        slice of it with steps_per_generation)."""
        return int(self.engine.get("micro_batch") or self.generation_batch // (self.steps_per_generation or 1))

    @property
    def gradient_accumulation_steps(self) -> int:
        """Micro-batches per optimizer step (default: the whole generation batch per step)."""
        return int(self.engine.get("gradient_accumulation_steps") or self.generation_batch // self.micro_batch)

    @property
    def gradient_checkpointing(self) -> bool:
        """Whether activations are recomputed in the backward."""
        return bool(self.engine.get("gradient_checkpointing", True))

    def adapter(self):
        """accounting.Adapter of this cell."""
        from ..accounting import Adapter

        return Adapter.from_rank(self.lora_rank, self.lora_alpha, self.lora_targets)

    def settings(self):
        """accounting.GRPOSettings of this cell."""
        from ..accounting import GRPOSettings

        return GRPOSettings(group_size=self.group_size, prompts_per_step=self.prompts_per_step,
                            num_iterations=self.num_iterations, beta=self.beta,
                            max_completion_tokens=self.max_completion_tokens,
                            gradient_checkpointing=self.gradient_checkpointing,
                            gradient_accumulation_steps=self.gradient_accumulation_steps,
                            steps_per_generation=self.steps_per_generation)

    def to_dict(self) -> dict:
        """The cell as a YAML-able mapping (the shape load_cell reads; fields not given left out)."""
        d = asdict(self)
        d["reward"] = {"system": self.reward.system, **dict(self.reward.options),
                       **{k: v for k in ("kind", "model") if (v := getattr(self.reward, k)) is not None}}
        d["lora_targets"] = list(self.lora_targets)
        d["engine"] = dict(self.engine)
        d["evaluations"] = [dict(e) for e in self.evaluations]
        for k in ("hardware", "published", "sources", "assumed", "rollouts"):
            if getattr(self, k) is not None:
                d[k] = dict(getattr(self, k))
        if self.stages is not None:
            d["stages"] = [dict(x) for x in self.stages]
        d.pop("source")
        return {k: v for k, v in d.items() if v is not None and v != []}

    # ---- what a report says about it --------------------------------------------------------

    def reward_spec(self):
        """record.runspec.RewardSpec: the suite's reward systems by their class (a PRM is charged
        by its model folder), others by the `kind` and `model` the cell gives."""
        from ..record.runspec import RewardSpec
        from .rewards import REWARD_SYSTEMS, default_model_path

        r = self.reward
        if r.kind is None and r.system in REWARD_SYSTEMS:
            cls = REWARD_SYSTEMS[r.system]
            if getattr(cls, "kind", "rule") == "rule":
                return RewardSpec(system=r.system, kind="rule", model=None)
            path = r.options.get("model_path") or default_model_path(getattr(cls, "default_model", "prm"))
            return RewardSpec(system=r.system, kind="prm", model=str(path))
        kind = r.kind or ("prm" if r.model else "rule")
        return RewardSpec(system=r.system, kind=kind, model=r.model)

    def run_spec(self, engine_profile: str | None = None):
        """record.runspec.RunSpec of this cell: policy, adapter, GRPO settings, reward, engine,
        accounting convention, budget, identity, declared steps, hardware. `engine_profile`
        overrides the cell's `engine.profile` (race run picks it from the device)."""
        from ..accounting.enginefile import ENGINE_FILES, canonical_engine
        from ..record.runspec import OWN_ENGINE, Budget, EngineSpec, Hardware, RunSpec, installed_version

        name = str(self.engine.get("name") or OWN_ENGINE)    # the suite's own runs train with TRL
        canon = canonical_engine(name)                    # 'TRL', 'huggingface-trl': engine trl
        own = ENGINE_FILES[canon].profiles if canon is not None else ()
        # default: the engine's first profile (its file's main one); engines without one: useful work only
        profile = engine_profile or self.engine.get("profile") or (own[0] if own else "generic")
        return RunSpec(policy=self.policy, adapter=self.adapter(), grpo=self.settings(), reward=self.reward_spec(),
                       engine=EngineSpec(name=name, version=str(self.engine.get("version") or installed_version(name))),
                       engine_profile=str(profile), attention=self.attention, budget=Budget(flops=self.budget_flops),
                       label=self.label, seed=self.seed, id=self.name, evaluations=tuple(self.evaluations),
                       steps=self.steps, notes=self.notes, reference_cell=self.reference_cell,
                       rollouts=dict(self.rollouts) if self.rollouts else None,
                       sources=None if self.published is None else
                       {"published": dict(self.published), "facts": dict(self.sources or {}),
                        "assumed": dict(self.assumed or {})},
                       hardware=Hardware.from_dict(self.hardware, f"{_where(self.name)}: hardware")
                       if self.hardware else None)

    def means(self):
        """record.build.Means of the setup table, for `race report --estimate`."""
        from ..record.build import Means

        missing = [k for k in ("steps", "mean_prompt_tokens", "mean_completion_tokens") if getattr(self, k) is None]
        if missing:
            raise RaceError(f"{_where(self.name)}: an estimate needs {', '.join(missing)}",
                            "give the setup table's step count and mean prompt and completion tokens "
                            "(docs/paper-report.md)")
        r = self.rollouts or {}
        return Means(self.mean_prompt_tokens, self.mean_completion_tokens, self.mean_reward_tokens,
                     environment_tokens=float(r.get("environment_tokens") or 0), turns=float(r.get("turns") or 1),
                     kept_share=None if r.get("kept_share") is None else float(r["kept_share"]))

    def stage_cells(self) -> list["CellSpec"]:
        """The stages of a staged estimate, each as the cell with the stage's overrides (name
        CELL/STAGE); [] for a cell without stages."""
        out = []
        for i, st in enumerate(self.stages or ()):
            ch = {k: v for k, v in st.items() if k != "name"}
            if "rollouts" in ch:
                ch["rollouts"] = {**(self.rollouts or {}), **ch["rollouts"]}
            for k in ("steps", "group_size", "prompts_per_step", "max_completion_tokens", "num_iterations"):
                if k in ch:
                    ch[k] = parse_number(ch[k], whole=True)
            for k in ("mean_prompt_tokens", "mean_completion_tokens", "mean_reward_tokens"):
                if k in ch:
                    ch[k] = float(ch[k])
            out.append(_checked(replace(self, stages=None, name=f"{self.name}/{st.get('name') or i + 1}", **ch)))
        return out

    def estimate(self, *, created: str | None = None, evaluations=None):
        """`race report --estimate`: the record.report.Report priced from this cell's setup table,
        stage by stage when it has `stages` (totals their sum)."""
        from ..record.build import build_estimate

        if self.stages:
            stages = [(c.name.rsplit("/", 1)[1], c.run_spec(), c.means()) for c in self.stage_cells()]
            return build_estimate(self.run_spec(), created=created, evaluations=evaluations, stages=stages)
        return build_estimate(self.run_spec(), self.means(), created=created, evaluations=evaluations)

    def needs_to_train(self) -> None:
        """RaceError unless the cell has what training needs beyond a description: data and a budget."""
        for k, what in (("dataset", "the training data (problems as GSM8K, MATH-500, Polaris-53K or the "
                                    "embedded task publish them)"),
                        ("budget_flops", "the training FLOP budget")):
            if getattr(self, k) is None:
                raise RaceError(f"{_where(self.name)}: race run needs `{k}`, {what}",
                                "a cell needs policy, dataset, reward and budget_flops to train")

    def with_changes(self, **changes) -> "CellSpec":
        """A copy with some fields changed (checked like a loaded cell)."""
        return _checked(replace(self, **changes))


# ---- loading ----------------------------------------------------------------------------------

_PATH_FIELDS = ("policy", "tokenizer", "dataset")


def _where(cell_name: str) -> str:
    return f"cell {cell_name}"


def _resolve(value: str, base: Path | None, what: str, cell_name: str, must_exist: bool = True) -> str:
    """A path of the cell: relative paths from the cell file's folder, then the suite's home.
    Not found: an error when the path must exist (training), else the value as given (a
    catalog name, a hub id, a path on the machine the run went to)."""
    p = Path(os.path.expanduser(str(value)))
    candidates = [p] if p.is_absolute() else [c / p for c in (base, _home()) if c is not None]
    for c in candidates:
        if c.exists():
            return str(c.resolve())
    if not must_exist:
        return str(value)
    raise RaceError(f"{_where(cell_name)}: {what} path {value} does not exist"
                    + (f" (looked in {', '.join(str(c) for c in candidates)})" if not p.is_absolute() else ""),
                    f"fix the `{what}` field, or build the embedded models (race embedded build, from a checkout)")


def _reference(source: str | None) -> bool:
    """Whether a cell or grid file is one of the suite's own (under tasks/ of its home)."""
    home = _home()
    if not source or home is None:
        return False
    try:
        return Path(source).resolve().is_relative_to((home / "tasks").resolve())
    except OSError:
        return False


def _home() -> Path | None:
    try:
        from ..paths import home

        return home()
    except RaceError:
        return None


def canonical_fields(d: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The fields of a cell mapping under their canonical names (the schema's `x-aliases`: K,
    mu, lr, ... as people write them), nulls left out (not given). Two spellings of one field
    are a RaceError naming both: one of them would be dropped without a word."""
    aliases = schemas.load(schemas.CELL)["x-aliases"]
    spelled: dict[Any, list[Any]] = {}
    for k, v in d.items():
        if v is not None:
            spelled.setdefault(aliases.get(k, k), []).append(k)
    twice = next((ks for ks in spelled.values() if len(ks) > 1), None)
    if twice:
        raise RaceError(f"{where}: {' and '.join(map(str, twice))} name the same field "
                        f"({aliases.get(twice[0], twice[0])})", "give it once")
    return {field: d[ks[0]] for field, ks in spelled.items()}


def cell_from_dict(d: Mapping[str, Any], *, name: str | None = None, base: Path | None = None,
                   source: str | None = None, check_paths: bool = True) -> CellSpec:
    """Build a CellSpec from a mapping (a parsed cell file): checked against
    schemas/cell-v1.schema.json, then paths resolved and the reward system looked up. Every
    problem raises RaceError naming the field."""
    if isinstance(d, Mapping):
        d = canonical_fields(d, _where(str(d.get("name") or name or "cell")))
        cname = str(d.pop("name", None) or name or "cell")
    else:
        cname = str(name or source)
    d = schemas.numbers_parsed(d, schemas.CELL)
    schemas.check_spec(d, schemas.CELL, _where(cname))
    rw = {"system": d["reward"]} if isinstance(d["reward"], str) else dict(d["reward"])
    system = str(rw.pop("system"))
    kind, model = rw.pop("kind", None), rw.pop("model", None)
    options = dict(rw.pop("options", None) or {}, **rw)
    from .rewards import REWARD_SYSTEMS

    if system not in REWARD_SYSTEMS and kind is None and model is None:
        raise RaceError(f"{_where(cname)}: unknown reward system {system!r}",
                        f"known reward systems: {', '.join(sorted(REWARD_SYSTEMS))}; for a reward outside the suite "
                        "(reports and estimates) give {system, kind: rule|orm|prm|judge, model}")
    if kind is not None and (kind == "rule") != (model is None):
        raise RaceError(f"{_where(cname)}: reward kind {kind!r} " + ("takes no model" if model else "needs a model"),
                        "rule rewards have no model; orm/prm/judge name theirs (a catalog name or config path)")
    if "model_path" in options and options["model_path"] is not None:
        options["model_path"] = _resolve(options["model_path"], base, "reward model_path", cname, check_paths)
    if model is not None:
        model = _resolve(model, base, "reward model", cname, must_exist=False)

    kw: dict[str, Any] = {"name": cname, "reward": RewardChoice(system, options, kind, model), "source": source}
    for k in _PATH_FIELDS:
        if k in d:
            kw[k] = _resolve(d[k], base, k, cname, check_paths)
    for k in ("budget_flops", "lora_rank", "group_size", "prompts_per_step", "max_completion_tokens", "num_iterations",
              "seed", "max_steps", "steps"):
        if k in d:
            kw[k] = parse_number(d[k], whole=True)
    for k in ("beta", "learning_rate", "temperature", "lora_alpha", "mean_prompt_tokens", "mean_completion_tokens",
              "mean_reward_tokens"):
        if k in d:
            kw[k] = float(d[k])
    if "lora_targets" in d:
        t = d["lora_targets"]
        kw["lora_targets"] = tuple([t] if isinstance(t, str) else t)
    for k in ("label", "attention", "notes", "reference_cell"):
        if k in d:
            kw[k] = str(d[k])
    if "reference_cell" not in kw and _reference(source):
        kw["reference_cell"] = cname
    kw["engine"] = dict(d.get("engine") or {})
    if "hardware" in d:
        kw["hardware"] = dict(d["hardware"])
    for k in ("sources", "assumed"):     # keyed by field names: the same aliases as the fields
        if k in d:
            kw[k] = canonical_fields(d[k], f"{_where(cname)}: {k}")
    if "published" in d:
        kw["published"] = dict(d["published"])
    if "rollouts" in d:
        kw["rollouts"] = dict(d["rollouts"])
    if "stages" in d:
        kw["stages"] = tuple(dict(x) for x in d["stages"])
    kw["evaluations"] = tuple(dict(e) for e in d.get("evaluations") or ())
    return _checked(CellSpec(**kw))


def _checked(c: CellSpec) -> CellSpec:
    """A built or changed cell against the schema, then the checks across fields (the
    accounting types check the rest)."""
    schemas.check_spec({k: v for k, v in c.to_dict().items() if v is not None}, schemas.CELL, _where(c.name))
    if c.generation_batch % c.micro_batch:
        raise RaceError(f"{_where(c.name)}: engine.micro_batch={c.micro_batch} must divide "
                        f"prompts_per_step * K = {c.generation_batch}")
    spg = c.steps_per_generation
    if spg is not None and c.micro_batch * spg != c.generation_batch:
        raise RaceError(f"{_where(c.name)}: engine.steps_per_generation={spg} slices of micro_batch={c.micro_batch} "
                        f"are not the generation batch prompts_per_step * K = {c.generation_batch}",
                        "drop engine.micro_batch (it defaults to the slice), or make them agree")
    c.adapter()  # LoRA targets and rank are checked by accounting.Adapter
    c.settings()
    if c.hardware is not None:
        from ..record.runspec import Hardware

        Hardware.from_dict(c.hardware, f"{_where(c.name)}: hardware")
    return c


def load_cell(path: str | os.PathLike, *, check_paths: bool = True) -> CellSpec:
    """Read a cell YAML file. A missing file, bad YAML, unknown field or (when `check_paths`,
    as training needs) a missing model path raises RaceError naming it. Relative paths resolve
    from the file's folder either way.

    Args: `path`, the cell YAML; `check_paths`, whether model and data paths must exist.
    Returns the CellSpec.
    """
    from ..record.runspec import read_yaml

    from ..paths import shipped

    p = shipped(path)           # tasks/cells/X.yaml also names the shipped cell outside a checkout
    if not p.is_file():
        hint = None
        cells = _home() and (_home() / "tasks" / "cells")
        if cells and cells.is_dir():
            hint = "reference cells: " + ", ".join(sorted(str(x.relative_to(_home())) for x in cells.glob("*.yaml")))
        raise RaceError(f"cell file {path} does not exist", hint)
    return cell_from_dict(read_yaml(p, "cell"), name=p.stem, base=p.parent.resolve(), source=str(p),
                          check_paths=check_paths)


def load_run_description(path: str | os.PathLike):
    """A run description for `race report --spec`: a cell YAML (the one description every
    command takes) or an older run-spec file (`grpo:`/`adapter:` sections), as a
    record.runspec.RunSpec. Relative paths resolve from the file's own folder.

    Args: `path`, the cell or run-spec YAML. Returns the RunSpec.
    """
    from ..record.runspec import is_run_spec, load_run_spec, read_yaml

    p = Path(path)
    if not p.is_file():
        raise RaceError(f"run description {path} does not exist", "pass a cell YAML (tasks/cells/*.yaml)")
    if is_run_spec(read_yaml(p)):
        return load_run_spec(p)
    return load_cell(p, check_paths=False).run_spec()


def dump_cell(cell: CellSpec, path: str | os.PathLike) -> Path:
    """Write the resolved cell (absolute paths) as YAML, atomically."""
    import yaml

    return write_text_atomic(path, yaml.safe_dump(cell.to_dict(), sort_keys=False))
