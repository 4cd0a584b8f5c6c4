"""Model identity: a model block's name says which model ran, and a lookalike of a catalog name
(suite.names) cannot carry another model's spec past PHYS-007."""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from .registry import Issue, rule


@lru_cache(maxsize=1)
def recipe_names() -> tuple[str, ...]:
    """The recipe catalog's model names."""
    from ..accounting.specs import PATH_RECIPE, catalog_names

    return tuple(catalog_names(PATH_RECIPE))


@lru_cache(maxsize=1)
def _all_catalog_names() -> tuple[str, ...]:
    """Every catalog model name, recipe and traced."""
    from ..accounting.specs import catalog_names

    return tuple(catalog_names())


def catalog_name(name) -> str | None:
    """The catalog model (recipe or traced) `name` names once normalised (suite.names: NFKC,
    format characters stripped, casefolded, hub host, organisation, revision and trailing slash
    dropped), or None."""
    from ..names import canonical

    return canonical(str(name), _all_catalog_names()) if isinstance(name, str) else None


def _model_sections(doc):
    from ..record.schemas import model_blocks

    return ((where, m) for _, where, m in model_blocks(doc))


@rule("PHYS-011", title="a model name is a lookalike of a catalog name", requires=("policy", "reward", "evaluations"))
def lookalike_names(ctx) -> Iterable[Issue]:
    """Every model block (policy, reward model, judges) is named so that a reader sees which
    model ran. A name compared as an exact string lets a smaller model's spec ride under a
    lookalike of a catalog name: a zero-width space, a trailing slash on a hub id, a Cyrillic
    letter. Names are normalised first (suite.names.normal_name: NFKC, format characters
    stripped, casefolded, hub host, organisation, revision and trailing slash dropped), so the
    first two *are* the catalog name and PHYS-007 holds them to its spec; a name that only looks
    like one (the same suite.names.skeleton: letters of other scripts, 0/o, 1/l/i, separators
    folded) but is not it is refused here, and so is a name holding characters a reader does
    not see (format or control characters, or text NFKC changes)."""
    from ..names import has_hidden_characters, lookalike

    for where, m in _model_sections(ctx.doc):
        name = m.get("name")
        if not isinstance(name, str):
            continue
        like = lookalike(name, _all_catalog_names())
        if like is not None:
            yield Issue(f"{where}.name", f"model name {name!r} looks like catalog model {like!r} but is not spelled "
                        "as it (letters of another script, lookalike digits or separators)",
                        f"name the model as it is: {like} (with its catalog spec), or a name that is not a catalog "
                        "name's lookalike")
        elif has_hidden_characters(name):
            yield Issue(f"{where}.name", f"model name {name!r} holds characters a reader does not see (format or "
                        "control characters, or text Unicode NFKC rewrites)", "write the name in plain characters")
