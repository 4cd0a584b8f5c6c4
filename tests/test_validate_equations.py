"""The work equations (suite/validate/equations.py, issue 29): every reproduction of the issue,
each refused by `race validate --strict` with its rule ID; the PHYS-002 floor under shared
prefill; TRL's one-record-per-step ledgers (a cut-short last cycle passes, an edited mu does
not); the imported tolerance at both edges; PROV-003 not fooled by one token."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

from suite import paths
from suite.record.summary import LedgerSummary
from suite.record.build import Provenance, build_report, totals_from
from suite.validate import exit_code, validate_report
from suite.validate.equations import System
from suite.validate.physics import _inputs, _priced
from validate_strategies import _retotal, _trl_layout_records, engine_of_profile, write_ledger

VALID = paths.schemas() / "examples" / "valid"
SPARSE = json.loads((VALID / "paper-qwen1.5b-lora64-sparse.json").read_text())
ESTIMATE = json.loads((VALID / "paper-qwen1.5b-lora64-estimate.json").read_text())


def _ids(findings):
    return {f.rule_id for f in findings}


def _refused(doc, folder=None) -> set:
    findings = validate_report(doc, base_dir=folder)
    assert exit_code(findings, strict=True) == 1 and "INTERNAL-001" not in _ids(findings)
    return _ids(findings)


def _reledger(doc, folder, recs):
    """Reprice each record from the report's specs, rewrite ledger and totals (a consistent forger)."""
    args = _inputs(doc)
    for r in recs:
        r["flops"] = _priced(r["work"], args)
    (folder / doc["ledger"]["path"]).unlink(missing_ok=True)
    write_ledger(folder / doc["ledger"]["path"], recs)
    s = LedgerSummary.scan(folder / doc["ledger"]["path"])
    doc["totals"] = totals_from(s.flops, s.tokens, s.work, s.records, s.seconds)
    doc["ledger"] = {**doc["ledger"], "sha256": s.sha256, "records": s.records}
    if "pretraining" in doc:          # rebuilt as a forger would (PUB-004: a catalog policy's report keeps it)
        from suite.accounting.modelspec import ModelSpec
        from suite.accounting.pretraining import share_of_pretraining

        doc["pretraining"] = share_of_pretraining(doc["totals"]["flops"]["total"],
                                                  ModelSpec.from_dict(doc["policy"]["spec"]))
    doc["provenance"]["steps"] = s.records


@pytest.fixture
def sparse(tmp_path):
    """(a copy of the sparse paper report, its folder, its ledger records)."""
    doc = copy.deepcopy(SPARSE)
    doc["budget"] = {"flops": None, "band": None}
    shutil.copy(VALID / doc["ledger"]["path"], tmp_path / doc["ledger"]["path"])
    recs = [json.loads(x) for x in (tmp_path / doc["ledger"]["path"]).read_text().splitlines()]
    return doc, tmp_path, recs


def test_the_sparse_report_passes_strict(sparse):
    doc, folder, recs = sparse
    _reledger(doc, folder, recs)
    assert validate_report(doc, base_dir=folder) == []


# ---- measured: fabricated work, inflated tokens, edited settings ---------------------------------


def test_fabricated_work_is_refused(sparse):
    """Issue: update work / 100 and rollout work x 0.35 in every record, repriced: p 0.076 instead
    of 0.743, and "no findings"."""
    doc, folder, recs = sparse
    for r in recs:
        for k in r["work"]:
            if k.startswith("update."):
                r["work"][k] //= 100
            elif k.startswith("rollout."):
                r["work"][k] = int(r["work"][k] * 0.35)
    _reledger(doc, folder, recs)
    assert doc["totals"]["update_share"] < 0.1
    assert {"WORK-003", "WORK-004"} <= _refused(doc, folder)


def test_halved_work_is_refused(sparse):
    doc, folder, recs = sparse
    for r in recs:
        r["work"] = {k: (v // 2 if not k.startswith("count.") else v) for k, v in r["work"].items()}
    _reledger(doc, folder, recs)
    assert {"WORK-003", "WORK-004"} <= _refused(doc, folder)


def test_tokens_inflated_with_counts_are_refused(sparse):
    """Issue: token totals +20% together with count.*, the work as it was."""
    doc, folder, recs = sparse
    for r in recs:
        for k in ("count.rollout_prompt", "count.rollout_completion", "count.update"):
            r["work"][k] = int(r["work"][k] * 1.2)
        r["tokens"] = {"rollout_prompt": r["work"]["count.rollout_prompt"],
                       "rollout_completion": r["work"]["count.rollout_completion"],
                       "update": r["work"]["count.update"], "reward": 0}
    _reledger(doc, folder, recs)
    assert "WORK-004" in _refused(doc, folder)    # trl's fused head projects exactly the completions


@pytest.mark.parametrize("key, value, rule", [
    ("prompts_per_step", 64, "WORK-001"),         # 16 -> 64
    ("group_size", 8, "WORK-001"),                # 2 -> 8
    ("max_completion_tokens", 100, "WORK-002"),   # below the ledger's mean of ~641
    ("beta", 0.04, "WORK-005"),                   # no reference pass in the ledger
    ("num_iterations", 4, "WORK-004"),            # one pass in the ledger, not four
], ids=lambda x: str(x))
def test_measured_settings_are_cross_checked(sparse, key, value, rule):
    doc, folder, recs = sparse
    doc["grpo"][key] = value
    _reledger(doc, folder, recs)                  # repriced under the edited setting
    assert rule in _refused(doc, folder)


def test_engine_profile_of_another_engine_is_refused(sparse):
    doc, folder, recs = sparse
    doc["accounting"]["engine_profile"] = "generic"   # drops TRL's padding and head recompute
    _reledger(doc, folder, recs)
    assert {"WORK-008", "WORK-003"} <= _refused(doc, folder)


# ---- PROV-003: means dressed as a measurement --------------------------------------------------------


def test_identical_records_nudged_by_one_token_are_refused(sparse):
    """Issue: one token of difference in one of 40 identical records bypassed PROV-003."""
    doc, folder, recs = sparse
    same = [copy.deepcopy(recs[0]) | {"step": i + 1} for i in range(40)]
    same[17]["work"]["count.rollout_completion"] += 1
    same[17]["tokens"]["rollout_completion"] += 1
    _reledger(doc, folder, same)
    assert "PROV-003" in _refused(doc, folder)


# ---- estimates: totals = steps x work_from_means(means, settings) ------------------------------------


@pytest.mark.parametrize("edit", [
    {"steps": 400, "completion_tokens": 1310},    # issue: "200 steps, 1.44e17", a quarter of the setup
    {"prompts_per_step": 32}, {"group_size": 4}, {"max_completion_tokens": 16}, {"beta": 0.1},
    {"num_iterations": 2}], ids=lambda e: ",".join(e))
def test_estimates_are_tied_to_their_setup(edit):
    doc = copy.deepcopy(ESTIMATE)
    for k, v in edit.items():
        if k == "steps":
            doc["provenance"]["steps"] = doc["totals"]["steps"] = v
        elif k == "completion_tokens":
            doc["provenance"]["means"][k] = v
        else:
            doc["grpo"][k] = v
    assert "WORK-007" in _refused(doc)


def test_an_estimate_priced_again_is_the_run_it_declares():
    """Edited and priced again (race report --estimate), the estimate claims the edited setup,
    and that is what it is priced as: valid."""
    from suite.accounting import work_from_means
    from suite.accounting.modelspec import ModelSpec
    from suite.validate.equations import settings_of

    doc = copy.deepcopy(ESTIMATE)
    doc["grpo"]["num_iterations"] = 2
    m = doc["provenance"]["means"]
    one = work_from_means(m["prompt_tokens"], m["completion_tokens"], settings_of(doc), "trl",
                          policy=ModelSpec.from_dict(doc["policy"]["spec"]))
    doc["totals"]["work"] = {k: v * 200 for k, v in one.items()}
    doc["totals"]["tokens"] = {"rollout_prompt": one["count.rollout_prompt"] * 200,
                               "rollout_completion": one["count.rollout_completion"] * 200,
                               "update": one["count.update"] * 200, "reward": 0}
    doc["totals"]["flops"] = {**doc["totals"]["flops"], **_priced(doc["totals"]["work"], _inputs(doc))}
    _retotal(doc)
    assert [f.rule_id for f in validate_report(doc)] == []


# ---- PHYS-002 follows the profile ----------------------------------------------------------------------


def _spec(profile, mu=1, steps_lengths=None):
    return {"id": "tiny", "policy": "Qwen2.5-0.5B-Instruct", "adapter": {"type": "full"},
            "grpo": {"group_size": 2, "prompts_per_step": 1, "num_iterations": mu, "beta": 0.0,
                     "max_completion_tokens": 16, "gradient_checkpointing": True},
            "reward": {"system": "sparse"}, "engine": {"name": engine_of_profile(profile), "version": "1.16.0"},
            "accounting": {"engine_profile": profile, "attention": "causal"}, "evaluations": []}


def _built(tmp_path, spec, lengths, layout="per-step"):
    from validate_strategies import ledger_records

    recs = _trl_layout_records(spec, lengths) if layout == "per-step" else ledger_records(spec, lengths)
    write_ledger(tmp_path / "ledger.jsonl", recs)
    return build_report(tmp_path / "ledger.jsonl", spec, created="2026-12-01T00:00:00Z",
                        provenance=Provenance("measured", recorder="test")).doc


def test_phys002_floor_counts_one_shared_prefill(tmp_path):
    """Issue (heavy fuzz lane): trl-vllm, 1 prompt token shared by K = 2 one-token completions:
    the rollout runs one forward (the prefill, whose logits give both first tokens), less than
    2·N x 2 generated tokens -- and valid."""
    doc = _built(tmp_path, _spec("trl-vllm"), [([1], [1, 1])])
    assert doc["totals"]["work"]["rollout.tokens"] == 1
    assert validate_report(doc, base_dir=tmp_path) == []
    n = doc["policy"]["params_non_embedding"]
    for rollout, below in ((2 * n, False), (2 * n - 1, True)):   # one forward of 2·N, and one FLOP less
        bad = copy.deepcopy(doc)
        bad["totals"]["flops"]["rollout"] = rollout
        _retotal(bad)
        assert ("PHYS-002" in _ids(validate_report(bad))) == below, rollout


# ---- TRL's one record per optimizer step -------------------------------------------------------------------


def test_trl_ledger_with_a_cut_short_cycle_passes_and_an_edited_mu_does_not(tmp_path):
    spec = _spec("trl", mu=2)
    lengths = [([3], [4, 5]), ([6], [2, 7]), ([5], [3, 3])]
    doc = _built(tmp_path, spec, lengths)
    assert validate_report(doc, base_dir=tmp_path) == []          # 6 steps, 3 generations
    lines = (tmp_path / "ledger.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "ledger.jsonl").write_bytes(b"".join(lines[:5]))  # stopped after step 5
    cut = build_report(tmp_path / "ledger.jsonl", spec, created="2026-12-01T00:00:00Z",
                       provenance=Provenance("measured", recorder="test")).doc
    assert validate_report(cut, base_dir=tmp_path) == []           # the last batch trained once
    for mu, rule in ((3, "WORK-001"), (1, "WORK-005")):
        bad = copy.deepcopy(cut)
        bad["grpo"]["num_iterations"] = mu
        assert rule in _refused(bad, tmp_path), mu


def test_one_step_of_a_trl_mu_run_passes(tmp_path):
    doc = _built(tmp_path, _spec("trl", mu=3), [([3], [4, 5])])
    lines = (tmp_path / "ledger.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "ledger.jsonl").write_bytes(lines[0])
    one = build_report(tmp_path / "ledger.jsonl", _spec("trl", mu=3), created="2026-12-01T00:00:00Z",
                       provenance=Provenance("measured", recorder="test")).doc
    assert validate_report(one, base_dir=tmp_path) == [] and doc["totals"]["steps"] == 3


# ---- tolerances at both edges ----------------------------------------------------------------------------


def _bump_update_tokens(doc, by):
    doc = copy.deepcopy(doc)
    doc["totals"]["work"]["count.update"] += by
    doc["totals"]["tokens"]["update"] += by
    return doc


def test_measured_equations_are_exact(sparse):
    doc, _, _ = sparse
    assert "WORK-004" not in _ids(validate_report(_bump_update_tokens(doc, 0)))
    assert "WORK-004" in _ids(validate_report(_bump_update_tokens(doc, 1)))
    assert "WORK-004" in _ids(validate_report(_bump_update_tokens(doc, -1)))


def test_imported_tolerance_is_the_rounding_of_means(tmp_path):
    """An imported ledger prices means, rounded once per statistic and generation batch: the
    update-token equation allows ceil((mu (k + 1) + 2) x G / 2) + 1 and no more (k: how often it
    counts a prompt, K where the prefill is shared, else 1)."""
    from suite.accounting import add_work, phase_flops, tokens_from_work, work_from_means
    from validate_strategies import _objects

    spec = _spec("trl")
    policy, adapter, g, _ = _objects(spec)
    one = work_from_means(37.3, 9.6, g, "trl", policy=policy)
    recs = [{"step": i + 1, "tokens": tokens_from_work(one), "work": dict(one),
             "flops": phase_flops(one, policy, adapter, g, engine="trl")} for i in range(2)]
    recs[1]["work"] = dict(add_work(one, one))
    recs[1]["tokens"] = tokens_from_work(recs[1]["work"])
    recs[1]["flops"] = phase_flops(recs[1]["work"], policy, adapter, g, engine="trl")
    recs[1]["step"] = 3
    write_ledger(tmp_path / "ledger.jsonl", recs)
    doc = build_report(tmp_path / "ledger.jsonl", spec, created="2026-12-01T00:00:00Z", provenance=Provenance(
        "imported", recorder="test", steps=3, source={"engine": "trl", "file": "trainer_state.json",
                                                       "fields": ["num_tokens"]})).doc
    assert validate_report(doc, base_dir=tmp_path) == []
    sy = System(doc)
    slack = sy.slack(sy.mu * (sy.k + 1) + 2)     # the update-token equation's tolerance
    assert sy.k == 1 and slack == -(-(1 * 2 + 2) * 3 // 2) + 1 == 7      # trl prefills every completion
    want = sy.update_tokens()[1]
    got = doc["totals"]["work"]["count.update"]
    assert abs(got - want) <= slack                # the rounding of means, inside the tolerance
    from suite.validate.equations import _eq

    for off, refused in ((slack, False), (-slack, False), (slack + 1, True), (-slack - 1, True)):
        assert (_eq("$", want + off, want, "update tokens", slack) is not None) == refused, off
    assert "WORK-004" in _ids(validate_report(_bump_update_tokens(doc, 10 * slack)))


def test_a_resumed_trl_run_regenerates_early_and_passes(tmp_path):
    """TRL regenerates right after a resume: one batch served fewer than mu steps."""
    spec = _spec("trl", mu=2)
    recs = _trl_layout_records(spec, [([3], [4, 5]), ([6], [2, 7]), ([5], [3, 3])])
    del recs[1]                                       # resumed at step 1: step 2 generated again
    for i, r in enumerate(recs, 1):
        r["step"] = i
    write_ledger(tmp_path / "ledger.jsonl", recs)
    doc = build_report(tmp_path / "ledger.jsonl", spec, created="2026-12-01T00:00:00Z",
                       provenance=Provenance("measured", recorder="test")).doc
    assert validate_report(doc, base_dir=tmp_path) == []
    bad = copy.deepcopy(doc)
    bad["grpo"]["num_iterations"] = 3                  # no batch served three steps
    assert "WORK-001" in _refused(bad, tmp_path)


@pytest.mark.parametrize("profile", ["trl", "trl-vllm"])
def test_linear_attention_chunk_counts_are_bounded_by_the_scanned_tokens(tmp_path, profile):
    """WORK-010 on measured ledgers of a linear-attention model (Qwen3-Next: 64-token chunks),
    padded (trl) and unpadded (trl-vllm), prompts and completions from 1 to 300 tokens: the real
    counts pass; a pass's chunks one below max(rows, tokens / 64), or at tokens / 64 + rows + 1,
    consistently repriced, are refused."""
    import random

    from validate_strategies import _records

    rng = random.Random(5)
    spec = {**_spec(profile), "policy": "Qwen3-Next-80B-A3B-Instruct",
            "grpo": {**_spec(profile)["grpo"], "max_completion_tokens": 300, "group_size": 3}}
    lengths = [([rng.randint(1, 300)], [rng.randint(1, 300) for _ in range(3)]) for _ in range(4)]
    doc = _built(tmp_path, spec, lengths, layout="per-generation")
    assert validate_report(doc, base_dir=tmp_path) == []
    w = doc["totals"]["work"]
    for name in ("update.train", "rollout"):
        tokens = w["rollout.prefill_tokens" if name == "rollout" else f"{name}.tokens"]
        rows = w[f"{name}.rows"]
        assert max(rows, tokens / 64) <= w[f"{name}.chunks"] < tokens / 64 + rows
        for delta in (-1, +1):      # one chunk outside the band, moved in the first record
            recs = _records(tmp_path)
            r = [r for r in recs if r["work"][f"{name}.rows"]][0]["work"]
            edge = max(rows, -(-tokens // 64)) - 1 if delta < 0 else tokens // 64 + rows + 1
            r[f"{name}.chunks"] += edge - w[f"{name}.chunks"]
            bad = copy.deepcopy(doc)
            folder = tmp_path / f"{name}{delta}"
            folder.mkdir()
            _reledger(bad, folder, recs)
            assert "WORK-010" in _refused(bad, folder), (name, delta)
