"""A submission's id: a content hash of the report (sha256 of its canonical JSON), so re-indenting
a file does not make it new. One definition for the gate, the board and the published rebuilds."""

from __future__ import annotations

import hashlib
import json
from typing import Any

ID_HEX = 16            # 64 bits of sha256: collisions are not a practical concern at leaderboard scale


def canonical_bytes(doc: Any) -> bytes:
    """The report as canonical JSON (sorted keys, no whitespace, UTF-8): what the id hashes."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def content_digest(doc: Any) -> str:
    """Full sha256 (hex) of a report's canonical JSON: what the validation cache is keyed by."""
    return hashlib.sha256(canonical_bytes(doc)).hexdigest()


def submission_id(doc: Any) -> str:
    """Content-hash id of a report: the first 16 hex digits of sha256 of its canonical JSON."""
    return hashlib.sha256(canonical_bytes(doc)).hexdigest()[:ID_HEX]
