"""timing.json: the wall seconds of a run folder's stages (training, evaluation), with the machine's
load when each started. suite.pipeline.gridrun writes it beside report.json; studies price
planned cells from it (suite.analysis.study.calibrate). The report's `totals.seconds` time the
phases inside the optimizer steps; this file times the whole stage, start-up and saving included.

    {"train_seconds": 41.2, "train_load_average": [2.1, 2.3, 2.2], "eval_seconds": 18.7,
     "eval_load_average": [...], "threads": 1, "cpus": 2, "train_resumed": true}
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from ..errors import RaceError

TIMING_FILE = "timing.json"
"""Its name inside a run folder."""


@contextlib.contextmanager
def timed(out: str | os.PathLike, stage: str, threads: int | None, resumed: bool = False):
    """Record the wall seconds of one stage ("train" or "eval") in out/timing.json, with the
    load average when it started. A stage that raises records nothing; a resumed training stage
    says so (its seconds cover only the rest of the run)."""
    from ..atomic import write_json_atomic

    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    t0 = time.perf_counter()
    yield
    doc = read_timing(out, remeasured=True)     # this stage is measured now; an unreadable file is rewritten
    doc.update({f"{stage}_seconds": round(time.perf_counter() - t0, 3), f"{stage}_load_average": load,
                "threads": threads, "cpus": os.cpu_count()})
    if resumed:
        doc["train_resumed"] = True
    write_json_atomic(Path(out) / TIMING_FILE, doc)


def read_timing(folder: str | os.PathLike, *, remeasured: bool = False) -> dict:
    """The timing of a run folder; {} when it has none. One it cannot read (not JSON, a duplicate
    key) is a RaceError naming it -- a study would price its cells from it -- except where the
    caller measures the stage again and rewrites the file (`remeasured`: {} then)."""
    from .. import jsonstrict

    path = Path(folder) / TIMING_FILE
    if not path.is_file():
        return {}
    try:
        doc = jsonstrict.read(path, hint="delete it: the next run of the cell measures its stages again")
    except RaceError:
        if remeasured:
            return {}
        raise
    return doc if isinstance(doc, dict) else {}
