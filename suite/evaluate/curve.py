"""Scores along a run: the policy before training and every adapter snapshot a run kept
(suite.train.snapshots) scored on a fixed subset of each target, each point stamped with the
ledger's cumulative training FLOPs per phase at its step, written into the report's `curve`
(schema 1.2). The run's end is the report's own `evaluations`, on all problems.

    race run cell.yaml --out runs/a            # the cell sets engine.snapshot_every: 10
    race eval runs/a                           # the end, all problems
    race eval runs/a --curve --curve-limit 100 # step 0 and every snapshot, first 100 problems

The subset is the first `limit` problems (doc ids 0..limit-1, lm-eval's `limit`), the same at
every point, so the points of one curve (and of every run scored alike) are paired problem by
problem. Per-sample logs go to RUN_DIR/eval/curve/step-N/, where suite.analysis.evidence reads
them. Resumable: each point is written into the report as soon as it is scored, and points
already there are skipped.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import RaceError
from .targets import DEFAULT_TARGETS, result_name, target

#: Problems per target scored at every point unless told otherwise.
DEFAULT_LIMIT = 100
#: Per-sample logs of the points, under RUN_DIR/eval/.
CURVE_DIR = "curve"


def point_dir(run_dir: str | Path, step: int) -> Path:
    """RUN_DIR/eval/curve/step-N: the per-sample logs of one point."""
    return Path(run_dir) / "eval" / CURVE_DIR / f"step-{int(step)}"


def cumulative_flops(ledger_path: Path, steps: list[int]) -> dict[int, dict[str, int]]:
    """step -> the ledger's FLOPs per phase (and total) summed over the records up to and
    including that step, for each step asked (0 -> all zeros)."""
    from ..accounting import PHASES
    from ..record.ledger import iter_ledger

    want = sorted(set(steps))
    out: dict[int, dict[str, int]] = {}
    acc = dict.fromkeys(PHASES, 0)
    i = 0
    while i < len(want) and want[i] <= 0:
        out[want[i]] = {**acc, "total": 0}
        i += 1
    for rec in iter_ledger(ledger_path):
        if i < len(want) and want[i] < rec["step"]:
            raise RaceError(f"{ledger_path} has no record of step {want[i]}, which a snapshot was saved at",
                            "the snapshots belong to another run; remove RUN_DIR/snapshots/ or retrain")
        for k in PHASES:
            acc[k] += int(rec["flops"][k])
        if i < len(want) and rec["step"] == want[i]:
            out[want[i]] = {**acc, "total": sum(acc.values())}
            i += 1
    if i < len(want):
        raise RaceError(f"{ledger_path} ends before step {want[i]}, which a snapshot was saved at",
                        "the snapshots belong to another run; remove RUN_DIR/snapshots/ or retrain")
    return out


def _every(run_dir: Path, steps: list[int]) -> int:
    """The cell's engine.snapshot_every, else the first snapshot's step."""
    if (run_dir / "cell.yaml").is_file():
        from ..train.cell import load_cell

        every = load_cell(run_dir / "cell.yaml", check_paths=False).engine.get("snapshot_every")
        if every:
            return int(every)
    return steps[0] if steps else 1


def _done(doc: dict, step: int, labels: set[str]) -> bool:
    """Whether the report's curve already holds pass@1 for every target at this step."""
    for p in (doc.get("curve") or {}).get("points") or []:
        if p.get("step") == step:
            return labels <= {r.get("target") for r in p.get("evaluations") or [] if r.get("metric") == "pass@1"}
    return False


def points_to_score(run_dir: str | Path):
    """(report, [(step, snapshot folder)]) of a run whose curve can be scored: a 1.2 report with
    a ledger and kept snapshots (those before its last step; the last step is the run's end).
    RaceError naming what is missing otherwise, before any model loads."""
    from ..record.report import read_report
    from ..train.snapshots import snapshots

    run_dir = Path(run_dir)
    report_path = run_dir / "report.json"
    if not report_path.is_file():
        raise RaceError(f"run folder {run_dir} has no report.json", "pass a folder written by `race run`")
    rep = read_report(report_path)
    if rep.doc.get("schema_version") in ("1.0", "1.1"):
        raise RaceError(f"{report_path} is a schema {rep.doc['schema_version']} report; curve points need 1.2",
                        "rerun the cell with this suite (race run) to get a 1.2 report with snapshots")
    if not rep.ledger:
        raise RaceError(f"{report_path} has no ledger: a curve's points are stamped from the ledger's FLOPs",
                        "score a run trained with `race run` or the RaceLedger callback")
    kept = snapshots(run_dir)
    if not kept:
        raise RaceError(f"run {run_dir} kept no snapshots ({run_dir}/snapshots/ is empty or missing)",
                        "train it with engine.snapshot_every: N in the cell (race grid/study: eval.curve.every)")
    return rep, [(s, p) for s, p in kept if 0 < s < rep.steps]


def curve_done(run_dir: str | Path, targets, limit: int | None) -> bool:
    """Whether the report of `run_dir` holds a point, on this subset of every target, for step 0
    and for every snapshot before its last step. A run whose snapshots were removed once scored
    (an exported study keeps reports only) is held to its curve's own `every`."""
    try:
        rep, snaps = points_to_score(run_dir)
        steps = [0, *(s for s, _ in snaps)]
    except RaceError:
        from ..record.report import read_report

        try:
            rep = read_report(Path(run_dir) / "report.json", check=False)
        except RaceError:
            return False
        every = (rep.doc.get("curve") or {}).get("every")
        if not every:
            return False
        steps = range(0, rep.steps, every)
    labels = {result_name(t, min(limit or target(t).size, target(t).size)) for t in targets}
    return (rep.doc.get("curve") or {}).get("limit", limit) == limit and all(_done(rep.doc, s, labels) for s in steps)


def evaluate_curve(run_dir: str | Path, targets=DEFAULT_TARGETS, limit: int | None = DEFAULT_LIMIT, *,
                   backend: str = "hf", model: str | None = None, judge: str | None = None,
                   data_dir: str | None = None, batch_size: int = 64, device: str = "cpu",
                   native_reward: str | None = None, native_reward_model: str | None = None,
                   progress=None) -> list[dict]:
    """Score step 0 (the base policy) and every snapshot before the run's last step on the first
    `limit` problems of each target (None: all) with the metrics of suite.evaluate.harness,
    writing each point into RUN_DIR/report.json's `curve` as it is scored (see the module doc).
    Returns the report's curve points."""
    from ..record.report import update_report
    from .harness import EvalConfig, evaluate
    from .runs import check_valid, run_models

    run_dir = Path(run_dir)
    report_path = run_dir / "report.json"
    if limit is not None and limit < 1:
        raise RaceError(f"--curve-limit must be a positive integer, got {limit}")
    rep, snaps = points_to_score(run_dir)
    ledger = rep.ledger
    base, system, reward_model = run_models(run_dir, native_reward, native_reward_model, model)
    for t in targets:
        target(t)
    labels = {result_name(t, min(limit or target(t).size, target(t).size)) for t in targets}
    stamps = cumulative_flops((run_dir / ledger["path"]).resolve(), [0, *(s for s, _ in snaps)])
    every = _every(run_dir, [s for s, _ in snaps])
    fresh = (rep.doc.get("curve") or {}).get("limit", limit) != limit   # another subset: score every point again
    for step, folder in [(0, None), *snaps]:
        if not fresh and _done(rep.doc, step, labels):
            continue
        full = folder is not None and (folder / "config.json").is_file() and not (folder / "adapter_config.json").is_file()
        config = EvalConfig(model=str(folder if full else base), adapter=str(folder) if folder and not full else None,
                            targets=tuple(targets), limit=limit, backend=backend, judge=judge, native_reward=system,
                            native_reward_model=reward_model, data_dir=data_dir,
                            out_dir=str(point_dir(run_dir, step)), batch_size=batch_size, device=device)
        rows = evaluate(config)
        point = {"step": step, "flops": stamps[step], "evaluations": rows}

        def add(doc, point=point, fresh=fresh):
            kept = [] if fresh else [p for p in (doc.get("curve") or {}).get("points") or [] if p.get("step") != point["step"]]
            doc["curve"] = {"every": every, "limit": limit, "points": sorted([*kept, point], key=lambda p: p["step"])}

        rep = update_report(report_path, add, check=lambda doc: check_valid(doc, report_path, "$.curve", with_ledger=True))
        fresh = False
        if progress is not None:
            progress(step, rows)
    return list((rep.doc.get("curve") or {}).get("points") or [])
