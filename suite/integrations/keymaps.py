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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import RaceError
from ..registry import Registry
from .logformats import number as _number


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
    sequences: Any = None
    kept: str | None = None
    seconds: Mapping[str, Any] = field(default_factory=dict)
    off_policy: Mapping[str, str] | None = None
    metrics: tuple[str, ...] = ()
    critic: tuple[str, ...] = ()
    ambiguous: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    renames: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
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
                out += [k for k in spec["minus"] if isinstance(k, str)]
        return out + [k for k in (self.kept,) if k]

    def sequences_key(self) -> str | None:
        """The log key the sequence count comes from (a count, or verl's token total)."""
        s = self.sequences
        return s.get("tokens") if isinstance(s, Mapping) else s

    def wanted(self) -> set[str]:
        """Every key the import keeps from a row (the rest is only noted as seen)."""
        keys = {*self.token_keys(), *self.metrics, *self.critic, *self.ambiguous, *(self.off_policy or {}).values()}
        for v in self.seconds.values():
            keys.update([v] if isinstance(v, str) else v)
        if self.sequences_key():
            keys.add(self.sequences_key())
        return keys

    def renamed(self, version: str | None) -> dict[str, str]:
        """{old name: this map's name} for the engine version (empty when it is not known)."""
        out: dict[str, str] = {}
        for spec, names in self.renames.items():
            if version and _in_range(version, spec):
                out.update({old: new for new, old in names.items()})
        return out


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
    d["critic"] = tuple(d.get("critic") or ())
    from .logformats import LOG_FORMATS

    if d.get("format", "jsonl") not in LOG_FORMATS:
        raise RaceError(f"{path}: format {d['format']!r} is not a known log reader",
                        f"known: {', '.join(sorted(LOG_FORMATS))}")
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


def _in_range(version: str, spec: str) -> bool:
    """Whether engine `version` lies in the PEP 440 range `spec` (an unparsable version: no)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version) in SpecifierSet(spec)
    except (InvalidVersion, InvalidSpecifier):
        return False


def reader_for(path: Path, km: KeyMap):
    """The log reader for `path` under `km`: by suffix (.csv, .jsonl), by folder (TensorBoard
    events, wandb run), else the map's own format."""
    from .logformats import LOG_FORMATS, sniff

    suffix = path.suffix.lower()
    if suffix == ".csv":
        return LOG_FORMATS["csv"]
    if suffix in (".jsonl", ".json") and km.format in ("jsonl", "csv"):
        return LOG_FORMATS["jsonl"]
    if path.is_dir() or "tfevents" in path.name:
        r = sniff(path)
        if r is None or r.name not in ("tensorboard", "wandb"):
            raise RaceError(f"{path}: a folder with no TensorBoard event files and no wandb files/output.log",
                            "pass the log file, the event files' folder or the wandb run folder")
        return r
    return LOG_FORMATS[km.format]


def _rows(path: Path, km: KeyMap):
    """(step, record) rows of the log through its reader (suite.integrations.logformats)."""
    r = reader_for(path, km)
    opts: dict[str, Any] = {"step": km.step, "nest": km.nest, "line_prefix": km.line_prefix}
    if r.name == "wandb" and km.format not in ("jsonl", "csv", "tensorboard", "wandb"):
        opts["console"] = km.format
    return r.rows(path, **opts)


OPTIONAL_TIMERS = ("reward", "step")
"""Phases a log may lack timers for: early verl timed the rule reward inside timing_s/adv, and the
step total only splits off 'other' seconds."""


def _refuse_critic(path: Path, km: KeyMap, seen) -> None:
    critic = [k for k in km.critic if k in seen]
    if critic:
        raise RaceError(f"{path}: the log has a PPO critic ({', '.join(critic)}): RACE does not price a critic's "
                        "forward and update, and will not drop them silently",
                        "import a run without a critic (GRPO-style advantages), or report this one by hand")


def refuse_critic(path: str | Path, km: KeyMap) -> None:
    """Refuse a log whose first training row holds a critic's keys (before anything else is
    read or checked: the cell of a PPO run may not even describe a GRPO run)."""
    if not km.critic or not Path(path).exists():
        return
    tokens = set(km.token_keys())
    for _, rec in _rows(Path(path), km):
        if tokens.intersection(rec):
            _refuse_critic(Path(path), km, rec)
            return


def read_metric_log(path: str | Path, km: KeyMap, *, engine_version: str | None = None) -> dict[int, dict[str, float]]:
    """Step -> its numbers (rows of one step merged, later rows winning; only the keys the map
    uses are kept, so memory grows with steps, not with the log), steps with none of the map's
    token keys left out (evaluation-only rows). RaceError (one line) when the file is missing, has
    no training step, lacks a key the map names (naming key, file and engine version, and the
    old name where the log has one), holds a critic's keys, or holds a key whose meaning
    depends on an engine version that is not given."""
    path = Path(path)
    if not path.exists():
        raise RaceError(f"{km.engine} log {path} not found", f"{km.where}: {km.logger}")
    wanted = km.wanted()
    renamed = km.renamed(engine_version)
    steps: dict[int, dict[str, float]] = {}
    seen: set[str] = set()
    for s, rec in _rows(path, km):
        if renamed:
            rec = {renamed.get(k, k): v for k, v in rec.items()}
        seen.update(k for k, v in rec.items() if v not in (None, ""))
        row = steps.setdefault(int(s), {})
        for k in wanted.intersection(rec):
            x = _number(rec[k])
            if x is not None:
                row[k] = x
    version = engine_version or "unknown"
    _refuse_critic(path, km, seen)
    for k, a in km.ambiguous.items():
        if k in seen and k in km.token_keys():
            if engine_version is None:
                raise RaceError(f"{path}: key '{k}' of {km.where} means different things in different {km.engine} "
                                f"versions ({a['why']}), and the engine version is not given",
                                "pass --engine-version (the version that wrote the log)")
            if _in_range(engine_version, a["versions"]):
                raise RaceError(f"{path}: key '{k}' of {km.where} does not count tokens in {km.engine} "
                                f"{engine_version} ({a['why']})", "import this version's log with another key map")
    need = [k for k in km.token_keys() if k not in km.ambiguous or engine_version is not None]
    if km.format in ("jsonl", "csv") and reader_for(path, km).name in ("jsonl", "csv"):
        need = [km.step, *need]
    for k in need:
        if k not in seen:
            olds = [old for spec, names in km.renames.items() for new, old in names.items()
                    if new == k and old in seen]
            hint = (f"the log has '{olds[0]}', the name older {km.engine} versions used: pass --engine-version"
                    if olds else f"the engine may have renamed it: fix the key map, or pass one that matches "
                    f"(--key-map FILE); the log must come from: {km.logger}")
            raise RaceError(f"{path}: key '{k}' of {km.where} is not in the log ({km.engine} version {version})", hint)
    for phase, keys in km.seconds.items():
        ks = [keys] if isinstance(keys, str) else keys
        if phase in OPTIONAL_TIMERS:
            continue
        if not any(k in seen for k in ks):
            raise RaceError(f"{path}: none of the {phase} timers {', '.join(ks)} of {km.where} is in the log "
                            f"({km.engine} version {version})", "the engine may have renamed them: fix the key map's "
                            "seconds, or pass --engine-version where the map knows the old names")
    train = {s: r for s, r in steps.items() if any(k in r for k in km.token_keys())}
    if not train:
        raise RaceError(f"{path}: no training steps with the keys of {km.where}", km.logger)
    return dict(sorted(train.items()))


def _described(cell, f: str) -> float | None:
    v = (cell.rollouts or {}).get("environment_tokens") if f == "environment_tokens" else getattr(cell, f)
    return None if v is None else float(v)


def _tok(spec, row: dict, cell, n: float, what: str, where: str, km: KeyMap) -> float:
    def get(k):
        if isinstance(k, Mapping):
            return desc(k["description"])
        if k not in row:
            raise RaceError(f"{where}: key '{k}' of {km.where} is missing at this step")
        return row[k]

    def desc(f):
        v = _described(cell, f)
        if v is None:
            raise RaceError(f"{where}: {km.where} takes the {what} tokens from the run description's {f}, which "
                            f"{cell.name} does not give", f"add `{f}` to the run description (the log does not say it)")
        return v

    if isinstance(spec, str):
        return get(spec)
    if "total" in spec:
        return get(spec["total"]) / n
    if "minus" in spec:
        a, b = spec["minus"]
        return get(a) - get(b)
    return desc(spec["description"])


def _descriptions(spec) -> list[str]:
    """The run-description fields a token spec reads."""
    if isinstance(spec, str):
        return []
    if "description" in spec:
        return [spec["description"]]
    return [x["description"] for x in spec.get("minus", ()) if isinstance(x, Mapping)]


DESCRIBED_WHY = {
    "mean_prompt_tokens": "the log counts generated tokens only; the prompt length is the run description's",
    "mean_completion_tokens": "the log does not count generated tokens; the run description's mean is used",
    "environment_tokens": "the log does not count environment (tool) tokens; the run description's mean is used",
}


def assumptions_of(km: KeyMap, cell, steps: list) -> list[dict]:
    """What the import took from the run description rather than the log, for the report's
    provenance.assumptions: each field with its value, why, and its range (the cell's `assumed`
    entry for the field: low, high, why) where the description gives one."""
    assumed = cell.assumed or {}
    out = []
    fields = sorted({f for spec in km.tokens.values() for f in _descriptions(spec)})
    for f in fields:
        a = {"field": f, "value": _described(cell, f), "why": DESCRIBED_WHY[f]}
        a.update({k: v for k, v in (assumed.get(f) or {}).items() if k in ("low", "high", "why")})
        out.append(a)
    counted = [s for s in steps if s.sequences is not None]
    if len(counted) < len(steps):
        n = cell.prompts_per_step * cell.group_size
        a = {"field": "sequences per step", "value": n,
             "why": f"the log does not count the sequences of {len(steps) - len(counted)} of its {len(steps)} steps; "
                    f"prompts_per_step x K of the run description ({cell.prompts_per_step} x {cell.group_size})"}
        for k in ("group_size", "prompts_per_step"):
            r = assumed.get(k) or {}
            if "low" in r and "high" in r:
                other = cell.prompts_per_step if k == "group_size" else cell.group_size
                a.update(low=r["low"] * other, high=r["high"] * other, why=a["why"] + f"; {k}: {r.get('why', '')}")
        out.append(a)
    return out


def steps_from_log(path: str | Path, km: KeyMap, cell, *, engine_version: str | None = None) -> list:
    """The importer's Steps (suite.integrations.importers.Step) of a metric log under `km`."""
    from .importers import Step

    rows = read_metric_log(path, km, engine_version=engine_version)
    expected = cell.prompts_per_step * cell.group_size
    turns = float((cell.rollouts or {}).get("turns") or 1)
    skey = km.sequences_key()
    by_tokens = isinstance(km.sequences, Mapping)
    out = []
    for step, row in rows.items():
        where = f"{path}: step {step}"
        counted = skey is not None and skey in row and not by_tokens
        n = row[skey] if counted else expected
        p = _tok(km.tokens["prompt"], row, cell, n, "prompt", where, km)
        c = _tok(km.tokens["completion"], row, cell, n, "completion", where, km)
        e = _tok(km.tokens["environment"], row, cell, n, "environment", where, km) if "environment" in km.tokens else 0
        if p <= 0 or c <= 0 or e < 0:
            raise RaceError(f"{where}: {km.where} gives {p:g} prompt, {c:g} completion and {e:g} environment tokens "
                            "per sequence", "check the map's token keys against the log")
        if by_tokens and skey in row:     # verl: global prompt + response tokens over the mean lengths
            n, counted = row[skey] / (p + c + e), True
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
                        sequences=n if counted else None, kept=kept, environment_tokens=e,
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
        km = KeyMap(**{**d, "metrics": tuple(d.get("metrics") or ()), "critic": tuple(d.get("critic") or ())})
    steps = steps_from_log(path, km, cell, engine_version=engine_version)
    lag = [s.metrics.get("off_policy/max") for s in steps if s.metrics.get("off_policy/max") is not None]
    if lag:
        mean = [s.metrics["off_policy/mean"] for s in steps if "off_policy/mean" in s.metrics]
        cell = cell.with_changes(rollouts={**(cell.rollouts or {}), "off_policy": {
            "max_lag": int(max(lag)), **({"mean_lag": sum(mean) / len(mean)} if mean else {})}})
    reader = reader_for(Path(path), km).name
    notes = (f"Imported from {km.engine}'s log ({Path(path).name}, read as {reader}) by race import {km.name} under "
             f"{km.where} (keys read from {km.source['repo']} at {km.source['commit'][:12]}): per-step mean lengths "
             f"priced by suite.accounting (profile {km.profile}); attention work assumes every sequence has the mean "
             "length.")
    fields = sorted({*([km.step] if reader in ("jsonl", "csv") else []), *km.token_keys()})
    source = {"engine": km.name, "file": Path(path).name, "fields": fields}
    declared = None
    if steps[0].step > 1:   # a resumed attempt, or a log that kept only its tail: it prices what it holds
        from dataclasses import replace

        first, last = steps[0].step, steps[-1].step
        notes += (f" The log holds the engine's steps {first}-{last} only (a resumed run or a truncated log): the "
                  f"report covers those {len(steps)} steps, numbered from 1 (ledger step = engine step - "
                  f"{first - 1}; each record keeps the engine's as metrics['log/step']).")
        steps = [replace(s, step=s.step - first + 1, metrics={**s.metrics, "log/step": s.step}) for s in steps]
        declared = steps[-1].step
    return import_steps(steps, cell, out, engine=km.engine, engine_version=engine_version or km.version,
                        engine_profile=km.profile, notes=notes, source=source, force=force,
                        assumptions=assumptions_of(km, cell, steps) or None, declared_steps=declared)


__all__ = ["KEY_MAPS", "key_map", "KeyMap", "load_key_map", "read_metric_log", "steps_from_log", "import_metric_log"]
