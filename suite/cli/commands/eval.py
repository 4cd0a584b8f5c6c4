"""`race eval`: score a run's adapter (or a base model) through lm-eval on the RACE targets with
pass@1, the common process judge and the run's native reward."""

from __future__ import annotations


from suite.cli import command
from suite.cli.args import add_out
from suite.errors import RaceError


@command("eval", help="evaluate a run's adapter (or a base model) with lm-eval: pass@1, process judge, native reward")
def configure(p):
    from suite.evaluate.harness import BACKENDS
    from suite.evaluate.targets import DEFAULT_TARGETS, TARGETS

    p.add_argument("run_dir", nargs="?", metavar="RUN_DIR",
                   help="run folder written by `race run` (report.json, adapter/, cell.yaml); the evaluations "
                        "are written into RUN_DIR/report.json and lm-eval's per-sample logs into RUN_DIR/eval/")
    p.add_argument("--base", metavar="MODEL",
                   help="score this base model folder without an adapter (the reference row) instead of a run; "
                        "needs --out")
    add_out(p, metavar="DIR",
            help="with --base: folder for evaluations.json and the per-sample logs (DIR/eval/)")
    p.add_argument("--targets", nargs="+", default=list(DEFAULT_TARGETS), metavar="TARGET",
                   help="targets to score (default: %(default)s); known: "
                        + "; ".join(f"{t.name} ({t.description})" for t in TARGETS.values()))
    p.add_argument("--limit", type=int, metavar="N",
                   help="score only the first N problems of each target (quick checks; the rows are then "
                        "named TARGET:first-N)")
    p.add_argument("--curve", action="store_true",
                   help="also score the run along the way: the policy before training and every adapter snapshot "
                        "the run kept (cell engine.snapshot_every), on the first --curve-limit problems of each "
                        "target, each stamped with the ledger's cumulative FLOPs per phase (report `curve`; fitted "
                        "by `race curves`)")
    p.add_argument("--curve-limit", type=int, metavar="N",
                   help="problems per target at each point along the run (default 100; the end is scored on "
                        "all, or --limit)")
    p.add_argument("--backend", choices=BACKENDS, default="hf",
                   help="hf: transformers with the peft adapter (default); vllm: vLLM with lora_local_path "
                        "(GPU, optional extra: pip install vllm)")
    p.add_argument("--judge", metavar="PRM_DIR",
                   help="process-judge PRM folder (default: the embedded tasks/arith/models/prm; real-data "
                        "targets need one, e.g. Qwen2.5-Math-PRM-7B). Compare only scores from the same judge")
    p.add_argument("--model", metavar="MODEL_DIR",
                   help="with RUN_DIR: the base model folder, when the run's policy path does not resolve here")
    p.add_argument("--native-reward", metavar="SYSTEM",
                   help="reward system to report as native_reward (sparse, structured, dense, proxy_prm, prm; orm: "
                        "a sequence-classification reward model, e.g. a TRL user's own; none: no native reward): "
                        "for a run it replaces the run's own (e.g. a run trained with your own reward function, "
                        "which the suite cannot rerun)")
    p.add_argument("--native-reward-model", metavar="DIR",
                   help="reward-model folder of a model-based --native-reward (a sequence classifier folder alone "
                        "means --native-reward orm); checked before anything is generated")
    p.add_argument("--data-dir", metavar="DIR",
                   help="local copies of the real data sets (DIR/gsm8k/test.jsonl, DIR/math500/test.jsonl; "
                        "default $RACE_DATA_DIR); without one they are downloaded from the hub when online")
    p.add_argument("--batch-size", type=int, default=64, metavar="N",
                   help="generation batch size of the HF backend (default: %(default)s)")
    p.add_argument("--device", default="cpu", help="torch device for generation and the judge (default: %(default)s)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="torch CPU threads (default: torch's choice)")
    return run


def run(args) -> int:
    from suite.evaluate import runs
    from suite.evaluate import targets

    for t in args.targets:
        targets.target(t)  # unknown target: one line before anything loads
    for flag, v in (("--limit", args.limit), ("--curve-limit", args.curve_limit)):
        if v is not None and v < 1:
            raise RaceError(f"{flag} must be a positive integer, got {v}")
    if (args.curve or args.curve_limit) and not args.run_dir:
        raise RaceError("--curve scores a run's snapshots; it needs RUN_DIR", "race eval runs/cell-1 --curve")
    if bool(args.run_dir) == bool(args.base):
        raise RaceError("give either RUN_DIR or --base MODEL", "race eval runs/cell-1   or   race eval --base MODEL --out DIR")
    if args.base and not args.out:
        raise RaceError("--base needs --out DIR", "the reference row is written to DIR/evaluations.json")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.curve or args.curve_limit:
        from suite.evaluate.curve import points_to_score

        points_to_score(args.run_dir)   # a run that kept no snapshots: one line before the end is scored
    common = dict(targets=args.targets, limit=args.limit, backend=args.backend, judge=args.judge,
                  data_dir=args.data_dir, batch_size=args.batch_size, device=args.device)
    if args.base:
        doc = runs.evaluate_base(args.base, args.out, native_reward=args.native_reward,
                               native_reward_model=args.native_reward_model, **common)
        rows, where = doc["evaluations"], f"{args.out}/evaluations.json"
    else:
        rows = runs.evaluate_run(args.run_dir, model=args.model, native_reward=args.native_reward,
                                 native_reward_model=args.native_reward_model, **common)
        where = f"{args.run_dir}/report.json"
    _print(rows)
    print(f"wrote {len(rows)} evaluations to {where}")
    if args.curve or args.curve_limit:
        from suite.evaluate.curve import DEFAULT_LIMIT, evaluate_curve

        def shown(step, got):
            print(f"step {step}: " + ", ".join(f"{r['target']} {r['metric']} {r['value']:.3f}" for r in got
                                                if r["metric"] != "native_reward"))

        points = evaluate_curve(args.run_dir, args.targets, args.curve_limit or DEFAULT_LIMIT, model=args.model,
                                native_reward=args.native_reward, native_reward_model=args.native_reward_model,
                                progress=shown, **{k: v for k, v in common.items() if k not in ("targets", "limit")})
        print(f"curve: {len(points)} points along the run (steps {', '.join(str(p['step']) for p in points)}) in {where}; "
              f"fit them with `race curves {args.run_dir}`")
    return 0


def _print(rows: list[dict]) -> None:
    for r in rows:
        err = f" ± {r['stderr']:.3f}" if r.get("stderr") is not None else ""
        print(f"{r['target']:<28} {r['metric']:<14} {r['value']:.3f}{err}  n={r['n']}  "
              f"eval FLOPs {r['compute']['flops']:.3e}")
