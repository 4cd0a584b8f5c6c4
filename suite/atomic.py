"""Atomic file writes: the one way the suite writes files that others read.

A temp file in the same folder, fsync, then os.replace: readers (and a crash) never see a
half-written file. The file gets the permissions open() would give it (mkstemp's are 0600).
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temp path beside `path` for writers that take a file name (matplotlib, parquet,
    safetensors); moved over `path` when the block succeeds, removed when it fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write text to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json_atomic(path: str | os.PathLike, obj: Any, *, indent: int | None = 2) -> Path:
    """Write `obj` as JSON to `path` atomically. NaN/Infinity are refused: they are not JSON."""
    return write_text_atomic(path, json.dumps(obj, indent=indent, allow_nan=False, ensure_ascii=False) + "\n")


def write_jsonl_atomic(path: str | os.PathLike, rows) -> Path:
    """Write one compact JSON object per line, atomically."""
    return write_text_atomic(path, "".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n"
                                           for r in rows))


def write_block_atomic(path: str | os.PathLike, begin: str, end: str, body: str) -> Path:
    """Replace what stands between the markers `begin` and `end` of a text file (a generated
    block of a doc page) with `body`, atomically."""
    text = Path(path).read_text(encoding="utf-8")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return write_text_atomic(path, f"{head}{begin}\n\n{body.strip()}\n\n{end}{tail}")
