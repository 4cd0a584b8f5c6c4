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
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from ..atomic import write_text_atomic
from ..errors import RaceError
from ..numbers import parse_number

DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# Engine options a cell may set; everything else in `engine:` is refused so typos surface.
ENGINE_OPTIONS = {
    "micro_batch": "sequences per forward/backward (TRL per_device_train_batch_size); "
                   "default: the whole generation batch (prompts_per_step * K)",
    "gradient_checkpointing": "recompute activations in the backward (TRL default: true)",
    "attn_implementation": "transformers attention kernel: eager (exact FLOP checks), sdpa, ...",
    "use_vllm": "generate with vLLM (GPU users; passed through to TRL)",
    "vllm_mode": "vLLM mode passed through to TRL (colocate or server)",
    "bf16": "train in bfloat16 (default: true on CUDA, false on CPU)",
    "device": "cpu or cuda (default: cuda when available)",
    "lr_scheduler": "learning-rate schedule (default constant: the budget, not a step count, ends the run)",
    "loss_type": "TRL loss_type (default: TRL's, dapo)",
    "checkpoint_every": "optimizer steps between resumable checkpoints (default 1)",
    "max_grad_norm": "gradient clipping norm (TRL default 1.0)",
    "torch_threads": "torch CPU threads (default: leave torch's choice)",
}


@dataclass(frozen=True)
class RewardChoice:
    """The reward system and its constructor options (e.g. model_path for a PRM)."""

    system: str
    """Name in suite.rewards.REWARD_SYSTEMS: sparse, structured, dense, proxy_prm, prm."""
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
    """Engine options (see ENGINE_OPTIONS)."""
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

_FIELDS = {f.name: f for f in fields(CellSpec)}
_REQUIRED = ("policy", "dataset", "reward", "budget_flops")
# Short spellings people write in YAML -> field names.
_ALIASES = {"K": "group_size", "k": "group_size", "mu": "num_iterations", "lr": "learning_rate",
            "budget": "budget_flops", "lora": "lora_rank", "rank": "lora_rank"}
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


def _number(v: Any, name: str, cell: str, kind=float, minimum: float | None = None):
    """A number that YAML may hand over as a string ("3e12"), by suite.numbers.parse_number."""
    try:
        x = parse_number(v, whole=True) if kind is int else float(parse_number(v))
    except ValueError:
        raise RaceError(f"{_where(cell)}: {name} must be {'an integer' if kind is int else 'a number'}, got {v!r}")
    if minimum is not None and x < minimum:
        raise RaceError(f"{_where(cell)}: {name} must be >= {minimum:g}, got {v!r}")
    return x


def cell_from_dict(d: Mapping[str, Any], *, name: str | None = None, base: Path | None = None,
                   source: str | None = None, check_paths: bool = True) -> CellSpec:
    """Build a CellSpec from a mapping; every problem raises RaceError naming the field."""
    if not isinstance(d, Mapping):
        raise RaceError(f"cell {name or source}: a cell must be a YAML mapping of fields")
    d = {_ALIASES.get(k, k): v for k, v in d.items()}
    cname = str(d.pop("name", None) or name or "cell")
    unknown = sorted(set(d) - set(_FIELDS))
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], list(_FIELDS) + list(_ALIASES), n=1)
        raise RaceError(f"{_where(cname)}: unknown field {unknown[0]!r}",
                        f"did you mean {close[0]!r}?" if close else f"fields: {', '.join(sorted(_FIELDS))}")
    for k in _REQUIRED:
        if d.get(k) is None:
            raise RaceError(f"{_where(cname)}: required field {k!r} is missing",
                            "a cell needs policy, dataset, reward and budget_flops")
    rw = d["reward"]
    if isinstance(rw, str):
        rw = {"system": rw}
    if not isinstance(rw, Mapping) or "system" not in rw:
        raise RaceError(f"{_where(cname)}: reward must be a system name or a mapping with `system`")
    rw = dict(rw)
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
        if d.get(k) is not None:
            kw[k] = _resolve(d[k], base, k, cname) if check_paths else str(d[k])
    kw["budget_flops"] = _number(d["budget_flops"], "budget_flops", cname, int, 1)
    ints = {"lora_rank": 0, "group_size": 2, "prompts_per_step": 1, "max_completion_tokens": 1,
            "num_iterations": 1, "seed": 0}
    for k, lo in ints.items():
        if d.get(k) is not None:
            kw[k] = _number(d[k], k, cname, int, lo)
    if d.get("max_steps") is not None:
        kw["max_steps"] = _number(d["max_steps"], "max_steps", cname, int, 1)
    for k, lo in {"beta": 0, "learning_rate": 0, "temperature": 0}.items():
        if d.get(k) is not None:
            kw[k] = _number(d[k], k, cname, float, lo)
    if d.get("lora_alpha") is not None:
        kw["lora_alpha"] = _number(d["lora_alpha"], "lora_alpha", cname, float, 0)
    if d.get("lora_targets") is not None:
        t = d["lora_targets"]
        kw["lora_targets"] = tuple([t] if isinstance(t, str) else t)
    if d.get("label") is not None:
        kw["label"] = str(d["label"])
    if d.get("attention") is not None:
        kw["attention"] = str(d["attention"])
    eng = d.get("engine") or {}
    if not isinstance(eng, Mapping):
        raise RaceError(f"{_where(cname)}: engine must be a mapping of options")
    bad = sorted(set(eng) - set(ENGINE_OPTIONS))
    if bad:
        raise RaceError(f"{_where(cname)}: unknown engine option {bad[0]!r}",
                        f"engine options: {', '.join(sorted(ENGINE_OPTIONS))}")
    kw["engine"] = dict(eng)
    return _checked(CellSpec(**kw))


def _checked(c: CellSpec) -> CellSpec:
    """Cross-field checks (the accounting types check the rest)."""
    if c.attention not in ("causal", "full"):
        raise RaceError(f"{_where(c.name)}: attention {c.attention!r} is not causal or full")
    if c.micro_batch < 1 or c.generation_batch % c.micro_batch:
        raise RaceError(f"{_where(c.name)}: engine.micro_batch={c.micro_batch} must divide "
                        f"prompts_per_step * K = {c.generation_batch}")
    c.adapter()  # LoRA targets and rank are checked by accounting.Adapter
    c.settings()
    return c


def load_cell(path: str | os.PathLike, *, check_paths: bool = True) -> CellSpec:
    """Read a cell YAML file. A missing file, bad YAML, unknown field or missing model path
    raises RaceError naming it."""
    import yaml

    p = Path(path)
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
