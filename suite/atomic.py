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
    safetensors); moved over `path` when the block succeeds, removed when it fails.

    Never clobbers a node that is not a regular file (suite.outputs): a character device or FIFO
    at `path` (/dev/null, /dev/stdout, a pipe) gets the bytes written in place, a folder, block
    device or socket is refused; a symbolic link is kept and its target replaced."""
    from .outputs import in_place, output_file

    path = Path(path)
    output_file(path, what="output")
    if in_place(path):
        tmp = tempfile.mkdtemp(prefix=".race-out.")
        try:
            yield Path(tmp) / path.name
            with open(Path(tmp) / path.name, "rb") as src:
                _write_in_place(path, src)
        finally:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
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


def _write_in_place(path: Path, src) -> None:
    """Copy `src` into the device or FIFO at `path` without creating, truncating or replacing
    it; a FIFO with no reader is refused at once instead of blocking."""
    import fcntl
    import stat

    from .errors import RaceError

    fifo = stat.S_ISFIFO(os.stat(path).st_mode)
    try:
        fd = os.open(path, os.O_WRONLY | (os.O_NONBLOCK if fifo else 0))
    except OSError as e:
        if fifo and e.errno == 6:       # ENXIO: nobody reads the FIFO
            raise RaceError(f"output {path} is a FIFO with no reader", "start the reader first, or write to a file") from None
        raise
    try:
        if fifo:
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        while chunk := src.read(1 << 20):
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
    finally:
        os.close(fd)


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
