"""Findings as text (grouped by file and severity), JSON (stable keys) or SARIF 2.1.0 (for
code-hosting CI annotations)."""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import groupby
from typing import Iterable

from .. import __version__
from .registry import RULES, Finding

FORMATS = ("text", "json", "sarif")
_SEV_ORDER = {"error": 0, "warning": 1}


def apply_strict(findings: Iterable[Finding]) -> list[Finding]:
    """--strict: every warning becomes an error."""
    return [replace(f, severity="error") if f.severity == "warning" else f for f in findings]


def _sorted(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.file, _SEV_ORDER.get(f.severity, 2), f.rule_id, f.path))


def summary_line(findings: list[Finding], files: int) -> str:
    """'2 errors, 1 warning in 3 files' (or 'no findings in 3 files')."""
    e = sum(f.severity == "error" for f in findings)
    w = sum(f.severity == "warning" for f in findings)
    nf = f"{files} file{'s' if files != 1 else ''}"
    if not findings:
        return f"no findings in {nf}"
    return f"{e} error{'s' if e != 1 else ''}, {w} warning{'s' if w != 1 else ''} in {nf}"


def to_text(findings: Iterable[Finding], *, files: int = 1) -> str:
    """Human text: per file, errors then warnings; each finding on one line with its fix hint
    on the next."""
    fs = _sorted(findings)
    lines: list[str] = []
    for file, group in groupby(fs, key=lambda f: f.file):
        lines.append(f"{file}")
        for sev, items in groupby(group, key=lambda f: f.severity):
            items = list(items)
            lines.append(f"  {len(items)} {sev}{'s' if len(items) != 1 else ''}:")
            for f in items:
                lines.append(f"    {f.path}  {f.rule_id}  {f.message}")
                if f.hint:
                    lines.append(f"      hint: {f.hint}")
    lines.append(summary_line(fs, files))
    from ..textsafe import clean

    return clean("\n".join(lines)) + "\n"     # no escape sequence of an input reaches the terminal


def to_json(findings: Iterable[Finding], *, files: int = 1) -> str:
    """Machine form: {"version", "files", "summary": {"errors", "warnings"}, "findings": [...]}
    with findings sorted and keys in a fixed order."""
    fs = _sorted(findings)
    doc = {"version": 1, "files": files,
           "summary": {"errors": sum(f.severity == "error" for f in fs),
                       "warnings": sum(f.severity == "warning" for f in fs)},
           "findings": [f.to_dict() for f in fs]}
    return json.dumps(doc, indent=2) + "\n"


def to_sarif(findings: Iterable[Finding], *, files: int = 1) -> str:
    """SARIF 2.1.0: one run of tool 'race validate' with every registered rule; each result
    has a physical location (file; line 1 unless the path is a ledger line) and a logical
    location carrying the JSON path."""
    fs = _sorted(findings)
    ids = sorted(RULES)
    index = {rid: i for i, rid in enumerate(ids)}
    rules = [{"id": rid, "name": rid.replace("-", ""), "shortDescription": {"text": RULES[rid].title},
              "fullDescription": {"text": RULES[rid].doc or RULES[rid].title},
              "defaultConfiguration": {"level": RULES[rid].severity},
              "helpUri": "https://race-suite.org/docs/validation#" + rid.lower()} for rid in ids]
    results = []
    for f in fs:
        line = int(f.path.split()[1]) if f.path.startswith("line ") and f.path.split()[1].isdigit() else 1
        res = {"ruleId": f.rule_id, "level": f.severity,
               "message": {"text": f"{f.path}: {f.message}" + (f" (hint: {f.hint})" if f.hint else "")},
               "locations": [{"physicalLocation": {"artifactLocation": {"uri": f.file.replace("\\", "/")},
                                                   "region": {"startLine": line}},
                              "logicalLocations": [{"fullyQualifiedName": f.path, "kind": "member"}]}]}
        if f.rule_id in index:
            res["ruleIndex"] = index[f.rule_id]
        results.append(res)
    doc = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
           "runs": [{"tool": {"driver": {"name": "race validate", "version": __version__,
                                         "informationUri": "https://race-suite.org/docs/validation", "rules": rules}},
                     "results": results}]}
    return json.dumps(doc, indent=2) + "\n"


RENDERERS = {"text": to_text, "json": to_json, "sarif": to_sarif}
