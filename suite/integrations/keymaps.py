# Over 500 lines: one idea, a log read under a key map into steps (the map, its registry, its version rules,
# the critic refusal and the steps); the readers live in logformats/consoles, the importers elsewhere.
"""Importer key maps: how an engine's metric log names the numbers `race import` reads. Each
engine file (tasks/engines/*.yaml, schemas/engine-v1.schema.json; suite.accounting.enginefile)
lists the logs its engine writes under `logs`; each entry is registered here by name. A user
writes a map of their own (`race import map LOG --key-map FILE`, schemas/keymap-v1.schema.json);
other packages add engine files (`race.engines`) or maps (`race.importers`) through entry points.

Every log is read through its reader (suite.integrations.logformats) into (step, keys) rows; this
module turns rows into steps under a map, keeping only the keys the map uses (memory grows with
steps, not with the log). A missing key is one line naming the key, the file and the engine
version (and the old name where the log has it); a critic's keys and keys whose meaning depends
on an unknown engine version are refused by name."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from ..errors import RaceError
from ..registry import Registry
from .described import described, assumptions_of
from .logformats import number as _number


@dataclass(frozen=True)
class KeyMap:
    """A parsed key map (schemas/keymap-v1.schema.json, or an engine file's `logs` entry); `path`
    is the file it came from."""

    name: str
    engine: str
    profile: str
    source: Mapping[str, Any]
    logger: str
    step: str | None = None
    """Key of the training step in JSON Lines and CSV (None: a format whose reader knows its own layout)."""
    tokens: Mapping[str, Any] = field(default_factory=dict)
    version: str = "unknown"
    format: str = "jsonl"
    line_prefix: str | None = None
    nest: str | None = None
    sequences: Any = None
    """A key holding the sequences of a step, or {tokens: KEY}: a prompt + completion token total."""
    kept: str | None = None
    seconds: Mapping[str, Any] = field(default_factory=dict)
    off_policy: Mapping[str, str] | None = None
    metrics: tuple[str, ...] = ()
    versions: str | None = None
    """The engine versions (PEP 440 range) the entry's keys hold for."""
    renames: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Per version range: {key this entry names: key that version logs}."""
    refuse: Mapping[str, str] = field(default_factory=dict)
    """Keys whose meaning changed between versions: key -> why (read only where the version is known
    and within `versions`)."""
    timers: Mapping[str, str] = field(default_factory=dict)
    """Pass (old_policy, reference) -> the key the engine logs only when that pass runs."""
    critic_keys: tuple[str, ...] = ()
    """Keys only a PPO critic writes: a log holding any is refused, naming them (RACE does not price a critic)."""
    path: str = ""

    @property
    def where(self) -> str:
        """How messages name the map: its name and file."""
        return f"key map '{self.name}'" + (f" ({self.path})" if self.path else "")

    def read_keys(self) -> set[str]:
        """Every log key the entry reads: step, token counts, sequences, seconds, timers."""
        secs = [k for v in self.seconds.values() for k in ([v] if isinstance(v, str) else v)]
        return {k for k in (self.step, *self.token_keys(), *secs, *self.timers.values()) if k}

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
        keys = {*self.token_keys(), *self.metrics, *self.critic_keys, *self.refuse, *self.timers.values(),
                *(self.off_policy or {}).values()}
        for v in self.seconds.values():
            keys.update([v] if isinstance(v, str) else v)
        if self.sequences_key():
            keys.add(self.sequences_key())
        return keys



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
    d["critic_keys"] = tuple(d.get("critic_keys") or ())
    from .logformats import LOG_FORMATS

    if d.get("format", "jsonl") not in LOG_FORMATS and d.get("format") not in DEDICATED:
        raise RaceError(f"{path}: format {d['format']!r} is not a known log reader",
                        f"known: {', '.join(sorted(LOG_FORMATS))}")
    return KeyMap(**d, path=str(path))



READ_BY_KEY_MAP = ("jsonl", "csv")
"""Formats `read_metric_log` reads with a key map's step and token keys."""
DEDICATED = ("verl-jsonl", "trl-state", "mlperf")
"""Formats read by an importer of their own (suite.integrations.importers, .mlperf): no key map."""
COMPARED = ("verl-jsonl", "trl-state")
"""Formats whose import prints the comparison with the engine's own FLOP figures (the others: the phase table)."""


def known_formats() -> set[str]:
    """The log formats an engine file's `logs` entry may name: the key-map formats, the dedicated
    importers', and the readers registered in suite.integrations.logformats where present."""
    out = set(READ_BY_KEY_MAP) | set(DEDICATED)
    try:
        from .logformats import LOG_FORMATS     # the readers' registry (console, TensorBoard, wandb)
    except ImportError:
        return out
    return out | set(LOG_FORMATS)


def from_entry(rec, entry: Mapping[str, Any]) -> KeyMap:
    """The KeyMap of one `logs` entry of engine file `rec` (suite.accounting.enginefile.EngineFile);
    RaceError naming the file when its format is one nobody reads."""
    if entry["format"] not in known_formats():
        raise RaceError(f"{rec.where}: log {entry['name']!r} has format {entry['format']!r}, which no reader reads",
                        f"known formats: {', '.join(sorted(known_formats()))}")
    d = dict(entry)
    d["metrics"] = tuple(d.get("metrics") or ())
    d["critic_keys"] = tuple(d.get("critic_keys") or ())
    return KeyMap(**d, engine=rec.name, source=rec.source or {}, path=rec.path)


def _sync() -> None:
    """Register every engine file's log entries not registered yet (a plugin's file may come later)."""
    from ..accounting.enginefile import ENGINE_FILES

    for rec in ENGINE_FILES.values():
        for entry in rec.logs:
            if entry["name"] not in KEY_MAPS:
                KEY_MAPS.add(entry["name"], from_entry(rec, entry))


KEY_MAPS: Registry[Any] = Registry("importer key map", loader=_sync, group="race.importers")
"""Log name -> its key map (the engine files' `logs` entries, then plugins')."""


def log_entry(name: str):
    """The key map `race import NAME` reads with: an engine file's log entry or a plugin's map."""
    if name not in KEY_MAPS:
        _sync()
    return KEY_MAPS[name]


def key_map(name: str):
    """Decorator: register the decorated key map under `name`.

    Args: name, the log format's name (as `race import` takes it). Returns the decorator, which
    returns the key map unchanged."""
    return KEY_MAPS.register(name)


# ---- reading ------------------------------------------------------------------------------------


def reader_for(path: Path, km: KeyMap):
    """The log reader for `path` under `km` (logformats.reader_for with the map's format)."""
    from .logformats import reader_for as reader

    return reader(path, km.format)


def for_version(km: KeyMap, version: str | None) -> KeyMap:
    """The entry as a log of engine `version` (the import's --engine-version; None: not known)
    names its keys: its `renames` for the ranges holding the version applied. RaceError when the
    version is outside the entry's `versions`, or unknown while the entry reads a key whose meaning
    changed between versions (`refuse`: the key and why, one line)."""
    from ..accounting.enginefile import version_in

    known = version not in (None, "", "unknown")
    if known and km.versions and not version_in(version, km.versions):
        raise RaceError(f"{km.where} reads logs of {km.engine} {km.versions}, not {km.engine} {version}",
                        "pass the log's own engine version (--engine-version), or a key map for that version")
    if not known:
        for key, why in km.refuse.items():
            if key in km.read_keys():
                raise RaceError(f"{km.where}: key '{key}' is read only where the engine version is known: {why}",
                                f"pass the {km.engine} version that wrote the log (--engine-version)")
    ren = {new: old for rng, m in (km.renames.items() if known else ()) if version_in(version, rng)
           for new, old in m.items()}
    if not ren:
        return replace(km, version=version) if known else km

    def r(k):
        return ren.get(k, k) if isinstance(k, str) else k

    def spec(s):
        if isinstance(s, str):
            return r(s)
        return {"total": r(s["total"])} if "total" in s else {"minus": [r(x) for x in s["minus"]]} if "minus" in s else s

    return replace(km, step=r(km.step), tokens={p: spec(s) for p, s in km.tokens.items()},
                   seconds={ph: r(v) if isinstance(v, str) else [r(x) for x in v] for ph, v in km.seconds.items()},
                   sequences=r(km.sequences), kept=r(km.kept), metrics=tuple(r(k) for k in km.metrics),
                   off_policy=None if km.off_policy is None else {w: r(k) for w, k in km.off_policy.items()},
                   timers={p: r(k) for p, k in km.timers.items()}, version=version)


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
    critic = [k for k in km.critic_keys if k in seen]
    if critic:
        raise RaceError(f"{path}: the log has a PPO critic ({', '.join(critic)}): RACE does not price a critic's "
                        "forward and update, and will not drop them silently",
                        "import a run without a critic (GRPO-style advantages), or report this one by hand")


def refuse_critic(path: str | Path, km: KeyMap) -> None:
    """Refuse a log whose first training row holds a critic's keys (before anything else is
    read or checked: the cell of a PPO run may not even describe a GRPO run)."""
    if not km.critic_keys or not Path(path).exists():
        return
    tokens = set(km.token_keys())
    for _, rec in _rows(Path(path), km):
        if tokens.intersection(rec):
            _refuse_critic(Path(path), km, rec)
            return


def read_metric_log(path: str | Path, km: KeyMap) -> dict[int, dict[str, float]]:
    """Step -> its numbers (rows of one step merged, later rows winning; only the keys the map
    uses are kept, so memory grows with steps, not with the log), steps with none of the map's
    token keys left out (evaluation-only rows). `km` names keys as the log's engine version does
    (`for_version`). RaceError (one line) when the file is missing, has no training step, lacks a
    key the map names (naming key, file and engine version, and the old name where the log has
    one), or holds a critic's keys."""
    path = Path(path)
    if not path.exists():
        raise RaceError(f"{km.engine} log {path} not found", f"{km.where}: {km.logger}")
    wanted = km.wanted()
    steps: dict[int, dict[str, float]] = {}
    seen: set[str] = set()
    for s, rec in _rows(path, km):
        seen.update(k for k, v in rec.items() if v not in (None, ""))
        row = steps.setdefault(int(s), {})
        for k in wanted.intersection(rec):
            x = _number(rec[k])
            if x is not None:
                row[k] = x
    _refuse_critic(path, km, seen)
    known = km.version not in ("", "unknown")
    at = f" of {km.engine} {km.version}" if known else f" ({km.engine} version unknown)"
    need = list(km.token_keys())
    if km.step and reader_for(path, km).name in ("jsonl", "csv"):
        need = [km.step, *need]
    for k in need:
        if k not in seen:
            olds = [old for spec, names in km.renames.items() for new, old in names.items()
                    if new == k and old in seen]
            hint = (f"the log has '{olds[0]}', the name older {km.engine} versions used: pass --engine-version"
                    if olds else f"the engine may have renamed it: fix the key map, or pass one that matches "
                    f"(--key-map FILE); the log must come from: {km.logger}")
            raise RaceError(f"{path}: key '{k}' of {km.where} is not in the log{at}", hint)
    for phase, keys in km.seconds.items():
        ks = [keys] if isinstance(keys, str) else keys
        if phase not in OPTIONAL_TIMERS and not any(k in seen for k in ks):
            raise RaceError(f"{path}: none of the {phase} timers {', '.join(ks)} of {km.where} is in the log{at}",
                            "the engine may have renamed them: fix the key map's seconds, or pass --engine-version "
                            "where the map knows the old names")
    train = {s: r for s, r in steps.items() if any(k in r for k in km.token_keys())}
    if not train:
        raise RaceError(f"{path}: no training steps with the keys of {km.where}", km.logger)
    return dict(sorted(train.items()))


def _tok(spec, row: dict, cell, n: float, what: str, where: str, km: KeyMap) -> float:
    def get(k):
        if isinstance(k, Mapping):
            return desc(k["description"])
        if k not in row:
            raise RaceError(f"{where}: key '{k}' of {km.where} is missing at this step")
        return row[k]

    def desc(f):
        v = described(cell, f)
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


def check_passes(path, km: KeyMap, rows: Mapping[int, Mapping[str, float]], cell, profile: str) -> None:
    """The log and the profile agree on the passes the log times (`km.timers`): a key logged only
    when the old-policy (or reference) forward runs is in the log exactly when `profile` charges
    that pass for the run's settings. RaceError naming the key, the profile and the fix (the
    engine's profile that agrees, or the run description's beta) otherwise."""
    if not km.timers:
        return
    from ..accounting import ENGINES
    from ..accounting.enginefile import ENGINE_FILES

    settings = cell.settings()
    timed = {p: any(k in r for r in rows.values()) for p, k in km.timers.items()}

    def charges(name: str) -> dict:
        prof = ENGINES[name]
        return {p: prof.old_policy_pass(settings) if p == "old_policy" else prof.reference_pass(settings)
                for p in km.timers}

    got = charges(profile)
    if got == timed:
        return
    p = next(p for p in km.timers if got[p] != timed[p])
    what = "old-policy log-prob forward" if p == "old_policy" else "reference log-prob forward"
    said = f"times the {what} ('{km.timers[p]}')" if timed[p] else f"never times the {what} ('{km.timers[p]}')"
    own = ENGINE_FILES[km.engine].profiles if km.engine in ENGINE_FILES else ()
    fits = [q for q in own if charges(q) == timed]
    if fits:
        hint = f"price it under the profile that runs the passes the log times: --engine-profile {fits[0]}"
    elif p == "reference":
        hint = (f"the run description's beta ({settings.beta:g}) decides the reference pass: set it to the run's KL "
                f"coefficient")
    else:
        hint = f"check the run description's mu ({settings.num_iterations}) and schedule against the run"
    raise RaceError(f"{path}: the log {said}, but profile {profile!r} "
                    f"{'does not charge' if timed[p] else 'charges'} it for this run's settings", hint)


def steps_from_log(path: str | Path, km: KeyMap, cell, profile: str | None = None) -> list:
    """The importer's Steps (suite.integrations.importers.Step) of a metric log under `km`, the
    passes the log times checked against `profile` (default the map's; `check_passes`)."""
    from .importers import Step

    rows = read_metric_log(path, km)
    check_passes(path, km, rows, cell, profile or km.profile)
    expected = cell.prompts_per_step * cell.group_size
    turns = float((cell.rollouts or {}).get("turns") or 1)
    skey = km.sequences_key()
    by_tokens = isinstance(km.sequences, Mapping)
    out = []
    for step, row in rows.items():
        where = f"{path}: step {step}"
        counted = skey is not None and skey in row and not by_tokens
        n = row[skey] if counted else expected
        if not n > 0:       # a sequence count of 0 divides every per-sequence mean by zero
            raise RaceError(f"{where}: field '{skey}' = {n:g} sequences; a training step generates at least one",
                            "check the map's sequence key against the log")
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


def as_key_map(km) -> KeyMap:
    """A plugin's map (a mapping or an object with the keymap-v1 fields) as a checked KeyMap."""
    if isinstance(km, KeyMap):
        return km
    from ..record import schemas

    d = dict(km) if isinstance(km, Mapping) else {k: getattr(km, k) for k in dir(km) if not k.startswith("_")}
    schemas.check_spec(d, schemas.KEYMAP, f"key map {d.get('name', '?')}")
    return KeyMap(**{**d, "metrics": tuple(d.get("metrics") or ()), "critic_keys": tuple(d.get("critic_keys") or ())})


def _check_owner(km: KeyMap, profile: str) -> None:
    """An import is priced under a profile of its engine's own (WORK-008 would refuse the report
    otherwise): one line naming the profile and the engine's profiles, before anything is written."""
    from ..accounting import get_engine
    from ..accounting.enginefile import ENGINE_FILES, canonical_engine, profile_owner

    prof = get_engine(profile)
    engine = canonical_engine(km.engine) or km.engine
    own = ENGINE_FILES[engine].profiles if engine in ENGINE_FILES else ()
    owner = profile_owner(profile)
    if (own and profile not in own) or (not own and owner not in (None, engine) and not prof.any_engine):
        raise RaceError(f"{km.where}: profile {profile!r} is not one of {km.engine}'s own "
                        f"({', '.join(own) or 'none: generic suits it'})",
                        "price the log under a profile of the engine that wrote it (--engine-profile; WORK-008)")


def import_log(km, path: str | Path, cell, out: str | Path, *, engine_version: str | None = None,
               engine_profile: str | None = None, force: bool = False, **options):
    """`race import`: the log at `path` read as `km` says (its format's importer), priced under
    `engine_profile` (default: the entry's profile). `options` go to a dedicated importer
    (peak_tflops for verl). Returns the ImportResult."""
    km = as_key_map(km)
    version = engine_version or (km.version if km.version != "unknown" else None)
    if km.format == "mlperf":        # a run description may say which NeMo-RL profile its run used
        engine_profile = engine_profile or (cell.engine or {}).get("profile")
    profile = engine_profile or km.profile
    _check_owner(km, profile)
    if km.format == "verl-jsonl":
        from .importers import import_verl

        return import_verl(path, cell, out, engine_version=version or "unknown", force=force, **options)
    if km.format == "trl-state":
        from .importers import import_trl

        return import_trl(path, cell, out, engine_version=version, engine_profile=profile, force=force)
    if km.format == "mlperf":
        from .mlperf import import_mlperf

        return import_mlperf(path, cell, out, engine_version=version or "unknown", force=force,
                             engine_profile=profile)
    if km.step is None or not km.tokens:
        raise RaceError(f"{km.where}: format {km.format!r} has no importer here",
                        f"formats race import reads: {', '.join(sorted(known_formats()))}")
    return import_metric_log(path, km, cell, out, engine_version=version, force=force,
                             engine_profile=engine_profile)


def import_metric_log(path: str | Path, km: KeyMap, cell, out: str | Path, *, engine_version: str | None = None,
                      force: bool = False, engine_profile: str | None = None):
    """A metric log read under key map `km` -> ledger and report in `out` (priced under
    `engine_profile`, default the map's profile). Returns the ImportResult."""
    from .importers import import_steps

    km = for_version(as_key_map(km), engine_version)
    profile = engine_profile or km.profile
    steps = steps_from_log(path, km, cell, profile)
    lag = [s.metrics.get("off_policy/max") for s in steps if s.metrics.get("off_policy/max") is not None]
    if lag:
        mean = [s.metrics["off_policy/mean"] for s in steps if "off_policy/mean" in s.metrics]
        cell = cell.with_changes(rollouts={**(cell.rollouts or {}), "off_policy": {
            "max_lag": int(max(lag)), **({"mean_lag": sum(mean) / len(mean)} if mean else {})}})
    reader = reader_for(Path(path), km).name
    notes = (f"Imported from {km.engine}'s log ({Path(path).name}, read as {reader}) by race import {km.name} under "
             f"{km.where} (keys read from {km.source['repo']} at {km.source['commit'][:12]}): per-step mean lengths "
             f"priced by suite.accounting (profile {profile}); attention work assumes every sequence has the mean "
             "length.")
    fields = sorted({*([km.step] if reader in ("jsonl", "csv") else []), *km.token_keys()})
    source = {"engine": km.name, "file": Path(path).name, "fields": fields}
    declared = None
    if steps[0].step != 1:  # counted from 0 (AReaL's TensorBoard), a resumed attempt, or a log's tail only
        first, last = steps[0].step, steps[-1].step
        notes += (f" The log numbers its steps {first}-{last}" + (" (from 0)" if first == 0 else
                  " only (a resumed run or a truncated log)") + f": the report covers those {len(steps)} steps, "
                  f"numbered from 1 (each record keeps the engine's number as metrics['log/step']).")
        steps = [replace(s, step=s.step - first + 1, metrics={**s.metrics, "log/step": s.step}) for s in steps]
        declared = steps[-1].step
    return import_steps(steps, cell, out, engine=km.engine, engine_version=engine_version or km.version,
                        engine_profile=profile, notes=notes, source=source, force=force,
                        assumptions=assumptions_of(km, cell, steps) or None, declared_steps=declared)


__all__ = ["KEY_MAPS", "key_map", "KeyMap", "load_key_map", "read_metric_log", "steps_from_log", "import_metric_log",
           "import_log", "log_entry", "known_formats", "from_entry", "as_key_map", "for_version", "READ_BY_KEY_MAP",
           "DEDICATED", "COMPARED", "reader_for", "refuse_critic"]
