"""The field's published runs, re-accounted (issue 30): every run description in
leaderboard/published/ rebuilds its report in leaderboard/submissions/ and the page docs/field.md
byte for byte; each validates under --strict, sources every number, and implies a utilization
between 1% and 70% at its stated hours; `race flops` prints the share of pretraining compute and
the EU indicator, checked on a hand-worked case; bad run descriptions are refused in one line."""

from __future__ import annotations

import json

import pytest
import yaml

from suite.accounting.specs import spec_for
from suite.cli import main
from suite.record.runspec import Hardware
from suite.record.sources import SETUP_FIELDS
from tools import published


@pytest.fixture(scope="module")
def built():
    """Every published run's report, built once (validated under --strict by `reports`)."""
    return published.reports()


def test_reports_and_page_rebuild_byte_for_byte(built):
    assert published.check(built) == []


def test_at_least_twelve_runs_each_sourced_with_utilization_in_range(built):
    assert len(built) >= 12
    stored = [json.loads(p.read_text()) for p in published.SUBMISSIONS.glob("*.json")]
    assert sum(published.is_published(d) for d in stored) == len(built)
    with_hours = 0
    for name, doc in built:
        src = doc["sources"]
        assert doc["provenance"]["method"] == "estimated" and src["published"]["url"].startswith("https://"), name
        known = set(src["facts"]) | set(src["assumed"])
        assert set(SETUP_FIELDS) <= known, (name, set(SETUP_FIELDS) - known)
        lo, hi = src["range"]["flops"]["low"], src["range"]["flops"]["high"]
        assert lo <= doc["totals"]["flops"]["total"] <= hi, name
        if "hardware" in doc:                     # the stated hours: every run within 1%..70% of peak
            with_hours += 1
            util = Hardware.from_dict(doc["hardware"]).utilization(doc["totals"]["flops"]["total"])
            assert 0.01 <= util <= 0.70, (name, util)
            assert {"hardware", "peak_flops"} <= set(src["facts"]), name
    assert with_hours >= 10


def test_the_page_claims_what_the_reports_hold(built):
    """docs/field.md says 6*N*D and verl's estimator come out below every dense run's total, 6*N*D
    above the mixture-of-experts run's (all experts charged for every token), the pretraining share
    at most about 0.5% and below one third for every run, and which rows publish hours: each holds
    for each report."""
    from suite.record.report import Report
    from suite.site.field import row

    moe = set()
    for name, doc in built:
        x = row(Report(doc, name))
        assert x["verl"] is None or x["verl"] < x["total"], name
        if doc["policy"]["spec"].get("num_experts"):
            moe.add(name)
            assert x["six_n_d"] > x["total"], name
        else:
            assert x["six_n_d"] < x["total"], name
        assert doc["pretraining"]["eu"]["exceeds"] is False, name
        assert doc["pretraining"].get("ratio") is None or doc["pretraining"]["ratio"] < 0.006, name
    assert moe == {"deepseek-r1-zero.yaml"}
    hours = {name for name, doc in built if "hardware" in doc}
    for name in ("deepcoder-14b.yaml", "polaris-4b.yaml", "deepseek-r1-zero.yaml"):
        assert name in hours, name
    for name in ("dapo-qwen2.5-32b.yaml", "skywork-or1-32b.yaml", "race-paper-qwen1.5b-r8.yaml",
                 "race-paper-qwen1.5b-r256.yaml"):       # none published: the row says so
        assert name not in hours and "hours" in dict(built)[name]["run"]["notes"].lower(), name


# DeepSeek-R1-Distill-Qwen-1.5B: N = 1,777,088,000 parameters (untied embeddings), pretrained as
# Qwen2.5-Math-1.5B: 18T tokens of Qwen2.5 + 1T of Qwen Math Corpus v2 = D = 19e12 tokens.
N, D = 1_777_088_000, 19 * 10 ** 12
PRE = 202_588_032_000_000_000_000_000       # 6 * N * D, worked by hand
THIRD = 67_529_344_000_000_000_000_000      # PRE // 3


@pytest.mark.parametrize("steps, verdict", [(1_000, "below"), (200_000_000, "above")])
def test_race_flops_prints_the_pretraining_share_hand_worked(capsys, steps, verdict):
    assert spec_for("DeepSeek-R1-Distill-Qwen-1.5B").params_total == N and 6 * N * D == PRE and PRE // 3 == THIRD
    args = ["flops", "--model", "DeepSeek-R1-Distill-Qwen-1.5B", "--lora-rank", "0", "--group-size", "8",
            "--prompts-per-step", "128", "--prompt-tokens", "200", "--completion-tokens", "5000",
            "--max-completion-tokens", "8192", "--steps", str(steps)]
    assert main([*args, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    post = d["total"]["flops"]["total"]
    assert post == d["per_step"]["flops"]["total"] * steps
    pre = d["pretraining"]
    assert pre["flops"] == PRE and pre["method"] == "6ND" and pre["tokens"] == D
    assert pre["ratio"] == post / PRE
    assert pre["eu"]["threshold_flops"] == THIRD and pre["eu"]["exceeds"] is (post > THIRD) is (verdict == "above")
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "pretraining compute of DeepSeek-R1-Distill-Qwen-1.5B: 2.026e+23 FLOPs (6*N*D, D = 1.9e+13 tokens)" in text
    assert f"post-training / pretraining = {post / PRE:.3e}" in text
    assert f"EU indicator (C(2025) 5045, points 59-61): {verdict} one third of the original training compute " \
           f"({THIRD:.3e} FLOPs); indicative, not legal advice" in text


def test_race_plan_prints_the_share_and_the_default_when_unknown(capsys):
    assert main(["plan", "--budget", "1e22", "--models", "DeepSeek-R1-Distill-Qwen-1.5B,gpt-oss-20b", "--lora-rank",
                 "0"]) == 0
    out = capsys.readouterr().out
    known, unknown = (next(line for line in out.splitlines() if line.startswith(m))
                      for m in ("DeepSeek-R1-Distill-Qwen-1.5B", "gpt-oss-20b"))
    assert known.split()[-2] != "?" and known.split()[-1] == "below"
    assert unknown.split()[-2:] == ["?", "below"]     # no pretraining facts: against the default 10^23 / 3
    assert "not legal advice" in out


def _write(tmp_path, change):
    doc = yaml.safe_load((published.PUBLISHED / "simplerl-zoo-qwen2.5-7b.yaml").read_text())
    change(doc)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_number_without_source_or_assumption_is_refused(tmp_path, capsys):
    path = _write(tmp_path, lambda d: d["sources"].pop("group_size"))
    assert main(["report", "--estimate", str(path), "-o", str(tmp_path / "r.json")]) == 1
    err = capsys.readouterr().err
    assert "PUB-002" in err and "group_size" in err and not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("change, words", [
    (lambda d: d["assumed"]["mean_completion_tokens"].update(high=700), "lies outside its range"),
    (lambda d: d["assumed"].update(lora_rank={"low": 8, "high": 64, "why": "x" * 5}), "not a number the estimate"),
    (lambda d: d["sources"]["steps"].update(url="javascript:alert(1)"), "sources"),
])
def test_bad_assumptions_and_sources_get_one_line(tmp_path, capsys, change, words):
    path = _write(tmp_path, change)
    assert main(["report", "--estimate", str(path), "-o", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2
    assert not (tmp_path / "r.json").exists()


def test_two_published_figures_for_the_hours_are_both_shown(tmp_path):
    """Where two sources disagree on a run's hours, the page shows each figure and the implied
    utilization it gives, each with its source."""
    from suite.record.report import Report
    from suite.record.build import build_estimate
    from suite.site.field import page
    from suite.train.cell import load_cell

    path = _write(tmp_path, lambda d: d["sources"]["hardware"].update(alternatives=[
        {"value": 480, "url": "https://example.org/other", "where": "a second account: 480 GPU-hours"}]))
    cell = load_cell(path, check_paths=False)
    doc = build_estimate(cell.run_spec(), cell.means(), created=published.CREATED).doc
    total = doc["totals"]["flops"]["total"]
    text = page([Report(doc, "run.json")])
    assert "Where two sources disagree" in text
    for hours in (240, 480):                   # the run's own figure and the other one
        util = total / (9.89e14 * hours * 3600)
        assert f"| {hours:,} | {100 * util:.1f}% |" in text
    assert "[a second account: 480 GPU-hours](https://example.org/other)" in text
