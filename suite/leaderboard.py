"""Leaderboard submissions: one report v1 file per run in a folder, behind a validation gate.

A submission's id is a content hash (sha256 of the report's canonical JSON, so re-indenting a
file does not make it new); it is stored as `<id>.json`. Writes are atomic and never clobber:
the bytes go to a private temp file in the same folder, are fsynced, and are then hard-linked to
the final name, which fails if that name exists — two concurrent submits of the same report
leave one file and one "duplicate" refusal, and an interrupted submit leaves nothing but a temp
file that the next build ignores. A ledger beside the report is stored content-addressed under
`ledgers/<sha256>.jsonl` so the site can chart it.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from . import jsonstrict
from .errors import RaceError

ID_HEX = 16            # 64 bits of sha256: collisions are not a practical concern at leaderboard scale
LEDGER_DIR = "ledgers"
MAX_LEDGER_BYTES = 256 * 1024 * 1024  # a 100,000-step ledger is ~50 MB


class SubmissionRefused(RaceError):
    """A submission that did not pass the gate (error findings or a duplicate): exit 1, like
    `race validate` with error findings."""

    exit_code = 1


def canonical_bytes(doc: Any) -> bytes:
    """The report as canonical JSON (sorted keys, no whitespace, UTF-8): what the id hashes."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def submission_id(doc: Any) -> str:
    """Content-hash id of a report: the first 16 hex digits of sha256 of its canonical JSON."""
    return hashlib.sha256(canonical_bytes(doc)).hexdigest()[:ID_HEX]


def read_report(path: Path) -> tuple[bytes, Any]:
    """Read one report file strictly (size limit, UTF-8, no NaN, no duplicate keys).
    Raises RaceError naming the file."""
    try:
        data = jsonstrict.read_bytes(path)
        return data, jsonstrict.loads(data)
    except jsonstrict.JSONInputError as e:
        raise RaceError(f"{path.name}: {e.message}", e.hint) from None
    except OSError as e:
        raise RaceError(f"cannot read {path.name}: {e.strerror or e}", "check the path") from None


def errors_of(findings: Sequence[Any]) -> list[Any]:
    """The findings at error level."""
    return [f for f in findings if f.severity == "error"]


def describe(f: Any) -> str:
    """One line for a finding: severity, rule, JSON path, message."""
    where = f" at {f.path}" if getattr(f, "path", "") else ""
    return f"{f.severity} {f.rule_id}{where}: {f.message}"


def validate(doc: Any, base_dir: Path | None) -> list[Any]:
    """Run the suite's validator on one report (the gate both submit and build use)."""
    from .validate import validate_report

    return list(validate_report(doc, base_dir=base_dir))


# ----------------------------------------------------------------------------- writing

def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_new(path: Path, data: bytes) -> bool:
    """Create `path` with exactly `data`, atomically, never replacing an existing file.
    Returns False (and writes nothing) when the name already exists. Safe against concurrent
    writers: only one of them can link the final name."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)      # atomic, and fails if the name exists: no clobbering
        except FileExistsError:
            return False
        _fsync_dir(path.parent)
        return True
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


@dataclass(frozen=True)
class Submitted:
    """What `submit` stored."""

    id: str
    path: Path
    findings: tuple = ()            #: warnings (errors refuse the submission)
    ledger: Path | None = None      #: where the ledger was stored, if one was found beside the report


def _find_duplicate(folder: Path, sid: str) -> str | None:
    """A file in `folder` whose content id is `sid` (other than `<sid>.json`), if any: catches a
    report that arrived by pull request under another name."""
    for p in sorted(folder.glob("*.json")):
        if p.name.startswith(".") or p.name == f"{sid}.json":
            continue
        try:
            if submission_id(jsonstrict.load(p)) == sid:
                return p.name
        except (jsonstrict.JSONInputError, OSError, ValueError):
            continue
    return None


def submit(report: Path, folder: Path, *, copy_ledger: bool = True) -> Submitted:
    """Validate `report` and store it in the submissions `folder` as `<id>.json`.

    Refuses (SubmissionRefused, exit 1) a report with error findings, naming every one, and a
    report whose content is already submitted. Unreadable input raises RaceError (exit 2)."""
    report, folder = Path(report), Path(folder)
    if not folder.is_dir():
        raise RaceError(f"submissions folder {folder} does not exist", "create it or pass --submissions DIR")
    data, doc = read_report(report)
    findings = validate(doc, base_dir=report.parent)
    errors = errors_of(findings)
    if errors:
        lines = "\n".join(f"  {describe(f)}" + (f"\n    hint: {f.hint}" if getattr(f, "hint", None) else "")
                          for f in errors)
        raise SubmissionRefused(f"{report.name} refused: {len(errors)} error finding(s)\n{lines}",
                                f"fix them and check with `race validate {report.name}` before submitting")
    sid = submission_id(doc)
    target = folder / f"{sid}.json"
    other = _find_duplicate(folder, sid)
    if other:
        raise SubmissionRefused(f"{report.name} refused: duplicate of {other} (same content, id {sid})",
                                "a run is submitted once; change the report if this is a different run")
    if not write_new(target, data):
        raise SubmissionRefused(f"{report.name} refused: duplicate of {target.name} (same content, id {sid})",
                                "a run is submitted once; change the report if this is a different run")
    stored = _store_ledger(doc, report.parent, folder) if copy_ledger else None
    return Submitted(sid, target, tuple(f for f in findings if f.severity != "error"), stored)


def _store_ledger(doc: dict, report_dir: Path, folder: Path) -> Path | None:
    """Copy the report's ledger, when it sits beside the report with the declared sha256, into
    `ledgers/<sha256>.jsonl` (content-addressed: identical ledgers are stored once)."""
    ref = doc.get("ledger") or {}
    src = report_dir / str(ref.get("path", ""))
    sha = ref.get("sha256", "")
    if not src.is_file() or src.stat().st_size > MAX_LEDGER_BYTES:
        return None
    data = src.read_bytes()
    if hashlib.sha256(data).hexdigest() != sha:
        return None
    (folder / LEDGER_DIR).mkdir(exist_ok=True)
    dest = folder / LEDGER_DIR / f"{sha}.jsonl"
    write_new(dest, data)           # already there means the same bytes: nothing to do
    return dest


# ----------------------------------------------------------------------------- reading a folder

@dataclass(frozen=True)
class Submission:
    """A listed submission: its id, file name, report and validation findings (no errors)."""

    id: str
    filename: str
    doc: dict
    findings: tuple = ()


@dataclass(frozen=True)
class Skipped:
    """A file of the submissions folder that is not listed, and why."""

    name: str
    reason: str


@dataclass
class Folder:
    """Everything in a submissions folder: what is listed and what was skipped."""

    submissions: list[Submission] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def load_submissions(folder: Path, *, check: bool = True) -> Folder:
    """Read every `*.json` in `folder` (not recursive; hidden and temp files ignored). A file
    that cannot be read, has error findings (when `check`) or duplicates an earlier one is
    skipped with its reason; the rest are listed. Never raises for a bad file."""
    folder = Path(folder)
    if not folder.is_dir():
        raise RaceError(f"submissions folder {folder} does not exist",
                        "pass --submissions DIR (default leaderboard/submissions)")
    out, seen = Folder(), {}
    for p in sorted(folder.iterdir()):
        if p.name.startswith(".") or p.suffix != ".json" or not p.is_file():
            continue
        try:
            _, doc = read_report(p)
        except RaceError as e:
            out.skipped.append(Skipped(p.name, e.message.removeprefix(f"{p.name}: ")))
            continue
        if not isinstance(doc, dict):
            out.skipped.append(Skipped(p.name, "not a report: the document is not a JSON object"))
            continue
        findings: list = []
        if check:
            try:
                findings = validate(doc, base_dir=None)
            except RaceError as e:
                out.skipped.append(Skipped(p.name, e.message))
                continue
            errors = errors_of(findings)
            if errors:
                shown = "; ".join(describe(f) for f in errors[:3])
                more = f"; and {len(errors) - 3} more" if len(errors) > 3 else ""
                out.skipped.append(Skipped(p.name, f"{len(errors)} error finding(s): {shown}{more}"))
                continue
        sid = submission_id(doc)
        if sid in seen:
            out.skipped.append(Skipped(p.name, f"duplicate of {seen[sid]} (same content, id {sid})"))
            continue
        seen[sid] = p.name
        out.submissions.append(Submission(sid, p.name, doc, tuple(findings)))
    return out


def ledger_steps(folder: Path, doc: dict) -> tuple[tuple[list[int], list[dict[str, int]]] | None, str]:
    """Per-step FLOPs of a submission's ledger when it is stored beside the submissions
    (`ledgers/<sha256>.jsonl`, or the report's own relative path inside the folder) and its
    sha256 matches the report; else None and the reason."""
    from .ledger import LedgerReader

    ref = doc.get("ledger") or {}
    sha = str(ref.get("sha256", ""))
    folder = Path(folder).resolve()
    candidates = [folder / LEDGER_DIR / f"{sha}.jsonl"]
    own = (folder / str(ref.get("path", ""))).resolve()
    if own.is_relative_to(folder) and own != folder:   # never read outside the submissions folder
        candidates.append(own)
    for path in candidates:
        if not path.is_file():
            continue
        if path.stat().st_size > MAX_LEDGER_BYTES:
            return None, "the ledger is larger than the site's limit"
        reader = LedgerReader(path, strict=False)
        steps, flops = [], []
        for rec in reader:
            steps.append(rec["step"])
            flops.append({k: rec["flops"][k] for k in ("rollout", "update", "reward")})
        if reader.sha256 != sha:
            return None, "a ledger file was found but its sha256 does not match the report"
        if not steps:
            return None, "the ledger has no complete records"
        return (steps, flops), ""
    return None, ("the ledger is not available beside the report in the submissions folder "
                  f"(expected {LEDGER_DIR}/<sha256>.jsonl; `race submit` stores it when it sits beside the report)")


def build(folder: Path, out: Path, *, check: bool = True) -> dict[str, Any]:
    """Build the static site in `out` from the submissions `folder`: every valid submission is
    listed, every other file is named on the site with the reason it was skipped. Returns the
    site builder's summary (pages, listed, skipped, main page bytes) plus the skipped files."""
    from . import render

    folder, out = Path(folder), Path(out)
    loaded = load_submissions(folder, check=check)
    entries, skipped = [], [render.Skip(s.name, s.reason) for s in loaded.skipped]
    for s in loaded.submissions:
        try:
            row = render.row_from_report(s.doc, id=s.id, page=f"s/{s.id}.html")
        except (KeyError, TypeError, AttributeError) as e:   # only reachable with check=False
            skipped.append(render.Skip(s.filename, f"not a report v1 document (missing or wrong field {e})"))
            continue
        ledger, note = ledger_steps(folder, s.doc)
        entries.append(render.SiteEntry(row=row, doc=s.doc, filename=s.filename, findings=s.findings,
                                        ledger=ledger, ledger_note=note))
    summary = render.build_site(entries, out, skipped)
    summary["skipped_files"] = [(s.name, s.reason) for s in skipped]
    return summary
