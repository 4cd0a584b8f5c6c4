"""The one number parser: numbers people write in YAML, JSON and on command lines, plain or in
scientific notation, given as numbers or as strings (YAML 1.1 reads `3e12` as a string)."""

from __future__ import annotations

import math
from typing import Any


def parse_number(value: Any, *, whole: bool = False) -> int | float:
    """`value` as a finite number: an int stays an int, anything else becomes a float; with
    `whole`, an int (3e12 -> 3000000000000). Booleans are not numbers. Raises ValueError whose
    text says why not: "not a number", "not finite" or "not a whole number"."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("not a number")
    if isinstance(value, int):
        return value
    try:
        x = float(value)
    except ValueError:
        raise ValueError("not a number") from None
    if not math.isfinite(x):
        raise ValueError("not finite")
    if whole:
        if not x.is_integer():
            raise ValueError("not a whole number")
        return int(x)
    return x


def json_count(value: Any) -> int | None:
    """A JSON document's whole number as JSON Schema's `integer` admits it (12 or 12.0) as an int;
    None for anything else (booleans, strings, fractions): a rule that read only `int` would let
    `"steps": 200.0` pass the schema and skip its check."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if isinstance(value, int) or (math.isfinite(value) and value.is_integer()) else None


__all__ = ["parse_number", "json_count"]
