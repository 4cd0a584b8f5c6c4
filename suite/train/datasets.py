"""The one dataset loader of the suite: `race run`, `race grid`, `race export verl` and `race eval`
all read problems through `load`. It reads the embedded arithmetic splits and local files in the
formats Polaris-53K, GSM8K, MATH-500 and MATH publish, as .jsonl, .json (a list of objects) or
.parquet.

Every row has the same columns, which reward systems and evaluation read: `question`, `answer`
(the gold final answer as a string), `solution` (worked solution or None), `source` (the format
name) and the format's kept fields. The published formats:

| format   | file (as published)                                              | question | answer                             | solution           |
|----------|------------------------------------------------------------------|----------|------------------------------------|--------------------|
| arith    | tasks/arith/data/<split>.jsonl: question, solution, answer       | question | answer                             | solution           |
| gsm8k    | openai/gsm8k main: question, answer "... #### 42"                | question | text after "####" (commas dropped) | text before "####" |
| math500  | HuggingFaceH4/MATH-500 test.jsonl: problem, solution, answer, subject, level, unique_id | problem | answer | solution |
| polaris  | POLARIS-Project/Polaris-Dataset-53K: problem, answer, difficulty | problem  | answer                             | —                  |
| math     | hendrycks MATH: problem, solution (\\boxed answer), level, type   | problem  | the solution's last \\boxed{}      | solution           |

Without a named format, a file's format is read from its first record's fields (`detect_format`):
the formats above differ in which fields they have, and GSM8K's answers end with "#### n".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import jsonlines, jsonstrict
from ..answers import extract_boxed
from ..errors import RaceError


def _gsm8k_answer(text: str) -> str:
    if "####" not in text:
        raise ValueError("GSM8K answers end with '#### <number>'")
    return text.rsplit("####", 1)[1].strip().replace(",", "")


def _gsm8k_solution(text: str) -> str:
    # Drop the calculator annotations <<48/2=24>> GSM8K puts in its worked solutions.
    return re.sub(r"<<[^>]*>>", "", text.rsplit("####", 1)[0]).strip()


def _boxed_answer(text: str) -> str:
    answer = extract_boxed(text)
    if not answer:
        raise ValueError("the solution has no \\boxed{...} final answer")
    return answer


@dataclass(frozen=True)
class DatasetFormat:
    """How one published format maps onto the common columns."""

    name: str
    question: str  #: field holding the problem text
    answer: str  #: field holding (or containing) the gold answer
    solution: str | None = None  #: field holding the worked solution, if any
    parse_answer: Callable[[str], str] = str.strip  #: gold answer from the answer field (ValueError: none)
    parse_solution: Callable[[str], str] = str.strip  #: worked solution from its field
    keep: tuple[str, ...] = ()  #: extra fields carried through unchanged


#: Format name -> its field mapping.
FORMATS: dict[str, DatasetFormat] = {
    "arith": DatasetFormat("arith", "question", "answer", "solution"),
    "gsm8k": DatasetFormat("gsm8k", "question", "answer", "answer", _gsm8k_answer, _gsm8k_solution),
    "math500": DatasetFormat("math500", "problem", "answer", "solution",
                             keep=("subject", "level", "unique_id")),
    "polaris": DatasetFormat("polaris", "problem", "answer", keep=("difficulty",)),
    "math": DatasetFormat("math", "problem", "solution", "solution", _boxed_answer, keep=("level", "type")),
}

DATA_BYTES = 1 << 31
"""A .json data set is read whole: 2 GiB at most (JSON Lines and parquet are streamed)."""

#: Embedded split name -> the real data set it stands in for.
EMBEDDED_SPLITS = {"train": "Polaris-53K", "arith-easy-250": "GSM8K", "arith-hard-250": "MATH-500",
                   "arith-easy-2000": "a large held-out GSM8K-like set"}


def detect_format(record: dict) -> str:
    """The format a record is in, from its fields: question + answer is GSM8K when the answer
    holds '####', else the embedded format; problem + answer is MATH-500 with a solution,
    Polaris without; problem + solution alone is MATH. RaceError when none fits."""
    keys = record.keys() if isinstance(record, dict) else ()
    if {"question", "answer"} <= keys:
        return "gsm8k" if "####" in str(record["answer"]) else "arith"
    if {"problem", "answer"} <= keys:
        return "math500" if "solution" in keys else "polaris"
    if {"problem", "solution"} <= keys:
        return "math"
    raise RaceError(f"cannot tell the data set format of a record with fields {', '.join(map(str, keys)) or 'none'}",
                    "a problem needs question + answer (embedded, GSM8K '#### n'), problem + answer (MATH-500, "
                    "Polaris-53K) or problem + solution with a \\boxed{} answer (MATH)")


def read_records(path: str | Path) -> list:
    """Raw records of a .jsonl, .json (list, or {data|rows: list}) or .parquet file."""
    path = Path(path)
    if not path.is_file():
        raise RaceError(f"dataset file {path} not found", "check the path; data sets are read from local files only")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path).to_pylist()
        except Exception as e:  # pyarrow's ArrowInvalid and friends: not a parquet file
            raise RaceError(f"{path} is not a readable parquet file ({type(e).__name__})",
                            "expected JSON Lines (one object per line), a .json list or a .parquet file") from None
    hint = "expected JSON Lines (one object per line), a .json list or a .parquet file"
    if path.suffix == ".json":      # strict: a duplicate key is refused, never guessed at
        data = jsonstrict.read(path, hint=hint, allow_nan=True, max_bytes=DATA_BYTES)
        if isinstance(data, dict):
            data = data.get("data", data.get("rows", []))
        return data if isinstance(data, list) else []
    return list(jsonlines.values(path, hint=hint))


def load(path: str | Path, format: str | None = None, limit: int | None = None) -> list[dict]:
    """Rows (question, answer, solution, source + kept fields) of a local file in `format`
    (default: detected from its first record). Every record must be in that format; a file
    without records is an error."""
    if format is not None and format not in FORMATS:
        raise RaceError(f"unknown dataset format {format!r}", f"known formats: {', '.join(FORMATS)}")
    records = read_records(path)[:limit]
    if not records:
        raise RaceError(f"dataset {path} has no problems", "one problem per line (JSON Lines), a .json list or parquet")
    name = format or detect_format(records[0])
    fmt = FORMATS[name]
    rows = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise RaceError(f"{path}: record {i} is not an object", "one problem per line, e.g. {\"question\": ..., "
                                                                    "\"answer\": ...}")
        missing = [f for f in (fmt.question, fmt.answer) if rec.get(f) is None]
        if missing:
            raise RaceError(f"{path}: record {i} has no field {missing[0]!r} (format {name})",
                            f"its fields are {', '.join(rec) or 'none'}; every record of a file is in one format")
        try:
            answer = fmt.parse_answer(str(rec[fmt.answer]))
        except ValueError as e:
            raise RaceError(f"{path}: record {i}: {e}", f"format {name}; see suite.train.datasets") from None
        solution = fmt.parse_solution(str(rec[fmt.solution])) if fmt.solution and rec.get(fmt.solution) else None
        row = {"question": str(rec[fmt.question]), "answer": answer, "solution": solution, "source": name}
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
    """The policy prompt of a problem: a conversational prompt (TRL applies the chat template),
    one user turn after an optional system turn."""
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": question}]


def with_prompts(rows: list[dict], system: str | None = None) -> list[dict]:
    """Rows plus a `prompt` column of chat messages, ready for a datasets.Dataset."""
    return [{**r, "prompt": prompt_messages(r["question"], system)} for r in rows]
