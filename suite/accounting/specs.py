"""The one door to a model: the `Spec` protocol every priced model implements, the built-in
catalog (recipe entries in `catalog/*.json`, traced entries in `catalog/traced/*.json`) with its
one lookup, and `spec_for`, which turns any name, config.json, folder or config dict into the
spec that prices it.

Two kinds of spec implement `Spec`:

- `modelspec.ModelSpec` (`priced_by == "recipe"`): a family with an analytic recipe
  (`modelspec.FAMILIES`), priced by `suite.accounting.costs` without torch;
- `traced.TracedSpec` (`priced_by == "traced"`): any other decoder transformers builds, priced by
  FlopCounterMode over its own code (needs torch and transformers).

Pricing, adapters, work and reports ask a spec its questions (`costs`, `lora`, `needs`,
`to_dict`) and never which kind it is.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..errors import RaceError
from .adapter import Adapter, Lora
from .modelspec import _TEXT_OF, FAMILIES, PATH_RECIPE, spec_from_config
from .traced import PATH_TRACED, traced_spec
from .work import Needs

CATALOG_DIR = Path(__file__).with_name("catalog")
"""Recipe catalog entries: one config.json-like file per model (facts only, no weights)."""
TRACED_CATALOG = CATALOG_DIR / "traced"
"""Catalog entries of families with no recipe (each with its `_source`): priced by the traced path."""
PATHS = (PATH_RECIPE, PATH_TRACED)
"""The ways a model is priced, as reports (`spec.priced_by`) and `race flops` name them."""


@runtime_checkable
class Spec(Protocol):
    """What every priced model answers (ModelSpec and TracedSpec)."""

    name: str
    """Catalog name or model id."""
    model_type: str
    """Hugging Face model_type."""
    num_layers: int
    hidden_size: int
    vocab_size: int
    has_lm_head: bool
    tie_embeddings: bool
    score_head: tuple[tuple[int, int], ...]
    """Reward head Linear layers (in, out); () if none."""
    score_bias: bool
    num_experts: int
    experts_per_token: int

    @property
    def priced_by(self) -> str:
        """'recipe' or 'traced' (PATHS)."""

    @property
    def params_total(self) -> int:
        """Every parameter of the real model (tied embeddings once)."""

    @property
    def params_embedding(self) -> int:
        """Input embedding plus an untied LM head."""

    @property
    def needs(self) -> Needs:
        """Work statistics beyond the base keys that its FLOPs use."""

    def costs(self, adapter: Adapter, *, rg0: bool, gc: bool, fold: bool = False, early_stop: bool = False) -> dict:
        """{'fwd', 'base', 'bwd', 'recompute'}: FLOPs per statistic of each pass kind."""

    def lora(self, adapter: Adapter) -> Lora:
        """What peft adapts for `adapter`, trainable parameters, targets that adapt nothing."""

    def to_hf_config(self) -> dict:
        """A Hugging Face config.json dict that builds it."""

    def to_dict(self) -> dict:
        """The spec as a report stores it (`suite.accounting.stored.spec_from_dict` reads it back)."""


def priced_by(x) -> str | None:
    """'recipe' or 'traced': of a spec, or of a spec as a report stores it (a dict: `priced_by`
    absent means the recipe); None for None (no model, e.g. a rule reward)."""
    if x is None:
        return None
    if isinstance(x, dict):
        return PATH_TRACED if x.get("priced_by") == PATH_TRACED else PATH_RECIPE
    return x.priced_by


# ---- the catalog ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One catalog entry."""

    name: str
    """As the catalog spells it (the file's stem)."""
    path: Path
    """Its config file."""
    priced_by: str
    """'recipe' (catalog/) or 'traced' (catalog/traced/)."""


def _entries() -> dict[str, Entry]:
    out = {p.stem.lower(): Entry(p.stem, p, PATH_TRACED) for p in TRACED_CATALOG.glob("*.json")}
    out.update({p.stem.lower(): Entry(p.stem, p, PATH_RECIPE) for p in CATALOG_DIR.glob("*.json")})
    return out


def catalog_names(kind: str | None = None) -> list[str]:
    """Names of the built-in catalog models: every entry, or those `kind` ('recipe', 'traced')
    prices.

    Args: `kind` (None: all). Returns the names, sorted."""
    return sorted(e.name for e in _entries().values() if kind is None or e.priced_by == kind)


def lookup(name: str) -> Entry | None:
    """The catalog entry `name` names (case-insensitive; a hub id's organisation prefix, as in
    Qwen/Qwen2.5-1.5B-Instruct, is ignored), or None. The one catalog lookup."""
    return _entries().get(str(name).split("/")[-1].lower())


def _read_json(path: Path) -> dict:
    from .. import jsonstrict

    # strict: no duplicate keys (readers disagree which wins), bounded size, depth and digits
    return jsonstrict.read(path)


def read_entry(entry: Entry) -> dict:
    """The config an entry holds."""
    return _read_json(entry.path)


def closest_names(name: str) -> list[str]:
    """Up to three catalog names close to `name` (for the hint of an unknown name)."""
    names = catalog_names()
    close = difflib.get_close_matches(str(name), names, n=3, cutoff=0.3)
    if not close:  # case differences and partial names ("qwen 7b")
        low = {n.lower(): n for n in names}
        close = [low[n] for n in difflib.get_close_matches(str(name).lower(), list(low), n=3, cutoff=0.3)]
    return close


# ---- the door ---------------------------------------------------------------------------------


def spec_for(config, name: str | None = None) -> Spec:
    """The spec that prices a model: the analytic recipe where its family has one (ModelSpec),
    else the traced path (TracedSpec, needs torch). `config`: a catalog name (case-insensitive, hub
    prefix allowed), a config.json path or a folder holding one, a config dict, or a transformers
    PretrainedConfig. Unknown names list the closest catalog names.

    Args: `config`, `name` (a catalog entry keeps its own; default:  the config's _name_or_path, else its
    folder or model_type). Returns the Spec."""
    if isinstance(config, (str, Path)):
        if not str(config).strip():
            raise RaceError("empty model name", f"catalog: {', '.join(catalog_names())}")
        hit = lookup(str(config))
        if hit is not None:  # named as the catalog spells it
            return _build(read_entry(hit), hit.name, f"catalog {hit.name}")
        path = Path(config).expanduser()
        if path.is_dir():
            path = path / "config.json"
            if not path.is_file():
                raise RaceError(f"{path.parent}: folder has no config.json")
        if not path.is_file():
            close = closest_names(str(config))
            hint = f"closest catalog names: {', '.join(close)}" if close else f"catalog: {', '.join(catalog_names())}"
            raise RaceError(f"unknown model '{config}' (not a catalog name, config.json or folder)", hint)
        cfg = _read_json(path)
        stem = path.parent.name if path.name == "config.json" else path.stem
        return _build(cfg, name or cfg.get("_name_or_path") or stem or str(path), str(path))
    if isinstance(config, dict):
        cfg = config
    else:  # a PretrainedConfig
        cfg = {**config.to_dict(), "model_type": config.model_type}
    return _build(cfg, name or cfg.get("_name_or_path") or str(cfg.get("model_type")), None)


def _build(cfg: dict, name: str, where: str | None) -> Spec:
    mt = cfg.get("model_type") if isinstance(cfg, dict) else None
    if not isinstance(cfg, dict) or mt in FAMILIES or mt in _TEXT_OF or mt is None:
        return spec_from_config(cfg, name, where)  # its errors name what is missing
    return traced_spec(cfg, name, where)


__all__ = ["Spec", "Entry", "spec_for", "priced_by", "catalog_names", "lookup", "PATHS", "PATH_RECIPE", "PATH_TRACED"]
