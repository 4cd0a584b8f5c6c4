# Over 500 lines: one idea, the gate -- submit behind validation, read a folder back for the site, its validation cache (keyed by content, MAC-checked).
"""Leaderboard submissions: one report v1 file per run in a folder, behind a validation gate.

A submission's id is a content hash (sha256 of the report's canonical JSON, so re-indenting a
file does not make it new); it is stored as `<id>.json`. Writes are atomic and never clobber:
the bytes go to a private temp file in the same folder, are fsynced, and are then hard-linked to
the final name, which fails if that name exists — two concurrent submits of the same report
leave one file and one "duplicate" refusal, and an interrupted submit leaves nothing but a hidden
temp file that the next build ignores.

The report's ledger is stored beside it under a name of its own, `ledger-<sha256 prefix>.jsonl`
(named by its content: any number of runs whose ledgers were all called `ledger.jsonl` submit
into one folder), and the stored report's `ledger.path` is rewritten to it, so that `race
validate leaderboard/submissions` checks every submission against its ledger exactly as it was
checked on submit, and the site can chart it. An estimate (provenance estimated) has no ledger.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .. import jsonstrict
from ..digest import file_sha256
from ..errors import RaceError
from ..record.summary import LedgerSummary
from ..record.report import read_report
from .ids import ID_HEX, canonical_bytes, content_digest, submission_id  # noqa: F401  (the ids, re-exported)
from .render import Skip

MAX_LEDGER_BYTES = 256 * 1024 * 1024  # a 100,000-step ledger is ~50 MB


class SubmissionRefused(RaceError):
    """A submission that did not pass the gate (error findings or a duplicate): exit 1, like
    `race validate` with error findings."""

    exit_code = 1


def errors_of(findings: Sequence[Any]) -> list[Any]:
    """The findings at error level."""
    return [f for f in findings if f.severity == "error"]


def describe(f: Any) -> str:
    """One line for a finding: severity, rule, JSON path, message."""
    where = f" at {f.path}" if getattr(f, "path", "") else ""
    return f"{f.severity} {f.rule_id}{where}: {f.message}"


def validate(doc: Any, base_dir: Path | None, file: str = "<report>") -> list[Any]:
    """Run the suite's validator on one report (the gate both submit and build use)."""
    from ..validate import validate_report

    return list(validate_report(doc, base_dir=base_dir, file=file))


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


def run_key(doc: Any) -> tuple[str, str] | None:
    """What identifies one run across edits of its report: (run id, ledger sha256), or for an
    estimate (no ledger) (run id, sha256 of its totals); None when the report lacks them."""
    try:
        rid = doc["run"]["id"]
        led = doc.get("ledger")
        digest = led["sha256"] if isinstance(led, dict) else hashlib.sha256(canonical_bytes(doc["totals"])).hexdigest()
    except (KeyError, TypeError, ValueError):
        return None
    return (rid, digest) if isinstance(rid, str) and isinstance(digest, str) else None


def _folder_reports(folder: Path) -> list[tuple[str, dict]]:
    """(file name, document) of every readable report in the submissions folder, read once per
    submit for both the duplicate and the run-id checks."""
    out = []
    for p in sorted(folder.glob("*.json")):
        if p.name.startswith("."):
            continue
        try:
            doc = read_report(p, check=False).doc
        except (RaceError, ValueError):
            continue
        if isinstance(doc, dict):
            out.append((p.name, doc))
    return out


def _find_duplicate(reports: list[tuple[str, dict]], sid: str, *also: str,
                    run: tuple[str, str] | None = None) -> str | None:
    """A file of `reports` (_folder_reports) whose content id is `sid` or one of `also` (other than
    `<sid>.json`), or that reports the same run (`run`: run_key), if any: catches a report that
    arrived by pull request under another name, verbatim (its ledger path not yet rewritten), or
    again with only its notes or labels edited."""
    ids = {sid, *also}
    for name, other in reports:
        if name == f"{sid}.json":
            continue
        if submission_id(other) in ids or (run is not None and run_key(other) == run):
            return name
    return None


def _run_ids(reports: list[tuple[str, dict]]) -> dict[str, str]:
    """Run id -> file name of the reports (_folder_reports)."""
    out: dict[str, str] = {}
    for name, doc in reports:
        rid = doc.get("run", {}).get("id") if isinstance(doc.get("run"), dict) else None
        if isinstance(rid, str):
            out.setdefault(rid, name)
    return out


def _content_id(path: Path) -> str | None:
    try:
        return submission_id(read_report(path, check=False).doc)
    except (RaceError, ValueError):
        return None


def stored_ledger_name(doc: dict) -> str:
    """The file name a report's ledger is stored under in a submissions folder: named by its
    content, so it never collides with another run's ledger and one ledger is stored once."""
    return f"ledger-{doc['ledger']['sha256'][:ID_HEX]}.jsonl"


def submit(report: Path, folder: Path, *, maintained: Any = None) -> Submitted:
    """Validate `report` (with its ledger, as `race validate` does) and store it in the
    submissions `folder` as `<id>.json`, its ledger as `stored_ledger_name(doc)` with the
    stored report's `ledger.path` pointing at it (the id hashes the report as stored).

    Refuses (SubmissionRefused, exit 1) a report with error findings, naming every one; a report
    whose content is already submitted; a run id already listed (BOARD-001); a report carrying
    sources.published that is not the rebuild of a maintained run description (BOARD-002;
    `maintained`: a suite.site.board.Maintained, default: rebuilt from the `published` folder
    beside `folder`). Unreadable input raises RaceError (exit 2).

    Args: `report`, the report file; `folder`, the submissions folder. Returns the Submitted
    (id, stored file, warnings, stored ledger).
    """
    report, folder = Path(report), Path(folder)
    if not folder.is_dir():
        raise RaceError(f"submissions folder {folder} does not exist", "create it or pass --submissions DIR")
    read = read_report(report, check=False, name=report.name)
    data, doc = read.data, read.doc
    findings = validate(doc, base_dir=report.parent)
    errors = errors_of(findings)
    if errors:
        lines = "\n".join(f"  {describe(f)}" + (f"\n    hint: {f.hint}" if getattr(f, "hint", None) else "")
                          for f in errors)
        raise SubmissionRefused(f"{report.name} refused: {len(errors)} error finding(s)\n{lines}",
                                f"fix them and check with `race validate {report.name}` before submitting")
    stored = doc
    if isinstance(doc.get("ledger"), dict):
        stored = read.with_ledger_path(stored_ledger_name(doc))
        data = (json.dumps(stored, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    sid = submission_id(stored)
    key = run_key(doc)
    reports = _folder_reports(folder)
    other = _find_duplicate(reports, sid, submission_id(doc), run=key)
    if other:
        same = "same content" if other == f"{sid}.json" or _content_id(folder / other) in (sid, submission_id(doc)) \
            else f"the same run: run id {key[0]!r}, ledger sha256 {key[1][:ID_HEX]}"
        raise SubmissionRefused(f"{report.name} refused: duplicate of {other} (submission {Path(other).stem}: {same}; id {sid})",
                                "a run is submitted once; to correct a listed report, replace that submission "
                                f"({other}) instead of adding another")
    from . import board

    if board.claims_published(doc):
        known = maintained if maintained is not None else board.maintained(board.default_published(folder))
        if not known.holds(sid):
            rule, message = board.board_refusal(stored, sid, known, {})
            raise SubmissionRefused(f"{report.name} refused: {rule} {message}",
                                    "submit your own run without sources.published, or propose the run description "
                                    "in leaderboard/published/ (docs/leaderboard.md)")
    taken = _run_ids(reports)
    rid = key[0] if key else None
    if rid in taken and taken[rid] != f"{sid}.json":      # the same file again: a duplicate, refused below
        raise SubmissionRefused(f"{report.name} refused: BOARD-001 run id {rid!r} is already listed by {taken[rid]}: "
                                "one row per run id", "give this run an id of its own (run.id) and submit again")
    # First: a listed report always has its ledger.
    ledger = _store_ledger(doc, report.parent, folder) if stored is not doc else None
    target = folder / f"{sid}.json"
    if not write_new(target, data):
        raise SubmissionRefused(f"{report.name} refused: duplicate of {target.name} (same content, id {sid})",
                                "a run is submitted once; change the report if this is a different run")
    return Submitted(sid, target, tuple(f for f in findings if f.severity != "error"), ledger)


def _inside(folder: Path, rel: str) -> Path | None:
    """`folder/rel` when it stays inside `folder` (no absolute paths, no `..` escapes), else None."""
    base = folder.resolve()
    p = (base / rel).resolve()
    return p if rel and p != base and p.is_relative_to(base) else None


def _store_ledger(doc: dict, report_dir: Path, folder: Path) -> Path:
    """Copy the report's ledger (already checked by the validator: it exists and its sha256
    matches) into the submissions folder under its own name (stored_ledger_name)."""
    ref = doc["ledger"]
    src = _inside(report_dir, ref["path"])
    if src is None or not src.is_file():
        raise SubmissionRefused(f"ledger path {ref['path']!r} does not stay inside the report's folder",
                                "give ledger.path relative to the report, without '..'")
    data = src.read_bytes()
    if hashlib.sha256(data).hexdigest() != ref["sha256"]:      # changed since validation
        raise SubmissionRefused(f"ledger {ref['path']} changed while submitting", "submit again")
    dest = folder / stored_ledger_name(doc)
    if not write_new(dest, data) and hashlib.sha256(dest.read_bytes()).hexdigest() != ref["sha256"]:
        raise SubmissionRefused(f"{dest.name} in the submissions folder holds other bytes than its name says",
                                f"remove the damaged {dest.name} and submit again")
    return dest


# ----------------------------------------------------------------------------- reading a folder

@dataclass(frozen=True)
class Submission:
    """A listed submission: its id, file name, report and validation findings (no errors)."""

    id: str
    filename: str
    doc: dict
    findings: tuple = ()


@dataclass
class Folder:
    """Everything in a submissions folder: what is listed and what was skipped."""

    submissions: list[Submission] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)


def validator_fingerprint() -> str:
    """Identity of the validator's verdicts: a hash over the code and data they depend on (the
    core modules and the accounting, record and validate layers with the model catalog, and
    the schemas). Cached findings are reused only while it is unchanged."""
    from .. import __version__, paths

    pkg = Path(__file__).resolve().parents[1]       # suite/
    h = hashlib.sha256(__version__.encode())
    files = sorted([*pkg.glob("*.py"), *(f for layer in ("accounting", "record", "validate")
                                         for f in (pkg / layer).rglob("*") if f.suffix in (".py", ".json")),
                    *paths.schemas().glob("*.json")])
    for f in files:
        h.update(f.relative_to(f.parents[1]).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _ledger_key(folder: Path, doc: dict, memo: dict | None = None) -> str:
    """What a report's verdict depends on besides its own content: its ledger's bytes. `memo`
    (path -> key) spares re-hashing a ledger several reports share within one build; a ledger
    the validator already scanned in this build (shared_ledgers) is not read again."""
    from ..validate.context import shared_scan

    ref = doc.get("ledger")
    path = _inside(folder, str(ref.get("path", ""))) if isinstance(ref, dict) else None
    if path is None or not path.is_file():
        return "no-ledger"
    if memo is not None and str(path) in memo:
        return memo[str(path)]
    scanned = shared_scan(path)
    if scanned is not None and scanned.error is None:
        key = scanned.sha256
    else:
        key = file_sha256(path)
    if memo is not None:
        memo[str(path)] = key
    return key


def load_submissions(folder: Path, *, check: bool = True, cache: dict | None = None, maintained: Any = None) -> Folder:
    """Read every `*.json` in `folder` (not recursive; hidden and temp files ignored). A file
    that cannot be read, has error findings (when `check`) or duplicates an earlier one is
    skipped with its reason; the rest are listed. Never raises for a bad file.

    `cache` maps (content id, ledger hash) to findings from an earlier build with the same
    validator_fingerprint(); it is read and updated in place. Then the board's rules
    (suite.site.board): one row per run id, the maintained published runs first (BOARD-001), and
    a published run only as the rebuild of a maintained description (`maintained`, BOARD-002)."""
    from .board import Maintained, board_refusal
    from ..validate import Finding

    folder = Path(folder)
    if not folder.is_dir():
        raise RaceError(f"submissions folder {folder} does not exist",
                        "pass --submissions DIR (default leaderboard/submissions)")
    out, seen = Folder(), {}
    cached = {k.split(":", 1)[0] for k in cache} if cache else set()     # full sha256 of each cached report
    hashes: dict[str, str] = {}       # ledger path -> key part, for ledgers shared by reports
    for p in sorted(folder.iterdir()):
        if p.name.startswith(".") or p.suffix != ".json" or not p.is_file():
            continue
        if p.is_symlink():          # a link could point anywhere on the builder's machine
            out.skipped.append(Skip(p.name, "a symbolic link, not a file: submissions are plain files"))
            continue
        try:
            doc = read_report(p, check=False, name=p.name).doc
        except RaceError as e:
            out.skipped.append(Skip(p.name, e.message.removeprefix(f"{p.name}: ")))
            continue
        findings: list = []
        sid = submission_id(doc)
        digest = content_digest(doc)      # the cache is keyed by the full digest, never the 64-bit id
        if check:
            # Only a submission seen by an earlier build can have cached findings: hash its
            # ledger for the key first; a new one is validated, and its key taken after.
            key = f"{digest}:{_ledger_key(folder, doc, hashes)}" if digest in cached else None
            if key is not None and key in cache:
                findings = [Finding(**{**f, "file": p.name}) for f in cache[key]]
            else:
                try:
                    findings = [_scrubbed(f, folder) for f in validate(doc, base_dir=folder, file=p.name)]
                except RaceError as e:
                    out.skipped.append(Skip(p.name, e.message))
                    continue
                if cache is not None:
                    key = key or f"{digest}:{_ledger_key(folder, doc, hashes)}"
                    cache[key] = [f.to_dict() for f in findings]
            errors = errors_of(findings)
            if errors:
                shown = "; ".join(describe(f) for f in errors[:3])
                more = f"; and {len(errors) - 3} more" if len(errors) > 3 else ""
                out.skipped.append(Skip(p.name, f"{len(errors)} error finding(s): {shown}{more}"))
                continue
        if sid in seen:
            out.skipped.append(Skip(p.name, f"duplicate of {seen[sid]} (same content, id {sid})"))
            continue
        seen[sid] = p.name
        out.submissions.append(Submission(sid, p.name, doc, tuple(findings)))
    known = maintained if maintained is not None else Maintained()
    listed: dict[str, str] = {}
    kept = []
    for s in sorted(out.submissions, key=lambda s: (not known.holds(s.id), s.filename)):
        refusal = board_refusal(s.doc, s.id, known, listed)
        if refusal:
            out.skipped.append(Skip(s.filename, f"{refusal[0]}: {refusal[1]}"))
            continue
        rid = (s.doc.get("run") or {}).get("id") if isinstance(s.doc.get("run"), dict) else None
        if isinstance(rid, str):
            listed[rid] = s.filename
        kept.append(s)
    out.submissions = sorted(kept, key=lambda s: s.filename)
    return out


def _scrubbed(f: Any, folder: Path) -> Any:
    """A finding with the submissions folder's absolute path cut out of its text: the site must
    carry no local paths."""
    import dataclasses

    prefixes = sorted({str(folder.resolve()) + os.sep, str(folder.absolute()) + os.sep}, key=len, reverse=True)

    def cut(text: str) -> str:
        for p in prefixes:
            text = text.replace(p, "")
        return text

    return dataclasses.replace(f, message=cut(f.message), hint=cut(f.hint or ""), file=cut(f.file or ""))


def ledger_steps(folder: Path, doc: dict, cache: dict | None = None, scans: dict | None = None
                 ) -> tuple[tuple[list[int], list[dict[str, int]]] | None, str]:
    """Per-step FLOPs of a submission's ledger, read from the report's relative `ledger.path`
    inside the submissions folder (never outside it) when its sha256 matches the report; else
    None and the reason. `cache` (sha256 -> steps) lets one build read each ledger once;
    `scans` (from suite.validate.shared_ledgers) lends the series the validator already read.
    Read by the ledger's one reader (suite.record.ledger): lines that are not records are left out."""
    ref = doc.get("ledger") or {}
    sha = str(ref.get("sha256", ""))
    if cache is not None and sha in cache:
        return cache[sha]
    path = _inside(Path(folder), str(ref.get("path", "")))
    if path is None or not path.is_file():
        return None, ("the ledger is not available beside the report in the submissions folder "
                      "(`race submit` stores it there when it sits beside the report)")
    if path.stat().st_size > MAX_LEDGER_BYTES:
        return None, "the ledger is larger than the site's limit"
    scanned = (scans or {}).get(path)
    if scanned is None or scanned.series is None or scanned.error is not None:
        scanned = LedgerSummary.scan(path, series=True)     # the strict reader: bad lines are left out
    if scanned.sha256 != sha:
        return None, "a ledger file was found but its sha256 does not match the report"
    result = (scanned.series, "") if scanned.records else (None, "the ledger has no complete records")
    if cache is not None:
        cache[sha] = result
    return result


CACHE_FILE = ".race-validation-cache.json"   # inside the built site; findings keyed by content
CACHE_KEY_ENV = "RACE_CACHE_KEY_FILE"


def _cache_key() -> bytes | None:
    """The builder's secret for the validation cache's MACs: a random key kept outside every site
    ($RACE_CACHE_KEY_FILE, else $XDG_CACHE_HOME/race/validation-cache.key, else ~/.cache/...),
    created 0600 on first use. None (no cache: every submission validated) when it cannot be kept."""
    env = os.environ.get(CACHE_KEY_ENV)
    if env:
        path = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "race" / "validation-cache.key"
    try:
        data = path.read_bytes()
        if len(data) >= 32:
            return data
    except OSError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
        return path.read_bytes()
    except FileExistsError:             # another build created it meanwhile
        try:
            data = path.read_bytes()
            return data if len(data) >= 32 else None
        except OSError:
            return None
    except OSError:
        return None


def _mac(key: bytes, fingerprint: str, entry: str, findings: Any) -> str:
    import hmac

    msg = "\0".join((fingerprint, entry, json.dumps(findings, sort_keys=True, separators=(",", ":")))).encode()
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def _read_cache(path: Path, fingerprint: str, key: bytes | None = None) -> dict:
    """Findings of an earlier build, when it ran the same validator and each entry carries the MAC
    this builder's key gives it (an entry added or edited by hand is dropped: its report is
    validated again); else an empty cache."""
    import hmac

    if key is None:
        return {}
    try:        # a damaged cache (a duplicate key too) is no cache: every submission is validated again
        data = jsonstrict.loads(path.read_bytes())
        if data.get("fingerprint") != fingerprint or not isinstance(data.get("findings"), dict):
            return {}
        macs = data.get("macs") if isinstance(data.get("macs"), dict) else {}
        return {k: v for k, v in data["findings"].items()
                if isinstance(macs.get(k), str) and hmac.compare_digest(macs[k], _mac(key, fingerprint, k, v))}
    except (OSError, ValueError, AttributeError, TypeError):     # jsonstrict.JSONInputError is a ValueError
        pass
    return {}


def _reference_cell(doc: dict) -> bool:
    """Whether a listed report is one of the suite's own cells: it names one, and the validator
    (REF-001, suite.validate.board_rules) held the claim to the cell's content."""
    prov = doc.get("provenance")
    return isinstance(prov, dict) and isinstance(prov.get("reference_cell"), str)


def build(folder: Path, out: Path, *, check: bool = True, findings: Path | None = None,
          published: Path | None = None) -> dict[str, Any]:
    """Build the static site in `out` from the submissions `folder`: every valid submission is
    listed, every other file is named on the site with the reason it was skipped; with `findings`
    (a findings.json of `race findings` / `race study`) also the findings page. Returns the site
    builder's summary (pages, listed, skipped, main page bytes) plus the skipped files. A findings
    file that fails its schema raises RaceError before anything is written. `published`: the
    maintained run descriptions (default: the `published` folder beside `folder`, when there is
    one); only their rebuilds are listed as published runs."""
    from . import board, render

    from ..validate.context import shared_ledgers

    folder, out = Path(folder), Path(out)
    study, figure = None, None
    if findings is not None:
        from .findings import for_site

        study, figure = for_site(findings)
    fingerprint = validator_fingerprint() if check else ""
    secret = _cache_key() if check else None
    cache = _read_cache(out / CACHE_FILE, fingerprint, secret) if check else None
    known = board.maintained(published if published is not None else board.default_published(folder))
    with shared_ledgers() as scans:     # each ledger read once: validated, then charted
        loaded = load_submissions(folder, check=check, cache=cache, maintained=known)
        entries, skipped = [], list(loaded.skipped)
        for s in loaded.submissions:
            ledger, note = ledger_steps(folder, s.doc, scans=scans)
            b = board.badge(s.doc, s.id, known, ledger_verified=ledger is not None, checked=check)
            origin = "published run" if known.holds(s.id) else \
                "reference cell" if check and _reference_cell(s.doc) else "submitted run"
            try:
                row = render.row_from_report(s.doc, id=s.id, page=f"s/{s.id}.html", origin=origin, badge=b)
            except (RaceError, KeyError, TypeError, AttributeError) as e:   # only reachable with check=False
                skipped.append(Skip(s.filename, f"not a report v1 document (missing or wrong field {e})"))
                continue
            entries.append(render.SiteEntry(row=row, doc=s.doc, filename=s.filename, findings=s.findings,
                                            ledger=ledger, ledger_note=note))
    extra = {}
    if cache is not None and secret is not None:    # only what this build saw: removed submissions drop out
        seen = {content_digest(s.doc) for s in loaded.submissions}
        kept = {k: v for k, v in cache.items() if k.split(":", 1)[0] in seen}
        extra[CACHE_FILE] = json.dumps({"fingerprint": fingerprint, "findings": kept,
                                        "macs": {k: _mac(secret, fingerprint, k, v) for k, v in kept.items()}},
                                       separators=(",", ":"))
    summary = render.build_site(entries, out, skipped, extra_files=extra, findings=study, figure=figure)
    summary["skipped_files"] = [(s.name, s.reason) for s in skipped]
    return summary
