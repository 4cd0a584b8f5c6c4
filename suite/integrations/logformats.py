"""Readers for what RL engines write: console output, JSON Lines, CSV, TensorBoard event files and
wandb run folders, each turned into `(step, {key: value})` rows that suite.integrations.keymaps
prices. One registry (`LOG_FORMATS`), filled by the `log_format` decorator and open to plugins
through the `race.logformats` entry point group; `sniff(head, path)` lets `race import auto`
recognise a file from its first bytes.

Every reader streams: lines are read in blocks and split on newline and carriage return (tqdm
redraws its bar with a bare \\r, so a bar-only "line" can be as long as the run), ANSI colour
codes and Ray's `(Actor pid=N)` prefixes are stripped, and only the current step's record is kept.
Memory is bounded by one record, not by the file (benchmarks/test_logformats_bench.py measures it).

The engines' console readers are in suite.integrations.consoles; each layout was read from the
engine's own logging code, and the citation (repository @ commit: file) is the reader's `source`. Values are what the line says: a number becomes a float,
a string that parses as one too (SkyRL prints floats as strings rounded to 4 decimals); min and max
keys pass through as metrics like any other key.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from .. import jsonlines
from ..errors import RaceError
from ..registry import Registry

Row = tuple[int, dict[str, Any]]
"""One reader row: the engine's step and the keys logged for it (several rows may share a step)."""

BLOCK = 1 << 20
"""Bytes read at a time."""
MAX_LINE = 1 << 24
"""A 'line' longer than this (16 MiB without a newline or \\r) is dropped, not buffered: no engine
prints a metrics record that long, and buffering it would make memory grow with the file."""
MAX_RECORD = 1 << 22
"""A multi-line record (SkyRL's dict) longer than this is abandoned (4 MiB)."""

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-B]")
RAY_PREFIX = re.compile(r"\([\w.\-]+ pid=\d+(?:, ip=[0-9a-fA-F.:]+)?\) ?")
RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")


@dataclass(frozen=True)
class Reader:
    """One log format: how to recognise it and how to read it."""

    name: str
    """Registry name (what a key map's `format` and `race import --format` take)."""
    engine: str | None
    """The engine that writes this layout (None: a generic container such as JSON Lines)."""
    description: str
    """What the file is and how a user gets it."""
    source: str
    """Where the layout was read: repository @ commit: file (the engine's logging code)."""
    sniff: Callable[[bytes, Path], bool]
    """True when the file's first bytes (and path) look like this format."""
    read: Callable[..., Iterator[Row]]
    """The rows: read(path, **options) -> iterator of (step, {key: value})."""

    def rows(self, path: str | Path, **options: Any) -> Iterator[Row]:
        """Stream the rows of `path`; options (`step`, `nest`, `line_prefix`) matter to the
        generic JSON Lines and CSV readers only."""
        path = Path(path)
        if not path.exists():
            raise RaceError(f"log {path} not found", f"{self.name}: {self.description}")
        return self.read(path, **options)


LOG_FORMATS: Registry[Reader] = Registry("log format", loader="suite.integrations.consoles", group="race.logformats")
"""Log format name -> its Reader (this module's containers, the engines' consoles of
suite.integrations.consoles, then plugins')."""


def log_format(name: str, *, engine: str | None, description: str, source: str,
               sniff: Callable[[bytes, Path], bool]):
    """Decorator: register the decorated row generator `read(path, **options)` as format `name`.

    Args: name, the format's name; engine, the engine that writes it (None for generic
    containers); description, what the file is; source, the logging code it follows; sniff, the
    recogniser. Returns the decorator, which returns the function unchanged."""

    def decorate(read):
        LOG_FORMATS.add(name, Reader(name, engine, description, source, sniff, read))
        return read

    return decorate


# ---- shared helpers -------------------------------------------------------------------------------


_SPLIT = re.compile(rb"\r\n|\r|\n")


def text_lines(path: Path, needle: bytes | None = None) -> Iterator[str]:
    """The file's lines, split on \\n and \\r, decoded as UTF-8 (bad bytes replaced), with ANSI
    codes, Ray actor prefixes and Ray's `[repeated Nx across cluster]` suffixes removed. With
    `needle`, only lines whose bytes contain it (a reader's cheap pre-filter)."""
    pending = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(BLOCK)
            if not block:
                break
            parts = _SPLIT.split(pending + block)
            pending = parts.pop()
            if len(pending) > MAX_LINE:
                pending = b""
            for raw in parts:
                if raw and (needle is None or needle in raw):
                    yield _clean(raw)
    if pending and (needle is None or needle in pending):
        yield _clean(pending)


def _clean(raw: bytes) -> str:
    s = ANSI.sub("", raw.decode("utf-8", "replace"))
    s = RAY_PREFIX.sub("", s, count=2) if "pid=" in s else s     # also mid-line, after a tqdm redraw
    return RAY_REPEATED.sub("", s)


def head_text(head: bytes) -> str:
    """Sniffing: the head bytes as cleaned text."""
    return "\n".join(_clean(x) for x in re.split(rb"\r\n|\r|\n", head))


_NUMPY_REPR = re.compile(r"^(?:np\.|numpy\.)?(?:float|int|uint|bool_)\w*\((.*)\)$")


def number(v: Any) -> float | None:
    """A finite float from a logged value (int, float, numeric string, numpy repr such as
    `np.float64(0.5)`), else None."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, str):
        s = v.strip()
        m = _NUMPY_REPR.match(s)
        if m:
            s = m.group(1)
        try:
            v = float(s)
        except ValueError:
            return None
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return None


def literal(text: str, path: Path, what: str) -> Any:
    """A Python-repr record (SkyRL's pprinted dict, slime's and OpenRLHF's dicts) read with
    ast.literal_eval (no code runs), None where it is not one."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def values(d: Any) -> dict[str, Any]:
    """A logged dict's entries with string keys, numbers made floats (others kept as they are)."""
    if not isinstance(d, dict):
        return {}
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(k, str):
            x = number(v)
            out[k] = x if x is not None else v
    return out


# ---- JSON Lines and CSV (generic containers) -------------------------------------------------------


def _sniff_jsonl(head: bytes, path: Path) -> bool:
    first = next((x for x in head.splitlines() if x.strip()), b"")
    return path.suffix.lower() in (".jsonl", ".json") or first.lstrip().startswith(b"{")


@log_format("jsonl", engine=None, source="verl @ 0.9.1: verl/utils/tracking.py FileLogger ({'step': N, 'data': "
                                         "{...}} a line); prime-rl @ 559b4477: src/prime_rl/monitors/file.py",
            description="JSON Lines, one record a line (verl's FileLogger, prime-rl's metrics.jsonl)",
            sniff=_sniff_jsonl)
def read_jsonl(path: Path, *, step: str = "step", nest: str | None = None, line_prefix: str | None = None,
               **_: Any) -> Iterator[Row]:
    """One row per record with a numeric `step` (prime-rl's `"step": null` rows, written by other
    producers, are skipped); the record's `nest` dict (verl's `data`) merged into its top level."""
    for _, rec in jsonlines.records(path, prefix=line_prefix, torn_tail=True, hint="one JSON object a line"):
        if not isinstance(rec, dict):
            continue
        if nest and isinstance(rec.get(nest), dict):
            rec = {**{k: v for k, v in rec.items() if k != nest}, **rec[nest]}
        s = number(rec.get(step))
        if s is not None:
            yield int(s), values(rec)


@log_format("csv", engine=None, source="wandb run history export (one column per key, _step)",
            description="CSV with a header row (a wandb or TensorBoard history export)",
            sniff=lambda head, path: path.suffix.lower() == ".csv")
def read_csv(path: Path, *, step: str = "_step", **_: Any) -> Iterator[Row]:
    """One row per CSV row with a numeric `step` cell; empty cells left out."""
    import csv

    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.DictReader(f)
        try:
            for rec in reader:
                s = number(rec.get(step))
                if s is not None:
                    yield int(s), {k: v for k, v in values(rec).items() if v not in ("", None)}
        except csv.Error as e:      # a field over the csv module's 128 KiB limit (line_num: the lines before it)
            raise RaceError(f"{path}:{reader.line_num + 1}: not a CSV row the import can read ({e})",
                            "export the metrics again (wandb / TensorBoard CSV: one row a step, numbers only)") \
                from None


# ---- TensorBoard -----------------------------------------------------------------------------------


def _event_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and "tfevents" in p.name)


def _sniff_tb(head: bytes, path: Path) -> bool:
    return "tfevents" in path.name or (path.is_dir() and any("tfevents" in p.name for p in path.rglob("*tfevents*")))


@log_format("tensorboard", engine=None, sniff=_sniff_tb,
            source="tensorboard 2.21 (installed): tensorboard.backend.event_processing.event_file_loader."
                   "EventFileLoader; written by torch.utils.tensorboard.SummaryWriter.add_scalar as verl, NeMo-RL, "
                   "SkyRL, OpenRLHF and ROLL call it",
            description="TensorBoard event files (events.out.tfevents.*), a file or a folder of them")
def read_tensorboard(path: Path, **_: Any) -> Iterator[Row]:
    """One row per scalar event: (its step, {tag: value}); several files of a folder in name
    order. Needs the `logs` extra (tensorboard)."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util import tensor_util
    except ImportError:
        raise RaceError("reading TensorBoard event files needs the tensorboard package",
                        "pip install 'race-suite[logs]' -c constraints.txt") from None
    files = _event_files(path)
    if not files:
        raise RaceError(f"{path}: no TensorBoard event files (events.out.tfevents.*)",
                        "pass the event file or the folder the engine's SummaryWriter wrote")
    for f in files:
        for event in EventFileLoader(str(f)).Load():
            if not event.HasField("summary"):
                continue
            row: dict[str, Any] = {}
            for v in event.summary.value:
                if v.HasField("simple_value"):
                    x = number(v.simple_value)
                elif v.HasField("tensor") and not v.tensor.tensor_shape.dim:
                    try:
                        x = number(tensor_util.make_ndarray(v.tensor).item())
                    except (ValueError, TypeError):
                        x = None
                else:
                    x = None
                if x is not None:
                    row[v.tag] = x
            if row:
                yield int(event.step), row


# ---- wandb run folders -----------------------------------------------------------------------------


def _wandb_files(path: Path) -> Path | None:
    for p in (path / "files", path):
        if (p / "output.log").is_file() or (p / "wandb-summary.json").is_file():
            return p
    return None


def _sniff_wandb(head: bytes, path: Path) -> bool:
    return path.is_dir() and _wandb_files(path) is not None


@log_format("wandb", engine=None, sniff=_sniff_wandb,
            source="wandb 0.31 run folder layout: wandb/run-<date>-<id>/files/{output.log, wandb-summary.json, "
                   "wandb-metadata.json} and run-<id>.wandb (binary; its Python reader left wandb, see docs/import.md)",
            description="a wandb run folder (online or offline): files/output.log is read with the engine's console "
                        "reader; files/wandb-summary.json gives the last step's values")
def read_wandb(path: Path, *, console: str | None = None, **_: Any) -> Iterator[Row]:
    """The run's console capture (files/output.log) through the console reader `console` (or
    the one that recognises it). The binary run-*.wandb history is not read: wandb 0.31 dropped
    its Python datastore reader (the Go core reads it), so a folder with no output.log is refused."""
    files = _wandb_files(path)
    out = files / "output.log" if files else None
    if out is None or not out.is_file():
        raise RaceError(f"{path}: no files/output.log in this wandb run folder",
                        "the binary run-*.wandb history is not readable without wandb's service; export the run "
                        "history as CSV (wandb.Api().run(...).history()) or import the TensorBoard events")
    reader = LOG_FORMATS[console] if console else sniff(out, consoles_only=True)
    if reader is None:
        raise RaceError(f"{out}: no console reader recognises this output.log", _seen(out))
    yield from reader.rows(out)


def wandb_summary(path: Path) -> dict[str, Any]:
    """The run's files/wandb-summary.json (last logged value per key), {} where absent."""
    files = _wandb_files(Path(path))
    p = files / "wandb-summary.json" if files else None
    if p is None or not p.is_file():
        return {}
    try:
        return values(json.loads(p.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


# ---- sniffing --------------------------------------------------------------------------------------

HEAD = 1 << 18
"""Bytes sniffed (256 KiB: verl prints its whole config before the first step)."""


def read_head(path: Path) -> bytes:
    """The first HEAD bytes of a file (a folder: of its wandb output.log, else nothing)."""
    if path.is_dir():
        files = _wandb_files(path)
        path = files / "output.log" if files and (files / "output.log").is_file() else None
        if path is None:
            return b""
    with open(path, "rb") as f:
        return f.read(HEAD)


SCAN = 1 << 25
"""Bytes scanned, block by block, when the head shows no format (32 MiB: a verl run's per-sample
debug prints can push its first `step:` line megabytes in)."""


def sniff(path: str | Path, *, consoles_only: bool = False) -> Reader | None:
    """The reader that recognises `path`: engine consoles first (most specific), then TensorBoard
    and wandb folders, then JSON Lines and CSV by suffix or first byte; None if none does. A
    console whose head says nothing is scanned further, a block at a time (at most SCAN bytes)."""
    path = Path(path)
    order = sorted(LOG_FORMATS.values(), key=lambda r: (r.engine is None, r.name))
    if path.is_dir():       # a folder is a container first (a wandb run holds a console log)
        order = [r for r in order if r.engine is None] + [r for r in order if r.engine is not None]
    if consoles_only:
        order = [r for r in order if r.engine is not None]
    head = read_head(path) if not (path.is_dir() and not _wandb_files(path)) else b""
    found = _first(order, head, path)
    if found is not None or path.is_dir():
        return found
    consoles = [r for r in order if r.engine is not None]
    with open(path, "rb") as f:
        f.seek(len(head))
        tail = head[-4096:]
        for _ in range(SCAN // HEAD):
            block = f.read(HEAD)
            if not block:
                break
            found = _first(consoles, tail + block, path)
            if found is not None:
                return found
            tail = block[-4096:]
    return None


def reader_for(path: Path, fmt: str) -> Reader:
    """The reader of `path` that a log entry of format `fmt` reads with: by suffix (.csv; .jsonl
    for a JSON Lines or CSV entry), by folder (TensorBoard events, a wandb run), else `fmt`'s own."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return LOG_FORMATS["csv"]
    if suffix in (".jsonl", ".json") and fmt in ("jsonl", "csv"):
        return LOG_FORMATS["jsonl"]
    if path.is_dir() or "tfevents" in path.name:
        r = sniff(path)
        if r is None or r.name not in ("tensorboard", "wandb"):
            raise RaceError(f"{path}: a folder with no TensorBoard event files and no wandb files/output.log",
                            "pass the log file, the event files' folder or the wandb run folder")
        return r
    return LOG_FORMATS[fmt]


def _first(readers: list[Reader], head: bytes, path: Path) -> Reader | None:
    for r in readers:
        try:
            if r.sniff(head, path):
                return r
        except OSError:
            continue
    return None


def _seen(path: Path) -> str:
    """One line on what the first lines of a file look like (for `race import auto` refusals)."""
    try:
        lines = [x.strip() for x in head_text(read_head(path)[:4096]).splitlines() if x.strip()][:2]
    except OSError as e:
        return f"cannot read it ({e.strerror})"
    shown = " / ".join(x[:80] for x in lines) or "an empty file"
    return f"its first lines: {shown!r}; known formats: {', '.join(sorted(LOG_FORMATS))}"


def seen(path: str | Path) -> str:
    """Public form of the one-line description of an unrecognised file."""
    return _seen(Path(path))


__all__ = ["LOG_FORMATS", "Reader", "Row", "log_format", "number", "read_head", "reader_for", "seen", "sniff", "text_lines",
           "wandb_summary"]
