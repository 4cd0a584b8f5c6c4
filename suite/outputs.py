"""Where the suite may write: the one check every `-o FILE` and `--out DIR` goes through.

Never clobber. A file output must be a regular file (or a new name): a device node, a FIFO or a
folder at that name is never replaced by the atomic rename (`-o /dev/null` as root would turn
/dev/null into a regular file); character devices and FIFOs are written in place instead
(suite.atomic does it), block devices, sockets and folders are refused. An output that is one of
the command's inputs is refused before anything is read twice. A folder output is refused when it
is the file system root, a system folder, the current folder or one above it, the home folder, or
(for outputs the suite replaces whole, like the leaderboard site) a non-empty folder the suite
did not write. Every refusal is one RaceError line naming the path and the fix.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable

from .errors import RaceError
from .inputs import kind

# Folders no suite output belongs in (nor under, for the pseudo file systems).
SYSTEM = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
          "/sys", "/usr", "/var", "/srv", "/opt", "/home", "/root", "/mnt", "/media", "/snap", "/tmp",
          "/private", "/System", "/Library", "/Applications", "/Users", "/Volumes")
PSEUDO = ("/proc", "/sys", "/dev")


def in_place(path: str | os.PathLike) -> bool:
    """True when `path` is a character device or a FIFO: written in place, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False
    return os.path.realpath(a) == os.path.realpath(b)


def output_file(path: str | os.PathLike, *, inputs: Iterable[str | os.PathLike] = (),
                what: str = "--output") -> Path:
    """Check a file output before the command does any work; returns it as a Path.

    Refuses (RaceError) an empty name, a folder, a block device or socket, and a path that is one
    of `inputs` (the same file by inode, or by resolved path when not yet there). A character
    device or FIFO is allowed: suite.atomic writes it in place."""
    if str(path) == "":
        raise RaceError(f"{what} is empty", f"give {what} FILE, or leave it out to print to standard output")
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise RaceError(f"cannot use {what} {p}: {e.strerror or e}", "choose another output file") from None
    except ValueError:
        raise RaceError(f"{what} {p!r} is not a usable file name", "choose another output file") from None
    if st is not None and not stat.S_ISREG(st.st_mode) and not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        raise RaceError(f"{what} {p} is {kind(st.st_mode)}, not a file: it would be replaced",
                        "give the name of a (new or existing) regular file")
    if (st is None or stat.S_ISREG(st.st_mode)) and any(_under(os.path.realpath(p), t) for t in PSEUDO):
        raise RaceError(f"{what} {p} is in {next(t for t in PSEUDO if _under(os.path.realpath(p), t))}: "
                        "the suite writes no files there", "give the name of a file in a folder of your own")
    for i in inputs:
        if i not in (None, "-") and _same(p, Path(i)):
            raise RaceError(f"{what} {p} is also an input of this command: it would overwrite it",
                            "write the output to another file")
    return p


def _under(p: str, top: str) -> bool:
    return p == top or p.startswith(top.rstrip("/") + "/")


def output_dir(path: str | os.PathLike, *, what: str = "--out", marker: str | None = None,
               owner: str = "folder the suite wrote", replaces: bool = False, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """Check a folder output before the command does any work; returns it as a Path.

    Refused: an empty name; a path that exists and is not a folder; the root, a system folder
    (SYSTEM, or anything under /proc, /sys, /dev), the home folder; and, when the command
    `replaces` the folder whole (the leaderboard site), also the current folder or one above it,
    a folder holding an input, and a non-empty folder without `marker` (the file the suite writes
    into every folder it built)."""
    if str(path) == "":
        raise RaceError(f"{what} is empty", f"give {what} DIR, a new or suite-written folder")
    p = Path(path)
    try:
        real = os.path.realpath(p)
    except (OSError, ValueError):
        raise RaceError(f"{what} {str(p)!r} is not a usable folder name", "choose another folder") from None
    long = next((part for part in p.parts if len(os.fsencode(part)) > 255), None)
    if long is not None:
        raise RaceError(f"{what} {str(p)[:80]}...: File name too long ({len(os.fsencode(long))} bytes in one name, "
                        "255 at most)", "use a shorter name")
    home = os.path.realpath(os.path.expanduser("~"))
    if real == "/" or real in SYSTEM or any(_under(real, t) for t in PSEUDO) or (real == home and home != "/"):
        raise RaceError(f"{what} {p} is {'the file system root' if real == '/' else 'a system folder' if real != home else 'your home folder'}: "
                        "the suite does not write there", f"give {what} a folder of its own, e.g. {what} ./race-out")
    if os.path.lexists(p) and not p.is_dir():
        raise RaceError(f"{what} {p} exists and is not a folder", f"give {what} a new folder or one the suite wrote")
    if not replaces:
        return p
    cwd = os.path.realpath(os.getcwd())
    if _under(cwd, real):
        raise RaceError(f"{what} {p} is the current folder{' or one above it' if real != cwd else ''}: "
                        "the build replaces that folder whole", f"give {what} a folder of its own, e.g. {what} site")
    for i in inputs:
        if i is not None and _under(os.path.realpath(i), real):
            raise RaceError(f"{what} {p} holds this command's input {i}: the build replaces that folder whole",
                            f"give {what} a folder of its own")
    if p.is_dir() and marker is not None and not (p / marker).is_file():
        try:
            nonempty = any(p.iterdir())
        except OSError as e:
            raise RaceError(f"cannot read {what} {p}: {e.strerror or e}", "choose another folder") from None
        if nonempty:
            raise RaceError(f"{what} {p} exists and is not a {owner}: a non-empty folder the suite did not write, "
                            "which the build would replace",
                            f"give {what} a new or empty folder, or one a previous build wrote")
    return p


def os_error(e: OSError, doing: str = "") -> RaceError:
    """An OSError as one line naming the path: read-only, full disk, name too long, no permission."""
    names = " -> ".join(str(x) for x in (e.filename, getattr(e, "filename2", None)) if x)
    reason = e.strerror or type(e).__name__
    hints = {"EROFS": "the file system is read-only: choose a writable folder",
             "ENOSPC": "the disk is full: free space or choose another folder",
             "ENAMETOOLONG": "use a shorter name",
             "EACCES": "you lack permission there: choose another folder",
             "EPERM": "you lack permission there: choose another folder",
             "ENOENT": "check the path exists",
             "EISDIR": "that is a folder: give a file name",
             "ENOTDIR": "a part of the path is not a folder"}
    import errno

    code = errno.errorcode.get(e.errno or -1, "")
    return RaceError(f"{doing + ' ' if doing else ''}{names + ': ' if names else ''}{reason}",
                     hints.get(code, "check the path and try again"))
