"""Which importer reads a log: `race import auto LOG` recognises the engine and the format from the
file itself (suite.integrations.logformats sniffing, then the keys of its first rows against every
key map), and `race import ENGINE LOG` picks, among that engine's key maps, the one whose format
the file has (a SkyRL console log given to `race import skyrl` is read by skyrl-console). When
nothing fits, one line says what the file looked like."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

from ..errors import RaceError

PEEK_ROWS = 200
"""Rows whose keys are compared with the key maps' when the format alone does not name the engine."""


def choose(name: str, log: str | Path):
    """The key map (an engine file's `logs` entry) that `race import NAME LOG` reads with. `auto`:
    the one the file's reader and keys point at; an entry name: that entry, or its engine's entry
    for the format the file has. RaceError (one line) when `auto` recognises nothing, or matches
    several engines' maps."""
    from .keymaps import log_entry
    from .logformats import sniff

    path = Path(log)
    if name == "auto":
        return _auto(path)
    km = log_entry(name)
    if path.exists() and path.suffix.lower() not in (".csv", ".jsonl", ".json"):
        r = sniff(path)
        if r is not None and r.engine == km.engine and r.name != km.format:
            return _map_of(km.engine, r.name) or km
    return km


def _maps():
    from .keymaps import KEY_MAPS, _sync

    _sync()
    return [KEY_MAPS[n] for n in sorted(KEY_MAPS)]


def _map_of(engine: str | None, fmt: str):
    maps = [m for m in _maps() if (engine is None or m.engine == engine) and m.format == fmt]
    return maps[0] if maps else None


def _auto(path: Path):
    from .logformats import read_head, seen, sniff

    if not path.exists():
        raise RaceError(f"{path} not found", "pass the log file, or the TensorBoard or wandb run folder")
    dedicated = None
    if path.name == "trainer_state.json" or (path.is_dir() and (path / "trainer_state.json").is_file()):
        dedicated = "trl-state"
    elif path.is_file() and b":::MLLOG" in read_head(path):
        dedicated = "mlperf"
    if dedicated:
        km = _map_of(None, dedicated)
        if km is not None:
            return km
    r = sniff(path)
    if r is None:
        raise RaceError(f"{path}: no reader recognises this file", seen(path))
    if r.name == "wandb":
        inner = sniff(path, consoles_only=True)
        km = _map_of(inner.engine, inner.name) if inner is not None else None
        if km is not None:
            return km
    if r.engine is not None:
        km = _map_of(r.engine, r.name)
        if km is None:
            raise RaceError(f"{path}: looks like {r.engine}'s {r.name} log, but no engine file reads that format",
                            "pass a key map of your own (race import map LOG --key-map FILE)")
        return km
    if r.name == "jsonl" and _is_verl_file_logger(path):
        km = _map_of(None, "verl-jsonl")
        if km is not None:
            return km
    # A generic container: compare the keys of its first rows with every map's.
    matches = []
    keys: set[str] = set()
    for km in _maps():
        if not km.tokens or km.format not in ("jsonl", "csv", r.name):
            continue
        try:
            rows = list(islice(r.rows(path, step=km.step, nest=km.nest, line_prefix=km.line_prefix), PEEK_ROWS))
        except RaceError:
            continue
        got = {k for _, row in rows for k in row}
        keys |= got
        need = [k for k in km.token_keys() if k not in km.refuse]
        if rows and need and all(k in got for k in need):
            matches.append(km)
    engines = sorted({m.engine for m in matches})
    if len(engines) == 1:
        best = [m for m in matches if m.format == r.name] or matches
        return best[0]
    shown = ", ".join(sorted(keys)[:8]) + (" ..." if len(keys) > 8 else "")
    if not engines:
        raise RaceError(f"{path}: read as {r.name}, its keys ({shown or 'none'}) match no engine's key map",
                        "name the log (race import NAME LOG) or pass --key-map FILE")
    raise RaceError(f"{path}: read as {r.name}, its keys fit the key maps of {', '.join(engines)}",
                    "name the log: race import NAME LOG")


def _is_verl_file_logger(path: Path) -> bool:
    from .. import jsonlines

    try:        # the first record decides
        rec = next(jsonlines.values(path), None)
    except RaceError:
        return False
    return isinstance(rec, dict) and isinstance(rec.get("data"), dict) and "step" in rec


__all__ = ["choose"]
