"""A model spec as a report's model block stores it, read back.

Two forms (schemas/report-v1.schema.json, `$defs/model_spec` and `$defs/traced_spec`):

- a family with an analytic recipe: `ModelSpec.to_dict()`, the architecture facts (no `priced_by`
  key: the recipe path, readable by the light core);
- a family priced by the traced path (report 1.3): `TracedSpec.to_dict()`, i.e.
  `{"priced_by": "traced", "name", "model_type", "config"}` with the Hugging Face config itself.
  Nothing derived from the config is stored beside it (no widths, no coefficients), so nothing can
  disagree with it: reading it back traces the config again (suite.accounting.traced, cached per
  config), which needs torch and transformers. Without them the spec cannot be priced, and
  `TracedUnverifiable` says so.
"""

from __future__ import annotations

import functools
import json

from ..errors import RaceError
from .modelspec import ModelSpec
from .specs import PATH_TRACED, lookup, read_entry
from .traced import canonical

PRICED_BY = "priced_by"
"""The key of a stored spec that names the path that prices it (absent: the recipe)."""
TRACED_KEYS = frozenset({PRICED_BY, "name", "model_type", "config"})
INSTALL = "pip install 'race-suite[train]' -c constraints.txt"
"""How to get torch and transformers (the train extra)."""


class TracedUnverifiable(RaceError):
    """A traced spec that cannot be traced here (torch or transformers missing, or over the
    bounded number of traced models a report may carry): its FLOPs cannot be re-derived."""


def is_traced(d) -> bool:
    """Whether a stored spec dict is priced by the traced path."""
    return isinstance(d, dict) and d.get(PRICED_BY) == PATH_TRACED


def traced_available() -> bool:
    """Whether torch and transformers import here (a module set to None in sys.modules does not)."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def check_traced(d: dict, where: str = "model spec") -> str:
    """The canonical config of a stored traced spec, after the checks that need no torch: its
    keys, the config's model_type, a family with no recipe, bounded sizes. RaceError otherwise."""
    from ..limits import MAX_TRACED_CONFIG_BYTES, check_config_counts
    from .modelspec import FAMILIES, _TEXT_OF

    extra = sorted(set(d) - TRACED_KEYS)
    missing = sorted(TRACED_KEYS - set(d))
    if extra or missing:
        raise RaceError(f"{where}: a traced spec has exactly {', '.join(sorted(TRACED_KEYS))}"
                        + (f"; unknown: {', '.join(extra)}" if extra else "")
                        + (f"; missing: {', '.join(missing)}" if missing else ""),
                        "write it with suite.accounting.traced.TracedSpec.to_dict()")
    cfg, mt = d["config"], d["model_type"]
    if not isinstance(cfg, dict) or cfg.get("model_type") != mt:
        raise RaceError(f"{where}: the traced config's model_type {cfg.get('model_type') if isinstance(cfg, dict) else None!r} "
                        f"is not the spec's {mt!r}", "store the config the model was traced from")
    if mt in FAMILIES or mt in _TEXT_OF:
        raise RaceError(f"{where}: model_type {mt!r} has an analytic recipe; its report spec is the recipe's",
                        "write it with suite.accounting.specs.spec_for(config).to_dict() (a ModelSpec)")
    text = canonical(cfg)
    if len(text) > MAX_TRACED_CONFIG_BYTES:
        raise RaceError(f"{where}: the traced config is {len(text):,} bytes, over the {MAX_TRACED_CONFIG_BYTES:,} the "
                        "suite accepts", "real configs are a few KB; store the model's config.json")
    check_config_counts(cfg, where)
    return text


@functools.lru_cache(maxsize=64)
def _traced(text: str, name: str):
    from .traced import traced_spec

    try:
        return traced_spec(json.loads(text), name)
    except RaceError:
        raise
    except Exception as e:  # transformers' own checks on a config it cannot build, worded as one line
        raise RaceError(f"{name}: transformers cannot build this config ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:160] if str(e) else ''})",
                        "store the config.json the model was built from") from None


def spec_from_dict(d: dict, name: str | None = None):
    """The spec a report's model block stores (`spec`), read back: a ModelSpec, or a TracedSpec
    traced again from its config (cached per config). `name` replaces the stored one.
    RaceError for a spec that cannot be read; TracedUnverifiable (a RaceError) for a traced
    spec where torch or transformers is missing."""
    if not isinstance(d, dict):
        raise RaceError("model spec is not an object", "use ModelSpec.to_dict() or TracedSpec.to_dict()")
    if not is_traced(d):
        return ModelSpec.from_dict({**d, "name": name} if name else d)
    text = check_traced(d)
    if not traced_available():
        raise TracedUnverifiable(f"{d['name']} ({d['model_type']}) is priced by the traced path, which needs torch and "
                                 "transformers to re-derive its FLOPs and parameter counts",
                                 f"{INSTALL} (the train extra), then validate again")
    return _traced(text, name or d["name"])


def traced_catalog_config(name: str) -> dict | None:
    """The config a report stores for a traced catalog entry (facts only, `_` keys left out), None
    when `name` names no traced catalog entry."""
    hit = lookup(str(name))
    if hit is None or hit.priced_by != PATH_TRACED:
        return None
    text = canonical(read_entry(hit))
    # as spec_for stores it (a multimodal entry: its text config), where it can be traced
    return json.loads(_traced(text, hit.name).config if traced_available() else text)


IRRELEVANT = frozenset({"transformers_version", "dtype", "torch_dtype", "bos_token_id", "eos_token_id", "pad_token_id",
                        "use_cache", "initializer_range"})
"""Config keys that change neither FLOPs nor parameters (ids, dtypes, versions, initialisation)."""


def _normal(config: dict) -> dict:
    """The config as transformers fills it in (defaults spelled out, aliases resolved), when
    transformers imports; the keys as given otherwise."""
    out = config
    if traced_available():
        from .traced import _hf_config, _quiet

        try:
            with _quiet():
                out = {**_hf_config(config).to_dict(), "architectures": config.get("architectures")}
        except Exception:  # a config transformers refuses is compared as written
            out = config
    return {k: v for k, v in out.items() if not k.startswith("_") and k not in IRRELEVANT}


def config_differences(got: dict, want: dict, limit: int = 6) -> list[str]:
    """'key got vs want' for each key (not in IRRELEVANT) where two configs differ, at most `limit`."""
    a, b = _normal(got), _normal(want)
    keys = sorted(k for k in set(a) | set(b) if a.get(k, "absent") != b.get(k, "absent"))
    return [f"{k} {a.get(k, 'absent')!r} vs {b.get(k, 'absent')!r}" for k in keys[:limit]]


__all__ = ["PRICED_BY", "TracedUnverifiable", "is_traced", "traced_available", "check_traced", "spec_from_dict", "traced_catalog_config", "config_differences", "IRRELEVANT"]
