"""Every example document: the valid ones pass with no finding at all; each invalid one
triggers exactly the rule IDs its `.expect` file declares (no more: a spurious finding is a bug too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite import paths
from suite.validate import exit_code, validate_path

EXAMPLES = paths.schemas() / "examples"
VALID = sorted((EXAMPLES / "valid").glob("*.json"))
INVALID = sorted((EXAMPLES / "invalid").glob("*.expect"))


def test_there_are_examples():
    assert len(VALID) >= 2 and len(INVALID) >= 30


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_example_has_no_findings(path: Path):
    assert validate_path(path) == []


@pytest.mark.parametrize("expect", INVALID, ids=lambda p: p.stem)
def test_invalid_example_triggers_its_rules(expect: Path):
    want = set(expect.read_text().split())
    findings = validate_path(expect.with_suffix(".json"))
    got = {f.rule_id for f in findings}
    assert want == got, f"expected exactly {sorted(want)}, got {sorted(got)}"
    assert "INTERNAL-001" not in got
    for f in findings:  # every finding says where, what and (for errors) how to fix it
        assert f.path and f.message and (f.hint or f.severity == "warning" or f.message.startswith("..."))
    codes = {r.split("-")[0] for r in want}
    assert exit_code(findings) == (2 if "INPUT" in codes else 1 if any(f.severity == "error" for f in findings) else 0)


def test_folder_of_invalid_examples_is_walked_recursively():
    findings = validate_path(EXAMPLES)
    files = {f.file for f in findings}
    assert not any("/valid/" in f for f in files)
    names = {Path(f).name for f in files}
    for e in INVALID:  # each case is found, in its report or in its own broken ledger
        assert {f"{e.stem}.json", f"{e.stem}.ledger.jsonl"} & names, e.stem
