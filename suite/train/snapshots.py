"""Adapter snapshots along a run: what `race eval --curve` scores, so a run yields a curve of
scores against its cumulative training FLOPs instead of one number at its end.

    from suite.train.snapshots import Snapshots
    trainer.add_callback(Snapshots("runs/my-run", every=10))   # after RaceLedger.attach(trainer)

Every `every` optimizer steps the trained adapter (the whole model for full fine-tuning, with
its tokenizer) is saved to DIR/snapshots/step-N/. These are not the resumable checkpoints
(DIR/checkpoints/ keeps the last two, with optimizer state): a snapshot holds only what an
evaluation loads, and all of them are kept. Added after the ledger callback, the ledger line of
step N is on disk before snapshot N, so a snapshot's FLOPs are always in the ledger.

Crash safety: a snapshot is written to a temporary folder and renamed into place, so a folder
named step-N is complete. On resume from checkpoint c, snapshots after step c are removed
(their steps run again, as their ledger lines move to ledger.discarded.jsonl).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from transformers import TrainerCallback

from ..errors import RaceError

SNAPSHOTS_DIR = "snapshots"
"""The snapshots' folder inside a run folder."""
_NAME = re.compile(r"step-(\d+)")


def snapshot_dir(run_dir: str | os.PathLike, step: int) -> Path:
    """RUN_DIR/snapshots/step-N."""
    return Path(run_dir) / SNAPSHOTS_DIR / f"step-{int(step)}"


def snapshots(run_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, folder) of every complete snapshot of a run, by step."""
    d = Path(run_dir) / SNAPSHOTS_DIR
    found = []
    for c in d.iterdir() if d.is_dir() else ():
        m = _NAME.fullmatch(c.name)
        if m and c.is_dir():
            found.append((int(m.group(1)), c))
    return sorted(found)


class _skipped:
    """`obj.name` is a no-op inside the block (an instance attribute shadowing the method): TRL
    and peft render a model card on every save (~0.15 s of a 0.2 s save on 2 cores)."""

    def __init__(self, obj, name: str):
        self.obj, self.name = obj, name

    def __enter__(self):
        setattr(self.obj, self.name, lambda *args, **kwargs: None)

    def __exit__(self, *exc):
        delattr(self.obj, self.name)


def save_without_card(model, folder: Path) -> None:
    """model.save_pretrained(folder) without peft's model card."""
    if hasattr(model, "create_or_update_model_card"):
        with _skipped(model, "create_or_update_model_card"):
            model.save_pretrained(folder)
    else:
        model.save_pretrained(folder)


class Snapshots(TrainerCallback):
    """Save the trained adapter every `every` optimizer steps into DIR/snapshots/step-N/ (see the
    module docstring). `resume`: this run continues from a checkpoint; later snapshots go."""

    def __init__(self, out_dir: str | os.PathLike, every: int, *, resume: bool = False):
        if int(every) < 1:
            raise RaceError(f"snapshot every {every} optimizer steps: must be a positive integer",
                            "engine.snapshot_every: 10 keeps the adapter every 10 steps")
        self.out_dir, self.every, self.resume = Path(out_dir), int(every), resume
        self.saved: list[int] = []

    @property
    def folder(self) -> Path:
        """DIR/snapshots."""
        return self.out_dir / SNAPSHOTS_DIR

    def on_train_begin(self, args, state, control, **kwargs):
        """Remove half-written snapshots, and on resume those after the checkpoint's step."""
        for c in self.folder.glob("*.tmp") if self.folder.is_dir() else ():
            shutil.rmtree(c, ignore_errors=True)
        for step, path in snapshots(self.out_dir):
            if self.resume and step > state.global_step:
                shutil.rmtree(path)

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        """Every `every` steps: the adapter (or model) and, for a full model, its tokenizer."""
        step = state.global_step
        if step % self.every or model is None or not state.is_world_process_zero:
            return
        final = snapshot_dir(self.out_dir, step)
        tmp = final.with_name(final.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        save_without_card(model, tmp)
        if processing_class is not None and not (tmp / "adapter_config.json").is_file():
            processing_class.save_pretrained(tmp)     # a full model is loaded with its own tokenizer
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        self.saved.append(step)


__all__ = ["Snapshots", "SNAPSHOTS_DIR", "snapshot_dir", "snapshots", "save_without_card"]
