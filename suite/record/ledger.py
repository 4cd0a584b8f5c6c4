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
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from .. import jsonlines, jsonstrict
from ..errors import RaceError
from .recordcheck import fast_records, record_problem

# Lines parsed together as one JSON array: at most this many, or this many bytes (bounded memory).
_BATCH, _BATCH_BYTES = 256, 4 * 1024 * 1024


def utc_now() -> str:
    """Current UTC time as RFC 3339 with a Z suffix (second precision)."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


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
            recs = fast_records(b"[" + b",".join(r for _, _, r in batch) + b"]")
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
        of lines that are all exactly `{...}` is parsed as one JSON array (recordcheck.fast_records); any
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
                    recs = fast_records(b"[" + body + b"]") if b"\n" not in body else None
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

