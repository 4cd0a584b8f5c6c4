"""Engine files: one engine as data (tasks/engines/NAME.yaml, schemas/engine-v1.schema.json).

A file names its engine (and the aliases reports use for it), the accounting profiles it owns
(which passes the engine runs, read from its code: `source`) and the logs `race import` reads for
it. Loading a file registers its record in ENGINE_FILES; suite.accounting.engines builds
its profiles into ENGINES; the importers read its `logs` (suite.integrations.keymaps),
the validator its ownership (WORK-008) and its aliases (`canonical_engine`).

Engine identity is compared after normalisation, so `TRL`, `huggingface-trl`, `trl ` and a
lookalike spelled with a Cyrillic letter or a zero-width space are all engine trl: NFKC, format
characters (Unicode Cf) dropped, casefold, the Cyrillic and Greek letters that render as Latin
ones mapped to them, runs of spaces and '_' as one '-'. A name that matches no file stays unknown
(None): it is never taken for another engine.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from ..errors import RaceError
from ..registry import Registry

SCHEMA = "engine-v1.schema.json"
"""The engine file's JSON Schema (schemas/)."""

DATA_FIELDS = ("padded", "prefill_per_completion", "rollout_padded", "lm_head_train", "lm_head_recompute",
               "checkpoint_early_stop", "hf_rollout", "peft_training", "old_policy", "reference",
               "layer0_input_grad", "critic", "any_engine")
"""The fields of an engine file's profile (besides description, versions, extends), in file order."""


@dataclass(frozen=True)
class EngineFile:
    """A parsed engine file: its names, where its facts were read, its profiles and its logs."""

    name: str
    """Canonical engine name (run.engine.name)."""
    description: str
    aliases: tuple[str, ...] = ()
    source: Mapping[str, Any] | None = None
    """{repo, commit, files}: where the passes and keys were read (None: the suite's own generic)."""
    profiles: tuple[str, ...] = ()
    """The profiles it owns, in file order."""
    logs: tuple[Mapping[str, Any], ...] = ()
    """The log entries, as the file writes them (suite.integrations.keymaps reads them)."""
    path: str = ""
    """The file it came from."""
    data: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def where(self) -> str:
        """How messages name the file."""
        return f"engine file '{self.name}'" + (f" ({self.path})" if self.path else "")


ENGINE_FILES: Registry[EngineFile] = Registry("engine", loader=lambda: load_shipped(), group="race.engines")
"""Engine name -> its EngineFile (the shipped tasks/engines/*.yaml, then plugins')."""

_OWNER: dict[str, str] = {}          # profile -> the engine whose file owns it
_FIELDS: dict[str, dict] = {}        # profile -> its resolved fields (for `extends` across files)
_NAMES: dict[str, str] = {}          # normalised name or alias -> canonical engine name
_loaded = False


# ---- identity -----------------------------------------------------------------------------------

# Cyrillic and Greek letters (after casefold) that render like a Latin letter: a name spelled with
# them reads as the engine's name on a page, so it is that engine (Unicode confusables, lower case).
_CONFUSABLE = str.maketrans({
    "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "н": "h", "і": "i", "ј": "j", "к": "k",
    "ӏ": "l", "м": "m", "п": "n", "о": "o", "р": "p", "ԛ": "q", "г": "r", "ѕ": "s", "т": "t", "ц": "u",
    "ѵ": "v", "ԝ": "w", "х": "x", "у": "y", "ʏ": "y", "ᴛ": "t", "ʀ": "r", "ʟ": "l",
    "α": "a", "β": "b", "ϲ": "c", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "γ": "y", "ω": "w",
})


def normalise(name: str) -> str:
    """The form engine names are compared in: NFKC, format characters (zero-width spaces, bidi
    marks) dropped, casefold, Latin lookalikes mapped to Latin, spaces and '_' runs as '-',
    leading and trailing '-' dropped."""
    s = unicodedata.normalize("NFKC", str(name))
    s = "".join(c for c in s if unicodedata.category(c) != "Cf")
    s = unicodedata.normalize("NFKC", s.casefold()).translate(_CONFUSABLE)
    return re.sub(r"[\s_\-]+", "-", s).strip("-")


def canonical_engine(name: object) -> str | None:
    """The engine a report's run.engine.name means (its file's canonical name), or None when no
    engine file has that name or alias."""
    len(ENGINE_FILES)       # loads the files
    return _NAMES.get(normalise(name)) if isinstance(name, str) else None


def profile_owner(profile: str) -> str | None:
    """The engine whose file owns `profile`, or None (a Python plugin's profile, an unknown one)."""
    len(ENGINE_FILES)
    return _OWNER.get(profile)


def owned_profiles(engine: str) -> set[str]:
    """The profiles the file of `engine` (any of its names) owns; empty for an unknown engine."""
    canon = canonical_engine(engine)
    return set(ENGINE_FILES[canon].profiles) if canon is not None else set()


# ---- versions ------------------------------------------------------------------------------------

_CLAUSE = re.compile(r"^\s*(~=|==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*)(\.\*)?\s*$")


def _release(v: str) -> tuple[int, ...]:
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)", str(v))
    if m is None:
        raise ValueError(f"not a version: {v!r}")
    return tuple(int(x) for x in m.group(1).split("."))


def check_range(spec: str, where: str) -> str:
    """`spec` if it is a PEP 440 range of release versions ('>=0.2,<0.4', '==0.9.*'), else RaceError."""
    if not all(_CLAUSE.match(c) for c in str(spec).split(",")):
        raise RaceError(f"{where}: version range {spec!r} is not a PEP 440 range of release versions",
                        "write clauses like '>=0.2,<0.4' or '==0.9.*', separated by commas")
    return spec


def version_in(version: str, spec: str) -> bool:
    """Whether release `version` ('0.9.1', 'v0.3.0rc1': its release numbers) lies in range `spec`
    (PEP 440 clauses over release numbers; pre-release and local parts are not compared)."""
    v = _release(version)
    for clause in str(spec).split(","):
        op, num, star = _CLAUSE.match(clause).groups()
        w = tuple(int(x) for x in num.split("."))
        n = max(len(v), len(w))
        vv, ww = v + (0,) * (n - len(v)), w + (0,) * (n - len(w))
        if star:
            same = v[:len(w)] == w
            ok = same if op == "==" else not same
        elif op == "~=":
            ok = vv >= ww and v[:len(w) - 1] == w[:-1]
        else:
            ok = {"==": vv == ww, "!=": vv != ww, "<=": vv <= ww, ">=": vv >= ww, "<": vv < ww, ">": vv > ww}[op]
        if not ok:
            return False
    return True


# ---- loading -------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _validator():
    from jsonschema import Draft202012Validator

    from .. import jsonstrict, paths

    return Draft202012Validator(jsonstrict.read(paths.schemas() / SCHEMA, hint="reinstall the suite"))


def _schema_problem(doc: Any, where: str) -> None:
    import jsonschema

    errs = list(_validator().iter_errors(doc))
    if errs:
        # unknown keys first (a typo explains the rest), then missing ones, outermost first
        rank = {"additionalProperties": 0, "required": 1}
        err = min(errs, key=lambda e: (rank.get(e.validator, 2), len(e.absolute_path)))
        err = jsonschema.exceptions.best_match([err])
        at = "/".join(map(str, err.absolute_path)) or "top"
        raise RaceError(f"{where} at {at}: {err.message}", f"an engine file follows schemas/{SCHEMA} "
                                                           "(tasks/engines/*.yaml show the shape)")


def read_file(path: str | Path) -> dict:
    """An engine file's content, checked against its schema; RaceError naming the file and field."""
    import yaml

    from .. import yamlstrict

    path = Path(path)
    if not path.is_file():
        raise RaceError(f"engine file {path} not found", "tasks/engines/*.yaml show the shape")
    try:
        doc = yamlstrict.load(path)     # strict: no anchors, no duplicate keys
    except yaml.YAMLError as e:
        raise RaceError(f"{path}: not YAML ({str(e).splitlines()[0]})", "see tasks/engines/*.yaml") from None
    _schema_problem(doc, str(path))
    return doc


def _resolve(name: str, profiles: Mapping[str, Mapping], where: str, seen: tuple = ()) -> dict:
    """A profile's fields with those of the profile it extends filled in (within the file, or a
    profile of a file loaded before)."""
    if name in seen:
        raise RaceError(f"{where}: profile {name!r} extends itself (through {' -> '.join(seen)})")
    if name not in profiles:
        if name in _FIELDS:
            return dict(_FIELDS[name])
        raise RaceError(f"{where}: profile {seen[-1]!r} extends {name!r}, which no engine file defines",
                        "extend a profile of this file or of a shipped engine file")
    own = dict(profiles[name])
    parent = own.pop("extends", None)
    base = _resolve(parent, profiles, where, seen + (name,)) if parent else {}
    return {**base, **own}


def register_file(path: str | Path) -> EngineFile:
    """Load an engine file and register its record and its profiles. RaceError naming the file
    for a schema problem, a name or alias another engine has, a profile that is taken, a log whose
    profile is neither the file's nor one that any engine may declare, or a bad version range."""
    load_shipped()          # the shipped files first: a plugin's file may extend or price under theirs
    return _register(read_file(path), str(path))


def _register(doc: dict, where: str) -> EngineFile:
    name = doc["name"]
    for alias in [name, *doc.get("aliases", ())]:
        key = normalise(alias)
        other = _NAMES.get(key)
        if other is not None and other != name:
            raise RaceError(f"{where}: engine name {alias!r} is already engine {other!r}'s",
                            "give each engine names of its own")
    profiles = doc["profiles"]
    built = {}
    for p in profiles:
        if p in _FIELDS:
            raise RaceError(f"{where}: profile {p!r} is already registered", "give the profile a name of its own")
        fields = _resolve(p, profiles, where)
        if fields.get("versions"):
            check_range(fields["versions"], f"{where}: profile {p}")
        built[p] = fields
    for i, log in enumerate(doc["logs"]):
        if log["profile"] not in profiles and not _FIELDS.get(log["profile"], {}).get("any_engine"):
            raise RaceError(f"{where}: log {log['name']!r} is priced under {log['profile']!r}, which is neither a "
                            f"profile of this file ({', '.join(profiles) or 'none'}) nor one any engine may declare",
                            "price an engine's logs under its own profiles")
        for rng in ([log["versions"]] if log.get("versions") else []) + list(log.get("renames") or {}):
            check_range(rng, f"{where}: log {log['name']}")
    for p, fields in built.items():
        _FIELDS[p] = fields
        _OWNER[p] = name
    for alias in [name, *doc.get("aliases", ())]:
        _NAMES[normalise(alias)] = name
    rec = EngineFile(name=name, description=doc["description"], aliases=tuple(doc.get("aliases", ())),
                     source=doc.get("source"), profiles=tuple(profiles), logs=tuple(doc["logs"]), path=where, data=doc)
    ENGINE_FILES.add(name, rec)
    return rec


def shipped_folder() -> Path:
    """tasks/engines of the data home."""
    from .. import paths

    return paths.tasks() / "engines"


def load_shipped() -> None:
    """Register the shipped engine files (once): generic first (others may price logs under it)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    folder = shipped_folder()
    docs = [(read_file(p), str(p)) for p in (sorted(folder.glob("*.yaml")) if folder.is_dir() else [])]
    docs.sort(key=lambda d: not any(p.get("any_engine") for p in d[0]["profiles"].values()))
    for doc, where in docs:
        _register(doc, where)


def profile_fields(profile: str) -> dict:
    """The resolved fields (`extends` filled in) of a profile an engine file defines."""
    len(ENGINE_FILES)
    return dict(_FIELDS[profile])


__all__ = ["EngineFile", "ENGINE_FILES", "SCHEMA", "normalise", "canonical_engine", "profile_owner", "owned_profiles",
           "register_file", "load_shipped", "read_file", "check_range", "version_in", "shipped_folder", "profile_fields",
           "DATA_FIELDS"]
