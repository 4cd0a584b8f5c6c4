"""The all-or-nothing swap of a built folder into place (the leaderboard site): readers, and a
kill -9 at any point, see the old site or the new one at OUT, never none and never half of one.

- Where the kernel exchanges two names atomically (Linux renameat2 RENAME_EXCHANGE), OUT is a real
  folder and one exchange swaps it with the finished staging folder.
- Elsewhere (macOS, the BSDs, a Linux file system without RENAME_EXCHANGE) OUT is a symbolic link
  to a hidden sibling `.OUT.site-<pid>-<hex>`: a build moves its finished folder to a new sibling,
  makes a link to it and renames the link over OUT (rename(2) replaces a link in one step), then
  removes the old sibling.
- Only a real folder at OUT where no exchange exists (a site built on Linux, then built again on
  another system; or where links cannot be made, Windows without developer mode) needs two
  renames, the one instant with no site at OUT; a build killed there has its old site put back by
  the next build, and the folder is a link from then on.

Every name a build works under is a hidden sibling of OUT carrying the builder's pid, so the next
build removes what a killed one left -- never another live builder's (a process builds one site
at a time), never the folder OUT links to.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
from pathlib import Path

from ..errors import RaceError

SITE_MARKER = ".race-site"   # marks a folder as a built site: only such a folder is ever replaced
_RENAME_EXCHANGE = 2
_RACED = (errno.EEXIST, errno.ENOTEMPTY, errno.ENOENT)      # what a concurrent build's rename causes


def _prefix(out: Path) -> str:
    return f".{out.name[:120]}."


def sibling(out: Path, kind: str) -> Path:
    """A new hidden sibling of `out` a build works under: kind building (the site being built),
    site (a finished site OUT links to), link (the link about to replace OUT) or old (the old
    site between two renames)."""
    return out.with_name(f"{_prefix(out)}{kind}-{os.getpid()}-{secrets.token_hex(3)}")


def _pattern(out: Path):
    return re.compile(re.escape(_prefix(out)) + r"(building|site|link|old)-(\d+)-[0-9a-f]+$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def _target(link: Path, out: Path) -> Path | None:
    """The sibling site folder of `out` that the link `link` points to (None for anything else)."""
    if not link.is_symlink():
        return None
    name = os.readlink(link)
    m = _pattern(out).match(name)
    return out.with_name(name) if m and m.group(1) == "site" else None


def linked(out: Path) -> Path | None:
    """The sibling site folder `out` links to (None when `out` is not such a link)."""
    return _target(out, out)


def remove_leftovers(out: Path) -> list[Path]:
    """Remove what killed builds of `out` left beside it (their staging, site, link and old-site
    names, carrying a dead builder's pid; never a live builder's, never the site `out` links to).
    When `out` itself is gone (a build killed between two renames), the old site is put back
    first. Returns the paths removed."""
    removed, pattern, current = [], _pattern(out), linked(out)
    try:
        siblings = sorted(out.parent.iterdir())
    except OSError:
        return removed
    for p in siblings:
        m = pattern.match(p.name)
        pid = int(m.group(2)) if m else 0
        # a live builder's names are in use -- but this process builds one site at a time, so its
        # own are what an earlier build of it left (a child killed after linking its site in)
        if not m or p == current or (pid != os.getpid() and _alive(pid)):
            continue
        if p.is_symlink() or not p.is_dir():
            if p.is_symlink():          # a link about to replace OUT, or an old one moved aside
                p.unlink(missing_ok=True)
                removed.append(p)
            continue
        if m.group(1) == "old" and not os.path.lexists(out) and (p / SITE_MARKER).is_file():
            try:
                os.rename(p, out)       # the old site back where a killed two-rename swap left none
                continue
            except OSError:
                pass
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


def _renameat2():
    """Linux's renameat2 from the C library, or None where it does not exist."""
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return fn


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap the names `a` and `b` (folders or a link): at every instant `b` is the old
    one or the new one. False where renameat2 does not exist or the file system does not
    support the exchange."""
    import ctypes

    fn = _renameat2()
    if fn is None:
        return False
    at_fdcwd = -100
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _discard(old: Path, out: Path) -> None:
    """Remove an old site: a folder, or a link of ours with the sibling site it links to."""
    target = _target(old, out)
    if old.is_symlink():
        old.unlink(missing_ok=True)
        if target is not None:
            shutil.rmtree(target, ignore_errors=True)
    else:
        shutil.rmtree(old, ignore_errors=True)


def _link(staging: Path, out: Path) -> Path | None:
    """The finished `staging` as a site sibling with a new link to it, ready to be renamed over
    `out`: the link's path, or None where links cannot be made (the site left in `staging`)."""
    site = sibling(out, "site")
    os.rename(staging, site)
    link = sibling(out, "link")
    try:
        os.symlink(site.name, link, target_is_directory=True)
    except (OSError, NotImplementedError):
        os.rename(site, staging)
        return None
    return link


def _raced(staging: Path, what: str, out: Path) -> RaceError:
    shutil.rmtree(staging, ignore_errors=True)
    return RaceError(f"another build {what} {out} at the same time", "run the build again")


def swap_in(staging: Path, out: Path) -> None:
    """Put the finished `staging` folder in place at `out` (see the module's docstring).
    Refuses to replace anything that is not a site built by race."""
    current = linked(out)
    if os.path.lexists(out):
        site = current or out
        if not site.is_dir() or (out.is_symlink() and current is None) or \
                (any(site.iterdir()) and not (site / SITE_MARKER).is_file()):
            shutil.rmtree(staging, ignore_errors=True)
            raise RaceError(f"{out} exists and is not a site built by race", "choose an empty or new folder for --out")
    try:
        if os.path.lexists(out) and _exchange(staging, out):
            _discard(staging, out)          # staging now holds the old site
            return
    except OSError as e:
        if e.errno not in _RACED:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        raise _raced(staging, "replaced", out) from None
    if not os.path.lexists(out) and _renameat2() is not None:
        try:
            os.rename(staging, out)         # where exchanges exist, a new site is a folder
            return
        except OSError as e:
            if e.errno not in _RACED:
                shutil.rmtree(staging, ignore_errors=True)
                raise           # read-only, full, name too long: the CLI names it
            raise _raced(staging, "created", out) from None
    link = _link(staging, out)
    current = linked(out)                   # again: another build may have linked its site meanwhile
    if link is not None and (current is not None or not os.path.lexists(out)):
        try:
            os.replace(link, out)           # one step: the old link or the new one
        except OSError:                     # another build put a folder there meanwhile
            _discard(link, out)
            raise _raced(staging, "replaced", out) from None
        if current is not None:
            shutil.rmtree(current, ignore_errors=True)
        return
    # A real folder at `out` and no exchange: two renames, the next build puts the old site back
    # if this one is killed between them.
    old = sibling(out, "old")
    new = link if link is not None else staging
    try:
        if os.path.lexists(out):
            os.rename(out, old)
        os.rename(new, out)
    except OSError:                         # a concurrent build moved or recreated `out` meanwhile
        if not os.path.lexists(out) and os.path.lexists(old):
            os.rename(old, out)
        _discard(new, out)
        _discard(old, out)
        raise _raced(staging, "replaced", out) from None
    _discard(old, out)
