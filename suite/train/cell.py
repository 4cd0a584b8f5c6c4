"""Cells: one GRPO training run of the suite, declared in a YAML file (tasks/cells/*.yaml).

A cell names the policy, tokenizer, dataset and reward system, the adapter (LoRA rank 0 means
full fine-tuning), the GRPO knobs (K, prompts per step, max completion tokens, mu, beta,
learning rate, temperature, seed), the FLOP budget and a free allocation label. Relative paths
are resolved against the cell file's folder, then against the suite's home (the checkout).

    from suite.train.cell import load_cell
    cell = load_cell("tasks/cells/s-sparse.yaml")
    cell.settings()        # accounting.GRPOSettings
    cell.adapter()         # accounting.Adapter
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
    """Name in suite.train.rewards.REWARD_SYSTEMS: sparse, structured, dense, proxy_prm, prm."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Keyword options for the reward system's constructor."""


@dataclass(frozen=True)
class CellSpec:
    """A GRPO cell. Units: tokens, FLOPs; paths absolute after load_cell()."""

    name: str
    """Cell id (defaults to the YAML file's stem)."""
    policy: str
    """Folder of the policy model (HF format)."""
    dataset: str
    """JSON Lines training data: one problem per line with `question` and `answer`."""
    reward: RewardChoice
    """Reward system and its options."""
    budget_flops: int
    """Training FLOP budget: the run stops before the step that would exceed it."""
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
    source: str | None = None
    """The YAML file this cell came from."""

    # ---- what the accounting needs --------------------------------------------------------

    @property
    def generation_batch(self) -> int:
        """Completions per generation: prompts_per_step * K."""
        return self.prompts_per_step * self.group_size

    @property
    def micro_batch(self) -> int:
        """Sequences per forward/backward pass."""
        return int(self.engine.get("micro_batch") or self.generation_batch)

    @property
    def gradient_accumulation_steps(self) -> int:
        """Micro-batches per optimizer step (the whole generation batch per step)."""
        return self.generation_batch // self.micro_batch

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
                            gradient_accumulation_steps=self.gradient_accumulation_steps)

    def to_dict(self) -> dict:
        """The cell as a YAML-able mapping (the shape load_cell reads)."""
        d = asdict(self)
        d["reward"] = {"system": self.reward.system, **dict(self.reward.options)}
        d["lora_targets"] = list(self.lora_targets)
        d["engine"] = dict(self.engine)
        d.pop("source")
        return d

    def with_changes(self, **changes) -> "CellSpec":
        """A copy with some fields changed (checked like a loaded cell)."""
        return _checked(replace(self, **changes))


# ---- loading ----------------------------------------------------------------------------------

_PATH_FIELDS = ("policy", "tokenizer", "dataset")


def _where(cell_name: str) -> str:
    return f"cell {cell_name}"


def _resolve(value: str, base: Path | None, what: str, cell_name: str) -> str:
    p = Path(os.path.expanduser(str(value)))
    candidates = [p] if p.is_absolute() else [c / p for c in (base, _home()) if c is not None]
    for c in candidates:
        if c.exists():
            return str(c.resolve())
    raise RaceError(f"{_where(cell_name)}: {what} path {value} does not exist"
                    + (f" (looked in {', '.join(str(c) for c in candidates)})" if not p.is_absolute() else ""),
                    f"fix the `{what}` field, or build the embedded models (race embedded build, from a checkout)")


def _home() -> Path | None:
    try:
        from ..paths import home

        return home()
    except RaceError:
        return None


def cell_from_dict(d: Mapping[str, Any], *, name: str | None = None, base: Path | None = None,
                   source: str | None = None, check_paths: bool = True) -> CellSpec:
    """Build a CellSpec from a mapping (a parsed cell file): checked against
    schemas/cell-v1.schema.json, then paths resolved and the reward system looked up. Every
    problem raises RaceError naming the field."""
    if isinstance(d, Mapping):
        aliases = schemas.load(schemas.CELL)["x-aliases"]
        d = {aliases.get(k, k): v for k, v in d.items() if v is not None}     # null: not given
        cname = str(d.pop("name", None) or name or "cell")
    else:
        cname = str(name or source)
    d = schemas.numbers_parsed(d, schemas.CELL)
    schemas.check_spec(d, schemas.CELL, _where(cname))
    rw = {"system": d["reward"]} if isinstance(d["reward"], str) else dict(d["reward"])
    system = str(rw.pop("system"))
    options = dict(rw.pop("options", None) or {}, **rw)
    from .rewards import REWARD_SYSTEMS

    if system not in REWARD_SYSTEMS:
        raise RaceError(f"{_where(cname)}: unknown reward system {system!r}",
                        f"known reward systems: {', '.join(sorted(REWARD_SYSTEMS))}")
    if "model_path" in options and options["model_path"] is not None and check_paths:
        options["model_path"] = _resolve(options["model_path"], base, "reward model_path", cname)

    kw: dict[str, Any] = {"name": cname, "reward": RewardChoice(system, options), "source": source}
    for k in _PATH_FIELDS:
        if k in d:
            kw[k] = _resolve(d[k], base, k, cname) if check_paths else str(d[k])
    for k in ("budget_flops", "lora_rank", "group_size", "prompts_per_step", "max_completion_tokens", "num_iterations",
              "seed", "max_steps"):
        if k in d:
            kw[k] = parse_number(d[k], whole=True)
    for k in ("beta", "learning_rate", "temperature", "lora_alpha"):
        if k in d:
            kw[k] = float(d[k])
    if "lora_targets" in d:
        t = d["lora_targets"]
        kw["lora_targets"] = tuple([t] if isinstance(t, str) else t)
    for k in ("label", "attention"):
        if k in d:
            kw[k] = str(d[k])
    kw["engine"] = dict(d.get("engine") or {})
    return _checked(CellSpec(**kw))


def _checked(c: CellSpec) -> CellSpec:
    """A built or changed cell against the schema, then the checks across fields (the
    accounting types check the rest)."""
    schemas.check_spec({k: v for k, v in c.to_dict().items() if v is not None}, schemas.CELL, _where(c.name))
    if c.generation_batch % c.micro_batch:
        raise RaceError(f"{_where(c.name)}: engine.micro_batch={c.micro_batch} must divide "
                        f"prompts_per_step * K = {c.generation_batch}")
    c.adapter()  # LoRA targets and rank are checked by accounting.Adapter
    c.settings()
    return c


def load_cell(path: str | os.PathLike, *, check_paths: bool = True) -> CellSpec:
    """Read a cell YAML file. A missing file, bad YAML, unknown field or missing model path
    raises RaceError naming it."""
    import yaml

    from ..paths import shipped

    p = shipped(path)           # tasks/cells/X.yaml also names the shipped cell outside a checkout
    if not p.is_file():
        hint = None
        cells = _home() and (_home() / "tasks" / "cells")
        if cells and cells.is_dir():
            hint = "reference cells: " + ", ".join(sorted(str(x.relative_to(_home())) for x in cells.glob("*.yaml")))
        raise RaceError(f"cell file {path} does not exist", hint)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise RaceError(f"cell {p}: not valid YAML{where}", "check indentation and colons") from None
    return cell_from_dict(data, name=p.stem, base=p.parent.resolve(), source=str(p), check_paths=check_paths)


def dump_cell(cell: CellSpec, path: str | os.PathLike) -> Path:
    """Write the resolved cell (absolute paths) as YAML, atomically."""
    import yaml

    return write_text_atomic(path, yaml.safe_dump(cell.to_dict(), sort_keys=False))
