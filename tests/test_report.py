"""Report v1: built from a ledger + run spec, schema-valid, numbers exactly the ledger's sums,
examples reproducible, atomic writes, `race report` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from suite import paths
from suite.cli import main
from suite.errors import RaceError
from suite.record.summary import LedgerSummary
from suite.atomic import write_json_atomic
from suite.record.report import Report
from suite.record.build import Provenance, build_report
from suite.record.runspec import RunSpec, load_run_spec
from suite.validate import validate_report

EXAMPLES = paths.schemas() / "examples"
VALID = EXAMPLES / "valid"
MEASURED = Provenance("measured", recorder="race report (a per-step ledger)")
SPEC = {
    "label": "t", "seed": 3, "policy": "Qwen2.5-1.5B-Instruct",
    "adapter": {"type": "lora", "rank": 64, "alpha": 128},
    "grpo": {"group_size": 2, "prompts_per_step": 16, "max_completion_tokens": 2048},
    "reward": {"system": "sparse"}, "engine": {"name": "trl", "version": "1.16.0"},
    "budget": {"flops": "4e16", "band": [3e16, 5e16]},
}


@pytest.fixture
def ledger(tmp_path):
    p = tmp_path / "run" / "ledger.jsonl"
    p.parent.mkdir()
    p.write_bytes((VALID / "paper-qwen1.5b-lora64-sparse.ledger.jsonl").read_bytes())
    return p


def test_report_sums_the_ledger_exactly_and_validates_clean(ledger):
    report = build_report(ledger, SPEC, created="2026-11-29T20:00:00Z", provenance=MEASURED)
    assert isinstance(report, Report) and report.provenance_method == "measured" and report.steps == 40
    doc = report.doc
    s = LedgerSummary.scan(ledger)
    t = doc["totals"]
    assert t["flops"] == {**s.flops, "total": sum(s.flops.values())}
    assert t["tokens"] == s.tokens and t["work"] == s.work and t["steps"] == s.records == 40
    assert t["update_share"] == t["flops"]["update"] / t["flops"]["total"]
    assert abs(sum(t["shares"].values()) - 1) < 1e-12
    assert doc["ledger"] == {"path": "ledger.jsonl", "sha256": s.sha256, "records": 40}
    assert doc["policy"]["params_total"] == 1_543_714_304  # Qwen2.5-1.5B-Instruct, tied embeddings
    assert doc["adapter"]["trainable_params"] == 73_859_072  # r=64 on all seven projections, 28 layers
    assert doc["budget"] == {"flops": 4 * 10**16, "band": {"low": 3 * 10**16, "high": 5 * 10**16}}
    assert doc["run"]["started"] == "2026-11-01T12:01:35Z"
    assert validate_report(doc, base_dir=ledger.parent) == []


def test_committed_examples_are_what_the_generator_makes(tmp_path):
    """The valid examples are regenerated from suite.accounting: if a coefficient changes,
    this fails until `python schemas/examples/make_examples.py` is rerun and committed."""
    for reward in ("sparse", "prm"):
        doc = json.loads((VALID / f"paper-qwen1.5b-lora64-{reward}.json").read_text())
        again = build_report(VALID / doc["ledger"]["path"], _spec_of(doc), report_dir=VALID, created=doc["run"]["created"],
                             provenance=Provenance(**doc["provenance"])).doc
        for key in ("policy", "adapter", "grpo", "reward", "accounting", "totals", "ledger", "evaluations"):
            assert again[key] == doc[key], key
        from suite.accounting import phase_flops  # the ledger itself is priced by the accounting
        from suite.validate.physics import _inputs

        args = _inputs(doc)
        assert phase_flops(doc["totals"]["work"], *args[:4], engine=args[4], attention=args[5]) == \
            {k: doc["totals"]["flops"][k] for k in ("rollout", "update", "reward")}


def _spec_of(doc):
    return {"id": doc["run"]["id"], "label": doc["run"]["label"], "seed": doc["run"]["seed"],
            "policy": doc["policy"]["name"],
            "adapter": {k: doc["adapter"][k] for k in ("type", "rank", "alpha", "targets")},
            "grpo": doc["grpo"],
            "reward": {"system": doc["reward"]["system"], "kind": doc["reward"]["kind"],
                       "model": doc["reward"]["model"]["name"] if doc["reward"]["model"] else None},
            "engine": doc["run"]["engine"], "accounting": {"engine_profile": "trl", "attention": "causal"},
            "evaluations": doc["evaluations"]}


def test_paper_examples_split_compute_as_the_paper_describes():
    sparse = json.loads((VALID / "paper-qwen1.5b-lora64-sparse.json").read_text())
    prm = json.loads((VALID / "paper-qwen1.5b-lora64-prm.json").read_text())
    assert sparse["totals"]["flops"]["reward"] == 0 and sparse["reward"]["model"] is None
    assert prm["totals"]["shares"]["reward"] > 0.1  # PRM feedback is a visible part of the budget
    assert prm["reward"]["model"]["name"] == "Qwen2.5-Math-PRM-7B"
    assert sparse["grpo"]["group_size"] == 2 and sparse["grpo"]["max_completion_tokens"] == 2048


def test_torn_ledger_warns_and_counts_complete_records(ledger):
    with open(ledger, "ab") as f:
        f.write(b'{"step": 41, "ti')
    seen = []
    doc = build_report(ledger, SPEC, warn=seen.append, provenance=MEASURED).doc
    assert doc["totals"]["steps"] == 40 and len(seen) == 1 and "torn" in seen[0]
    assert validate_report(doc, base_dir=ledger.parent)[0].rule_id == "LEDGER-001"


def test_bad_ledgers_and_specs_are_refused_with_a_reason(ledger, tmp_path):
    lines = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(b"".join(lines[:3] + [lines[1]] + lines[3:]))
    with pytest.raises(RaceError, match="does not follow"):
        build_report(ledger, SPEC, provenance=MEASURED)
    with pytest.raises(RaceError, match="not found"):
        build_report(tmp_path / "nope.jsonl", SPEC, provenance=MEASURED)
    with pytest.raises(TypeError, match="provenance"):       # how the ledger was made is never a default
        build_report(ledger, SPEC)
    with pytest.raises(RaceError, match="an estimate has no ledger"):
        build_report(ledger, SPEC, provenance=Provenance("estimated"))
    for bad, msg in [({**SPEC, "polcy": 1}, "unknown field 'polcy'"),
                     ({k: v for k, v in SPEC.items() if k != "adapter"}, "'adapter'"),
                     ({**SPEC, "reward": {"system": "prm", "kind": "prm"}}, "needs a model"),
                     ({**SPEC, "budget": {"flops": "lots"}}, "not a number"),
                     ({**SPEC, "accounting": {"attention": "sparse"}}, "not causal or full"),
                     ({**SPEC, "grpo": {"group_size": 2}}, "prompts_per_step")]:
        with pytest.raises(RaceError, match=msg):
            RunSpec.from_dict(bad)


def test_write_json_atomic_leaves_no_temp_and_refuses_nan(tmp_path):
    p = tmp_path / "a" / "r.json"
    write_json_atomic(p, {"x": 1})
    write_json_atomic(p, {"x": 2})
    assert json.loads(p.read_text()) == {"x": 2}
    with pytest.raises(ValueError):
        write_json_atomic(p, {"x": float("nan")})
    assert json.loads(p.read_text()) == {"x": 2}  # the old file survives a failed write
    assert os.listdir(p.parent) == ["r.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask  # as open() would make it, not mkstemp's 0600


def test_race_report_cli(ledger, tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    import yaml

    spec.write_text(yaml.safe_dump({**SPEC, "evaluations": [{"target": "gsm8k-250", "metric": "pass@1", "value": 0.5, "n": 250}]}))
    assert load_run_spec(spec).evaluations[0]["n"] == 250
    evals = tmp_path / "evals.jsonl"
    evals.write_text(json.dumps({"target": "math500-250", "metric": "pass@1", "value": 0.25, "n": 250,
                                 "compute": {"tokens": 10, "flops": 100}}) + "\n")
    out = ledger.parent / "report.json"
    assert main(["report", str(ledger), "--spec", str(spec), "-o", str(out), "--evaluations", str(evals),
                 "--created", "2026-11-29T20:00:00Z"]) == 0
    doc = json.loads(out.read_text())
    assert [e["target"] for e in doc["evaluations"]] == ["gsm8k-250", "math500-250"]
    assert doc["run"]["created"] == "2026-11-29T20:00:00Z"
    assert main(["validate", str(out)]) == 0
    assert main(["report", str(ledger), "--spec", str(tmp_path / "missing.yaml")]) == 2
    assert main(["report", str(ledger), "--spec", str(spec), "--created", "noon"]) == 2
    err = capsys.readouterr().err
    assert "missing.yaml" in err and "Traceback" not in err


def test_race_report_help_is_complete():
    race = Path(sys.executable).parent / "race"  # note: `python -m suite.cli` registers no commands
    r = subprocess.run([str(race), "report", "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    for flag in ("--spec", "--output", "--evaluations", "--created", "--format"):
        assert flag in r.stdout


def test_report_docs_python_blocks_run_as_written(tmp_path):
    """docs/report.md's Python blocks, in order, in a fresh interpreter from an empty folder:
    an import path that moved (suite.report.write_json_atomic did) fails here."""
    import re

    from suite.paths import home

    blocks = re.findall(r"```python\n(.*?)```", (home() / "docs" / "report.md").read_text(), re.S)
    assert len(blocks) >= 3
    (tmp_path / "runs" / "a").mkdir(parents=True)
    r = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "3 records; None" in r.stdout and r.stdout.strip().splitlines()[-1].startswith("measured 3 p = ")
    from suite.cli import main

    assert main(["validate", "--strict", str(tmp_path / "runs" / "a" / "report.json")]) == 0
    # The same description through the CLI: the cell YAML is the run description.
    assert main(["report", str(tmp_path / "runs" / "a" / "ledger.jsonl"), "--spec",
                 str(tmp_path / "runs" / "a" / "cell.yaml"), "-o", str(tmp_path / "runs" / "a" / "again.json")]) == 0
