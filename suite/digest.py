"""sha256 of files: the one helper that hashes what the suite stores and compares (ledgers,
submissions, model weights), read in chunks so a file of any size hashes in constant memory."""

from __future__ import annotations

import hashlib
import os
from typing import Iterable

CHUNK = 1 << 20


def files_sha256(paths: Iterable[str | os.PathLike], chunk: int = CHUNK) -> str:
    """sha256 of the files' bytes one after another, in the given order, lower-case hex."""
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            while b := f.read(chunk):
                h.update(b)
    return h.hexdigest()


def file_sha256(path: str | os.PathLike, chunk: int = CHUNK) -> str:
    """sha256 of one file's bytes, lower-case hex."""
    return files_sha256([path], chunk)


__all__ = ["file_sha256", "files_sha256"]
