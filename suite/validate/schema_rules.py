"""Schema rules: the report against schemas/report-v1.schema.json (Draft 2020-12, formats
checked), and the schema version. Also the INPUT rules, emitted by the loader when a file
cannot be read as strict JSON (they are registered here so they are listed and documented)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Iterable

from ..record.schemas import SUPPORTED_VERSIONS, json_path, report_validator
from .registry import Issue, rule

# ------------------------------------------------------------------------ input (loader) rules
# The loader emits these; the functions only document them. kind -> rule ID:
INPUT_RULES = {"io": "INPUT-001", "size": "INPUT-002", "encoding": "INPUT-003", "syntax": "INPUT-004",
               "nan": "INPUT-005", "duplicate-key": "INPUT-006", "depth": "INPUT-007"}


def _emitted_by_loader(ctx) -> Iterable[Issue]:
    return ()


@rule("INPUT-001", title="file cannot be read", scope="input")
def input_io(ctx):
    """The path does not exist, is not a regular file, or the operating system refused to read
    it. `race validate` exits 2."""
    return _emitted_by_loader(ctx)


@rule("INPUT-002", title="file is over the size limit", scope="input")
def input_size(ctx):
    """A report larger than the limit (64 MiB by default, `--max-bytes`) is refused by its size
    on disk before it is read, so a 2 GB upload cannot exhaust memory. Ledgers are streamed
    instead and have a per-line limit (1 MiB). Exit 2."""
    return _emitted_by_loader(ctx)


@rule("INPUT-003", title="file is not UTF-8", scope="input")
def input_encoding(ctx):
    """JSON files must be UTF-8 (RFC 8259); the offset of the first bad byte is reported. Exit 2."""
    return _emitted_by_loader(ctx)


@rule("INPUT-004", title="file is not one JSON document", scope="input")
def input_syntax(ctx):
    """Syntax errors and trailing data after the document (line and column reported). Exit 2."""
    return _emitted_by_loader(ctx)


@rule("INPUT-005", title="NaN, Infinity or an out-of-range number in JSON", scope="input")
def input_nan(ctx):
    """NaN, Infinity and numbers that overflow to infinity are not JSON and make every sum
    meaningless; integers too long for Python to convert (over 4,300 digits) are refused the
    same way. Write finite numbers (counts are at most 10^30) or null. Exit 2."""
    return _emitted_by_loader(ctx)


@rule("INPUT-006", title="duplicate key in a JSON object", scope="input")
def input_duplicate(ctx):
    """Readers disagree on which of two equal keys wins, so a report with duplicates means
    different things to different tools. Exit 2."""
    return _emitted_by_loader(ctx)


@rule("INPUT-007", title="JSON nested too deeply", scope="input")
def input_depth(ctx):
    """Nesting beyond 64 levels (a report needs about 5) is refused without recursing into
    it, so 100,000-deep documents cannot crash the validator. Exit 2."""
    return _emitted_by_loader(ctx)


# ------------------------------------------------------------------------ schema rules

# Top-level keywords under which a report is valid exactly when the top level is (its type,
# required and allowed keys, and the allOf conditions across sections, which the top-level
# validator checks on the whole document) and every section is valid under its own subschema.
_SECTIONWISE = {"$schema", "$id", "title", "description", "type", "additionalProperties", "required", "properties",
                "allOf"}
# Sections that repeat across a leaderboard's reports (a few models, adapters, settings).
_MEMO_SECTIONS = frozenset({"policy", "adapter", "grpo", "reward", "accounting"})


@lru_cache(maxsize=1)
def _section_validators():
    """(top-level validator with every section schema replaced by `true`, {section: validator})
    from the compiled report validator; None when the schema's top level has keywords that
    would make section-wise checking inexact."""
    from jsonschema import Draft202012Validator

    v = report_validator()
    if not set(v.schema) <= _SECTIONWISE or not isinstance(v.schema.get("properties"), dict):
        return None
    fc = Draft202012Validator.FORMAT_CHECKER
    top = Draft202012Validator({**v.schema, "properties": dict.fromkeys(v.schema["properties"], True)},
                               format_checker=fc)
    return top, {k: Draft202012Validator(sub, format_checker=fc) for k, sub in v.schema["properties"].items()}


_SECTION_MEMO: dict[tuple[str, str], bool] = {}


def report_is_valid(doc) -> bool:
    """True exactly when `doc` has no report v1 schema error; sections that repeat across
    reports (policy, adapter, grpo, reward, accounting) are checked once per distinct content
    (keyed by repr, which tells 1 from 1.0 from True and a list from a tuple, as the schema
    does). Only a fast answer for valid documents: errors are listed by the full validator."""
    sv = _section_validators()
    if sv is None:
        return report_validator().is_valid(doc)
    top, sections = sv
    if not top.is_valid(doc):
        return False
    for k, value in doc.items():
        if k in _MEMO_SECTIONS:
            try:
                key = (k, repr(value))
            except RecursionError:
                return False            # the full validator will say what is wrong
            ok = _SECTION_MEMO.get(key)
            if ok is None:
                if len(_SECTION_MEMO) >= 4096:     # bounded memory
                    _SECTION_MEMO.clear()
                ok = _SECTION_MEMO[key] = sections[k].is_valid(value)
            if not ok:
                return False
        elif k in sections and not sections[k].is_valid(value):
            return False
    return True


def _branch_errors(err) -> list:
    """The errors of the oneOf/anyOf branches that fit the instance's type (a branch that
    fails on `type` at the instance itself is the wrong alternative, not the interesting one)."""
    by_branch: dict = {}
    for e in err.context:
        by_branch.setdefault(e.schema_path[0] if e.schema_path else None, []).append(e)
    fitting = [es for es in by_branch.values()
               if not any(e.validator == "type" and not e.relative_path for e in es)]
    return [e for es in (fitting or list(by_branch.values())) for e in es]


def _short(message: str, limit: int = 300) -> str:
    # jsonschema quotes the whole offending value; a report section is a wall of text.
    return message if len(message) <= limit else message[: limit - 3] + "..."


def _describe(err) -> tuple[str, str, str]:
    """Message, JSON path and fix hint of one schema error; for oneOf/anyOf the best match
    among the alternatives that fit the value's type, instead of a wall of alternatives."""
    from jsonschema.exceptions import best_match

    while err.validator in ("oneOf", "anyOf") and err.context:
        err = best_match(_branch_errors(err))
    own = err.schema if isinstance(err.schema, dict) else {}
    if "x-error" in own:          # a rule the schema words itself (the version a section needs)
        return own["x-error"], json_path(err.absolute_path), own.get("x-hint") or _hint(err)
    return _short(err.message), json_path(err.absolute_path), _hint(err)


def _hint(err) -> str:
    """The fix for one schema error, worded for the kind of value: a share over 1 is a percent
    where a fraction belongs, a count over 10^30 a unit mistake."""
    schema = err.schema if isinstance(err.schema, dict) else {}
    if err.validator == "maximum" and schema.get("maximum") == 1:
        return (f"shares are fractions of the total in [0, 1], not percents: {err.instance!r} should be "
                f"{err.instance / 100:.4g}" if isinstance(err.instance, (int, float)) and err.instance <= 100
                else "shares are fractions of the total in [0, 1]")
    if err.validator == "required" and "'provenance'" in err.message:
        return ("a report of version 1.1 or later says how its numbers were obtained: add provenance {method: measured, imported "
                "or estimated} (docs/report.md), or rebuild it with race report")
    return _HINTS.get(err.validator, "see schemas/report-v1.schema.json")


_HINTS = {
    "required": "add the missing field (see schemas/report-v1.schema.json)",
    "additionalProperties": "remove or rename the field: it is not part of report v1 (a typo?)",
    "format": "use an RFC 3339 date-time such as 2026-11-29T20:00:00Z",
    "type": "use the type the schema gives for this field",
    "enum": "use one of the listed values",
    "const": "use the value the schema requires",
    "minimum": "counts and FLOPs are non-negative",
    "maximum": "counts and FLOPs are at most 10^30 (a unit mistake?)",
    "pattern": "see the field's description in schemas/report-v1.schema.json",
}


@rule("SCHEMA-001", title="unknown or missing schema version")
def schema_version(ctx) -> Iterable[Issue]:
    """`schema_version` must name a version this validator supports; the message lists them.
    A document of another version is not checked further (its rules may differ)."""
    doc = ctx.doc
    if not isinstance(doc, dict):
        ctx.schema_bad.add("$")
        yield Issue("$", f"a report must be a JSON object, not {_jtype(doc)}",
                    "the top level of a report is an object with schema_version, run, policy, ...")
        return
    v = doc.get("schema_version")
    if v not in SUPPORTED_VERSIONS:
        ctx.schema_bad.add("$")
        what = "missing" if "schema_version" not in doc else f"{json.dumps(v)} is not supported"
        yield Issue("$.schema_version", f"schema version {what}; supported: {', '.join(SUPPORTED_VERSIONS)}",
                    f'set "schema_version": "{SUPPORTED_VERSIONS[-1]}" and follow schemas/report-v1.schema.json')


@rule("SCHEMA-002", title="report does not match the report v1 schema")
def schema_errors(ctx) -> Iterable[Issue]:
    """Every violation of `schemas/report-v1.schema.json` (Draft 2020-12) with its JSON path:
    missing or unknown fields, wrong types, bad date-times (format checking is on), values
    out of range. For oneOf/anyOf the best-matching alternative is reported, not all of them.
    Rules that read a section with a schema error are skipped for that section."""
    if "$" in ctx.schema_bad:  # not an object, or another schema version
        return
    from ..limits import oversized

    big = oversized(ctx.doc, report_validator().schema)
    if big:     # bounded work: refused before the full check walks every item of an oversized list
        ctx.schema_bad.add("$")
        for where, message in big:
            yield Issue(json_path(where), message, "real reports are far smaller; split or trim the document")
        return
    if report_is_valid(ctx.doc):   # the common case, answered from memoized sections
        return
    v = report_validator()
    for err in sorted(v.iter_errors(ctx.doc), key=lambda e: (list(map(str, e.absolute_path)), e.message)):
        message, path, hint = _describe(err)
        top = str(err.absolute_path[0]) if err.absolute_path else "$"
        ctx.schema_bad.add(top)
        yield Issue(path, message, hint)


def _jtype(x) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(x), "a number")
