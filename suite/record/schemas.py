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
REPORT_VERSION = "1.2"
"""The report version this suite writes (1.1: provenance required, hardware optional; 1.2: the
optional sections of real runs); a report that needs a later one names it (`version_for`)."""
TRACED_VERSION = "1.3"
"""The version that adds model specs priced by the traced path (`spec.priced_by: traced`)."""
PADDED_VERSION = "1.4"
"""The version that adds TRL's pad_to_multiple_of to the grpo section."""
COST_VERSION = "1.5"
"""The version that adds the optional `cost` section (hardware table entry, energy per phase, price)."""
SUPPORTED_VERSIONS = ("1.0", "1.1", "1.2", "1.3", "1.4", "1.5")
"""The report versions this suite reads and validates (a 1.0 report has no provenance)."""


def model_blocks(doc: Mapping[str, Any]):
    """(section, JSON path, block) of each model block of a report document (name, spec,
    parameter counts): the policy, the reward model and every evaluation's judge."""
    blocks = [("policy", "$.policy", doc.get("policy"))]
    reward = doc.get("reward")
    blocks.append(("reward", "$.reward.model", reward.get("model") if isinstance(reward, dict) else None))
    rows = doc.get("evaluations")
    for i, row in enumerate(rows if isinstance(rows, list) else ()):
        blocks.append(("evaluations", f"$.evaluations[{i}].judge", row.get("judge") if isinstance(row, dict) else None))
    yield from ((section, where, m) for section, where, m in blocks if isinstance(m, dict))


def version_for(doc: Mapping[str, Any], at_least: str = REPORT_VERSION) -> str:
    """The oldest report version that holds `doc` and is at least `at_least`: PADDED_VERSION when
    the grpo section carries pad_to_multiple_of, TRACED_VERSION when a model block carries a
    traced spec, else `at_least`. Reports without either read exactly as before, so readers of
    1.2 keep reading them."""
    need = [at_least]
    if any(isinstance(m.get("spec"), dict) and m["spec"].get("priced_by") == "traced" for _, _, m in model_blocks(doc)):
        need.append(TRACED_VERSION)
    if isinstance(doc.get("grpo"), dict) and "pad_to_multiple_of" in doc["grpo"]:
        need.append(PADDED_VERSION)
    if "cost" in doc:
        need.append(COST_VERSION)
    return max(need, key=lambda v: tuple(map(int, v.split("."))))
LEDGER_RECORD = "ledger-record-v1.schema.json"
"""One line of a ledger.jsonl."""
RACE = "race-v1.schema.json"
"""The RACE diagnosis (race.json)."""
RACE_VERSION = "1.0"
"""The race.json version this suite writes."""
CELL = "cell-v1.schema.json"
"""A cell file (tasks/cells/*.yaml)."""
GRID = "grid-v1.schema.json"
"""A pilot grid file (tasks/grids/*.yaml)."""
RUN_SPEC = "run-spec-v1.schema.json"
"""A run spec (race report --spec)."""
STUDY = "study-v1.schema.json"
"""A study file (tasks/studies/*.yaml)."""
FINDINGS = "findings-v1.schema.json"
"""The findings of a study (findings.json)."""
KEYMAP = "keymap-v1.schema.json"
"""A user's own importer key map (`race import map LOG --key-map FILE`); the shipped maps are the `logs` entries of the engine files (engine-v1)."""
CURVES = "curves-v1.schema.json"
"""Compute-performance curves per allocation (curves.json, `race curves`)."""


@lru_cache(maxsize=None)
def load(name: str) -> dict:
    """The parsed schema file schemas/NAME."""
    from .. import jsonstrict, paths

    return jsonstrict.read(paths.schemas() / name, hint="reinstall the suite")


def inline_refs(schema: dict) -> dict:
    """The schema with every local `#/$defs/...` reference replaced by its target (the schemas
    are not recursive): same verdicts, about a third faster, since jsonschema resolves each
    $ref through the referencing library on every visit."""
    def target(ref: str):
        # any local JSON pointer (#/$defs/x, #/properties/hardware: a staged report's stage
        # hardware refers to the top-level section), so no section validated alone keeps a $ref
        # it cannot resolve
        node = schema
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def walk(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/") and (t := target(ref)) is not None:
                return {**walk(t), **{k: walk(v) for k, v in node.items() if k != "$ref"}}
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


def problems(doc: Any, name: str, most: int = 3) -> list[str]:
    """The first (up to `most`, in JSON-path order) violations of schemas/NAME by `doc`, each
    "$.path: message"; empty when it follows the schema."""
    errs = sorted(validator(name).iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{json_path(e.absolute_path)}: {e.message}" for e in errs[:most]]


def report_problems(doc: Any) -> str | None:
    """The first (up to three) report v1 schema violations of `doc` as one line, or None."""
    return "; ".join(problems(doc, REPORT)) or None


def check_output(doc: Any, name: str, what: str, hint: str) -> None:
    """The one check of a document the suite is about to write (a report, race.json, curves.json,
    findings.json) against schemas/NAME: RaceError "WHAT would not follow NAME: at $.path: message"
    naming its first violations, `hint` saying whose bug it is. Nothing is written after it fails."""
    found = problems(doc, name)
    if found:
        raise RaceError(f"{what} would not follow {name}: " + "; ".join(f"at {p}" for p in found), hint)


def check_report(doc: Mapping[str, Any]) -> None:
    """Raise RaceError naming the first schema violations of a report about to be written."""
    check_output(doc, REPORT, "the report", "check the run spec's evaluations and budget (docs/report.md)")


# ---- spec files people write: one clear line for the first problem ------------------------------
# The schemas of cells, grids, studies and run specs word their own messages in x- keywords: x-error (a
# template for any keyword that fails at that node: {field}, {value!r}, {key}), x-hint,
# x-unknown / x-known (a key that is not allowed; the allowed keys), x-aliases (other accepted
# spellings, offered as suggestions), x-required (a template: {key}, {field}) / x-required-hint.

_RANK = {"additionalProperties": 0, "required": 1}
_NOUNS = {"object": "a mapping", "array": "a list", "string": "text", "integer": "an integer", "number": "a number",
          "boolean": "true or false", "null": "null"}


def numbers_parsed(doc: Any, name: str) -> Any:
    """`doc` with every text where schemas/NAME wants a number parsed as one (suite.numbers:
    YAML reads 3e12 as text); text that is no number is left for check_spec to name."""
    return _parse_numbers(doc, load(name))


def _numeric(node: dict) -> str | None:
    kinds = node.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds or []
    return None if "string" in kinds else "integer" if "integer" in kinds else "number" if "number" in kinds else None


def _parse_numbers(value: Any, node: Any) -> Any:
    from ..numbers import parse_number

    if not isinstance(node, dict):
        return value
    if isinstance(value, str):
        for alt in [node, *node.get("anyOf", ())]:
            kind = _numeric(alt)
            if kind:
                try:
                    return parse_number(value, whole=kind == "integer")
                except ValueError:
                    return value
        return value
    if isinstance(value, dict):
        alts = [node, *(a for a in node.get("anyOf", ()) if isinstance(a, dict) and "properties" in a)]
        props = next((a["properties"] for a in alts if "properties" in a), {})
        extra = node.get("additionalProperties")
        return {k: _parse_numbers(v, props.get(k, extra)) for k, v in value.items()}
    if isinstance(value, list):
        items = next((a.get("items") for a in [node, *node.get("anyOf", ())] if isinstance(a, dict) and "items" in a), None)
        return [_parse_numbers(v, items) for v in value]
    return value


def check_spec(doc: Any, name: str, where: str) -> None:
    """Check a spec file's parsed content against schemas/NAME; RaceError with the first
    problem as "WHERE: message" and a hint, worded by the schema. Unknown keys come first (a
    typo explains the rest), then missing ones, then values, outermost first."""
    _first_problem(validator(name).iter_errors(doc), where, load(name).get("x-hint"))


@lru_cache(maxsize=None)
def _section_validator(section: str):
    from jsonschema import Draft202012Validator

    return Draft202012Validator(inline_refs(load(REPORT))["properties"][section],
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def report_section(doc: Any, section: str, where: str) -> Any:
    """A section a spec file gives verbatim for the report (e.g. `hardware`), its numbers
    parsed (YAML reads 9.89e14 as text) and checked against the report schema's own subschema:
    one contract, one line for the first problem. Returns the parsed section."""
    doc = _parse_numbers(doc, inline_refs(load(REPORT))["properties"][section])
    _first_problem(_section_validator(section).iter_errors(doc), where,
                   f"see `{section}` in schemas/report-v1.schema.json")
    return doc


def _first_problem(errors, where: str, default_hint: str | None) -> None:
    errors = list(errors)
    if errors:
        err = min(errors, key=lambda e: (_RANK.get(e.validator, 2), len(e.absolute_path), list(map(str, e.absolute_path))))
        message, hint = _explain(err)
        raise RaceError(f"{where}: {message}", hint or default_hint)


def _worded(err) -> bool:
    key = {"additionalProperties": "x-unknown", "required": "x-required"}.get(err.validator, "x-error")
    return key in err.schema


def _explain(err) -> tuple[str, str | None]:
    import difflib

    if err.validator in ("anyOf", "oneOf") and err.context:
        # The alternative the value's type fits, when only one does and the schema words its problem.
        by_branch: dict = {}
        for e in err.context:
            by_branch.setdefault(e.schema_path[0], []).append(e)
        fitting = [es for es in by_branch.values() if not any(e.validator == "type" and not e.relative_path for e in es)]
        if len(fitting) == 1:
            inner = min(fitting[0], key=lambda e: (_RANK.get(e.validator, 2), len(e.absolute_path)))
            if _worded(inner):
                return _explain(inner)
    node, path = err.schema, list(err.absolute_path)
    field = ".".join(map(str, path)) or "the file"
    if err.validator == "additionalProperties":
        known = list(node.get("properties", {}))
        key = sorted(str(k) for k in err.instance if k not in node.get("properties", {}))[0]
        close = difflib.get_close_matches(key, known + list(node.get("x-aliases", {})), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"{node.get('x-known', 'known fields')}: {', '.join(known)}"
        return f"{node.get('x-unknown', 'unknown field')} {key!r}", hint
    if err.validator == "required":
        key = next(k for k in node["required"] if k not in err.instance)
        return (node.get("x-required", "required field {key!r} is missing").format(key=key, field=field),
                node.get("x-required-hint"))
    template = node.get("x-error")
    if template is None:
        kind = node.get("type")
        template = {
            "type": f"{{field}} must be {' or '.join(_NOUNS.get(t, t) for t in ([kind] if isinstance(kind, str) else kind or []))}, got {{value!r}}",
            "enum": f"{{field}} must be one of {', '.join(map(str, node.get('enum', ())))}, got {{value!r}}",
            "minimum": f"{{field}} must be >= {node.get('minimum')}, got {{value!r}}",
            "maximum": f"{{field}} must be <= {node.get('maximum')}, got {{value!r}}",
            "minItems": "{field} must not be empty", "minProperties": "{field} must not be empty",
            "uniqueItems": "{field} must not repeat a value, got {value!r}",
        }.get(err.validator, "{field}: " + err.message.replace("{", "{{").replace("}", "}}"))
    return _fill(template, field=field, value=err.instance, key=path[-1] if path else ""), node.get("x-hint")


def _short(value, n: int = 80) -> str:
    """A value as a message shows it: its repr, cut at `n` characters (never a whole instance:
    a billion-laughs document would be gigabytes)."""
    if isinstance(value, (dict, list)):
        kind = "object" if isinstance(value, dict) else "list"
        return f"{kind} of {len(value)} item{'s' if len(value) != 1 else ''}"
    text = repr(value) if not isinstance(value, int) or abs(value) < 10 ** 30 else f"{value:.3e}"
    return text if len(text) <= n else text[:n] + "..."


def _fill(template: str, **values) -> str:
    """`template` with {field}, {key}, {value} and {value!r} filled (values cut short); any other
    brace is text, so a schema's worded message may show a literal {a, b} without breaking."""
    import re

    def sub(m):
        name = m.group(1)
        v = values[name]
        return _short(v) if name == "value" else str(v)

    text = re.sub(r"(?<!\{)\{(field|value|key)(![rs])?\}(?!\})", sub, template)
    return text.replace("{{", "{").replace("}}", "}")


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


__all__ = ["REPORT", "REPORT_ID", "REPORT_VERSION", "TRACED_VERSION", "PADDED_VERSION", "COST_VERSION", "version_for", "model_blocks", "SUPPORTED_VERSIONS",
           "LEDGER_RECORD", "RACE", "RACE_VERSION",
           "load", "inline_refs", "validator", "report_validator", "ledger_record_validator", "json_path",
           "problems", "report_problems", "check_output", "check_report", "report_section", "CELL", "GRID", "RUN_SPEC", "STUDY", "FINDINGS", "CURVES", "KEYMAP",
           "numbers_parsed", "check_spec", "RecordShape", "record_shape"]
