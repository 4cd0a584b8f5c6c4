"""`race import NAME LOG --cell CELL`: turn another engine's training log into the suite's ledger
and report. NAME is a `logs` entry of an engine file (tasks/engines/*.yaml), read by its format's
importer (suite.integrations.keymaps.import_log), or `auto`: the entry the file's format and keys
point at (suite.integrations.choose); the names and profiles come from the registry."""

from __future__ import annotations

from pathlib import Path

from suite.cli import command
from suite.cli.args import add_engine_profile, add_out


@command("import", help="turn another engine's training log into a RACE ledger and report (LoRA-correct FLOPs)")
def configure(p):
    from suite.integrations.keymaps import KEY_MAPS

    logs = "; ".join(f"{n}: {getattr(KEY_MAPS[n], 'logger', '')}" for n in sorted(KEY_MAPS))
    p.add_argument("engine", metavar="ENGINE",
                   help=f"the engine, named by the log it wrote (its accounting profile is --engine-profile): auto: "
                        f"recognise the engine and the format from the file (console output, JSON Lines, CSV, "
                        f"TensorBoard events, a wandb run folder), or say in one line what it saw; or the log's kind, "
                        f"a `logs` entry of an engine file (tasks/engines/*.yaml; docs/import.md; an entry's engine "
                        f"reads its other formats too): {logs}; or `map` with --key-map FILE for a map of your own")
    p.add_argument("log", metavar="LOG", help="the log file (or TensorBoard / wandb run folder) to import")
    p.add_argument("--cell", required=True,
                   help="the run description (cell YAML) the run was launched from: model, adapter, K, prompts per "
                        "step, mu, beta (the log does not say them); relative paths resolve from its own folder, "
                        "and paths that are not here (the cluster's) are not checked")
    add_out(p, metavar="DIR",
            help="folder for ledger.jsonl, report.json and comparison.json "
                 "(default: race-import/ beside the log)")
    p.add_argument("--force", action="store_true", help="replace an existing ledger in --out")
    p.add_argument("--key-map", metavar="FILE", help="a key map YAML of your own (schemas/keymap-v1.schema.json): "
                                                     "which logged keys give tokens, steps and phase seconds")
    p.add_argument("--engine-version", help="the engine version that wrote the log, written into the report "
                                            "(default: the log entry's `version`; TRL: the installed trl); keys "
                                            "renamed between versions and keys whose meaning changed (SkyRL's "
                                            "generate/*_num_tokens) are read only where it is given")
    add_engine_profile(p, what="accounting profile of the run, one of its engine's own (WORK-008)",
                       default_text="the log entry's `profile`")
    p.add_argument("--power", metavar="DIR", default=None,
                   help="mlperf only: the run's power folder (power/result_N with node_*.txt MLLOG power logs): their "
                        "energy, integrated as MLPerf's result summarizer does, goes into the report's cost.energy")
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
    from suite.integrations.choose import choose
    from suite.integrations.keymaps import COMPARED, as_key_map, import_log, load_key_map, refuse_critic
    from suite.record.report import Report
    from suite.train.cell import load_cell

    km = as_key_map(load_key_map(args.key_map) if args.key_map else choose(args.engine, args.log))
    refuse_critic(args.log, km)     # before the cell: a PPO run's description need not describe a GRPO run
    from suite.integrations import mlperf_power

    if args.power and km.format != mlperf_power.LOG_FORMAT:
        from suite.errors import RaceError

        raise RaceError("--power goes with race import mlperf", "MLPerf power logs belong to an MLPerf run's log")
    cell = load_cell(args.cell, check_paths=False)
    out = Path(args.out) if args.out else Path(args.log).resolve().parent / "race-import"
    if args.engine == "auto" or km.name != args.engine:
        print(f"read {args.log} as {km.engine}'s '{km.name}' log (format {km.format})")
    options = {"peak_tflops": args.peak_tflops} if km.format == "verl-jsonl" else {}
    res = import_log(km, args.log, cell, out, engine_version=args.engine_version, engine_profile=args.engine_profile,
                     force=args.force, **options)
    if args.power:
        from suite.record.energy import describe
        from suite.record.report import read_report

        mlperf_power.attach_power(res.report, args.power)
        print(describe(read_report(res.report).doc["cost"]["energy"]))
    report = Report(res.doc, str(res.report))
    print(f"imported {report.steps} step(s) of {cell.name}: total {report.total_flops:.4g} FLOPs, "
          f"update share p = {report.update_share:.3f}")
    if km.format in COMPARED:
        print(res.comparison.table())
    else:
        print(phase_table(report))
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
