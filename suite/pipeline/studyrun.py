"""Running a study: every planned cell of its blocks trained and evaluated through the grid runner
(suite.pipeline.gridrun: resumable, local workers or Ray), the sessions that ran it recorded in
study.json, and its findings computed (suite.analysis.findings) and presented (suite.site.findings).

    from suite.analysis import study
    from suite.pipeline import studyrun
    sp = study.plan(study.load("tasks/studies/ci.yaml"))
    studyrun.run(sp, "runs/ci-study")                       # resumable
    studyrun.write_findings("runs/ci-study")                # findings.json / .md, figures
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from ..analysis.study import STUDY_FILE, StudyPlan, claim_cells, findings_settings, read_study_json
from .gridrun import GridResult


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    from .. import __version__

    out = {"race": __version__, "python": platform.python_version()}
    for dist in ("torch", "transformers", "trl", "peft", "lm_eval", "math-verify", "numpy", "scipy"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def _machine() -> dict:
    return {"platform": platform.platform(), "processor": platform.machine(), "cpus": os.cpu_count()}


def _portable(obj, prefix: str):
    """obj with every string path under the checkout written relative to it: study.json is
    committed with a study's results and must not carry one machine's folders."""
    if isinstance(obj, dict):
        return {k: _portable(v, prefix) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_portable(v, prefix) for v in obj]
    return obj[len(prefix):] if isinstance(obj, str) and obj.startswith(prefix) else obj


def write_study_json(sp: StudyPlan, out: Path, sessions: Sequence[dict] = ()) -> Path:
    """out/study.json: the study, its blocks and claims, the planned cells and every session
    that ran it (machine, versions, wall time). Atomic."""
    from ..atomic import write_json_atomic
    from ..paths import home

    s = sp.study
    ev = sp.evaluation
    doc = {"study": {"name": s.name, "source": s.source, "description": s.description,
                     "race": {"pilot": s.pilot, "validation": s.validation}, "analysis": dict(s.analysis)},
           "blocks": [{"name": b.name, "claims": list(b.claims), "why": b.why, "cells": list(sp.blocks[b.name])}
                      for b in s.blocks],
           "claims": {c: len(ids) for c, ids in claim_cells(sp).items()},
           "eval": {"targets": list(ev.targets), "limit": ev.limit, "batch_size": ev.batch_size, "judge": ev.judge,
                    **({"curve": asdict(ev.curve)} if ev.curve else {})},
           "cells": [pc.to_dict() for pc in sp.cells],
           "sessions": list(sessions)}
    return write_json_atomic(out / STUDY_FILE, _portable(doc, str(home()) + os.sep))


def run(sp: StudyPlan, out: str | os.PathLike, *, workers: int | str = 1, executor: str = "local",
        threads: int | None = None, progress: bool = True, address: str | None = None,
        gpus_per_cell: float = 0.0) -> GridResult:
    """Run and evaluate every cell of the study into out/cells/ (suite.pipeline.gridrun.run:
    finished cells are skipped, a killed cell resumes from its checkpoint) and record the session
    (start, end, wall seconds, cells run, machine, versions) in out/study.json."""
    from .gridrun import run as run_grid

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sessions = list((read_study_json(out) or {}).get("sessions") or [])
    write_study_json(sp, out, sessions)
    started, t0 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.perf_counter()
    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    # One torch thread per cell unless told: the tiny models gain nothing from more, and more
    # threads per process oversubscribe a 2-core machine (the quickstart measured ~10x slower).
    threads = threads or 1
    result = run_grid(sp.cells, out, sp.evaluation, workers=workers, executor=executor, threads=threads,
                      progress=progress, grid=None, address=address, gpus_per_cell=gpus_per_cell)
    sessions.append({"started": started, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "wall_seconds": round(time.perf_counter() - t0, 1), "load_average_at_start": load,
                     "ran": len(result.ran), "skipped": len(result.skipped), "failed": sorted(result.failed),
                     "workers": result.workers, "executor": executor, "threads": threads,
                     "machine": _machine(), "versions": _versions()})
    write_study_json(sp, out, sessions)
    return result


def findings_of(directory: str | os.PathLike, **overrides) -> dict:
    """The findings document of the runs under `directory` (a study folder or an exported one),
    with the settings of its study.json and `overrides` (suite.analysis.study.findings_settings)."""
    from ..analysis import findings
    from ..analysis.evidence import load_runs

    doc = read_study_json(directory)
    source = {"study": doc["study"]["name"]} if doc else {}
    return findings.findings(findings.analyse(load_runs(directory), findings_settings(doc, **overrides)), source)


def write_findings(directory: str | os.PathLike, out: str | os.PathLike | None = None, *, plots: bool = True,
                   **overrides) -> tuple[dict, list[Path]]:
    """Compute the findings of the runs under `directory` and write them into `out` (default
    `directory`): findings.json, findings.md and, unless plots=False, the figures. Returns the
    document and the paths written."""
    from ..site import findings as page

    doc = findings_of(directory, **overrides)
    return doc, page.write(doc, out if out is not None else directory, plots=plots)


def site_command(out: str | os.PathLike) -> str:
    """The command that puts the findings written into `out` on the leaderboard site (printed
    after they are written)."""
    import shlex

    return f"race leaderboard build --findings {shlex.quote(str(Path(out) / 'findings.json'))} --out site"


def stale_findings(directory: str | os.PathLike, out: str | os.PathLike | None = None, **overrides) -> list[str]:
    """The files of suite.site.findings.FILES in `out` (default `directory`) that differ from the
    findings recomputed from the runs under `directory` (or are missing): [] when they match."""
    from ..site import findings as page

    out = Path(out if out is not None else directory)
    texts = page.texts(findings_of(directory, **overrides))
    return [n for n in page.FILES if not (out / n).is_file() or (out / n).read_text(encoding="utf-8") != texts[n]]
