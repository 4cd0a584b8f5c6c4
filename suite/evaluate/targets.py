"""Evaluation targets: the sets adapters are scored on (two embedded arithmetic splits standing in
for GSM8K and MATH-500, and the documented 250-problem selections of the real ones), as lm-eval
tasks (tasks/lm_eval/*.yaml), with the documented selection rule of the real-data rows.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from ..errors import RaceError

@dataclass(frozen=True)
class Target:
    """An evaluation set: an lm-eval task in tasks/lm_eval/ of the same name."""

    name: str  #: target and lm-eval task name, e.g. "arith-easy-250"
    source: str  #: "embedded", "gsm8k" or "math500"
    description: str  #: one line for --help and docs
    size: int = 250  #: problems in the target

    @property
    def embedded(self) -> bool:
        """Shipped with the suite (runs offline, no data dir needed)."""
        return self.source == "embedded"


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("arith-easy-250", "embedded", "embedded 2-step arithmetic, 250 problems (GSM8K stand-in)"),
        Target("arith-hard-250", "embedded", "embedded 3-4-step arithmetic, 250 problems (MATH-500 stand-in)"),
        Target("arith-easy-2000", "embedded", "embedded 2-step arithmetic, 2000 fresh problems (none in train or the "
                                              "250-problem sets): resolves a 0.03 difference", size=2000),
        Target("gsm8k-250", "gsm8k", "250 documented GSM8K test problems"),
        Target("math500-250", "math500", "250 documented MATH-500 problems"),
    )
}
#: What `race eval` scores when --targets is not given.
DEFAULT_TARGETS = ("arith-easy-250", "arith-hard-250")


def target(name: str) -> Target:
    """The Target called `name`; RaceError naming it when unknown."""
    if name not in TARGETS:
        raise RaceError(f"unknown target '{name}'", f"choose from {', '.join(TARGETS)}")
    return TARGETS[name]


def lm_eval_tasks_dir() -> Path:
    """tasks/lm_eval: the task YAMLs, utils.py and the id lists."""
    from ..paths import tasks

    return tasks() / "lm_eval"


# ------------------------------------------------------------------------------ data

#: Seed of the documented selection rule for the real-data targets.
SELECTION_SEED = 2607
#: Published split sizes, and a fact about row 0 that guards against a reordered file.
REAL_SPLITS = {
    "gsm8k": {"rows": 1319, "file": "gsm8k/test.jsonl", "hub": ("openai/gsm8k", "main"),
              "row0": ("question", "Janet")},
    "math500": {"rows": 500, "file": "math500/test.jsonl", "hub": ("HuggingFaceH4/MATH-500", None),
                "row0": ("unique_id", "test/precalculus/807.json")},
}
DATA_DIR_ENV = "RACE_DATA_DIR"
#: Set to 1 while only embedded targets are evaluated.
OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def select_rows(n_rows: int, k: int = 250, seed: int = SELECTION_SEED) -> list[int]:
    """The documented selection rule: k distinct 0-based row indices of a published split,
    sorted(random.Random(seed).sample(range(n_rows), k)). tasks/lm_eval/ids/*.txt hold its output."""
    return sorted(random.Random(seed).sample(range(n_rows), k))


def read_ids(name: str) -> list[int]:
    """Row indices listed in tasks/lm_eval/ids/<name>.txt (comment lines start with '#')."""
    path = lm_eval_tasks_dir() / "ids" / f"{name}.txt"
    lines = [ln.strip() for ln in path.read_text().splitlines()]
    return [int(ln) for ln in lines if ln and not ln.startswith("#")]


def _real_rows(source: str, data_dir: str | None) -> list[dict]:
    """The whole published split as suite.train.datasets rows (question, answer, solution + kept
    fields): from data_dir when given, else from the hub when online."""
    from ..train import datasets as race_datasets

    spec = REAL_SPLITS[source]
    data_dir = data_dir or os.environ.get(DATA_DIR_ENV)
    if data_dir:
        base = Path(data_dir) / spec["file"]
        found = [p for p in (base, base.with_suffix(".parquet")) if p.is_file()]
        if not found:
            raise RaceError(f"{source} data not found: {base}",
                            f"put the published test split there as {spec['file']} (or .parquet)")
        rows = race_datasets.load(found[0], source)
    elif os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        raise RaceError(f"{source} data needs --data-dir (or ${DATA_DIR_ENV}) while offline",
                        f"download the test split once and pass its folder, holding {spec['file']}")
    else:
        import tempfile

        import datasets

        path, name = spec["hub"]
        try:
            split = datasets.load_dataset(path, name, split="test")
        except Exception as e:  # network, auth, or a missing dataset: one line for the user
            raise RaceError(f"could not download {path} ({type(e).__name__})",
                            f"pass --data-dir with {spec['file']}") from None
        with tempfile.TemporaryDirectory() as tmp:  # one parser for local and hub rows
            split.to_json(f"{tmp}/test.jsonl")
            rows = race_datasets.load(f"{tmp}/test.jsonl", source)
    key, value = spec["row0"]
    if len(rows) != spec["rows"] or not str(rows[0].get(key, "")).startswith(value):
        raise RaceError(f"{source} data has {len(rows)} rows (row 0 {key}={str(rows[0].get(key))[:40]!r})",
                        f"expected the published split: {spec['rows']} rows, row 0 {key} starting {value!r}")
    return rows


def target_docs(name: str, data_dir: str | None = None) -> list[dict]:
    """The problems of a target as {id, question, answer, solution} dicts (answer: the gold
    final answer; rows read by suite.train.datasets in their published formats)."""
    from ..train import datasets as race_datasets

    t = target(name)
    if t.embedded:
        rows = race_datasets.load_split(name)
        ids = [str(i) for i in range(len(rows))]
    else:
        rows = _real_rows(t.source, data_dir)
        picked = read_ids(name)
        rows = [rows[i] for i in picked]
        ids = [r["unique_id"] for r in rows] if t.source == "math500" else [str(i) for i in picked]
    return [{"id": i, "question": r["question"], "answer": r["answer"], "solution": r["solution"] or ""}
            for i, r in zip(ids, rows)]


def target_dataset(name: str, metadata: dict | None = None):
    """lm-eval's custom_dataset hook: a DatasetDict with one 'test' split. metadata comes from
    TaskManager(metadata=...); its 'data_dir' points at local copies of real data sets."""
    import datasets

    docs = target_docs(name, (metadata or {}).get("data_dir"))
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})


def result_name(name: str, n: int) -> str:
    """The target name written into results: the target itself, or "<target>:first-<n>" when
    --limit scored only its first n problems (a subset is never reported as the whole set)."""
    return name if n >= target(name).size else f"{name}:first-{n}"
