"""Run a cell: TRL's GRPOTrainer on the cell's policy, data and reward, with the live ledger.

    from suite.train.cell import load_cell
    from suite.train.run import run_cell
    result = run_cell(load_cell("tasks/cells/s-sparse.yaml"), "runs/s-sparse")

Writes DIR/cell.yaml (the resolved cell), DIR/ledger.jsonl (one line per optimizer step,
flushed as it goes), DIR/checkpoints/ (resumable trainer state), DIR/adapter/ (the trained
LoRA, or the full model for rank 0), DIR/report.json and, with `engine.snapshot_every`, the
adapter every N steps in DIR/snapshots/ (suite.train.snapshots: what `race eval --curve` scores). CPU by default; CUDA and bf16 when a
GPU is present; `engine.use_vllm` is passed through to TRL for GPU users.

Crash safety: the ledger line of a step is on disk before that step's checkpoint, so after a
kill -9 the ledger is valid up to the last finished step; resume=True restarts from the last
checkpoint and moves any ledger lines after it to ledger.discarded.jsonl (they are re-run), so
no step is counted twice.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .cell import CellSpec, dump_cell, load_cell
from ..errors import RaceError

CELL_FILE = "cell.yaml"
CHECKPOINTS = "checkpoints"
REPORT = "report.json"
UNLIMITED_STEPS = 10**9  # the budget, not a step count, ends a cell


@dataclass(frozen=True)
class RunResult:
    """What a finished (or budget-stopped) cell produced."""

    out: Path
    """The run folder."""
    steps: int
    """Optimizer steps in the ledger."""
    flops: dict
    """FLOPs per phase (rollout, update, reward) over the ledger."""
    stopped_by_budget: bool
    """True when the run ended because the next step could cross the budget."""
    report: Path | None
    """DIR/report.json."""


# ---- data ---------------------------------------------------------------------------------------


def training_rows(dataset: str | os.PathLike) -> tuple[list[dict], str]:
    """(rows, format) of a cell's dataset through the one loader (suite.train.datasets.load: the
    embedded format, GSM8K, MATH-500, Polaris-53K or MATH; JSON Lines, JSON or parquet). Rows
    hold the columns TRL passes to the reward systems: question, answer (the gold final
    answer), solution ("" when the format has none)."""
    from .datasets import load

    rows = load(dataset)
    return [{"question": r["question"], "answer": r["answer"], "solution": r["solution"] or ""}
            for r in rows], rows[0]["source"]


def longest_prompt(tokenizer, rows: list[dict]) -> int:
    """Tokens of the dataset's longest prompt after the chat template (the budget bound)."""
    from .datasets import prompt_messages

    enc = tokenizer.apply_chat_template([prompt_messages(r["question"]) for r in rows], add_generation_prompt=True,
                                        tokenize=True, return_dict=True)
    return max(len(x) for x in enc["input_ids"])


#: Per process: (tokenizer folder, dataset file and its size and mtime) -> longest prompt. The
#: chat template over a 5,000-row dataset takes 1-1.5 s on 2 cores; every cell of a grid shares
#: the dataset, and a grid worker runs many cells.
_LONGEST: dict[tuple, int] = {}


def _longest_prompt_once(cell: CellSpec, tokenizer, rows: list[dict]) -> int:
    source = Path(cell.tokenizer or cell.policy).resolve()
    data = Path(cell.dataset).resolve()
    files = [data, *sorted(source.glob("tokenizer*")), *sorted(source.glob("chat_template*"))]
    key = (str(source), str(data), tuple((f.stat().st_size, f.stat().st_mtime_ns) for f in files))
    if key not in _LONGEST:
        _LONGEST[key] = longest_prompt(tokenizer, rows)
    return _LONGEST[key]


# ---- the run ------------------------------------------------------------------------------------


def last_checkpoint(out: Path) -> Path | None:
    """The newest complete checkpoint folder under DIR/checkpoints, or None."""
    d = out / CHECKPOINTS
    if not d.is_dir():
        return None
    found = []
    for c in d.iterdir():
        m = re.fullmatch(r"checkpoint-(\d+)", c.name)
        if m and (c / "trainer_state.json").is_file():  # written last: the checkpoint is complete
            found.append((int(m.group(1)), c))
    return max(found)[1] if found else None


def _device(cell: CellSpec) -> str:
    import torch

    want = cell.engine.get("device")
    if want == "cuda" and not torch.cuda.is_available():
        raise RaceError(f"cell {cell.name} asks for device cuda but no GPU is visible", "remove engine.device")
    return want or ("cuda" if torch.cuda.is_available() else "cpu")


def prepare(cell: CellSpec) -> dict:
    """Everything a run needs that is cheap to check before any model loads: specs, reward,
    data, and the budget's first-step check. Raises RaceError on bad input."""
    from transformers import AutoTokenizer

    from ..accounting import step_cost_bound
    from ..accounting.specs import spec_for
    from .rewards import get_reward_system

    cell.needs_to_train()
    policy = spec_for(cell.policy)      # any family: the analytic recipe, else the traced path
    reward = get_reward_system(cell.reward.system, **dict(cell.reward.options))
    reward_model = spec_for(reward.model_path) if getattr(reward, "kind", "rule") != "rule" else None
    tokenizer = AutoTokenizer.from_pretrained(cell.tokenizer or cell.policy)
    rows, data_format = training_rows(cell.dataset)
    longest = _longest_prompt_once(cell, tokenizer, rows)
    device = _device(cell)
    engine = ("trl-vllm" if cell.engine.get("vllm_importance_sampling_correction", True) else "trl-vllm-no-is") \
        if cell.engine.get("use_vllm") else "trl" if device == "cuda" else "trl-cpu"
    settings, adapter = cell.settings(), cell.adapter()
    first = step_cost_bound(policy, adapter, settings, max_prompt_tokens=longest, engine=engine,
                            attention=cell.attention, reward_model=reward_model)
    if first > cell.budget_flops:
        raise RaceError(f"cell {cell.name}: budget {cell.budget_flops:.3e} FLOPs cannot buy one step; "
                        f"one step costs up to {first:.3e} FLOPs",
                        f"raise budget_flops to at least {first:.3e}, or shrink K, prompts_per_step or "
                        f"max_completion_tokens")
    return {"policy": policy, "reward": reward, "reward_model": reward_model, "tokenizer": tokenizer,
            "rows": rows, "data_format": data_format, "longest_prompt": longest, "device": device, "engine": engine,
            "first_step_bound": first}


def grpo_config(cell: CellSpec, out: Path, device: str, max_steps: int):
    """TRL GRPOConfig of a cell."""
    from trl import GRPOConfig

    cuda = device == "cuda"
    eng = cell.engine
    kw = dict(output_dir=str(out / CHECKPOINTS), use_cpu=not cuda, bf16=bool(eng.get("bf16", cuda)),
              per_device_train_batch_size=cell.micro_batch,
              gradient_accumulation_steps=cell.gradient_accumulation_steps,
              num_generations=cell.group_size, max_completion_length=cell.max_completion_tokens,
              num_iterations=cell.num_iterations, beta=cell.beta, learning_rate=cell.learning_rate,
              temperature=cell.temperature, seed=cell.seed, data_seed=cell.seed,
              lr_scheduler_type=eng.get("lr_scheduler", "constant"),
              gradient_checkpointing=cell.gradient_checkpointing, max_steps=max_steps,
              logging_steps=1, report_to=[], disable_tqdm=True,
              save_strategy="steps", save_steps=int(eng.get("checkpoint_every", 1)), save_total_limit=2,
              use_vllm=bool(eng.get("use_vllm", False)))
    if cell.steps_per_generation is not None:
        kw["steps_per_generation"] = cell.steps_per_generation
    if "loss_type" in eng:
        kw["loss_type"] = eng["loss_type"]
    if "max_grad_norm" in eng:
        kw["max_grad_norm"] = float(eng["max_grad_norm"])
    for key in ("vllm_mode", "vllm_importance_sampling_correction"):
        if key in eng:
            kw[key] = eng[key]
    return GRPOConfig(**kw)


_TRAINER = None


def _trainer_class():
    """GRPOTrainer whose checkpoints carry no model cards. TRL and peft render one each per
    checkpoint (Jinja compiles and package-metadata reads: ~0.15 s of a 0.2 s save on 2 cores,
    paid every step); a checkpoint is for resuming, and the adapter saved at the end keeps its card."""
    global _TRAINER
    if _TRAINER is None:
        from contextlib import ExitStack

        from trl import GRPOTrainer

        from .snapshots import _skipped

        class Trainer(GRPOTrainer):
            def _save_checkpoint(self, model, trial):
                with ExitStack() as stack:
                    for obj, name in ((self, "create_model_card"), (self.model, "create_or_update_model_card")):
                        if hasattr(obj, name):
                            stack.enter_context(_skipped(obj, name))
                    super()._save_checkpoint(model, trial)

        _TRAINER = Trainer
    return _TRAINER


def build_trainer(cell: CellSpec, out: str | os.PathLike, *, resume: bool = False, max_steps: int | None = None,
                  progress: bool = True, prep: dict | None = None):
    """(trainer, ledger, prep): a GRPOTrainer for the cell with a RaceLedger attached, ready
    to train into `out` (which must exist). Used by run_cell; tests wrap its train()."""
    import warnings

    import torch

    # transformers 5 renames gradient checkpointing every step; TRL still calls the old names.
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, PrinterCallback

    from .datasets import with_prompts
    from .trl_callback import RaceLedger

    out = Path(out)
    prep = prep or prepare(cell)
    device = prep["device"]
    dtype = torch.bfloat16 if device == "cuda" and cell.engine.get("bf16", True) else torch.float32
    attn = cell.engine.get("attn_implementation") or ("eager" if device == "cpu" else "sdpa")
    model = AutoModelForCausalLM.from_pretrained(cell.policy, dtype=dtype, attn_implementation=attn)
    peft_config = None
    if cell.lora_rank:
        from peft import LoraConfig

        peft_config = LoraConfig(r=cell.lora_rank, lora_alpha=cell.adapter().alpha,
                                 target_modules=list(cell.lora_targets), lora_dropout=0.0, task_type="CAUSAL_LM")
    data = Dataset.from_list(with_prompts(prep["rows"]))
    steps_cap = max_steps or cell.max_steps or UNLIMITED_STEPS
    trainer = _trainer_class()(model=model, reward_funcs=[prep["reward"]], args=grpo_config(cell, out, device, steps_cap),
                               train_dataset=data, processing_class=prep["tokenizer"], peft_config=peft_config)
    trainer.remove_callback(PrinterCallback)  # the ledger's bar replaces per-step log dicts
    # Resuming without a checkpoint (killed before the first one) starts at step 0: the
    # callback then moves every ledger line to ledger.discarded.jsonl.
    ledger = RaceLedger(out, budget_flops=cell.budget_flops, max_prompt_tokens=prep["longest_prompt"],
                        attention=cell.attention, engine=prep["engine"], policy=prep["policy"],
                        adapter=cell.adapter(), settings=cell.settings(), reward_model=prep["reward_model"],
                        resume=resume, progress=progress, run_spec=cell.run_spec(prep["engine"])).attach(trainer)
    if cell.engine.get("snapshot_every"):     # after the ledger: step N's line is on disk before its snapshot
        from .snapshots import Snapshots

        trainer.add_callback(Snapshots(out, int(cell.engine["snapshot_every"]), resume=resume))
    return trainer, ledger, prep


def run_cell(cell: CellSpec | str | os.PathLike, out: str | os.PathLike, *, resume: bool = False,
             max_steps: int | None = None, progress: bool = True, threads: int | None = None) -> RunResult:
    """Train a cell into `out` until its budget (or max_steps) is spent; see the module doc.

    Args: `cell`, a CellSpec or its YAML file; `out`, the run folder; `resume`, `max_steps`,
    `progress`, `threads` (torch CPU threads). Returns the RunResult (steps, FLOPs per phase,
    whether the budget stopped it, the report).
    """
    out = Path(out)
    if resume:
        saved = out / CELL_FILE
        if not saved.is_file():
            raise RaceError(f"{out} holds no run to resume ({CELL_FILE} missing)", "start it without --resume")
        cell = load_cell(saved)  # the cell as it ran, not a possibly edited copy
    elif not isinstance(cell, CellSpec):
        cell = load_cell(cell)
    if not resume and (out / "ledger.jsonl").exists():
        raise RaceError(f"{out} already holds a run", "resume it with --resume, or choose a new --out folder")
    n = threads or cell.engine.get("torch_threads")
    if n:
        import torch

        torch.set_num_threads(int(n))
    prep = prepare(cell)  # bad input fails here, before the run folder is touched
    out.mkdir(parents=True, exist_ok=True)
    if not resume:
        # The profile the device decided goes into the run's cell.yaml: `race report --spec
        # DIR/cell.yaml` then prices the ledger as it was written.
        cell = cell.with_changes(engine={**cell.engine, "profile": prep["engine"]})
        dump_cell(cell, out / CELL_FILE)
    ckpt = last_checkpoint(out) if resume else None
    trainer, ledger, prep = build_trainer(cell, out, resume=resume, max_steps=max_steps, progress=progress,
                                         prep=prep)
    try:
        trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)   # the ledger saves DIR/adapter
    finally:
        ledger.close()
    report = ledger.write_report()
    return RunResult(out=out, steps=ledger.steps, flops=dict(ledger.spent),
                     stopped_by_budget=ledger.stopped_by_budget, report=report)
