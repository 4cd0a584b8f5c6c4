"""The per-step ledger: append-only JSON Lines, one record per optimizer step.

A run writes one line per step and flushes + fsyncs it, so after a crash the file reads back
up to the last complete record. A torn last line (the step being written when the process
died) is reported as `LedgerReader.torn`, never silently dropped and never a crash.
Reading streams line by line: constant memory for ledgers of any length.

Record shape (schemas/ledger-record-v1.schema.json):
    {"step": 1, "time": "2026-11-29T20:00:00Z",
     "tokens": {"rollout_prompt": .., "rollout_completion": .., "update": .., "reward": ..},
     "work": {...suite.accounting statistics...},
     "flops": {"rollout": .., "update": .., "reward": ..},
     "seconds": {...optional...}, "metrics": {...optional...}}
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from operator import itemgetter
from typing import Any, Iterator, Mapping

from . import jsonstrict
from .errors import RaceError

PHASES = ("rollout", "update", "reward")
TOKEN_KEYS = ("rollout_prompt", "rollout_completion", "update", "reward")
SECONDS_KEYS = ("rollout", "update", "reward", "other")
RECORD_KEYS = frozenset({"step", "time", "tokens", "work", "flops", "seconds", "metrics"})
REQUIRED_KEYS = ("step", "time", "tokens", "work", "flops")
# Lines parsed together as one JSON array: at most this many, or this many bytes (bounded memory).
_BATCH, _BATCH_BYTES = 256, 4 * 1024 * 1024
SCHEMA_FILE = "ledger-record-v1.schema.json"


def utc_now() -> str:
    """Current UTC time as RFC 3339 with a Z suffix (second precision)."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------------------------------------
# Record checks. A hand-written mirror of the ledger-record schema: jsonschema costs ~100 us a
# record, too slow for 100,000-step ledgers, so this fast check runs on every record and the
# schema only explains the records it rejects (tests keep the two in agreement).

MAX_COUNT = 10**30  # schema's count maximum: far above any run, and keeps numbers printable
_INT = {int}
_NUM = {int, float}
_TOKEN_SET = frozenset(TOKEN_KEYS)
_REQUIRED_SET = frozenset(REQUIRED_KEYS)
_PHASE_SET = frozenset(PHASES)
_SECONDS_SET = frozenset(SECONDS_KEYS)


def _counts(d: Any) -> bool:
    """A dict whose values are all non-negative ints (bool excluded), checked at C speed."""
    if type(d) is not dict:
        return False
    v = d.values()
    return not v or (set(map(type, v)) <= _INT and min(v) >= 0 and max(v) <= MAX_COUNT)


def _seconds(d: Any) -> bool:
    if type(d) is not dict or not d.keys() <= _SECONDS_SET:
        return False
    v = d.values()
    return not v or (set(map(type, v)) <= _NUM and all(map(math.isfinite, v)) and min(v) >= 0)


def record_problem(rec: Any) -> str | None:
    """None if `rec` is a well-formed ledger record, else a one-line reason (fast path)."""
    if type(rec) is not dict:
        return f"a record must be a JSON object, not {type(rec).__name__}"
    keys = rec.keys()
    if not keys <= RECORD_KEYS:
        return f"unknown key {sorted(keys - RECORD_KEYS)[0]!r}"
    if not _REQUIRED_SET <= keys:
        return f"missing key {next(k for k in REQUIRED_KEYS if k not in rec)!r}"
    step = rec["step"]
    if type(step) is not int or step < 1:
        return "step must be an integer >= 1"
    if type(rec["time"]) is not str or not _is_datetime(rec["time"]):
        return "time must be an RFC 3339 date-time"
    tokens = rec["tokens"]
    if not _counts(tokens) or tokens.keys() != _TOKEN_SET:
        return f"tokens must hold exactly {', '.join(TOKEN_KEYS)} as non-negative integers"
    flops = rec["flops"]
    if not _counts(flops) or flops.keys() != _PHASE_SET:
        return f"flops must hold exactly {', '.join(PHASES)} as non-negative integers"
    if not _counts(rec["work"]):
        return "work must map names to non-negative integers"
    if "seconds" in rec and not _seconds(rec["seconds"]):
        return f"seconds must map some of {', '.join(SECONDS_KEYS)} to non-negative numbers"
    if "metrics" in rec:
        m = rec["metrics"]
        if type(m) is not dict or not set(map(type, m.values())) <= {int, float, type(None)} \
                or not all(math.isfinite(v) for v in m.values() if v is not None):
            return "metrics must map names to numbers or null"
    return None


_DAYS_OK: dict[str, bool] = {}


def _is_datetime(s: str) -> bool:
    """The check jsonschema's date-time format uses (rfc3339-validator: its regex, then the
    calendar), with the calendar part cached per date: ledgers hold a few distinct dates and
    100,000s of times."""
    from rfc3339_validator import RFC3339_REGEX, validate_rfc3339

    if RFC3339_REGEX.match(s) is None:
        return False
    day = s[:10]  # the regex fixes YYYY-MM-DD at the start
    ok = _DAYS_OK.get(day)
    if ok is None:
        ok = _DAYS_OK[day] = validate_rfc3339(day + "T00:00:00Z")
    return ok


# ---------------------------------------------------------------------------------------------
# Writing

class LedgerWriter:
    """Appends one JSON line per optimizer step; every line is flushed and fsynced so a crash
    loses at most the step being written.

    `LedgerWriter(path)` starts a new ledger (refuses to overwrite a non-empty one);
    `LedgerWriter(path, resume=True)` continues an existing one after its last complete record,
    cutting off a torn last line first. Use as a context manager or call close().
    """

    def __init__(self, path: str | os.PathLike, *, resume: bool = False, fsync: bool = True):
        self.path = Path(path)
        self.fsync = fsync
        self.last_step = 0
        self.torn: TornLine | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and self.path.stat().st_size > 0:
            if not resume:
                raise RaceError(f"ledger {self.path} already exists and is not empty",
                                "pick a new path, or resume it (LedgerWriter(path, resume=True))")
            reader = LedgerReader(self.path)
            for rec in reader:
                self.last_step = rec["step"] if isinstance(rec.get("step"), int) else self.last_step
            self.torn = reader.torn
            if reader.torn is not None:
                with open(self.path, "r+b") as f:  # drop the partial line so the next record starts clean
                    f.truncate(reader.torn.offset)
        self._f = open(self.path, "ab")

    def write(self, record: Mapping[str, Any]) -> dict:
        """Append one record (adds `time` if missing). Refuses malformed records and steps that
        do not increase: the ledger is evidence, so it is checked at the source."""
        rec = dict(record)
        rec.setdefault("time", utc_now())
        problem = record_problem(rec)
        if problem:
            raise RaceError(f"ledger record for step {rec.get('step')!r} is malformed: {problem}",
                            "see schemas/ledger-record-v1.schema.json")
        if rec["step"] <= self.last_step:
            raise RaceError(f"ledger step {rec['step']} does not follow step {self.last_step}",
                            "steps must strictly increase")
        line = json.dumps(rec, separators=(",", ":"), allow_nan=False) + "\n"
        self._f.write(line.encode("utf-8"))
        self._f.flush()
        if self.fsync:
            os.fsync(self._f.fileno())
        self.last_step = rec["step"]
        return rec

    def append(self, step: int, *, tokens: Mapping[str, int], work: Mapping[str, int],
               flops: Mapping[str, int], seconds: Mapping[str, float] | None = None,
               metrics: Mapping[str, float | None] | None = None, time: str | None = None) -> dict:
        """Keyword form of write(): one optimizer step's tokens, work, FLOPs (and optional
        wall seconds per phase and training metrics)."""
        rec: dict[str, Any] = {"step": step, "time": time or utc_now(), "tokens": dict(tokens),
                               "work": dict(work), "flops": dict(flops)}
        if seconds is not None:
            rec["seconds"] = dict(seconds)
        if metrics is not None:
            rec["metrics"] = dict(metrics)
        return self.write(rec)

    def close(self) -> None:
        """Close the file (every record is already on disk)."""
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> "LedgerWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# Reading

@dataclass(frozen=True)
class TornLine:
    """The last line of a ledger was cut off mid-write (no newline and not a complete record)."""

    line: int  # 1-based line number
    offset: int  # byte offset where the torn line starts: truncate here to repair
    length: int  # bytes in the torn line
    reason: str

    def __str__(self) -> str:
        return (f"line {self.line} is a torn record ({self.length} bytes at offset {self.offset}: {self.reason}); "
                f"the ledger reads back up to line {self.line - 1}")


@dataclass(frozen=True)
class LineProblem:
    """A line that is not a ledger record (bad JSON, too long, malformed record)."""

    line: int
    message: str
    kind: str  # jsonstrict kind (syntax, nan, duplicate-key, ...), "too-long", or "record"


@dataclass
class LedgerReader:
    """Streams the complete records of a ledger in constant memory.

    Iterate it once; afterwards (or during) `torn` is the torn last line or None, `problems`
    the bad lines in the middle (kept only up to `max_problems`; `n_problems` counts all),
    `records` the number of good records, `sha256` the hash of every byte read, `size` bytes,
    `line` the line number of the record last yielded.
    `strict=True` raises RaceError at the first bad middle line instead of collecting it.
    """

    path: Path
    strict: bool = False
    max_line_bytes: int = jsonstrict.MAX_LINE_BYTES
    max_problems: int = 100
    check_records: bool = True
    torn: TornLine | None = None
    problems: list[LineProblem] = field(default_factory=list)
    n_problems: int = 0
    records: int = 0
    sha256: str = ""
    size: int = 0
    line: int = 0  # line number of the record last yielded

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    def _problem(self, p: LineProblem) -> None:
        if self.strict:
            raise RaceError(f"{self.path}: line {p.line}: {p.message}",
                            "ledgers are one JSON record per line; fix or remove the line")
        self.n_problems += 1
        if len(self.problems) < self.max_problems:
            self.problems.append(p)

    def _parse(self, pending: list[tuple[int, int, bytes]]) -> Iterator[dict]:
        """Parse and check a batch of lines, then empty it. Fast path: the batch as one JSON
        array. That is exact when every line starts with '{' and ends with '}' and every element
        is a valid (flat) record: '}' followed by '{' cannot occur inside one record, so no record
        can span two lines. Anything else is parsed line by line for precise problems."""
        if not pending:
            return
        batch = pending[:]
        pending.clear()
        if self.check_records and batch[-1][2].endswith(b"\n") and all(
                r.startswith(b"{") and r.rstrip().endswith(b"}") for _, _, r in batch):
            try:
                recs = jsonstrict.loads(b"[" + b",".join(r for _, _, r in batch) + b"]", max_depth=None,
                                        finite=False)  # record_problem checks every float
            except jsonstrict.JSONInputError:
                recs = None
            if recs is not None and len(recs) == len(batch) and not any(map(record_problem, recs)):
                for (lineno, _, _), rec in zip(batch, recs):
                    self.records += 1
                    self.line = lineno
                    yield rec
                return
        for lineno, start, raw in batch:
            try:
                # No depth walk: record_problem accepts only the flat record shape anyway.
                rec = jsonstrict.loads(raw, max_depth=None)
                problem = record_problem(rec) if self.check_records else None
            except jsonstrict.JSONInputError as e:
                if not raw.endswith(b"\n"):  # the last line, cut off mid-write
                    self.torn = TornLine(lineno, start, len(raw), e.message)
                    continue
                self._problem(LineProblem(lineno, e.message, e.kind))
                continue
            if problem:
                self._problem(LineProblem(lineno, problem, "record"))
                continue
            self.records += 1
            self.line = lineno
            yield rec

    def __iter__(self) -> Iterator[dict]:
        h = hashlib.sha256()
        offset, lineno = 0, 0
        pending: list[tuple[int, int, bytes]] = []  # lines not yet parsed: (line, offset, bytes)
        pending_bytes = 0
        try:
            f = open(self.path, "rb")
        except OSError as e:
            raise RaceError(f"cannot read ledger {self.path}: {e.strerror or e}", "check the path") from None
        with f:
            while True:
                raw = f.readline(self.max_line_bytes + 1)
                if not raw:
                    break
                lineno += 1
                start = offset
                h.update(raw)
                offset += len(raw)
                if len(raw) > self.max_line_bytes and not raw.endswith(b"\n"):
                    pending_bytes = 0
                    yield from self._parse(pending)  # keep problems in line order
                    # Skip the rest of the overlong line without holding it in memory.
                    while raw and not raw.endswith(b"\n"):
                        raw = f.readline(self.max_line_bytes)
                        h.update(raw)
                        offset += len(raw)
                    self._problem(LineProblem(lineno, f"line longer than {self.max_line_bytes:,} bytes", "too-long"))
                    continue
                if raw.isspace():
                    continue  # blank lines are harmless
                pending.append((lineno, start, raw))
                pending_bytes += len(raw)
                if len(pending) >= _BATCH or pending_bytes >= _BATCH_BYTES or not raw.endswith(b"\n"):
                    pending_bytes = 0
                    yield from self._parse(pending)
            yield from self._parse(pending)
        self.sha256 = h.hexdigest()
        self.size = offset


# How many step-order problems to list one by one before summarising.
MAX_STEP_PROBLEMS = 20
# Records summed together (bounded memory: ~1,000 records of ~1 KB).
_CHUNK = 1024


@dataclass
class LedgerSummary:
    """One streaming pass over a ledger: sums of flops, tokens, work and seconds, first and
    last step and time, step-order problems, torn tail, bad lines, sha256 and size."""

    path: Path
    records: int = 0
    flops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_KEYS, 0))
    work: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    first_time: str | None = None
    last_time: str | None = None
    first_step: int | None = None
    last_step: int | None = None
    step_problems: list[tuple[int, str]] = field(default_factory=list)  # (line, message)
    n_step_problems: int = 0
    torn: TornLine | None = None
    problems: list[LineProblem] = field(default_factory=list)
    n_problems: int = 0
    sha256: str = ""
    size: int = 0
    error: str | None = None  # the file could not be opened at all

    def _add(self, chunk: list[dict]) -> None:
        """Add a chunk of checked records to the sums, column-wise at C speed (zip + sum):
        flops and tokens have fixed keys; work and seconds are grouped by key set, which the
        records of one run share."""
        self.last_time = chunk[-1]["time"]
        for name, acc, keys in (("flops", self.flops, PHASES), ("tokens", self.tokens, TOKEN_KEYS)):
            for k, v in zip(keys, map(sum, zip(*map(itemgetter(*keys), map(itemgetter(name), chunk))))):
                acc[k] += v
        for name, acc in (("work", self.work), ("seconds", self.seconds)):
            groups: dict[tuple, list] = {}
            for d in (r[name] for r in chunk if name in r):
                groups.setdefault(tuple(d), []).append(d)
            for keys, ds in groups.items():
                if not keys:
                    continue
                rows = map(itemgetter(*keys), ds) if len(keys) > 1 else ((d[keys[0]],) for d in ds)
                for k, v in zip(keys, map(sum, zip(*rows))):
                    acc[k] = acc.get(k, 0) + v

    @classmethod
    def scan(cls, path: str | os.PathLike, *, strict: bool = False) -> "LedgerSummary":
        """Stream the ledger once and summarise it (constant memory). strict: a bad middle
        line or a step that does not increase raises RaceError instead of being collected."""
        s = cls(Path(path))
        if not s.path.is_file():
            s.error = f"ledger file {s.path} does not exist" if not s.path.exists() else f"{s.path} is not a file"
            return s
        reader = LedgerReader(s.path, strict=strict)
        prev = None
        chunk: list[dict] = []
        try:
            for rec in reader:
                step = rec["step"]
                if prev is not None and step <= prev:
                    if strict:
                        raise RaceError(f"{s.path}: line {reader.line}: step {step} does not follow step {prev}",
                                        "steps must strictly increase; one record per optimizer step")
                    s.n_step_problems += 1
                    if len(s.step_problems) < MAX_STEP_PROBLEMS:
                        what = "repeats" if step == prev else "goes back from"
                        s.step_problems.append((reader.line, f"step {step} {what} step {prev}"))
                prev = step
                if s.first_step is None:
                    s.first_step, s.first_time = step, rec["time"]
                chunk.append(rec)
                if len(chunk) == _CHUNK:
                    s._add(chunk)
                    chunk.clear()
            if chunk:
                s._add(chunk)
                s.last_time = chunk[-1]["time"]
        except OSError as e:
            s.error = f"cannot read ledger {s.path}: {e}"
            return s
        s.last_step = prev
        s.records = reader.records
        s.torn, s.problems, s.n_problems = reader.torn, reader.problems, reader.n_problems
        s.sha256, s.size = reader.sha256, reader.size
        return s


@dataclass(frozen=True)
class Ledger:
    """A ledger read whole: its complete records and what was wrong with the rest."""

    path: Path
    records: list[dict]
    torn: TornLine | None
    problems: list[LineProblem]
    sha256: str


def read_ledger(path: str | os.PathLike, *, strict: bool = True) -> Ledger:
    """Read every complete record of a ledger. A torn last line is in `.torn` (not an error);
    a bad line in the middle raises RaceError when strict, else it is listed in `.problems`.
    For huge ledgers iterate `LedgerReader(path)` instead (constant memory)."""
    reader = LedgerReader(Path(path), strict=strict)
    records = list(reader)
    return Ledger(reader.path, records, reader.torn, list(reader.problems), reader.sha256)


def iter_ledger(path: str | os.PathLike, *, strict: bool = True) -> LedgerReader:
    """A streaming reader over a ledger's complete records (see LedgerReader)."""
    return LedgerReader(Path(path), strict=strict)


def file_sha256(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """sha256 of a file's bytes, lower-case hex, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return h.hexdigest()
