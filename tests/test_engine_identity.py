"""Engine identity is normalised (issue 44, class "engine names compared literally"): a TRL run whose
run.engine.name is 'TRL', 'huggingface-trl', 'trl ' or a lookalike is engine trl, so WORK-008 holds
it to TRL's own profiles; before, each of these names matched no engine and the run priced under
`generic` (-59% on the forgery that found it) passed. An unknown name stays unknown: never generic
-priced where a profile says otherwise, never taken for another engine."""

from __future__ import annotations

import pytest
from test_validate_equations import _ids, _refused, _reledger, sparse  # noqa: F401  (the sparse paper report fixture)

from suite.accounting.enginefile import canonical_engine, normalise
from suite.train.cell import cell_from_dict
from suite.validate import validate_report

TRL_NAMES = ["TRL", "huggingface-trl", "trl ", "Trl", "HF_TRL", "ｔｒｌ",     # fullwidth: NFKC
             "t\u200brl", "\u2066trl\u2069", "\u0422RL", "tr\u04cf"]           # zero-width, bidi isolates, Cyrillic Т, ӏ


def test_alias_forms_are_engine_trl_and_unknown_names_stay_unknown():
    for name in TRL_NAMES:
        assert name != "trl" and canonical_engine(name) == "trl", name
    assert canonical_engine("skyrl_train") == canonical_engine("SkyRL") == "skyrl"
    assert canonical_engine("NeMo RL") == "nemo-rl" and normalise(" NeMo__RL ") == "nemo-rl"
    for name in ("acme-trainer", "trl2", "trlx", "", "verl-trl"):
        assert canonical_engine(name) is None, name


def test_a_trl_run_named_otherwise_and_priced_under_generic_is_refused_by_work_008(sparse):  # noqa: F811
    doc, folder, recs = sparse
    assert doc["run"]["engine"]["name"] == "trl" and doc["accounting"]["engine_profile"] == "trl"
    doc["accounting"]["engine_profile"] = "generic"       # drops TRL's padding and head recompute
    _reledger(doc, folder, recs)                          # a consistent forger reprices the ledger
    for name in TRL_NAMES:
        doc["run"]["engine"]["name"] = name
        assert "WORK-008" in _refused(doc, folder), name
    doc["run"]["engine"]["name"] = "acme-trainer"         # an engine with no file: generic suits it
    assert "WORK-008" not in _ids(validate_report(doc, base_dir=folder))


def test_alias_names_under_their_own_profile_pass_and_unknown_engines_cannot_take_a_profile(sparse):  # noqa: F811
    doc, folder, recs = sparse
    _reledger(doc, folder, recs)
    doc["run"]["engine"]["name"] = "HuggingFace TRL"
    assert validate_report(doc, base_dir=folder) == []
    doc["run"]["engine"]["name"] = "acme-trainer"         # unknown: trl's profile is not its to declare
    assert "WORK-008" in _refused(doc, folder)


@pytest.mark.parametrize("name,profile", [("TRL", "trl"), ("huggingface-trl", "trl"), ("SkyRL", "skyrl"),
                                          ("acme-trainer", "generic")])
def test_a_run_description_names_its_engine_any_way_and_gets_its_profile(name, profile):
    cell = cell_from_dict({"name": "x", "policy": "Qwen2.5-0.5B-Instruct", "reward": "sparse", "group_size": 2,
                           "prompts_per_step": 2, "engine": {"name": name, "version": "1"}}, check_paths=False)
    assert cell.run_spec().engine_profile == profile
