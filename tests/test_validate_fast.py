"""The validator's shortcuts give the verdicts of the plain path: the section-wise, memoized
schema check (report_is_valid) agrees with the full Draft 2020-12 validator on valid and
damaged reports."""

from __future__ import annotations

import copy

from hypothesis import given
from test_validate_fuzz import damaged_reports, fuzz_settings, pool

from suite.record.schemas import report_validator
from suite.validate.schema_rules import report_is_valid


@fuzz_settings(400)
@given(damaged_reports())
def test_section_wise_schema_check_agrees_with_the_full_validator(doc):
    assert report_is_valid(doc) == report_validator().is_valid(doc)
    assert report_is_valid(doc) == report_validator().is_valid(doc)     # again, from the memo


def test_memo_tells_json_types_apart():
    """1 and 1.0 and True, a list and a tuple: the schema tells them apart, so must the memo."""
    doc = copy.deepcopy(pool()[0][0])
    assert report_is_valid(doc)
    for bad in (True, 64.5, "64"):
        d = copy.deepcopy(doc)
        d["grpo"]["group_size"] = bad
        assert report_is_valid(d) == report_validator().is_valid(d) is False
    d = copy.deepcopy(doc)
    d["adapter"]["targets"] = tuple(d["adapter"]["targets"])   # a tuple is not a JSON array
    assert report_is_valid(d) == report_validator().is_valid(d)
