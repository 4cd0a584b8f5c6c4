"""Importer key maps: how an engine's metric log names the numbers `race import` reads, one
declarative map per engine (tasks/engines/*.yaml, checked by schemas/keymap-v1.schema.json),
registered by name. The shipped maps cover NeMo-RL, prime-rl, slime, SkyRL, OpenRLHF, ROLL and
AReaL; a user writes a new one without code (`race import --key-map FILE`), and other packages
add theirs through the `race.importers` entry point group (suite.registry).

One reader serves every map (`read_metric_log`): JSON Lines (a file monitor's records, or lines
of a console log behind a marker) or CSV (what wandb and TensorBoard export), rows merged by the
map's step key, each step's mean prompt, completion and environment tokens per sequence, its
sequences, kept sequences, phase seconds and off-policy lag taken from the keys the map names.
A key the map names that the log does not have is one line naming the key and the map."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .. import jsonstrict
from ..errors import RaceError
from ..registry import Registry


@dataclass(frozen=True)
class KeyMap:
    """A parsed key map (schemas/keymap-v1.schema.json); `path` is the file it came from."""

    name: str
    engine: str
    profile: str
    source: Mapping[str, Any]
    logger: str
    step: str
    tokens: Mapping[str, Any]
    version: str = "unknown"
    format: str = "jsonl"
    line_prefix: str | None = None
    nest: str | None = None
    sequences: str | None = None
    kept: str | None = None
    seconds: Mapping[str, Any] = field(default_factory=dict)
    off_policy: Mapping[str, str] | None = None
    metrics: tuple[str, ...] = ()
    path: str = ""

    @property
    def where(self) -> str:
        """How messages name the map: its name and file."""
        return f"key map '{self.name}'" + (f" ({self.path})" if self.path else "")

    def token_keys(self) -> list[str]:
        """Every log key the token counts need."""
        out = []
        for spec in self.tokens.values():
            if isinstance(spec, str):
                out.append(spec)
            elif "total" in spec:
                out.append(spec["total"])
            elif "minus" in spec:
                out += list(spec["minus"])
        return out + [k for k in (self.sequences, self.kept) if k]


def load_key_map(path: str | Path) -> KeyMap:
    """A key map YAML file, checked against its schema; RaceError naming the file and field."""
    from .. import yamlstrict
    from ..record import schemas

    path = Path(path)
    if not path.is_file():
        raise RaceError(f"key map {path} not found", "pass a key map YAML (tasks/engines/*.yaml shows the shape)")
    import yaml

    try:
        d = yamlstrict.load(path)   # strict: no anchors, no duplicate keys
    except yaml.YAMLError as e:
        raise RaceError(f"{path}: not YAML ({str(e).splitlines()[0]})", "see tasks/engines/*.yaml") from None
    schemas.check_spec(d, schemas.KEYMAP, str(path))
    d = dict(d)
    d["metrics"] = tuple(d.get("metrics") or ())
    return KeyMap(**d, path=str(path))


def _load_shipped() -> None:
    from .. import paths

    folder = paths.tasks() / "engines"
    for p in sorted(folder.glob("*.yaml")) if folder.is_dir() else ():
        m = load_key_map(p)
        KEY_MAPS.add(m.name, m)


KEY_MAPS: Registry[Any] = Registry("importer key map", loader=_load_shipped, group="race.importers")
"""Log format name -> its key map (the shipped tasks/engines/*.yaml, then plugins')."""


def key_map(name: str):
    """Decorator: register the decorated key map under `name`.

    Args: name, the log format's name (as `race import` takes it). Returns the decorator, which
    returns the key map unchanged."""
    return KEY_MAPS.register(name)


# ---- reading ------------------------------------------------------------------------------------


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None or v == "":
        return None
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return None


def _rows(path: Path, km: KeyMap):
    """(line, record) of the log: CSV rows (header first) or JSON Lines records (behind the
    map's line prefix, the metrics under its `nest` key merged with the top level)."""
    fmt = "csv" if path.suffix.lower() == ".csv" else "jsonl" if path.suffix.lower() in (".jsonl", ".json") \
        else km.format
    if fmt == "csv":
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            reader = csv.DictReader(f)
            try:
                for row in reader:
                    yield reader.line_num, row
            except csv.Error as e:      # a field over the csv module's 128 KiB limit (line_num: the lines before it)
                raise RaceError(f"{path}:{reader.line_num + 1}: not a CSV row the import can read ({e})",
                                "export the metrics again (wandb / TensorBoard CSV: one row a step, numbers only)") \
                    from None
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if km.line_prefix is not None:
                i = line.find(km.line_prefix)
                if i < 0:
                    continue
                line = line[i + len(km.line_prefix):]
            if not line.strip():
                continue
            try:
                rec = jsonstrict.loads(line.encode("utf-8"), allow_nan=True)
            except jsonstrict.JSONInputError as e:
                if e.kind == "syntax" and not line.endswith("\n"):
                    return  # torn last line of a killed run
                raise RaceError(f"{path}:{n}: not JSON ({e.message})", f"{km.where} reads one JSON object a line") \
                    from None
            if not isinstance(rec, dict):
                continue
            if km.nest and isinstance(rec.get(km.nest), dict):
                rec = {**{k: v for k, v in rec.items() if k != km.nest}, **rec[km.nest]}
            yield n, rec


def read_metric_log(path: str | Path, km: KeyMap) -> dict[int, dict[str, float]]:
    """Step -> its numbers (rows of one step merged, later rows winning), steps with none of the
    map's token keys left out (evaluation-only rows). RaceError when the file is missing, has no
    training step, or lacks a key the map names (one line: the key and the map)."""
    path = Path(path)
    if not path.is_file():
        raise RaceError(f"{km.engine} log {path} not found", f"{km.where}: {km.logger}")
    steps: dict[int, dict[str, float]] = {}
    seen: set[str] = set()
    for _, rec in _rows(path, km):
        seen.update(k for k, v in rec.items() if v not in (None, ""))
        s = _number(rec.get(km.step))
        if s is None:
            continue
        row = steps.setdefault(int(s), {})
        for k, v in rec.items():
            x = _number(v)
            if x is not None:
                row[k] = x
    need = [km.step, *km.token_keys()]
    for k in need:
        if k not in seen:
            raise RaceError(f"{path}: key '{k}' of {km.where} is not in the log",
                            f"the engine may have renamed it: fix the key map, or pass one that matches "
                            f"(--key-map FILE); the log must come from: {km.logger}")
    for phase, keys in km.seconds.items():
        ks = [keys] if isinstance(keys, str) else keys
        if not any(k in seen for k in ks):
            raise RaceError(f"{path}: none of the {phase} timers {', '.join(ks)} of {km.where} is in the log",
                            "the engine may have renamed them: fix the key map's seconds")
    train = {s: r for s, r in steps.items() if any(k in r for k in km.token_keys())}
    if not train:
        raise RaceError(f"{path}: no training steps with the keys of {km.where}", km.logger)
    return dict(sorted(train.items()))


def _tok(spec, row: dict, cell, n: float, what: str, where: str, km: KeyMap) -> float:
    def get(k):
        if k not in row:
            raise RaceError(f"{where}: key '{k}' of {km.where} is missing at this step")
        return row[k]

    if isinstance(spec, str):
        return get(spec)
    if "total" in spec:
        return get(spec["total"]) / n
    if "minus" in spec:
        a, b = spec["minus"]
        return get(a) - get(b)
    f = spec["description"]
    v = (cell.rollouts or {}).get("environment_tokens") if f == "environment_tokens" else getattr(cell, f)
    if v is None:
        raise RaceError(f"{where}: {km.where} takes the {what} tokens from the run description's {f}, which "
                        f"{cell.name} does not give", f"add `{f}` to the run description (the log does not say it)")
    return float(v)


def steps_from_log(path: str | Path, km: KeyMap, cell) -> list:
    """The importer's Steps (suite.integrations.importers.Step) of a metric log under `km`."""
    from .importers import Step

    rows = read_metric_log(path, km)
    expected = cell.prompts_per_step * cell.group_size
    turns = float((cell.rollouts or {}).get("turns") or 1)
    out = []
    for step, row in rows.items():
        where = f"{path}: step {step}"
        n = row[km.sequences] if km.sequences and km.sequences in row else expected
        if not n > 0:       # a sequence count of 0 divides every per-sequence mean by zero
            raise RaceError(f"{where}: field '{km.sequences}' = {n:g} sequences; a training step generates at least "
                            "one", "check the map's sequence key against the log")
        p = _tok(km.tokens["prompt"], row, cell, n, "prompt", where, km)
        c = _tok(km.tokens["completion"], row, cell, n, "completion", where, km)
        e = _tok(km.tokens["environment"], row, cell, n, "environment", where, km) if "environment" in km.tokens else 0
        if p <= 0 or c <= 0 or e < 0:
            raise RaceError(f"{where}: {km.where} gives {p:g} prompt, {c:g} completion and {e:g} environment tokens "
                            "per sequence", "check the map's token keys against the log")
        seconds: dict[str, float] = {}
        for phase in ("rollout", "update", "reward"):
            ks = km.seconds.get(phase)
            if ks:
                got = [row[k] for k in ks if k in row]
                if got:
                    seconds[phase] = sum(got)
        if km.seconds.get("step") and km.seconds["step"] in row:
            seconds["other"] = max(0.0, row[km.seconds["step"]] - sum(seconds.values()))
        metrics = {k: row[k] for k in km.metrics if k in row}
        if km.off_policy:
            for what, k in km.off_policy.items():
                if k in row:
                    metrics[f"off_policy/{what}"] = row[k]
        kept = row.get(km.kept) if km.kept else None
        out.append(Step(step=step, prompt_mean=p, completion_mean=c, seconds=seconds, metrics=metrics,
                        sequences=n if km.sequences else None, kept=kept, environment_tokens=e,
                        turns=turns if e else 1))
    return out


def import_metric_log(path: str | Path, km: KeyMap, cell, out: str | Path, *, engine_version: str | None = None,
                      force: bool = False):
    """A metric log read under key map `km` -> ledger and report in `out` (priced under the
    map's engine profile). Returns the ImportResult."""
    from .importers import import_steps

    if not isinstance(km, KeyMap):      # a plugin's map: a mapping of the schema's fields
        from ..record import schemas

        d = dict(km) if isinstance(km, Mapping) else {k: getattr(km, k) for k in dir(km) if not k.startswith("_")}
        schemas.check_spec(d, schemas.KEYMAP, f"key map {d.get('name', '?')}")
        km = KeyMap(**{**d, "metrics": tuple(d.get("metrics") or ())})
    steps = steps_from_log(path, km, cell)
    lag = [s.metrics.get("off_policy/max") for s in steps if s.metrics.get("off_policy/max") is not None]
    if lag:
        mean = [s.metrics["off_policy/mean"] for s in steps if "off_policy/mean" in s.metrics]
        cell = cell.with_changes(rollouts={**(cell.rollouts or {}), "off_policy": {
            "max_lag": int(max(lag)), **({"mean_lag": sum(mean) / len(mean)} if mean else {})}})
    notes = (f"Imported from {km.engine}'s metric log ({Path(path).name}) by race import {km.name} under {km.where} "
             f"(keys read from {km.source['repo']} at {km.source['commit'][:12]}): per-step mean lengths priced by "
             f"suite.accounting (profile {km.profile}); attention work assumes every sequence has the mean length.")
    fields = sorted({km.step, *km.token_keys()})
    source = {"engine": km.name, "file": Path(path).name, "fields": fields}
    return import_steps(steps, cell, out, engine=km.engine, engine_version=engine_version or km.version,
                        engine_profile=km.profile, notes=notes, source=source, force=force)


__all__ = ["KEY_MAPS", "key_map", "KeyMap", "load_key_map", "read_metric_log", "steps_from_log", "import_metric_log"]
