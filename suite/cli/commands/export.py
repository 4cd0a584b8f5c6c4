"""`race export verl CELL`: print the verl launch command for a cell."""

from __future__ import annotations

import sys
from pathlib import Path

from suite.cli import command
from suite.cli.args import add_side_output


@command("export", help="print the launch command that runs a cell on another engine (verl)")
def configure(p):
    from suite.integrations import verl as exporter   # the one exporter: its engine is the only choice

    p.add_argument("engine", choices=[exporter.ENGINE], help=f"target engine: {exporter.ENGINE} ({exporter.ENTRY})")
    p.add_argument("cell", metavar="CELL", help="the run description, a cell YAML (tasks/cells/*.yaml); relative "
                   "paths resolve from its own folder, and paths that are not here are passed on unchecked: they must "
                   "exist where verl runs")
    p.add_argument("--model-path", help="policy folder or hub id on the cluster (default: the cell's policy)")
    p.add_argument("--train-files", help="verl-format parquet of training prompts (default: the cell's dataset "
                   "with a .parquet suffix)")
    p.add_argument("--val-files", help="verl-format parquet for validation (default: the training files)")
    p.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (trainer.n_gpus_per_node; default 8)")
    p.add_argument("--nodes", type=int, default=1, help="nodes (trainer.nnodes; default 1)")
    p.add_argument("--rollout-tp", type=int, default=1,
                   help="vLLM tensor-parallel size of the rollout (default 1: a 1.5B-7B policy fits one GPU)")
    p.add_argument("--max-prompt-length", type=int, default=1024,
                   help="longest prompt in tokens (data.max_prompt_length; default 1024)")
    p.add_argument("--metrics", default="metrics.jsonl",
                   help="where verl's file logger writes its JSON Lines (VERL_FILE_LOGGER_PATH; default "
                        "metrics.jsonl), the input of `race import verl`")
    p.add_argument("--check", action="store_true",
                   help="also compose the overrides against verl's packaged config with Hydra (needs the "
                        "verl extra: pip install -e '.[verl]' and pip install --no-deps verl==0.9.1)")
    add_side_output(p, "--write-data", metavar="DIR",
                    help="also convert the cell's dataset (found here) into verl's RL parquet format as "
                         "DIR/train.parquet and point data.train_files/val_files at it (unless given)")
    p.add_argument("--overrides-only", action="store_true",
                   help="print one Hydra override per line instead of the shell command")
    return run


def run(args) -> int:
    from suite.integrations import verl
    from suite.train.cell import load_cell

    cell = load_cell(args.cell, check_paths=False)
    if args.write_data:
        src = Path(cell.dataset)
        if not src.is_absolute() and cell.source and (Path(cell.source).parent / src).exists():
            src = Path(cell.source).parent / src
        dest = Path(args.write_data) / "train.parquet"
        n = verl.write_dataset(src, dest)
        print(f"# wrote {n} rows to {dest}", file=sys.stderr)
        args.train_files = args.train_files or str(dest.resolve())
    cluster = verl.Cluster(n_gpus_per_node=args.gpus_per_node, nnodes=args.nodes, rollout_tp=args.rollout_tp)
    overrides = verl.launch_overrides(cell, model_path=args.model_path, train_files=args.train_files,
                                      val_files=args.val_files, cluster=cluster,
                                      max_prompt_length=args.max_prompt_length)
    if args.check:
        verl.compose(overrides)
        print(f"# composed against verl {verl.installed_version()}'s {verl.CONFIG_NAME} config: "
              f"{len(overrides)} overrides accepted", file=sys.stderr)
    if args.overrides_only:
        print("\n".join(overrides))
    else:
        print(verl.launch_command(overrides, args.metrics))
    return 0
