"""`race import verl METRICS.jsonl --cell CELL` and `race import trl trainer_state.json --cell CELL`:
turn another engine's training log into the suite's ledger and report."""

from __future__ import annotations

from pathlib import Path

from suite.cli import command


@command("import", help="turn a verl or TRL training log into a RACE ledger and report (LoRA-correct FLOPs)")
def configure(p):
    p.add_argument("engine", metavar="ENGINE",
                   help="auto: recognise the engine and the format from the file (console output, JSON Lines, CSV, "
                        "TensorBoard events, a wandb run folder) and say what it saw when it cannot; "
                        "verl: the file logger's JSON Lines (VERL_FILE_LOGGER_PATH) or verl's console output; "
                        "trl: a Trainer's trainer_state.json (or its checkpoint folder); "
                        "mlperf: an MLPerf Training GRPO log (:::MLLOG lines, NeMo-RL's qwen35_397b_grpo); "
                        "or the name of a key map (tasks/engines/*.yaml: nemo-rl, prime-rl, slime, skyrl, openrlhf, "
                        "roll, areal, and their *-console maps) for a metric log: the engine's console, JSON Lines, CSV, TensorBoard "
                        "events or a wandb run folder (docs/import.md); `map` with --key-map FILE for your own")
    p.add_argument("log", metavar="LOG", help="the log file (or TensorBoard / wandb run folder) to import")
    p.add_argument("--cell", required=True,
                   help="the run description (cell YAML) the run was launched from: model, adapter, K, prompts per "
                        "step, mu, beta (the log does not say them); relative paths resolve from its own folder, "
                        "and paths that are not here (the cluster's) are not checked")
    p.add_argument("--out", help="folder for ledger.jsonl, report.json and comparison.json "
                                 "(default: race-import/ beside the log)")
    p.add_argument("--force", action="store_true", help="replace an existing ledger in --out")
    p.add_argument("--key-map", metavar="FILE", help="a key map YAML of your own (schemas/keymap-v1.schema.json): "
                                                     "which logged keys give tokens, steps and phase seconds")
    p.add_argument("--engine-version", help="engine version that wrote the log, written into the report "
                                            "(default: verl 0.9.1; TRL: the installed trl). Keys whose meaning "
                                            "changed between versions (SkyRL's generate/*_num_tokens) and renamed "
                                            "keys are read only where it is given")
    p.add_argument("--engine-profile", default="trl", choices=["trl", "trl-vllm", "trl-vllm-no-is", "trl-cpu", "generic"],
                   help="TRL only: accounting profile of the run (trl: CUDA with Triton, the default; trl-vllm: "
                        "use_vllm, vLLM generation with prefix caching and the old-policy forward of TRL's default "
                        "importance-sampling correction; trl-vllm-no-is: the same with "
                        "vllm_importance_sampling_correction=False; trl-cpu: no Triton; generic: useful work only)")
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

    engine = args.engine
    km = None
    if args.key_map:
        from suite.integrations.keymaps import load_key_map

        km = load_key_map(args.key_map)
    else:
        from suite.integrations.choose import choose

        engine, km = choose(args.engine, args.log)
    if km is not None:
        from suite.integrations.keymaps import refuse_critic

        refuse_critic(args.log, km)     # before the cell: a PPO run's cell need not describe a GRPO run
    cell = load_cell(args.cell, check_paths=False)
    out = Path(args.out) if args.out else Path(args.log).resolve().parent / "race-import"
    if km is not None:
        from suite.integrations.keymaps import import_metric_log

        res = import_metric_log(args.log, km, cell, out, engine_version=args.engine_version, force=args.force)
        print(f"read {args.log} under key map '{km.name}' ({km.engine}, format {km.format})")
    elif engine == "mlperf":
        from suite.integrations.mlperf import import_mlperf

        res = import_mlperf(args.log, cell, out, engine_version=args.engine_version or "0.6.0", force=args.force)
    elif engine == "verl":
        res = importers.import_verl(args.log, cell, out, engine_version=args.engine_version or "0.9.1",
                                    force=args.force, peak_tflops=args.peak_tflops)
    else:
        res = importers.import_trl(args.log, cell, out, engine_version=args.engine_version,
                                   engine_profile=args.engine_profile, force=args.force)
    report = Report(res.doc, str(res.report))
    print(f"imported {report.steps} step(s) of {cell.name}: total {report.total_flops:.4g} FLOPs, "
          f"update share p = {report.update_share:.3f}")
    if engine not in ("verl", "trl") or args.key_map or km is not None:
        print(phase_table(report))
    else:
        print(res.comparison.table())
    print(f"wrote {res.ledger}, {res.report}, {res.comparison_path}")
    return 0


def phase_table(report) -> str:
    """Per phase: FLOPs, wall seconds, achieved FLOP/s and the utilization it implies on the
    report's hardware (count x peak); rollout seconds of an asynchronous engine are only the
    exposed part."""
    from suite.accounting.utilization import achieved

    flops, secs, hw = report.flops, report.seconds, report.hardware
    rates = achieved(flops, secs)
    lines = [f"{'phase':8} {'FLOPs':>12} {'seconds':>10} {'FLOP/s':>12} {'utilization':>12}"]
    for ph in ("rollout", "update", "reward", "total"):
        s = sum(secs.get(x, 0.0) for x in ("rollout", "update", "reward")) if ph == "total" else secs.get(ph)
        r = rates.get(ph)
        u = r / (hw.peak_flops * hw.count) if r and hw else None
        lines.append(f"{ph:8} {flops[ph]:12.4g} {'-' if s is None else f'{s:10.1f}':>10} "
                     f"{'-' if r is None else f'{r:.4g}':>12} {'-' if u is None else f'{u:.3%}':>12}")
    if hw:
        lines.append(f"implied utilization of {hw.count} x {hw.accelerator} over the training wall time: "
                     f"{hw.utilization(report.total_flops):.3%}")
    return "\n".join(lines)
