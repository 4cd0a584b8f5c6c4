"""Never block: what the suite reads is a regular file (or a folder, where a command takes one).

Opening a FIFO waits for a writer forever, and a device or socket never ends (`race validate
x.json` with x.json a FIFO hung). `os.stat` does not block, so every path named on the command
line and every file the strict readers open is looked at first and refused with one RaceError line
naming the path and what it is; `-` (standard input) stays allowed where a command reads it.
"""

from __future__ import annotations

import os
import stat
from typing import Iterable

from .errors import RaceError


def kind(mode: int) -> str:
    """What a file of this st_mode is, in words (for messages)."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def not_regular(path: str | os.PathLike, *, folders: bool = False) -> str | None:
    """What `path` is when it exists and is neither a regular file nor (with `folders`) a
    folder: "a FIFO", "a character device", ...; None otherwise (missing paths are the reader's
    to report)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode) or (folders and stat.S_ISDIR(mode)):
        return None
    return kind(mode)


def regular(path: str | os.PathLike, what: str = "input", *, folders: bool = False) -> None:
    """Refuse (RaceError) an existing `path` that is not a regular file (nor, with `folders`, a
    folder), before it is opened."""
    k = not_regular(path, folders=folders)
    if k is not None:
        raise RaceError(f"{what} {os.fspath(path)} is {k}, not a regular file: reading it would block or never end",
                        f"name a regular file{' or folder' if folders else ''} (or - for standard input, where "
                        "the command reads it)")


def named(paths: Iterable, what: str) -> None:
    """`regular` for the paths named on the command line: files or folders; `-` (standard
    input) and names that are not paths on this machine (a hub id) pass."""
    for p in paths:
        if isinstance(p, (str, os.PathLike)) and os.fspath(p) not in ("-", ""):
            regular(p, what, folders=True)
