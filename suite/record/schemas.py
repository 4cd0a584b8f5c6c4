"""The JSON Schemas of the files the suite writes and reads (schemas/*.schema.json): which ones
there are, the report versions this suite reads, and their compiled Draft 2020-12 validators
(formats checked: the jsonschema format extras are a dependency). The schema is the contract of
a file on disk; code that checks or builds such a file takes its shape from here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Mapping

from ..errors import RaceError

REPORT = "report-v1.schema.json"
"""Compute-allocation report v1."""
REPORT_ID = "https://race-suite.org/schemas/report/v1.json"
"""The `$schema` a report names."""
REPORT_VERSION = "1.0"
"""The report version this suite writes."""
SUPPORTED_VERSIONS = ("1.0",)
"""The report versions this suite reads and validates."""
LEDGER_RECORD = "ledger-record-v1.schema.json"
"""One line of a ledger.jsonl."""
RACE = "race-v1.schema.json"
"""The RACE diagnosis (race.json)."""
RACE_VERSION = "1.0"
"""The race.json version this suite writes."""


@lru_cache(maxsize=None)
def load(name: str) -> dict:
    """The parsed schema file schemas/NAME."""
    from .. import paths

    return json.loads((paths.schemas() / name).read_text(encoding="utf-8"))


def inline_refs(schema: dict) -> dict:
    """The schema with every local `#/$defs/...` reference replaced by its target (the schemas
    are not recursive): same verdicts, about a third faster, since jsonschema resolves each
    $ref through the referencing library on every visit."""
    defs = schema.get("$defs", {})

    def walk(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs:
                return {**walk(defs[ref[8:]]), **{k: walk(v) for k, v in node.items() if k != "$ref"}}
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(x) for x in node]
        return node

    return {k: walk(v) for k, v in schema.items() if k != "$defs"}


@lru_cache(maxsize=None)
def validator(name: str):
    """The format-checked Draft 2020-12 validator of schemas/NAME (local $refs inlined)."""
    from jsonschema import Draft202012Validator

    schema = load(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(inline_refs(schema), format_checker=Draft202012Validator.FORMAT_CHECKER)


def report_validator():
    """The validator of report v1."""
    return validator(REPORT)


def ledger_record_validator():
    """The validator of one ledger record."""
    return validator(LEDGER_RECORD)


def json_path(parts: Iterable) -> str:
    """A JSON path like $.totals.flops.rollout or $.evaluations[0].n."""
    out = "$"
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif isinstance(p, str) and p.isidentifier():
            out += f".{p}"
        else:
            out += f"[{json.dumps(p)}]"
    return out


def check_report(doc: Mapping[str, Any]) -> None:
    """Raise RaceError naming the first schema violations of a report about to be written."""
    errs = sorted(report_validator().iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    if errs:
        first = "; ".join(f"{json_path(e.absolute_path)}: {e.message}" for e in errs[:3])
        raise RaceError(f"the report would not match the v1 schema: {first}",
                        "check the run spec's evaluations and budget (docs/report.md)")


@dataclass(frozen=True)
class RecordShape:
    """The shape of a ledger record as its schema gives it, for the fast record check
    (suite.record.ledger), which must not restate it."""

    keys: frozenset
    """Every key a record may have."""
    required: tuple[str, ...]
    """Keys a record must have, in the schema's order."""
    tokens: tuple[str, ...]
    """Exactly the keys of `tokens`."""
    flops: tuple[str, ...]
    """Exactly the keys of `flops`."""
    seconds: tuple[str, ...]
    """The keys `seconds` may have."""
    max_count: int
    """Largest count (tokens, FLOPs, work)."""


@lru_cache(maxsize=1)
def record_shape() -> RecordShape:
    """The ledger record's shape, read from schemas/ledger-record-v1.schema.json."""
    s = load(LEDGER_RECORD)
    props = s["properties"]
    return RecordShape(keys=frozenset(props), required=tuple(s["required"]),
                       tokens=tuple(props["tokens"]["required"]), flops=tuple(props["flops"]["required"]),
                       seconds=tuple(props["seconds"]["properties"]), max_count=int(s["$defs"]["count"]["maximum"]))


__all__ = ["REPORT", "REPORT_ID", "REPORT_VERSION", "SUPPORTED_VERSIONS", "LEDGER_RECORD", "RACE", "RACE_VERSION",
           "load", "inline_refs", "validator", "report_validator", "ledger_record_validator", "json_path",
           "check_report", "RecordShape", "record_shape"]
