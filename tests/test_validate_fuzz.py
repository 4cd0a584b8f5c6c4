"""Fuzzing the validator with hypothesis: generated valid reports pass with no finding;
single-invariant mutations are caught by the intended rule; damaged reports and arbitrary JSON
never crash it.

Example counts scale with RACE_FUZZ_SCALE (default 1: about 2,200 examples in under 40 s on
2 cores, derandomized; benchmarks/test_validate_bench.py runs a heavier, random lane)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from suite.validate import validate_report
from validate_strategies import MUTATIONS, make_pool, mutate, valid_reports

SCALE = float(os.environ.get("RACE_FUZZ_SCALE", "1"))


def fuzz_settings(n: int):
    return settings(max_examples=max(1, int(n * SCALE)), deadline=None, derandomize=SCALE <= 1,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@lru_cache(maxsize=1)
def pool():
    folder = Path(tempfile.mkdtemp(prefix="race-fuzz-pool-"))
    return tuple(make_pool(24, folder))


def _ids(findings):
    return {f.rule_id for f in findings}


@fuzz_settings(80)
@given(valid_reports(with_ledger=True))
def test_generated_valid_reports_pass(case):
    doc, folder = case
    try:
        assert validate_report(doc, base_dir=folder) == []
        assert validate_report(json.loads(json.dumps(doc))) == []  # without its ledger too
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_pool_reports_pass():
    for doc, folder in pool():
        assert validate_report(doc, base_dir=folder) == []


@fuzz_settings(500)
@given(st.integers(0, 23), st.sampled_from(sorted(MUTATIONS)), st.integers(1, 10**9))
def test_single_invariant_mutation_is_caught_by_its_rule(i, name, delta):
    doc, src = pool()[i]
    rule_id, needs_ledger, _, applicable = MUTATIONS[name]
    if not applicable(doc):
        return
    folder = Path(tempfile.mkdtemp(prefix="race-fuzz-"))
    try:
        shutil.copy(src / "ledger.jsonl", folder / "ledger.jsonl")
        bad = mutate(doc, folder, name, delta)
        got = _ids(validate_report(bad, base_dir=folder))
        assert rule_id in got, f"{name}: expected {rule_id}, got {sorted(got)}"
        assert "INTERNAL-001" not in got
    finally:
        shutil.rmtree(folder, ignore_errors=True)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20)


@lru_cache(maxsize=1)
def field_reports() -> tuple:
    """Reports of what real runs do: the staged, filtered, multi-turn example and a filtered
    multi-turn single-stage estimate (their rules read sections the plain pool lacks)."""
    from suite import paths
    from suite.train.cell import cell_from_dict

    staged = json.loads((paths.schemas() / "examples" / "valid" / "staged-filtered-multiturn-estimate.json").read_text())
    est = cell_from_dict({"name": "f", "policy": "DeepSeek-V3-Base", "reward": "sparse", "lora_rank": 0,
                          "prompts_per_step": 3, "group_size": 4, "max_completion_tokens": 512, "steps": 5,
                          "mean_prompt_tokens": 50, "mean_completion_tokens": 200,
                          "rollouts": {"kept_share": 0.75, "environment_tokens": 40, "turns": 3}},
                         check_paths=False).estimate(created="2026-12-02T00:00:00Z").doc
    return staged, est


@st.composite
def damaged_reports(draw):
    """A valid report (the pool's or one of what real runs do) with one node anywhere replaced
    by arbitrary JSON (or deleted)."""
    i = draw(st.integers(0, 25))
    doc = json.loads(json.dumps(pool()[i][0] if i < 24 else field_reports()[i - 24]))
    node, parent, key = doc, None, None
    for _ in range(draw(st.integers(1, 5))):
        if isinstance(node, dict) and node:
            k = draw(st.sampled_from(sorted(node)))
        elif isinstance(node, list) and node:
            k = draw(st.integers(0, len(node) - 1))
        else:
            break
        parent, key, node = node, k, node[k]
    if parent is None:
        return draw(json_values)
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[key]
    else:
        parent[key] = draw(json_values)
    return doc


@fuzz_settings(600)
@given(damaged_reports())
def test_validator_never_crashes_on_damaged_reports(doc):
    assert "INTERNAL-001" not in _ids(validate_report(doc))


@fuzz_settings(1000)
@given(json_values | st.dictionaries(st.sampled_from(["schema_version", "run", "totals", "ledger", "x"]),
                                     json_values | st.just("1.0"), max_size=5))
def test_validator_never_crashes_on_arbitrary_json(doc):
    findings = validate_report(doc)
    assert findings and "INTERNAL-001" not in _ids(findings)


def test_swap_model_and_name_never_picks_a_near_twin():
    """The heavy lane's random seeds once picked a near twin: Qwen3-32B renamed Qwen2.5-32B (or
    DeepSeek-R1-Distill-Qwen-32B) prices the same work 0.47 % apart, inside PHYS-001's 1 %, and
    only PUB-001 (the pretraining share) told them apart. The mutation picks models priced apart."""
    from validate_strategies import POLICIES

    doc, src = next((d, s) for d, s in pool() if d["policy"]["name"] == "Qwen3-32B")
    for delta in range(len(POLICIES)):
        folder = Path(tempfile.mkdtemp(prefix="race-fuzz-"))
        try:
            shutil.copy(src / "ledger.jsonl", folder / "ledger.jsonl")
            bad = mutate(doc, folder, "swap-model-and-name", delta)
            assert "PHYS-001" in _ids(validate_report(bad, base_dir=folder)), bad["policy"]["name"]
        finally:
            shutil.rmtree(folder, ignore_errors=True)
