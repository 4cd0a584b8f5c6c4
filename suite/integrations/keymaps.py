"""Importer key maps: how an engine's training log names the numbers `race import` reads, one
map per engine log format, registered by name. Other packages add theirs through the
`race.importers` entry point group (suite.registry), as engine profiles, reward systems and
rules are added."""

from __future__ import annotations

from typing import Any

from ..registry import Registry

KEY_MAPS: Registry[Any] = Registry("importer key map", group="race.importers")
"""Log format name -> its key map."""


def key_map(name: str):
    """Decorator: register the decorated key map under `name`.

    Args: name, the log format's name (as `race import` takes it). Returns the decorator, which
    returns the key map unchanged."""
    return KEY_MAPS.register(name)


__all__ = ["KEY_MAPS", "key_map"]
