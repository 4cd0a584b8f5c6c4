"""The evidence of a study on disk: every evaluated run's coordinates (from its report.json) and
its per-problem scores (from the per-sample logs suite.evaluate.harness keeps in RUN_DIR/eval/).

Reports hold one mean per (target, metric); intervals over problems need the scores behind it.
suite.evaluate.harness writes them into each sample line of `eval/<target>.samples.jsonl` under
`race` (`pass@1`, `process_judge`, `native_reward`), with lm-eval's `doc_id`. A run is read
only when its logs agree with its report: the same number of problems and the same mean (to
1e-9), so a log can never silently belong to another evaluation.

`export` keeps what the findings are computed from — reports and *trimmed* sample logs (the doc
id and the scores, without the completions), those of the points along a run
(RUN_DIR/eval/curve/step-N/, suite.evaluate.curve) among them — in one compressed file per
study, PACKED (`runs.jsonl.xz`): one JSON line per run, its report.json's text verbatim and each
log's scores as columns (doc ids, then one list per metric). A study of 64 runs scored along the
way packs into ~0.6 MB where the trimmed logs took 40 MB. `load_runs` reads a folder holding
PACKED exactly as it reads the run folders it came from; `unpack` writes those folders back, the
reports and trimmed logs byte for byte (`race study --from EXPORT` resumes a study over them).
`export(..., packed=False)` writes the trimmed folders instead (tests/fixtures/findings-ci).

    runs = load_runs("runs/study")               # list[Run]; also load_runs("docs/decisive")
    runs[0].scores["arith-easy-250", "pass@1"]   # numpy array, one score per problem, by doc_id
"""

from __future__ import annotations

import json
import lzma
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping

import numpy as np

from .. import jsonlines, jsonstrict
from ..errors import RaceError
from ..evaluate.harness import METRICS   # read from each sample line's `race` object
from .frontier import Condition

#: Where a run keeps its per-sample logs, and their name per target.
EVAL_DIR = "eval"
SAMPLES = "{target}.samples.jsonl"
#: Largest disagreement tolerated between a report's mean and its log's mean.
TOLERANCE = 1e-9
#: The compact export: one compressed JSON Lines file per study (see the module docstring).
PACKED = "runs.jsonl.xz"
PACK_FORMAT = "race-runs"
PACK_VERSION = 1
#: xz preset of PACKED: 6 packs a 14 MB study in ~3 s; 9 gains 15% for 3x the time. xz writes no
#: time stamp, so the same runs give the same bytes with the same liblzma.
PACK_PRESET = 6
#: Largest decompressed size read from PACKED (a corrupt or hostile file cannot fill the memory).
MAX_UNPACKED = 2 * 1024 ** 3


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
    phases: Mapping[str, int] = field(default_factory=dict)
    """Cumulative FLOPs per phase at the step (`curve.points[].flops`: rollout, update, reward)."""


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
    phase_flops: Mapping[str, int] = field(default_factory=dict)
    """Training FLOPs per phase (`totals.flops`: rollout, update, reward)."""

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
        rows = list(jsonlines.values(path, hint="re-evaluate the run (`race eval RUN_DIR`)"))
    except RaceError as e:
        raise RaceError(f"{where}: cannot read its per-sample log ({e.message})", e.hint) from None
    return samples_of(rows, where)


def samples_of(rows: list, where: str) -> tuple[list[int], dict[str, list[float]]]:
    """(doc ids, metric -> scores) of a per-sample log's rows, in doc_id order."""
    if not all(isinstance(r, dict) for r in rows):
        raise RaceError(f"{where}: a per-sample line is not a JSON object", "re-evaluate the run (`race eval RUN_DIR`)")
    rows = sorted(rows, key=lambda r: r.get("doc_id", -1) if isinstance(r.get("doc_id"), int) else -1)
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

    def logs(rel: str, where: str):
        log = folder / rel
        return read_samples(log, where) if log.is_file() else None

    return _run_of(rep, shown, logs)


def _run_of(rep, shown: str, logs: Callable[[str, str], tuple[list[int], dict[str, list[float]]] | None]) -> Run | None:
    """The Run of one report (suite.record.report.Report) whose per-sample logs `logs` reads: (path
    relative to the run folder, how to name it) -> (doc ids, metric -> scores), None when absent."""
    from ..evaluate.curve import point_dir

    if not rep.doc.get("evaluations"):
        return None
    budget = rep.band or (rep.number("budget.flops"),) * 2
    values = {(e.target, e.metric): e.value for e in rep.evaluations if e.metric in METRICS}
    judge = next((e.judge for e in rep.evaluations if e.metric == "process_judge"), "")
    scores, ids = _scores(logs, EVAL_DIR, values, shown)
    curve = []
    for pt in rep.curve:
        got, got_ids = _scores(logs, point_dir(Path(), pt.step).as_posix(),
                               {(e.target, e.metric): e.value for e in pt.evaluations if e.metric in METRICS}, shown)
        curve.append(CurveScores(pt.step, pt.flops["total"],
                                 {(_base(t), m): x for (t, m), x in got.items()}, {_base(t): v for t, v in got_ids.items()},
                                 _phases(pt.flops)))
    return Run(path=shown, model=rep.model, params=rep.params_total, band=(int(budget[0]), int(budget[1])),
               reward=rep.reward_system, reward_kind=rep.reward_kind, label=rep.allocation,
               lora_rank=rep.lora_rank or 0, group_size=int(rep.number("grpo.group_size")),
               num_iterations=rep.num_iterations,
               seed=int(rep.seed or 0), p=rep.update_share, reward_share=rep.reward_share, steps=rep.steps,
               completions=rep.completions, flops=rep.total_flops, judge=judge, scores=scores, values=values,
               ids=ids, curve=tuple(curve), phase_flops=_phases(rep.flops))


def _phases(flops: Mapping) -> dict[str, int]:
    """The per-phase FLOPs of a report's totals or curve point (no total)."""
    return {k: int(v) for k, v in flops.items() if k != "total" and isinstance(v, (int, float))}


def _base(target: str) -> str:
    """"arith-easy-250:first-16" is logged as (and resampled with) arith-easy-250."""
    return target.split(":", 1)[0]


def _scores(logs: Callable, rel: str, values: Mapping[tuple[str, str], float],
            shown: str) -> tuple[dict[tuple[str, str], np.ndarray], dict[str, tuple[int, ...]]]:
    """(target, metric) -> per-problem scores from the per-sample logs in the run's folder `rel`
    (read by `logs`), each checked against the report's mean in `values`; and target -> its doc ids."""
    scores: dict[tuple[str, str], np.ndarray] = {}
    ids: dict[str, tuple[int, ...]] = {}
    read: dict[str, tuple[list[int], dict[str, list[float]]]] = {}
    for (target, metric), value in values.items():
        base = _base(target)
        if base not in read:
            name = f"{rel}/{SAMPLES.format(target=base)}"
            got = logs(name, f"{shown}/{name}")
            if got is None:
                raise RaceError(f"{shown}: no per-problem scores for {target} ({name} is missing)",
                                "re-evaluate the run (`race eval RUN_DIR`) so its per-sample logs are kept")
            read[base] = got
        got, per_metric = read[base]
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
    """Every evaluated run under `directory` (each folder holding a report.json, recursively, or
    the runs packed in its PACKED file), sorted by path. RaceError naming the file when a report
    or its logs cannot be used."""
    root = Path(directory)
    if not root.is_dir():
        raise RaceError(f"{root}: no such directory", "pass a study folder (race study --out) or an exported one")
    reports = sorted(root.rglob("report.json"))
    if (root / PACKED).is_file():
        if reports:
            raise RaceError(f"{root} holds both {PACKED} and run folders ({reports[0].relative_to(root)})",
                            f"read one: unpack {PACKED} elsewhere (race study --from {root}) or move it away")
        runs = [r for r in (_packed_run(line, root / PACKED) for line in read_packed(root / PACKED)) if r is not None]
    else:
        runs = [r for f in reports if (r := read_run(f.parent, root)) is not None]
    if not runs:
        raise RaceError(f"{root}: no evaluated runs (no report.json with evaluations)",
                        "run the study first (race study STUDY.yaml --out DIR)")
    runs.sort(key=lambda r: r.path)
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


def _trimmed(rows) -> list[dict]:
    """A per-sample log's rows as an export keeps them: the doc id and the `race` scores."""
    return [{"doc_id": r["doc_id"], "race": {k: v for k, v in (r.get("race") or {}).items() if k in METRICS}}
            for r in rows]


def _jsonl(rows) -> str:
    """Rows as suite.atomic.write_jsonl_atomic writes them."""
    return "".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in rows)


def _columns(rows: list[dict]) -> dict:
    """Trimmed rows as columns (doc ids, one list per metric) when every row has the same keys in
    the same order, so `_rows` gives them back exactly; else the rows as they are."""
    keys = [list(r["race"]) for r in rows]
    if rows and all(list(r) == ["doc_id", "race"] for r in rows) and all(k == keys[0] for k in keys):
        return {"doc_id": [r["doc_id"] for r in rows], "race": {m: [r["race"][m] for r in rows] for m in keys[0]}}
    return {"rows": rows}


def _rows(log: dict, where: str) -> list[dict]:
    """The rows of a packed log (either form of `_columns`)."""
    if isinstance(log, dict) and isinstance(log.get("rows"), list):
        return log["rows"]
    ids, race = (log or {}).get("doc_id"), (log or {}).get("race")
    if not isinstance(ids, list) or not isinstance(race, dict) or \
            any(not isinstance(v, list) or len(v) != len(ids) for v in race.values()):
        raise RaceError(f"{where}: a packed log is neither rows nor columns of equal length",
                        "export the study again (race findings DIR --export DEST)")
    return [{"doc_id": d, "race": {m: v[i] for m, v in race.items()}} for i, d in enumerate(ids)]


#: Kept beside a run's report when it has one: the stage times `race study --calibrate` prices from.
TIMING = "timing.json"


def _run_folders(root: Path) -> Iterator[tuple[Path, str, list[tuple[str, list[dict]]]]]:
    """Every evaluated run folder under `root`: (folder, its report's text, [(log path relative
    to the folder, its trimmed rows)])."""
    for f in sorted(root.rglob("report.json")):
        folder = f.parent
        if read_run(folder, root) is None:
            continue
        logs = [(log.relative_to(folder).as_posix(),
                 _trimmed(jsonlines.values(log, hint="re-evaluate the run (`race eval RUN_DIR`)")))
                for log in sorted((folder / EVAL_DIR).rglob("*.samples.jsonl"))]    # the end's and the curve points'
        yield folder, f.read_text(encoding="utf-8"), logs


def pack_text(directory: str | os.PathLike) -> bytes:
    """The PACKED bytes of every evaluated run under `directory` (run folders or trimmed ones):
    a header line, then one line per run with its report's text and its logs as columns."""
    root = Path(directory)
    lines = [json.dumps({"format": PACK_FORMAT, "version": PACK_VERSION,
                         "what": "per run: report.json's text and its trimmed per-sample logs (doc_id and the "
                                 "race scores) as columns; suite.analysis.evidence reads it"}, separators=(",", ":"))]
    for folder, report, logs in _run_folders(root):
        timing = {"timing": (folder / TIMING).read_text(encoding="utf-8")} if (folder / TIMING).is_file() else {}
        lines.append(json.dumps({"path": folder.relative_to(root).as_posix(), "report": report, **timing,
                                 "logs": {rel: _columns(rows) for rel, rows in logs}},
                                separators=(",", ":"), ensure_ascii=False))
    return lzma.compress(("\n".join(lines) + "\n").encode("utf-8"), format=lzma.FORMAT_XZ, preset=PACK_PRESET)


def read_packed(path: str | os.PathLike) -> list[dict]:
    """The run lines of a PACKED file (header checked), each {path, report, logs}."""
    path = Path(path)
    redo = "export the study again (race findings DIR --export DEST)"
    try:
        d = lzma.LZMADecompressor()
        data = d.decompress(path.read_bytes(), max_length=MAX_UNPACKED)
    except (lzma.LZMAError, OSError) as e:
        raise RaceError(f"{path}: not a readable xz file ({e})", redo) from None
    if not d.eof:
        raise RaceError(f"{path}: truncated, or larger than {MAX_UNPACKED} bytes unpacked", redo)
    out = []
    for n, obj in jsonlines.records(data, name=path, max_depth=None, max_line_bytes=MAX_UNPACKED, hint=redo):
        if n == 1:
            if not isinstance(obj, dict) or obj.get("format") != PACK_FORMAT or obj.get("version") != PACK_VERSION:
                raise RaceError(f"{path}: not a {PACK_FORMAT} v{PACK_VERSION} file (its first line says otherwise)", redo)
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("path"), str) or not isinstance(obj.get("report"), str) \
                or not isinstance(obj.get("logs"), dict) or obj["path"].startswith("/") or ".." in obj["path"].split("/"):
            raise RaceError(f"{path}: line {n} is not a run (path inside the folder, report text, logs)", redo)
        out.append(obj)
    return out


def _packed_run(line: dict, where: Path) -> Run | None:
    """The Run of one PACKED line."""
    from ..record.report import Report

    shown = line["path"]
    name = f"{shown}/report.json"
    try:
        doc = jsonstrict.loads(line["report"])
    except jsonstrict.JSONInputError as e:
        raise RaceError(f"{where}: {name}: not valid JSON ({e.message})", "export the study again") from None
    rep = Report(doc, name, None, line["report"].encode("utf-8"))

    def logs(rel: str, shown_as: str):
        log = line["logs"].get(rel)
        return None if log is None else samples_of(_rows(log, f"{where}: {shown_as}"), shown_as)

    return _run_of(rep, shown, logs)


def unpack(path: str | os.PathLike, out: str | os.PathLike, *, only: Callable[[str], bool] | None = None,
           overwrite: bool = False) -> list[Path]:
    """Write the runs of a PACKED file back as run folders under `out`: report.json and the trimmed
    per-sample logs, the same bytes they were packed from. `only(path)` picks runs; a run folder
    already holding a report.json is left alone unless `overwrite`. Returns the files written."""
    from ..atomic import write_text_atomic

    dest, written = Path(out), []
    for line in read_packed(path):
        folder = dest / line["path"]
        if (only is not None and not only(line["path"])) or ((folder / "report.json").exists() and not overwrite):
            continue
        for rel, log in sorted(line["logs"].items()):
            if rel.startswith("/") or ".." in rel.split("/"):
                raise RaceError(f"{path}: {line['path']}: log path {rel!r} leaves its run folder", "export again")
            written.append(write_text_atomic(folder / rel, _jsonl(_rows(log, f"{path}: {line['path']}/{rel}"))))
        if isinstance(line.get("timing"), str):
            written.append(write_text_atomic(folder / TIMING, line["timing"]))
        written.append(write_text_atomic(folder / "report.json", line["report"]))   # last: a report marks it whole
    return written


def export(directory: str | os.PathLike, out: str | os.PathLike, *, packed: bool = True) -> list[Path]:
    """Keep every evaluated run's report.json and trimmed per-sample logs (doc_id and the `race`
    scores only) from `directory` in `out`: packed into out/PACKED (default), or as run folders
    keeping their relative paths. `directory` may itself be an export. Returns the files written."""
    from ..atomic import atomic_path, write_text_atomic

    root, dest = Path(directory), Path(out)
    if (root / PACKED).is_file():
        if packed:
            if root.resolve() == dest.resolve():
                return []
            data = (root / PACKED).read_bytes()
            read_packed(root / PACKED)
        else:
            return unpack(root / PACKED, dest, overwrite=True)
    elif packed:
        data = pack_text(root)
    if packed:
        with atomic_path(dest / PACKED) as tmp:
            tmp.write_bytes(data)
        return [dest / PACKED]
    written = []
    for folder, report, logs in _run_folders(root):
        rel = folder.relative_to(root)
        written.append(write_text_atomic(dest / rel / "report.json", report))
        written += [write_text_atomic(dest / rel / name, _jsonl(rows)) for name, rows in logs]
        if (folder / TIMING).is_file():
            written.append(write_text_atomic(dest / rel / TIMING, (folder / TIMING).read_text(encoding="utf-8")))
    return written


def timed_reports(directory: str | os.PathLike) -> Iterator[tuple[str, object, dict]]:
    """(name, report, timing) of every run under `directory` with a timing.json — run folders or a
    PACKED export — for suite.analysis.study.calibrate."""
    from ..record.report import Report, read_report
    from ..record.timing import read_timing

    root = Path(directory)
    if (root / PACKED).is_file():
        for line in read_packed(root / PACKED):
            if not isinstance(line.get("timing"), str):
                continue
            try:
                timing = jsonstrict.loads(line["timing"])
                rep = Report(jsonstrict.loads(line["report"]), line["path"])
            except jsonstrict.JSONInputError as e:
                raise RaceError(f"{root / PACKED}: {line['path']}: {e.message}", "export the study again") from None
            if isinstance(timing, dict):
                yield line["path"].rsplit("/", 1)[-1], rep, timing
        return
    for t in sorted(root.rglob(TIMING)):
        if (t.parent / "report.json").is_file():
            yield t.parent.name, read_report(t.parent / "report.json", check=False,
                                             name=t.parent.relative_to(root).as_posix()), read_timing(t.parent)
