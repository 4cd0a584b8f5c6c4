"""Strict, bounded YAML reading for files that come from other people (cells, run specs, grids,
studies, published setups).

PyYAML's safe_load expands anchors and aliases (a 1 KB "billion laughs" file grows without bound)
and silently keeps the last of duplicate keys. Both are refused here with the line they are on:
a suite file never needs either (write the value out; keep one value per key). The file size is
checked before it is read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from .errors import RaceError

MAX_YAML_BYTES = 4 * 1024 * 1024
"""A cell or a study is a few kilobytes; 4 MiB refuses a runaway file before parsing it."""


class YAMLInputError(RaceError):
    """A YAML document the suite refuses: alias, anchor, duplicate key, or too large."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader without anchors, aliases or duplicate keys."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise YAMLInputError(f"YAML alias *{event.anchor} at line {event.start_mark.line + 1}: aliases are not "
                                 "accepted", "write the value out where it is used")
        event = self.peek_event()
        if getattr(event, "anchor", None) is not None:
            raise YAMLInputError(f"YAML anchor &{event.anchor} at line {event.start_mark.line + 1}: anchors are not "
                                 "accepted", "write the value out where it is used (drop the &name)")
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                continue        # SafeLoader raises its own error for an unhashable key
            if key in seen:
                raise YAMLInputError(f"duplicate key {str(key)[:80]!r} at line {key_node.start_mark.line + 1} "
                                     f"(first at line {seen[key] + 1})",
                                     "keep one value per key: readers disagree which duplicate wins")
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def loads(text: str, where: str = "YAML") -> Any:
    """Parse one YAML document strictly (no anchors, aliases or duplicate keys); RaceError naming
    `where` and the line for those, yaml.YAMLError for bad syntax."""
    if len(text) > MAX_YAML_BYTES:
        raise YAMLInputError(f"{where} is over the {MAX_YAML_BYTES:,}-byte limit for a YAML file",
                             "cells, specs and studies are a few kilobytes")
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except YAMLInputError as e:
        raise YAMLInputError(f"{where}: {e.message}", e.hint) from None


def load(path: str | os.PathLike, where: str | None = None) -> Any:
    """Read and parse a YAML file strictly (see loads), refusing it by size before reading."""
    from .inputs import regular

    p = Path(path)
    regular(p, where or "YAML file")       # a FIFO would block in open()
    if p.stat().st_size > MAX_YAML_BYTES:
        raise YAMLInputError(f"{where or p} is over the {MAX_YAML_BYTES:,}-byte limit for a YAML file",
                             "cells, specs and studies are a few kilobytes")
    return loads(p.read_text(encoding="utf-8"), where or str(p))
