# Over 500 lines: the writer, the streaming reader and its fast batch check must agree on one record.
"""The per-step ledger: append-only JSON Lines, one record per optimizer step.

A run writes one line per step and flushes + fsyncs it, so after a crash the file reads back
up to the last complete record. A torn last line (the step being written when the process
died) is reported as `LedgerReader.torn`, never silently dropped and never a crash.
Reading streams line by line: constant memory for ledgers of any length.

Record shape (schemas/ledger-record-v1.schema.json, the one place it is defined):
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
from fractions import Fraction
from pathlib import Path
from itertools import chain, islice, repeat
from operator import itemgetter, lt
from typing import Any, Iterator, Mapping

from .. import jsonlines, jsonstrict
from ..accounting import PHASES, TOKEN_KEYS
from ..errors import RaceError
from .schemas import record_shape

# Lines parsed together as one JSON array: at most this many, or this many bytes (bounded memory).
_BATCH, _BATCH_BYTES = 256, 4 * 1024 * 1024


def utc_now() -> str:
    """Current UTC time as RFC 3339 with a Z suffix (second precision)."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------------------------------------
# Record checks. The shape comes from the ledger-record schema (suite.record.schemas.record_shape);
# running jsonschema itself costs ~100 us a record, too slow for 100,000-step ledgers, so this
# fast check applies that shape to every record and the schema only explains the records it
# rejects (tests keep the two verdicts in agreement).

_INT = {int}
_NUM = {int, float}
_S = None


class _Shape:
    """record_shape() as the sets the checks test against (built once)."""

    def __init__(self):
        s = record_shape()
        self.keys, self.required, self.required_set = s.keys, s.required, frozenset(s.required)
        self.tokens, self.token_set = s.tokens, frozenset(s.tokens)
        self.flops, self.flop_set = s.flops, frozenset(s.flops)
        self.seconds, self.seconds_set = s.seconds, frozenset(s.seconds)
        self.max_count = s.max_count


def _shape() -> _Shape:
    global _S
    if _S is None:
        _S = _Shape()
    return _S


def _counts(d: Any) -> bool:
    """A dict whose values are all non-negative ints (bool excluded), checked at C speed."""
    if type(d) is not dict:
        return False
    v = d.values()
    return not v or (set(map(type, v)) <= _INT and min(v) >= 0 and max(v) <= _shape().max_count)


def _seconds(d: Any) -> bool:
    if type(d) is not dict or not d.keys() <= _shape().seconds_set:
        return False
    v = d.values()
    return not v or (set(map(type, v)) <= _NUM and all(map(math.isfinite, v)) and min(v) >= 0)


def record_problem(rec: Any) -> str | None:
    """None if `rec` is a well-formed ledger record, else a one-line reason (fast path)."""
    if type(rec) is not dict:
        return f"a record must be a JSON object, not {type(rec).__name__}"
    shape = _shape()
    keys = rec.keys()
    if not keys <= shape.keys:
        return f"unknown key {sorted(keys - shape.keys)[0]!r}"
    if not shape.required_set <= keys:
        return f"missing key {next(k for k in shape.required if k not in rec)!r}"
    step = rec["step"]
    if type(step) is not int or step < 1:
        return "step must be an integer >= 1"
    if type(rec["time"]) is not str or not _is_datetime(rec["time"]):
        return "time must be an RFC 3339 date-time"
    tokens = rec["tokens"]
    if not _counts(tokens) or tokens.keys() != shape.token_set:
        return f"tokens must hold exactly {', '.join(shape.tokens)} as non-negative integers"
    flops = rec["flops"]
    if not _counts(flops) or flops.keys() != shape.flop_set:
        return f"flops must hold exactly {', '.join(shape.flops)} as non-negative integers"
    if not _counts(rec["work"]):
        return "work must map names to non-negative integers"
    if "seconds" in rec and not _seconds(rec["seconds"]):
        return f"seconds must map some of {', '.join(shape.seconds)} to non-negative numbers"
    if "metrics" in rec:
        m = rec["metrics"]
        if type(m) is not dict or not set(map(type, m.values())) <= {int, float, type(None)} \
                or not all(math.isfinite(v) for v in m.values() if v is not None):
            return "metrics must map names to numbers or null"
    return None


_METRIC_TYPES = {int, float, type(None)}


def _count_column(dicts: list, plain: bool) -> bool:
    """_counts of every one of `dicts`, a whole column at once. `plain` (see batch_ok): the
    values hold no bool and no negative number, so one sum proves them integers (a float makes
    it a float, anything else a TypeError) and in range (each is at most the sum)."""
    if set(map(type, dicts)) - {dict}:
        return False
    if plain:
        try:
            total = sum(chain.from_iterable(map(dict.values, dicts)))
        except TypeError:
            return False
        if type(total) is int and total <= _shape().max_count:
            return True
    v = list(chain.from_iterable(map(dict.values, dicts)))
    return not v or (set(map(type, v)) <= _INT and min(v) >= 0 and max(v) <= _shape().max_count)


def batch_ok(recs: list, *, plain: bool = False) -> bool:
    """True only when record_problem(rec) is None for every record of `recs`, checked column
    by column at C speed (a few set/sum/min calls per batch instead of a dozen calls per
    record). False says nothing about which record is bad: check them one by one then.

    plain=True is a promise about the JSON text the records were parsed from: it has no
    `true`/`false` literal and no '-' outside the time strings (so no bool and no negative
    number anywhere); it lets sums stand in for type and range checks."""
    if not recs or set(map(type, recs)) != {dict}:
        return not recs
    shape = _shape()
    for keys in set(map(tuple, recs)):          # the records of one run share a key order
        ks = set(keys)
        if not (ks <= shape.keys and shape.required_set <= ks):
            return False
    steps = list(map(itemgetter("step"), recs))
    times = list(map(itemgetter("time"), recs))
    if set(map(type, steps)) != _INT or min(steps) < 1 or set(map(type, times)) != {str} \
            or not _all_datetimes(times):
        return False
    for name, want in (("tokens", shape.token_set), ("flops", shape.flop_set)):
        col = list(map(itemgetter(name), recs))
        if not _count_column(col, plain) or any(set(k) != want for k in set(map(tuple, col))):
            return False
    if not _count_column(list(map(itemgetter("work"), recs)), plain):
        return False
    seconds = [r["seconds"] for r in recs if "seconds" in r]
    if seconds:
        if set(map(type, seconds)) != {dict} or not set().union(*seconds) <= shape.seconds_set:
            return False
        v = list(chain.from_iterable(map(dict.values, seconds)))
        if plain:   # non-negative: the sum is finite only when every value is
            try:
                total = sum(v)
            except TypeError:
                return False
            if type(total) not in _NUM or not math.isfinite(total):
                return False
        elif v and not (set(map(type, v)) <= _NUM and all(map(math.isfinite, v)) and min(v) >= 0):
            return False
    metrics = [r["metrics"] for r in recs if "metrics" in r]
    if metrics:
        if set(map(type, metrics)) != {dict}:
            return False
        v = list(chain.from_iterable(map(dict.values, metrics)))
        if not set(map(type, v)) <= _METRIC_TYPES or not all(math.isfinite(x) for x in v if x is not None):
            return False
    return True


def _strings(recs: list) -> int:
    """How many JSON strings a batch of records that passed batch_ok holds: every key of every
    object, and one value per record (its time). Nothing else in such a record is a string."""
    n = len(recs) + sum(map(len, recs))
    for name in ("tokens", "flops", "work"):
        n += sum(map(len, map(itemgetter(name), recs)))
    for name in ("seconds", "metrics"):
        n += sum(len(r[name]) for r in recs if name in r)
    return n


try:  # a faster parser for the fast path; the strict reader stays the json module's
    from orjson import loads as _array_loads
except ImportError:  # pragma: no cover - orjson is a dependency; the stdlib path is exact too
    _array_loads = None

# orjson reads integers past 64 bits as floats. In count fields a float fails the record check
# (the batch is then read line by line, strictly); where floats are allowed (seconds, metrics) a
# value that large sends the batch to the json module, which keeps it an integer.
_BIG = float(2**63)


def _big_float(recs: list) -> bool:
    """A seconds or metrics value that may be an integer orjson read as a float."""
    for name in ("seconds", "metrics"):
        v = [x for r in recs if type(r) is dict and type(r.get(name)) is dict
             for x in r[name].values() if type(x) is float]
        if v and max(map(abs, v)) >= _BIG:
            return True
    return False


def _fast_records(data: bytes) -> list | None:
    """A batch `[{...},{...}]` of lines parsed by a C decoder with no per-object hook, when
    that provably gives what the strict reader would: UTF-8, no backslash (so every '"' in the
    text delimits a string), every element a well-formed record (batch_ok: this also refuses
    NaN, Infinity and overflowing floats, which plain json lets through), and as many strings in
    the text as keys and times in the records (a duplicate key would have collapsed into one).
    None otherwise: the caller parses strictly, line by line, and names the problem."""
    if b"\\" in data:
        return None
    try:
        recs = _array_loads(data) if _array_loads is not None else None    # checks UTF-8 itself
        if recs is None or type(recs) is list and _big_float(recs):
            recs = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):        # orjson's and json's decode errors are ValueErrors
        return None
    if type(recs) is not list or set(map(type, recs)) != {dict}:
        return None
    times = list(map(dict.get, recs, repeat("time")))
    if set(map(type, times)) != {str}:
        return None
    plain = b"true" not in data and b"false" not in data and data.count(b"-") == "".join(times).count("-")
    if not batch_ok(recs, plain=plain) or data.count(b'"') != 2 * _strings(recs):
        return None
    return recs


_DAYS_OK: dict[str, bool] = {}
_TIMES_RE = None


def _all_datetimes(times: list[str]) -> bool:
    """_is_datetime of every time, in one regex pass over the times joined by newlines (the
    record check's regex repeated) plus the calendar check per distinct day."""
    global _TIMES_RE
    if _TIMES_RE is None:
        import re

        from rfc3339_validator import RFC3339_REGEX

        one = RFC3339_REGEX.pattern.replace("^", "").replace("$", "")   # its only anchors
        _TIMES_RE = re.compile(rf"(?:{one})(?:\n(?:{one}))*", RFC3339_REGEX.flags)
    text = "\n".join(times)
    # A time holding a newline would split into two matches: refuse (the caller checks one by one).
    if text.count("\n") != len(times) - 1 or _TIMES_RE.fullmatch(text) is None:
        return False
    return all(_day_ok(day) for day in set(map(itemgetter(slice(0, 10)), times)))


def _day_ok(day: str) -> bool:
    from rfc3339_validator import validate_rfc3339

    ok = _DAYS_OK.get(day)
    if ok is None:
        ok = _DAYS_OK[day] = validate_rfc3339(day + "T00:00:00Z")
    return ok


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

    def _parse(self, pending: list[tuple[int, int, bytes]]) -> tuple[list[int], list[dict]]:
        """Parse and check a batch of lines, then empty it; returns the good records and their
        line numbers. Fast path: the batch as one JSON array. That is exact when every line
        starts with '{' and ends with '}' and every element is a valid (flat) record: '}'
        followed by '{' cannot occur inside one record, so no record can span two lines.
        Anything else is parsed line by line for precise problems."""
        if not pending:
            return [], []
        batch = pending[:]
        pending.clear()
        if self.check_records and batch[-1][2].endswith(b"\n") and all(
                r.startswith(b"{") and r.rstrip().endswith(b"}") for _, _, r in batch):
            recs = _fast_records(b"[" + b",".join(r for _, _, r in batch) + b"]")
            if recs is not None and len(recs) == len(batch):
                return [lineno for lineno, _, _ in batch], recs
        linenos, recs = [], []
        for lineno, start, raw in batch:
            try:
                # No depth walk: record_problem accepts only the flat record shape anyway.
                rec = jsonlines.parse(raw, allow_nan=False, max_depth=None)
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
            linenos.append(lineno)
            recs.append(rec)
        return linenos, recs

    def batches(self) -> Iterator[tuple[list[int], list[dict]]]:
        """The complete records in batches of up to a few hundred, each with their line
        numbers: (line numbers, records). For readers that work a column at a time;
        `records` and `line` advance by whole batches."""
        for linenos, recs in self._batches():
            self.records += len(recs)
            self.line = linenos[-1]
            yield linenos, recs

    def __iter__(self) -> Iterator[dict]:
        for linenos, recs in self._batches():
            for lineno, rec in zip(linenos, recs):
                self.records += 1
                self.line = lineno
                yield rec

    def _batches(self) -> Iterator[tuple[list[int], list[dict]]]:
        """Read the file in blocks (hashing each once) and cut them into complete lines. A block
        of lines that are all exactly `{...}` is parsed as one JSON array (_fast_records); any
        other block goes line by line: blank lines skipped, overlong lines reported, batches of
        lines parsed by _parse. A line longer than the limit is never held whole."""
        h = hashlib.sha256()
        limit = self.max_line_bytes
        block = max(1, min(_BATCH_BYTES, (limit + 1) // 2))  # a block of lines then holds no overlong line
        offset = lineno = 0              # file offset of `buf`, lines before it
        buf = b""                        # the start of a line whose end is not read yet
        pending: list[tuple[int, int, bytes]] = []  # lines not yet parsed: (line, offset, bytes)
        pending_bytes = 0
        try:
            f = open(self.path, "rb")
        except OSError as e:
            raise RaceError(f"cannot read ledger {self.path}: {e.strerror or e}", "check the path") from None
        with f:
            eof = False
            while not eof:
                chunk = f.read(block)
                eof = not chunk
                h.update(chunk)
                buf += chunk
                cut = len(buf) if eof else buf.rfind(b"\n") + 1
                if not cut:
                    if len(buf) > limit:     # an overlong line: report it, skip to its end
                        done = self._parse(pending)  # keep problems in line order
                        pending_bytes = 0
                        if done[1]:
                            yield done
                        lineno += 1
                        skipped, buf = len(buf), b""
                        while chunk := f.read(block):
                            h.update(chunk)
                            end = chunk.find(b"\n") + 1
                            if end:
                                skipped, buf = skipped + end, chunk[end:]
                                break
                            skipped += len(chunk)
                        offset += skipped
                        self._problem(LineProblem(lineno, f"line longer than {limit:,} bytes", "too-long"))
                    continue
                lines, buf = buf[:cut], buf[cut:]
                n = lines.count(b"\n")
                if self.check_records and not pending and len(lines) <= limit + 1 and lines.startswith(b"{") \
                        and lines.endswith(b"}\n"):
                    body = lines[:-1].replace(b"}\n{", b"},{")    # the lines joined by commas
                    recs = _fast_records(b"[" + body + b"]") if b"\n" not in body else None
                    if recs is not None and len(recs) == n:
                        yield list(range(lineno + 1, lineno + n + 1)), recs
                        lineno, offset = lineno + n, offset + cut
                        continue
                parts = lines.split(b"\n")
                for i, part in enumerate(parts):
                    raw = part + b"\n" if i < n else part
                    if not raw:
                        continue
                    lineno += 1
                    start = offset
                    offset += len(raw)
                    if len(part) > limit:
                        done = self._parse(pending)
                        pending_bytes = 0
                        if done[1]:
                            yield done
                        self._problem(LineProblem(lineno, f"line longer than {limit:,} bytes", "too-long"))
                        continue
                    if raw.isspace():
                        continue  # blank lines are harmless
                    pending.append((lineno, start, raw))
                    pending_bytes += len(raw)
                    if len(pending) >= _BATCH or pending_bytes >= _BATCH_BYTES or i == n:
                        pending_bytes = 0
                        done = self._parse(pending)
                        if done[1]:
                            yield done
            done = self._parse(pending)
            if done[1]:
                yield done
        self.sha256 = h.hexdigest()
        self.size = offset


# How many step-order problems to list one by one before summarising.
MAX_STEP_PROBLEMS = 20


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
    # With scan(series=True): every record's step and its flops dict, in file order (a chart).
    series: tuple[list[int], list[dict[str, int]]] | None = None
    # Records that generated (tokens.rollout_completion > 0): how many, the step gaps between
    # consecutive ones (up to 16 distinct), the last one's step and tokens (the work equations).
    # ... and how often the most common of them (same tokens, same non-zero work) recurs (PROV-003).
    generations: int = 0
    first_gen_step: int | None = None
    gen_gaps: set = field(default_factory=set)
    last_gen_step: int | None = None
    last_gen_tokens: dict | None = None
    top_repeat: int = 0
    _repeats: dict | None = None   # signature hash -> count, during the scan only
    # Records whose rows are all equally long, as a padded engine runs them: rollout pairs =
    # n x tri(positions / n); training positions^2 / full pairs = a whole multiple of the batch.
    rollout_rows_equal: int = 0
    train_records: int = 0
    train_rows_equal: int = 0
    _batch: int = 0
    # What the update trained of the generated rows (the work equations of filtered and multi-turn
    # ledgers): kept rows (count.completions - count.discarded) and each record's prompt,
    # completion and environment tokens weighted by its kept share; completions of records
    # with environment tokens (multi-turn).
    kept_rows: int = 0
    kept_tokens: tuple = (0, 0, 0)
    env_completions: int = 0

    def _generating(self, steps: list[int], recs: list[dict]) -> None:
        counts = self._repeats
        if counts is None:
            counts = self._repeats = {}
        tok = itemgetter(*TOKEN_KEYS)
        for step, r in zip(steps, recs):
            t, w = r["tokens"], r["work"]
            if w.get("count.completions"):
                n = self._batch = w["count.completions"]
                roll = w.get("rollout.tokens", 0)
                if 2 * n * w.get("rollout.attn_causal", 0) == roll * (roll + n):
                    self.rollout_rows_equal += 1
                self._kept(w, n)
            tu, full, n = w.get("update.train.tokens", 0), w.get("update.train.attn_full", 0), self._batch
            if tu:
                self.train_records += 1
                rows, rem = divmod(tu * tu, full) if full else (0, 1)
                if not rem and n and rows % n == 0:
                    self.train_rows_equal += 1
            if t["rollout_completion"]:
                if self.last_gen_step is None:
                    self.first_gen_step = step
                elif len(self.gen_gaps) < 16:
                    self.gen_gaps.add(step - self.last_gen_step)
                self.last_gen_step, self.last_gen_tokens = step, t
                self.generations += 1
                sig = hash((tok(t), tuple(sorted(kv for kv in r["work"].items() if kv[1]))))
                c = counts[sig] = counts.get(sig, 0) + 1
                if c > self.top_repeat:
                    self.top_repeat = c

    def _kept(self, w: dict, n: int) -> None:
        d, e = w.get("count.discarded", 0), w.get("count.rollout_env", 0)
        toks = (w.get("count.rollout_prompt", 0), w.get("count.rollout_completion", 0), e)
        f = Fraction(n - d, n) if d else 1
        self.kept_rows += n - d
        self.kept_tokens = tuple(a + f * b for a, b in zip(self.kept_tokens, toks))
        if e:
            self.env_completions += n

    def _add(self, chunk: list[dict]) -> None:
        """Add a chunk of checked records to the sums, column-wise at C speed (zip + sum):
        flops and tokens have fixed keys; work and seconds are grouped by key set, which the
        records of one run share."""
        self.last_time = chunk[-1]["time"]
        for name, acc, keys in (("flops", self.flops, PHASES), ("tokens", self.tokens, TOKEN_KEYS)):
            for k, v in zip(keys, map(sum, zip(*map(itemgetter(*keys), map(itemgetter(name), chunk))))):
                acc[k] += v
        for name, acc in (("work", self.work), ("seconds", self.seconds)):
            ds = [r[name] for r in chunk if name in r]
            kinds = set(map(tuple, ds))
            groups: dict[tuple, list] = {}
            if len(kinds) == 1:         # the usual case: one key set for the whole chunk
                groups[kinds.pop()] = ds
            else:
                for d in ds:
                    groups.setdefault(tuple(d), []).append(d)
            for keys, ds in groups.items():
                if not keys:
                    continue
                rows = map(itemgetter(*keys), ds) if len(keys) > 1 else ((d[keys[0]],) for d in ds)
                for k, v in zip(keys, map(sum, zip(*rows))):
                    acc[k] = acc.get(k, 0) + v

    @classmethod
    def scan(cls, path: str | os.PathLike, *, strict: bool = False, series: bool = False) -> "LedgerSummary":
        """Stream the ledger once and summarise it (constant memory). strict: a bad middle
        line or a step that does not increase raises RaceError instead of being collected.
        series: also keep every record's step and flops (memory grows with the ledger)."""
        s = cls(Path(path))
        if series:
            s.series = ([], [])
        if not s.path.is_file():
            s.error = f"ledger file {s.path} does not exist" if not s.path.exists() else f"{s.path} is not a file"
            return s
        reader = LedgerReader(s.path, strict=strict)
        prev = None
        try:
            for linenos, recs in reader.batches():
                steps = list(map(itemgetter("step"), recs))
                seq = steps if prev is None else [prev, *steps]
                if not all(map(lt, seq, islice(seq, 1, None))):    # look closer only when out of order
                    for line, step in zip(linenos, steps):
                        if prev is not None and step <= prev:
                            if strict:
                                raise RaceError(f"{s.path}: line {line}: step {step} does not follow step {prev}",
                                                "steps must strictly increase; one record per optimizer step")
                            s.n_step_problems += 1
                            if len(s.step_problems) < MAX_STEP_PROBLEMS:
                                what = "repeats" if step == prev else "goes back from"
                                s.step_problems.append((line, f"step {step} {what} step {prev}"))
                        prev = step
                prev = steps[-1]
                if series:
                    s.series[0].extend(steps)
                    s.series[1].extend(map(itemgetter("flops"), recs))
                if s.first_step is None:
                    s.first_step, s.first_time = steps[0], recs[0]["time"]
                s._add(recs)
                s._generating(steps, recs)
        except OSError as e:
            s.error = f"cannot read ledger {s.path}: {e}"
            return s
        s.last_step = prev
        s._repeats = None                  # a summary is kept per ledger in a site build: keep it small
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
    For huge ledgers iterate `LedgerReader(path)` instead (constant memory).

    Args: `path`, the ledger; `strict`. Returns the Ledger (records, torn, problems, sha256).
    """
    reader = LedgerReader(Path(path), strict=strict)
    records = list(reader)
    return Ledger(reader.path, records, reader.torn, list(reader.problems), reader.sha256)


def first_record(path: str | os.PathLike) -> dict | None:
    """The first line of a file as a ledger record, read alone (a ledger can be huge; a report
    file is not read past its first line); None when the file cannot be read or that line is
    not a well-formed record."""
    rec = jsonlines.first(path)
    return rec if rec is not None and record_problem(rec) is None else None


def iter_ledger(path: str | os.PathLike, *, strict: bool = True) -> LedgerReader:
    """A streaming reader over a ledger's complete records (see LedgerReader).

    Args: `path`, the ledger; `strict`, raise at a bad middle line. Returns the LedgerReader to
    iterate (constant memory).
    """
    return LedgerReader(Path(path), strict=strict)

