"""The JSON Schemas the standard publishes (`race schema`): the report, the ledger record and the
RACE diagnosis. Each is the shipped file, byte for byte, with a stable `$id` (its major version is
part of it) and a version read from the schema itself: the `schema_version` its documents carry
(the newest one it accepts), or `x-version` for a ledger record, which carries none.
"""

from __future__ import annotations

from . import schemas

PUBLISHED = {"report": schemas.REPORT, "ledger": schemas.LEDGER_RECORD, "race": schemas.RACE}
"""Published name -> schema file in schemas/."""


def _file(name: str) -> str:
    from ..errors import RaceError

    if name not in PUBLISHED:
        raise RaceError(f"no published schema {name!r}", f"published: {', '.join(PUBLISHED)}")
    return PUBLISHED[name]


def schema_text(name: str) -> str:
    """The schema file as shipped."""
    from .. import paths

    return (paths.schemas() / _file(name)).read_text(encoding="utf-8")


def schema(name: str) -> dict:
    """The parsed schema `name` (report, ledger or race).

    Returns a copy of the JSON Schema as a dict.
    """
    import copy

    return copy.deepcopy(schemas.load(_file(name)))


def version(name: str) -> str:
    """The version of schema `name`: the newest `schema_version` it accepts, else its `x-version`."""
    s = schemas.load(_file(name))
    field = s.get("properties", {}).get("schema_version", {})
    versions = [field["const"]] if "const" in field else list(field.get("enum", ()))
    if versions:
        return max(versions, key=lambda v: tuple(int(x) for x in v.split(".")))
    return s["x-version"]


def schema_id(name: str) -> str:
    """The `$id` of schema `name`."""
    return schemas.load(_file(name))["$id"]


__all__ = ["PUBLISHED", "schema", "schema_text", "version", "schema_id"]
