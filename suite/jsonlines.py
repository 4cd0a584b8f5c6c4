"""The one JSON Lines reader: one JSON value a line, streamed, each line parsed strictly.

Every JSON Lines file the suite reads goes through `records`: data sets, lm-eval's per-sample
logs, a study's packed export, engine logs (verl's file logger, prime-rl's metrics, MLPerf's
`:::MLLOG` lines), the first line of a ledger. The one exception is the ledger's own reader
(suite.record.ledger): it reads a ledger in blocks, for speed (a 100,000-step ledger parsed as
JSON arrays of its lines, with a hash and byte offsets to repair a torn tail), and parses any
line it reads alone with `parse`.

What every caller gets: lines read one at a time (memory bounded by `max_line_bytes`, a longer
line refused by its number, never held whole), blank lines skipped, each line parsed by
suite.jsonstrict (duplicate keys, runaway numbers and nesting refused; NaN only where the
writer is known to emit it), and a bad line named by file and line number in one RaceError.
`torn_tail`: the last line of a killed writer (no newline, not JSON) ends the file quietly.
"""

from __future__ import annotations

import io
import os
from typing import IO, Any, Iterator

from . import jsonstrict
from .errors import RaceError

# One line holds no more than one document may (jsonstrict's limit for a whole file).
MAX_LINE_BYTES = jsonstrict.MAX_DOCUMENT_BYTES


def parse(raw: bytes, *, allow_nan: bool = True, max_depth: int | None = jsonstrict.MAX_DEPTH) -> Any:
    """One line parsed strictly (jsonstrict.loads); raises jsonstrict.JSONInputError."""
    return jsonstrict.loads(raw, allow_nan=allow_nan, max_depth=max_depth)


def _lines(f: IO[bytes], limit: int, where: str, hint: str | None) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes with its newline) of every line, never holding more than `limit` + 1 bytes
    of one; a longer line is one RaceError naming it."""
    n = 0
    while raw := f.readline(limit + 1):
        n += 1
        if len(raw) > limit and not (len(raw) == limit + 1 and raw.endswith(b"\n")):
            raise RaceError(f"{where}: line {n}: longer than {limit:,} bytes", hint)
        yield n, raw


def records(source: str | os.PathLike | bytes, *, name: str | os.PathLike | None = None, allow_nan: bool = True,
            max_depth: int | None = jsonstrict.MAX_DEPTH, prefix: str | None = None, torn_tail: bool = False,
            max_line_bytes: int = MAX_LINE_BYTES, hint: str | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) of each non-blank line of a file (or of `bytes` already in memory,
    shown as `name`).

    Args: `allow_nan`, NaN and Infinity literals read as floats (logs and data sets other programs
    wrote hold them); `max_depth`, jsonstrict's nesting bound (None: the caller checks the shape);
    `prefix`, read only lines holding it, the JSON after it (MLPerf's ':::MLLOG '); `torn_tail`, a
    last line without a newline that is not JSON ends the file (a killed writer) instead of an
    error; `max_line_bytes`, the longest line read; `hint`, how to get a good file.
    Raises RaceError naming the file and the line for a line it refuses, or a file it cannot open.
    """
    if isinstance(source, bytes):
        where, opened = str(name or "<bytes>"), io.BytesIO(source)
    else:
        from .inputs import regular

        where = str(name or source)
        regular(source)
        try:
            opened = open(source, "rb")
        except OSError as e:
            raise RaceError(f"cannot read {where}: {e.strerror or e}", hint) from None
    marker = prefix.encode() if prefix is not None else None
    try:
        with opened as f:
            for n, raw in _lines(f, max_line_bytes, where, hint):
                if marker is not None:
                    i = raw.find(marker)
                    if i < 0:
                        continue
                    raw = raw[i + len(marker):]
                if not raw.strip():
                    continue
                try:
                    value = parse(raw, allow_nan=allow_nan, max_depth=max_depth)
                except jsonstrict.JSONInputError as e:
                    if torn_tail and e.kind == "syntax" and not raw.endswith(b"\n"):
                        return
                    raise RaceError(f"{where}: line {n}: not valid JSON ({e.message})", hint or e.hint) from None
                yield n, value
    except OSError as e:
        raise RaceError(f"cannot read {where}: {e.strerror or e}", hint) from None


def values(source: str | os.PathLike | bytes, **kw: Any) -> Iterator[Any]:
    """The parsed values of `records` without their line numbers."""
    for _, value in records(source, **kw):
        yield value


def first(path: str | os.PathLike, *, max_line_bytes: int = jsonstrict.MAX_LINE_BYTES,
          max_depth: int | None = None) -> Any:
    """The first line of a file parsed alone (a file that may be huge is not read past it);
    None when the file cannot be read or that line is not strict JSON."""
    try:
        with open(path, "rb") as f:
            line = f.readline(max_line_bytes + 1)
        return parse(line, allow_nan=False, max_depth=max_depth)
    except (OSError, jsonstrict.JSONInputError):
        return None


__all__ = ["MAX_LINE_BYTES", "first", "parse", "records", "values"]
