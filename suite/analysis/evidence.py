"""The evidence of a study on disk: every evaluated run's coordinates (from its report.json) and
its per-problem scores (from the per-sample logs suite.evaluate.harness keeps in RUN_DIR/eval/).

Reports hold one mean per (target, metric); intervals over problems need the scores behind it.
suite.evaluate.harness writes them into each sample line of `eval/<target>.samples.jsonl` under
`race` (`pass@1`, `process_judge`, `native_reward`), with lm-eval's `doc_id`. A run is read
only when its logs agree with its report: the same number of problems and the same mean (to
1e-9), so a log can never silently belong to another evaluation.

`export` copies what the findings are computed from — reports and *trimmed* sample logs (the
doc id and the scores, without the completions: ~45 kB a run instead of ~550 kB), those of the
points along a run (RUN_DIR/eval/curve/step-N/, suite.evaluate.curve) among them — into a
folder that can be committed and read back by this module exactly as the study folder.

    runs = load_runs("runs/study")               # list[Run]
    runs[0].scores["arith-easy-250", "pass@1"]   # numpy array, one score per problem, by doc_id
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from .. import jsonstrict
from ..errors import RaceError
from ..evaluate.harness import METRICS   # read from each sample line's `race` object
from .frontier import Condition

#: Where a run keeps its per-sample logs, and their name per target.
EVAL_DIR = "eval"
SAMPLES = "{target}.samples.jsonl"
#: Largest disagreement tolerated between a report's mean and its log's mean.
TOLERANCE = 1e-9


@dataclass(frozen=True)
class CurveScores:
    """One point along a run (report `curve`, suite.evaluate.curve): its step, the training FLOPs
    spent up to it, and its per-problem scores."""

    step: int
    """Optimizer steps done (0: the policy before training)."""
    flops: int
    """Cumulative training FLOPs at the step (`curve.points[].flops.total`)."""
    scores: Mapping[tuple[str, str], np.ndarray] = field(default_factory=dict)
    """(target, metric) -> per-problem scores in doc_id order; targets named as in the run's
    final evaluation (the subset's TARGET:first-N label is dropped: the doc ids say which)."""
    ids: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Target -> the doc ids scored, in order."""


@dataclass(frozen=True)
class Run:
    """One evaluated training run: its coordinates and its per-problem scores."""

    path: str
    """The run folder, relative to the folder it was loaded from."""
    model: str
    """Policy name (`policy.name`)."""
    params: int
    """Policy parameters (`policy.params_total`): orders model sizes."""
    band: tuple[int, int]
    """IsoFLOP band (`budget.band` low, high; the bare budget twice when no band is declared)."""
    reward: str
    """Training reward system (`reward.system`)."""
    reward_kind: str
    """`rule` (0 FLOPs) or the kind of reward model: orm, prm, judge (`reward.kind`)."""
    label: str
    """Allocation label (`run.label`)."""
    lora_rank: int
    """LoRA rank (`adapter.rank`; 0 for full fine-tuning)."""
    group_size: int
    """K, completions per prompt (`grpo.group_size`)."""
    num_iterations: int
    """Optimizer steps per generation batch (`grpo.num_iterations`)."""
    seed: int
    """Trainer seed (`run.seed`)."""
    p: float
    """Update share (`totals.update_share`)."""
    reward_share: float
    """Reward FLOP share (`totals.shares.reward`)."""
    steps: int
    """Optimizer steps the budget bought (`totals.steps`)."""
    completions: int
    """Rollouts generated (`totals.work.count.completions`)."""
    flops: int
    """Training FLOPs spent (`totals.flops.total`)."""
    judge: str
    """Name of the process judge (`evaluations[].judge.name` of process_judge), "" if none."""
    scores: Mapping[tuple[str, str], np.ndarray] = field(default_factory=dict)
    """(target, metric) -> per-problem scores in doc_id order."""
    values: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """(target, metric) -> the report's own mean (equal to the scores' mean)."""
    ids: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Target -> the doc ids of `scores`, in order."""
    curve: tuple[CurveScores, ...] = ()
    """The points along the run, by step (empty when it was scored only at its end)."""

    @property
    def budget(self) -> int:
        """The budget the run was planned for: the band's upper end."""
        return self.band[1]

    def condition(self, target: str, metric: str) -> Condition:
        """The condition of this run's score on `target` with `metric` (suite.analysis.frontier)."""
        return Condition(params_total=self.params, model=self.model, band_low=self.band[0], band_high=self.band[1],
                         reward_system=self.reward, target=target, metric=metric,
                         judge=self.judge if metric == "process_judge" else "")

    @property
    def group(self) -> str:
        """The name of this run's group — the runs that differ only in their seed — used to
        seed its resampling (suite.analysis.stats)."""
        return f"{self.model}|{self.band[0]}-{self.band[1]}|{self.reward}|{self.label}|r{self.lora_rank}"


# ---------------------------------------------------------------- reading


def read_samples(path: Path, where: str) -> tuple[list[int], dict[str, list[float]]]:
    """(doc ids, metric -> scores) of one per-sample log, in doc_id order."""
    try:        # lm-eval writes NaN for some scores; a duplicate key is refused, never guessed
        rows = list(jsonstrict.read_lines(path, hint="re-evaluate the run (`race eval RUN_DIR`)"))
    except RaceError as e:
        raise RaceError(f"{where}: cannot read its per-sample log ({e.message})", e.hint) from None
    rows.sort(key=lambda r: r.get("doc_id", -1))
    ids = [r.get("doc_id") for r in rows]
    if any(not isinstance(i, int) for i in ids) or len(set(ids)) != len(ids):
        raise RaceError(f"{where}: per-sample log lacks distinct integer doc_id values",
                        "re-evaluate the run (`race eval RUN_DIR`)")
    scores: dict[str, list[float]] = {}
    for m in METRICS:
        vals = [(r.get("race") or {}).get(m) for r in rows]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            scores[m] = [float(v) for v in vals]
    return ids, scores


def read_run(folder: Path, root: Path) -> Run | None:
    """The Run of one run folder, or None when its report has no evaluations yet."""
    from ..record.report import read_report

    shown = folder.relative_to(root).as_posix() or "."
    rep = read_report(folder / "report.json", check=False, name=f"{shown}/report.json")
    if not rep.doc.get("evaluations"):
        return None
    budget = rep.band or (rep.number("budget.flops"),) * 2
    values = {(e.target, e.metric): e.value for e in rep.evaluations if e.metric in METRICS}
    judge = next((e.judge for e in rep.evaluations if e.metric == "process_judge"), "")
    scores, ids = _scores(folder, folder / EVAL_DIR, values, shown)
    curve = []
    for pt in rep.curve:
        from ..evaluate.curve import point_dir

        got, got_ids = _scores(folder, point_dir(folder, pt.step), {(e.target, e.metric): e.value for e in pt.evaluations
                                                            if e.metric in METRICS}, shown)
        curve.append(CurveScores(pt.step, pt.flops["total"],
                                 {(_base(t), m): x for (t, m), x in got.items()}, {_base(t): v for t, v in got_ids.items()}))
    return Run(path=shown, model=rep.model, params=rep.params_total, band=(int(budget[0]), int(budget[1])),
               reward=rep.reward_system, reward_kind=rep.reward_kind, label=rep.allocation,
               lora_rank=rep.lora_rank or 0, group_size=int(rep.number("grpo.group_size")),
               num_iterations=rep.num_iterations,
               seed=int(rep.seed or 0), p=rep.update_share, reward_share=rep.reward_share, steps=rep.steps,
               completions=rep.completions, flops=rep.total_flops, judge=judge, scores=scores, values=values,
               ids=ids, curve=tuple(curve))


def _base(target: str) -> str:
    """"arith-easy-250:first-16" is logged as (and resampled with) arith-easy-250."""
    return target.split(":", 1)[0]


def _scores(folder: Path, logs_dir: Path, values: Mapping[tuple[str, str], float],
            shown: str) -> tuple[dict[tuple[str, str], np.ndarray], dict[str, tuple[int, ...]]]:
    """(target, metric) -> per-problem scores from the per-sample logs in `logs_dir` (inside the
    run folder `folder`), each checked against the report's mean in `values`; and target -> its
    doc ids."""
    rel = logs_dir.relative_to(folder).as_posix()
    scores: dict[tuple[str, str], np.ndarray] = {}
    ids: dict[str, tuple[int, ...]] = {}
    logs: dict[str, tuple[list[int], dict[str, list[float]]]] = {}
    for (target, metric), value in values.items():
        base = _base(target)
        if base not in logs:
            log = logs_dir / SAMPLES.format(target=base)
            if not log.is_file():
                raise RaceError(f"{shown}: no per-problem scores for {target} ({rel}/{log.name} is missing)",
                                "re-evaluate the run (`race eval RUN_DIR`) so its per-sample logs are kept")
            logs[base] = read_samples(log, f"{shown}/{rel}/{log.name}")
        got, per_metric = logs[base]
        if metric not in per_metric:
            raise RaceError(f"{shown}: {rel}/{base} logs carry no per-problem {metric}",
                            "re-evaluate the run with this suite (`race eval RUN_DIR`)")
        x = np.asarray(per_metric[metric], dtype=np.float64)
        if abs(float(x.mean()) - value) > TOLERANCE:
            raise RaceError(f"{shown}: {target} {metric} in report.json is {value:.6g}, its per-sample log "
                            f"averages {float(x.mean()):.6g}", "the log belongs to another evaluation; re-evaluate")
        scores[target, metric] = x
        ids[target] = tuple(got)
    return scores, ids


def load_runs(directory: str | os.PathLike) -> list[Run]:
    """Every evaluated run under `directory` (each folder holding a report.json, recursively),
    sorted by path. RaceError naming the file when a report or its logs cannot be used."""
    root = Path(directory)
    if not root.is_dir():
        raise RaceError(f"{root}: no such directory", "pass a study folder (race study --out) or an exported one")
    runs = [r for f in sorted(root.rglob("report.json")) if (r := read_run(f.parent, root)) is not None]
    if not runs:
        raise RaceError(f"{root}: no evaluated runs (no report.json with evaluations)",
                        "run the study first (race study STUDY.yaml --out DIR)")
    _check_problems(runs)
    return runs


def _check_problems(runs: list[Run]) -> None:
    """Every run scored on one target must be scored on the same number of problems: problems
    are resampled jointly per target (suite.analysis.stats)."""
    sizes: dict[str, tuple[int, str]] = {}
    for r in runs:
        for (target, _), x in r.scores.items():
            n, first = sizes.setdefault(target, (len(x), r.path))
            if len(x) != n:
                raise RaceError(f"{r.path}: {target} scored on {len(x)} problems, {first} on {n}",
                                "evaluate every run of a study on the same problems (one eval plan)")


# ---------------------------------------------------------------- export


def export(directory: str | os.PathLike, out: str | os.PathLike) -> list[Path]:
    """Copy every evaluated run's report.json and trimmed per-sample logs (doc_id and the `race`
    scores only) from `directory` into `out`, keeping relative folders. Returns the files written."""
    from ..atomic import write_jsonl_atomic, write_text_atomic

    root, dest = Path(directory), Path(out)
    written = []
    for f in sorted(root.rglob("report.json")):
        folder = f.parent
        if read_run(folder, root) is None:
            continue
        rel = folder.relative_to(root)
        written.append(write_text_atomic(dest / rel / "report.json", f.read_text(encoding="utf-8")))
        for log in sorted((folder / EVAL_DIR).rglob("*.samples.jsonl")):    # the end's and the curve points'

            rows = [{"doc_id": s["doc_id"], "race": {k: v for k, v in (s.get("race") or {}).items() if k in METRICS}}
                    for s in jsonstrict.read_lines(log, hint="re-evaluate the run (`race eval RUN_DIR`)")]
            written.append(write_jsonl_atomic(dest / rel / log.relative_to(folder), rows))
    return written
