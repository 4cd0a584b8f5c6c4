"""`race run CELL --out DIR [--resume] [--max-steps N]`: train a cell with the live ledger;
`race run CELL --plan`: check it and say what a step costs, training nothing."""

from __future__ import annotations

import sys

from .. import command
from ..args import add_out
from ...errors import RaceError


@command("run", help="Train a GRPO cell (TRL GRPOTrainer) and write its live ledger, adapter and report.")
def configure(p):
    p.add_argument("cell", metavar="CELL", nargs="?", default=None,
                   help="cell YAML file (e.g. tasks/cells/s-sparse.yaml); optional with --resume, "
                        "which reads DIR/cell.yaml")
    add_out(p, metavar="DIR", default=None,
            help="run folder: cell.yaml, ledger.jsonl, checkpoints/, adapter/, report.json "
                 "(default: runs/<cell name>)")
    p.add_argument("--resume", metavar="DIR", nargs="?", const=True, default=None,
                   help="continue the run in DIR (or in --out) from its last checkpoint; ledger lines after "
                        "that checkpoint move to ledger.discarded.jsonl so no step is counted twice")
    p.add_argument("--max-steps", type=int, metavar="N", default=None,
                   help="stop after N optimizer steps in all (counting steps before a resume) even if budget "
                        "is left")
    p.add_argument("--threads", type=int, metavar="N", default=None,
                   help="torch CPU threads (default: the cell's engine.torch_threads, else torch's choice)")
    p.add_argument("--plan", action="store_true",
                   help="check the cell (policy, data, reward system, budget) and print what it would run and "
                        "what one step costs at most; nothing is trained or written")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (FLOPs spent of the budget and the phase split)")
    return run


def run(args) -> int:
    from pathlib import Path

    resume_dir = args.resume if isinstance(args.resume, str) else None
    out = resume_dir or args.out
    if args.resume and not out:
        raise RaceError("--resume needs the run folder", "race run --resume DIR (or CELL --out DIR --resume)")
    if not args.resume and not args.cell:
        raise RaceError("no cell given", "race run CELL --out DIR; reference cells are in tasks/cells/")
    if args.max_steps is not None and args.max_steps < 1:
        raise RaceError(f"--max-steps must be >= 1, got {args.max_steps}")
    if args.plan:
        if args.resume:
            raise RaceError("--plan checks a new cell", "drop --resume")
        return plan(args.cell)
    if not out:
        out = str(Path("runs") / Path(args.cell).stem)

    from ...train.run import run_cell

    res = run_cell(args.cell, out, resume=bool(args.resume), max_steps=args.max_steps,
                   progress=not args.no_progress, threads=args.threads)
    f = res.flops
    tot = sum(f.values()) or 1
    why = "budget reached" if res.stopped_by_budget else "step cap or data end"
    print(f"{res.out}: {res.steps} steps, {tot:.3e} FLOPs (rollout {f['rollout'] / tot:.1%}, update "
          f"{f['update'] / tot:.1%}, reward {f['reward'] / tot:.1%}); {why}; report {res.report}",
          file=sys.stdout)
    from ...record.energy import run_line
    from ...record.report import read_report

    print(run_line(res.out, read_report(res.report, check=False).doc), file=sys.stdout)
    return 0


def plan(cell_file: str) -> int:
    """Print what `race run` would do with the cell (everything it checks before a model loads)."""
    from ...train.cell import load_cell
    from ...train.run import prepare

    cell = load_cell(cell_file)
    prep = prepare(cell)
    reward, bound = prep["reward"], prep["first_step_bound"]
    kind = getattr(reward, "kind", "rule")
    charged = f"its model {reward.model_path} charged per scored token" if kind != "rule" else "0 FLOPs"
    adapter = f"LoRA r={cell.lora_rank}" if cell.lora_rank else "full fine-tuning"
    print(f"cell {cell.name}: policy {prep['policy'].name} ({prep['policy'].params_total:,} parameters), {adapter}, "
          f"K={cell.group_size} x {cell.prompts_per_step} prompts, up to {cell.max_completion_tokens} tokens, "
          f"mu={cell.num_iterations}")
    print(f"data: {cell.dataset} ({len(prep['rows']):,} problems, format {prep['data_format']}; longest prompt "
          f"{prep['longest_prompt']} tokens)")
    print(f"reward: {cell.reward.system} ({kind}, {charged})")
    print(f"engine profile: {prep['engine']} (device {prep['device']}), attention {cell.attention}")
    print(f"one step costs at most {bound:.4g} FLOPs: the budget {cell.budget_flops:.4g} buys at least "
          f"{cell.budget_flops // bound:,} steps" + (f" (capped at {cell.max_steps})" if cell.max_steps else ""))
    print("planned only: nothing was trained (race run CELL --out DIR runs it)")
    return 0
