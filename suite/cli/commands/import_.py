"""`race import verl METRICS.jsonl --cell CELL` and `race import trl trainer_state.json --cell CELL`:
turn another engine's training log into the suite's ledger and report."""

from __future__ import annotations

from pathlib import Path

from suite.cli import command


@command("import", help="turn a verl or TRL training log into a RACE ledger and report (LoRA-correct FLOPs)")
def configure(p):
    p.add_argument("engine", choices=["verl", "trl"],
                   help="verl: the file logger's JSON Lines (VERL_FILE_LOGGER_PATH); "
                        "trl: a Trainer's trainer_state.json (or its checkpoint folder)")
    p.add_argument("log", metavar="LOG", help="the log file to import")
    p.add_argument("--cell", required=True,
                   help="the run description (cell YAML) the run was launched from: model, adapter, K, prompts per "
                        "step, mu, beta (the log does not say them); relative paths resolve from its own folder, "
                        "and paths that are not here (the cluster's) are not checked")
    p.add_argument("--out", help="folder for ledger.jsonl, report.json and comparison.json "
                                 "(default: race-import/ beside the log)")
    p.add_argument("--force", action="store_true", help="replace an existing ledger in --out")
    p.add_argument("--engine-version", help="engine version written into the report "
                                            "(default: verl 0.9.1; TRL: the installed trl)")
    p.add_argument("--engine-profile", default="trl", choices=["trl", "trl-vllm", "trl-cpu", "generic"],
                   help="TRL only: accounting profile of the run (trl: CUDA with Triton, the default; trl-vllm: "
                        "use_vllm, vLLM generation with prefix caching; trl-cpu: no Triton; generic: useful work only)")
    p.add_argument("--peak-tflops", type=float, default=989.0,
                   help="verl only: device peak in TFLOP/s used to turn perf/mfu/actor into FLOPs "
                        "(default 989: H100/H200 dense bf16, verl's own table)")
    return run


def _never_over_inputs(args) -> None:
    """The import's outputs are never its log or its cell (issue 29: never clobber)."""
    from suite.outputs import output_file

    out = Path(args.out) if args.out else Path(args.log).resolve().parent / "race-import"
    for name in ("ledger.jsonl", "report.json", "comparison.json"):
        output_file(out / name, inputs=[args.log, Path(args.log) / "trainer_state.json", args.cell], what="--out")


def run(args) -> int:
    _never_over_inputs(args)
    from suite.integrations import importers
    from suite.record.report import Report
    from suite.train.cell import load_cell

    cell = load_cell(args.cell, check_paths=False)
    out = Path(args.out) if args.out else Path(args.log).resolve().parent / "race-import"
    if args.engine == "verl":
        res = importers.import_verl(args.log, cell, out, engine_version=args.engine_version or "0.9.1",
                                    force=args.force, peak_tflops=args.peak_tflops)
    else:
        res = importers.import_trl(args.log, cell, out, engine_version=args.engine_version,
                                   engine_profile=args.engine_profile, force=args.force)
    report = Report(res.doc, str(res.report))
    print(f"imported {report.steps} step(s) of {cell.name}: total {report.total_flops:.4g} FLOPs, "
          f"update share p = {report.update_share:.3f}")
    print(res.comparison.table())
    print(f"wrote {res.ledger}, {res.report}, {res.comparison_path}")
    return 0
