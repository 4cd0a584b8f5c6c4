"""The filing view (issue 40, part 3): cumulative compute and the EU model documentation form's
compute, time and energy section from the reports, every figure traceable to a report field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from suite.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _published(run_id: str) -> Path:
    for p in sorted((ROOT / "leaderboard" / "submissions").glob("*.json")):
        if json.loads(p.read_text())["run"]["id"] == run_id:
            return p
    raise AssertionError(run_id)


def _field(doc, dotted: str):
    cur = doc
    for part in re.findall(r"[^.\[\]]+", dotted):
        cur = cur[int(part)] if part.isdigit() else cur[part]
    return cur


def _two_sig(x: float) -> str:
    m, e = f"{x:.1e}".split("e")
    return f"{m} x 10^{int(e)}"


def test_model_doc_of_deepscaler_traces_every_figure_to_its_report_field(capsys):
    path = _published("deepscaler-1.5b")
    doc = json.loads(path.read_text())
    assert main(["report", "--format", "model-doc", str(path)]) == 0
    out = capsys.readouterr().out
    post = doc["totals"]["flops"]["total"]
    assert f"Post-training compute: **{_two_sig(post)} FLOP** [`totals.flops.total`]" in out
    assert _two_sig(post) == "5.2 x 10^20"
    # every figure line names fields; each named field exists and prints as the figure
    checked = 0
    for line in out.splitlines():
        m = re.search(r" \[((?:`[^`]+`(?:, )?)+)\]$", line)
        for fld in re.findall(r"`([^`]+)`", m.group(1)) if m else ():
            _field(doc, fld)                               # KeyError if the document has no such field
            checked += 1
    assert checked >= 15
    for i, st in enumerate(doc["stages"]):
        assert f"stage {st['name']}: {_two_sig(st['flops']['total'])} FLOP [`stages[{i}].flops.total`]" in out
    pre = doc["pretraining"]
    assert f"{_two_sig(pre['flops'])} FLOP (6 x N x D" in out and "[`pretraining.flops`]" in out
    assert f"**{pre['ratio']:.2%}** ({pre['ratio']:.2g}) [`pretraining.ratio`]" in out
    assert f"**{_two_sig(pre['flops'] + post)} FLOP** [`pretraining.flops`, `totals.flops.total`]" in out
    # thresholds: one third of the base (pretraining.eu.threshold_flops) not crossed; 10^23 crossed by the base
    rows = {r.split(":")[0].strip("| "): r for r in out.splitlines() if r.startswith("| EU") or r.startswith("| Cal")}
    assert _two_sig(pre["eu"]["threshold_flops"]) in rows["EU modification indicator (one third of the original compute)"]
    assert rows["EU modification indicator (one third of the original compute)"].endswith("| no |")
    assert "**yes** (by the base model's own pretraining" in rows["EU general-purpose AI model (indicative criterion)"]
    assert rows["EU systemic-risk presumption"].endswith("| no |") and rows["California SB 53 frontier model"].endswith("| no |")
    hours = doc["hardware"]["accelerator_hours"]
    assert f"Hardware days: {hours / 24:,.0f} ({hours:,.0f} accelerator-hours)" in out
    assert f"Wall-clock days: {hours / doc['hardware']['count'] / 24:.2g}" in out
    assert "- Not available: the report is an estimate from published numbers" in out
    assert "indicative, not legal advice" in out and "1 multiply-add = 2 FLOPs" in out


def test_stage_reports_add_up_and_a_declared_base_is_used(tmp_path, capsys):
    """Two stage reports of one model add up; a base the facts do not know is declared with its source."""
    a = json.loads(_published("tina-open-rs2").read_text())
    b = json.loads(_published("tina-open-rs3").read_text())
    b["run"]["id"] = "tina-open-rs3"
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    assert main(["report", "--format", "model-doc", str(pa), str(pb)]) == 0
    out = capsys.readouterr().out
    post = a["totals"]["flops"]["total"] + b["totals"]["flops"]["total"]
    assert f"Post-training compute: **{_two_sig(post)} FLOP**" in out
    assert f"Hardware days: {(a['hardware']['accelerator_hours'] + b['hardware']['accelerator_hours']) / 24:,.0f}" in out
    assert main(["report", "--format", "model-doc", str(pa), "--base-flops", "3e23", "--base-source",
                 "https://example.org/tech-report, table 1"]) == 0
    out = capsys.readouterr().out
    assert "3.0 x 10^23 FLOP (declared; sources: https://example.org/tech-report, table 1) [`--base-flops`]" in out
    assert main(["report", "--format", "model-doc", str(pa), "--base-flops", "3e23"]) == 2
    assert "--base-flops needs --base-source" in capsys.readouterr().err


def test_a_modification_above_one_third_and_measured_energy(tmp_path, capsys):
    from suite.analysis.filing import filing
    from suite.record.report import Report
    from suite.site.modeldoc import render

    doc = json.loads(_published("tina-still").read_text())
    doc["pretraining"] = {**doc["pretraining"], "flops": doc["totals"]["flops"]["total"] * 2}   # a tiny base
    doc["cost"] = {"energy": {"measured": True, "method": "nvml", "joules": {"rollout": 1.8e9, "update": 1.8e9,
                                                                            "reward": 0.0}, "devices": 2}}
    f = filing([Report(doc)])
    third = next(t for t in f.thresholds if t["name"].startswith("EU modification"))
    assert third["crossed"] and third["value"] == doc["totals"]["flops"]["total"]
    text = render(f)
    assert "- Energy: 1 MWh (3.6e+09 J) [`cost.energy.joules`]" in text
    assert f.share.value == pytest.approx(0.5)
