"""Strict, bounded JSON reading for files that come from other people.

Python's json module accepts NaN/Infinity, silently keeps the last of duplicate keys and
recurses without a depth limit; a report with any of those is ambiguous, so we refuse them
with a reason instead. Sizes are checked before anything is read whole.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

# A report is a few kilobytes; 64 MiB leaves room for huge hand-made ones and refuses a 2 GB file
# before reading it. Ledgers are streamed line by line and have a per-line limit instead.
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024
# Real reports nest about 5 deep; anything past this is hostile or broken.
MAX_DEPTH = 64


class JSONInputError(ValueError):
    """A document that cannot be read as strict JSON. `kind` is a stable short code
    (size, encoding, syntax, nan, duplicate-key, depth, type) used by validation rules."""

    def __init__(self, kind: str, message: str, hint: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.hint = hint


def _no_constants(name: str):
    raise JSONInputError("nan", f"non-standard number literal {name} (JSON has no NaN or Infinity)",
                         "write the number as a finite value, or null if unknown")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise JSONInputError("duplicate-key", f"duplicate key {k[:80]!r} in one object",
                                     "keep one value per key: readers disagree which duplicate wins")
            seen.add(k)
    return d


def _finite_float(s: str) -> float:
    x = float(s)
    if math.isinf(x):  # 1e999 parses to inf: the same ambiguity as an Infinity literal
        raise JSONInputError("nan", f"number {s} overflows to infinity", "write a finite number")
    return x


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constants,
                            parse_float=_finite_float)
# For callers that check float finiteness themselves (ledger records): no per-float callback.
_FAST_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
# For engine logs (verl's file logger, a Trainer's trainer_state.json), whose writers emit NaN for
# a diverged metric: NaN/Infinity read as floats (the importer checks the fields it uses), but
# duplicate keys, bad bytes, runaway numbers and depth are still refused.
_LOG_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def depth(obj: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0), without recursion."""
    best, stack = 0, [(obj, 0)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            best = max(best, d)
            continue
        best = max(best, d + 1)
        stack.extend((c, d + 1) for c in children)
    return best


def loads(data: bytes | str, *, max_depth: int | None = MAX_DEPTH, finite: bool = True,
          allow_nan: bool = False) -> Any:
    """Parse one JSON document strictly: UTF-8, no NaN/Infinity, no duplicate keys, no
    trailing garbage, bounded nesting (max_depth None: only the parser's own recursion limit,
    for callers that check the shape themselves; finite False: a float literal that overflows
    to infinity is let through, for callers that check finiteness themselves; allow_nan True: NaN and
    Infinity literals too, for engine logs). Raises
    JSONInputError with a stable `kind`."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise JSONInputError("encoding", f"not UTF-8: byte 0x{data[e.start]:02x} at offset {e.start}",
                                 "save the file as UTF-8") from None
    else:
        text = data
    try:
        obj = (_LOG_DECODER if allow_nan else _DECODER if finite else _FAST_DECODER).decode(text)
    except RecursionError:
        raise JSONInputError("depth", f"nesting deeper than the parser allows (limit {max_depth})",
                             "flatten the document") from None
    except JSONInputError:
        raise
    except json.JSONDecodeError as e:
        if e.msg == "Extra data":
            raise JSONInputError("syntax", f"trailing data after the JSON document at line {e.lineno} column {e.colno}",
                                 "a report holds exactly one JSON document; ledgers use .jsonl") from None
        raise JSONInputError("syntax", f"not JSON: {e.msg} at line {e.lineno} column {e.colno}",
                             "check the file is one JSON document") from None
    except ValueError as e:  # an integer beyond Python's 4,300-digit conversion limit
        raise JSONInputError("nan", f"number out of range: {str(e).split(';')[0]}",
                             "counts and FLOPs are far below 10^30") from None
    if max_depth is not None and depth(obj) > max_depth:
        raise JSONInputError("depth", f"nesting deeper than {max_depth} levels", "flatten the document")
    return obj


def read_bytes(path: str | os.PathLike, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> bytes:
    """Read a whole file, refusing it by its size on disk before reading when over max_bytes."""
    import stat

    from .inputs import kind

    p = Path(path)
    st = p.stat()
    if not stat.S_ISREG(st.st_mode):    # a FIFO would block in open(), a device never end
        raise JSONInputError("type", f"not a regular file ({kind(st.st_mode)})", "pass a file")
    size = st.st_size
    if size > max_bytes:
        raise JSONInputError("size", f"file is {size:,} bytes, over the {max_bytes:,}-byte limit for one document",
                             "reports are small; raise the limit with --max-bytes if this one is genuine")
    chunks, total = [], 0
    with open(p, "rb") as f:      # in chunks: the file may grow between stat and read; no max_bytes buffer
        while total <= max_bytes and (chunk := f.read(min(1 << 24, max_bytes + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise JSONInputError("size", f"file is over the {max_bytes:,}-byte limit for one document",
                             "raise the limit with --max-bytes if this one is genuine")
    return data


def load(path: str | os.PathLike, *, max_bytes: int = MAX_DOCUMENT_BYTES, allow_nan: bool = False) -> Any:
    """read_bytes + loads."""
    return loads(read_bytes(path, max_bytes=max_bytes), allow_nan=allow_nan)


def read(path: str | os.PathLike, *, hint: str | None = None, allow_nan: bool = False,
         max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """`load` for a file the suite reads from disk: a document it refuses (not JSON, a duplicate
    key, NaN unless `allow_nan`, too large or deep, not a regular file) or cannot read is one
    RaceError naming the file (`hint`: how to get a good one)."""
    from .errors import RaceError

    try:
        return load(path, max_bytes=max_bytes, allow_nan=allow_nan)
    except JSONInputError as e:
        if e.kind in ("type", "size"):     # refused before parsing: not a question of JSON
            raise RaceError(f"{path}: {e.message}", hint or e.hint) from None
        raise RaceError(f"{path}: not valid JSON ({e.message})", hint or e.hint) from None
    except OSError as e:
        raise RaceError(f"cannot read {path}: {e.strerror or e}", hint) from None

