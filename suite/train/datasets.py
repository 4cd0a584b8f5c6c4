"""Dataset loaders: the embedded arithmetic splits and the real Polaris-53K, GSM8K and
MATH-500 from local files in their published formats.

Every loader returns rows with the same columns, which reward systems and evaluation read:
`question`, `answer` (the gold final answer as a string), `solution` (worked solution or None)
and `source` (the format name). The published formats:

| format   | file (as published)                              | question | answer                       | solution  |
|----------|--------------------------------------------------|----------|------------------------------|-----------|
| arith    | tasks/arith/data/<split>.jsonl                   | question | answer                       | solution  |
| polaris  | Polaris-Dataset-53K jsonl: problem, answer, difficulty | problem | answer                 | —         |
| gsm8k    | openai/gsm8k main jsonl/parquet: question, answer "... #### 42" | question | text after "####" (commas dropped) | text before "####" |
| math500  | HuggingFaceH4/MATH-500 test.jsonl: problem, solution, answer, subject, level, unique_id | problem | answer | solution |

Files may be .jsonl, .json (a list of objects) or .parquet.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import RaceError


def _gsm8k_answer(text: str) -> str:
    return text.rsplit("####", 1)[1].strip().replace(",", "")


def _gsm8k_solution(text: str) -> str:
    # Drop the calculator annotations <<48/2=24>> GSM8K puts in its worked solutions.
    return re.sub(r"<<[^>]*>>", "", text.rsplit("####", 1)[0]).strip()


@dataclass(frozen=True)
class DatasetFormat:
    """How one published format maps onto the common columns."""

    name: str
    question: str  #: field holding the problem text
    answer: str  #: field holding (or containing) the gold answer
    solution: str | None = None  #: field holding the worked solution, if any
    parse_answer: Callable[[str], str] = str.strip  #: gold answer from the answer field
    parse_solution: Callable[[str], str] = str.strip  #: worked solution from its field
    keep: tuple[str, ...] = ()  #: extra fields carried through unchanged


#: Format name -> its field mapping.
FORMATS: dict[str, DatasetFormat] = {
    "arith": DatasetFormat("arith", "question", "answer", "solution"),
    "polaris": DatasetFormat("polaris", "problem", "answer", keep=("difficulty",)),
    "gsm8k": DatasetFormat("gsm8k", "question", "answer", "answer", _gsm8k_answer, _gsm8k_solution),
    "math500": DatasetFormat("math500", "problem", "answer", "solution",
                             keep=("subject", "level", "unique_id")),
}

#: Embedded split name -> the real data set it stands in for.
EMBEDDED_SPLITS = {"train": "Polaris-53K", "arith-easy-250": "GSM8K", "arith-hard-250": "MATH-500",
                   "arith-easy-2000": "a large held-out GSM8K-like set"}


def read_records(path: str | Path) -> list[dict]:
    """Raw records of a .jsonl, .json (list) or .parquet file."""
    path = Path(path)
    if not path.is_file():
        raise RaceError(f"dataset file {path} not found", "check the path; data sets are read from local files only")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            data = json.loads(text)
            return data if isinstance(data, list) else data.get("data", data.get("rows", []))
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise RaceError(f"{path} is not valid JSON ({e.msg} at line {e.lineno})",
                        "expected JSON Lines (one object per line), a .json list or a .parquet file") from None


def load(path: str | Path, format: str, limit: int | None = None) -> list[dict]:
    """Rows (question, answer, solution, source + kept fields) of a local file in `format`."""
    if format not in FORMATS:
        raise RaceError(f"unknown dataset format {format!r}", f"known formats: {', '.join(FORMATS)}")
    fmt = FORMATS[format]
    rows = []
    for i, rec in enumerate(read_records(path)[:limit]):
        missing = [f for f in (fmt.question, fmt.answer) if f not in rec]
        if missing:
            raise RaceError(f"{path}: record {i} has no field {missing[0]!r} (format {format})",
                            f"its fields are {', '.join(rec) or 'none'}; is this the right --format?")
        try:
            answer = fmt.parse_answer(str(rec[fmt.answer]))
        except IndexError:
            raise RaceError(f"{path}: record {i}: answer has no '####' final answer", "GSM8K answers end with '#### <number>'") from None
        solution = fmt.parse_solution(str(rec[fmt.solution])) if fmt.solution and rec.get(fmt.solution) else None
        row = {"question": str(rec[fmt.question]), "answer": answer, "solution": solution, "source": format}
        row.update({k: rec[k] for k in fmt.keep if k in rec})
        rows.append(row)
    return rows


def load_split(name: str, limit: int | None = None) -> list[dict]:
    """An embedded split (train, arith-easy-250, arith-hard-250, arith-easy-2000) from tasks/arith/data."""
    from ..paths import tasks

    if name not in EMBEDDED_SPLITS:
        raise RaceError(f"unknown embedded split {name!r}", f"known splits: {', '.join(EMBEDDED_SPLITS)}")
    return load(tasks() / "arith" / "data" / f"{name}.jsonl", "arith", limit)


def prompt_messages(question: str, system: str | None = None) -> list[dict]:
    """A conversational prompt for TRL (GRPOTrainer applies the chat template)."""
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": question}]


def with_prompts(rows: list[dict], system: str | None = None) -> list[dict]:
    """Rows plus a `prompt` column of chat messages, ready for a datasets.Dataset."""
    return [{**r, "prompt": prompt_messages(r["question"], system)} for r in rows]
