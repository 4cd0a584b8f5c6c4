"""Conditional allocation frontiers: loading report folders, conditions never pooled, seeds
averaged, how p* moves, bad input, and the `race frontier` command's files."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from race_helpers import make_report, model, write_reports
from suite.analysis import frontier
from suite import paths
from suite.cli import main
from suite.errors import RaceError

PS = [0.1, 0.3, 0.5]


def test_helper_reports_follow_the_report_schema():
    schema = json.loads((paths.schemas() / "report-v1.schema.json").read_text())
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for r in (make_report(), make_report(rank=None, reward="prm", reward_share=0.2, band=None, label=None),
              make_report(scores={("gsm8k-250", "pass@1"): 0.5})):
        assert not list(v.iter_errors(r))


def test_load_reads_nested_folders_one_cell_per_evaluation(tmp_path):
    write_reports(tmp_path / "grid" / "deeper", [
        make_report(label="a1", p=0.2, scores={("easy", "pass@1"): 0.5, ("hard", "pass@1"): 0.2}, native=0.4),
        make_report(label="a2", p=0.4, scores={}, native=None),  # not evaluated yet
    ])
    pilot = frontier.load(tmp_path)
    assert pilot.reports == 2 and len(pilot.unevaluated) == 1
    assert sorted((c.condition.target, c.condition.metric) for c in pilot.cells) == [
        ("arith-train", "native_reward"), ("easy", "pass@1"), ("hard", "pass@1")]
    c = next(c for c in pilot.cells if c.condition.target == "easy")
    assert c.p == pytest.approx(0.2) and c.native_reward == 0.4 and c.label == "a1" and c.lora_rank == 16
    assert c.condition.band_low == 900_000_000_000 and c.total_flops == 1_000_000_000_000


def test_full_fine_tuning_and_missing_label(tmp_path):
    write_reports(tmp_path, [make_report(rank=None, label=None, scores={("easy", "pass@1"): 0.5})])
    (c, _) = sorted(frontier.load_cells(tmp_path), key=lambda c: c.condition.metric, reverse=True)
    assert c.lora_rank == 0 and c.label == "r0-K8-mu1"


def test_model_sizes_are_never_pooled(tmp_path):
    # The small model wants updates, the large one rollouts; pooled, they would tie in the middle.
    reps = [make_report(model_name="tiny-1m", label=f"a{i}", p=p, scores={("easy", "pass@1"): p}) for i, p in enumerate(PS)]
    reps += [make_report(model_name="tiny-4m", label=f"a{i}", p=p, scores={("easy", "pass@1"): 1 - p}) for i, p in enumerate(PS)]
    rows = [r for r in frontier.frontier(frontier.load_cells(write_reports(tmp_path, reps)))
            if r.condition.metric == "pass@1"]
    assert [(r.condition.model, r.best.label, r.cells) for r in rows] == [("tiny-1m", "a2", 3), ("tiny-4m", "a0", 3)]
    (move,) = [m for m in frontier.moves(rows) if m.factor == "model"]
    assert (move.frm, move.to) == ("tiny-1m", "tiny-4m") and move.delta == pytest.approx(0.1 - 0.5)


def test_band_reward_system_and_judge_are_separate_conditions(tmp_path):
    reps = [make_report(band=(1, 2), label="a", scores={("easy", "pass@1"): 0.1}),
            make_report(band=(3, 4), label="a", scores={("easy", "pass@1"): 0.2}),
            make_report(reward="prm", reward_share=0.2, label="a", scores={("easy", "pass@1"): 0.3})]
    judged = make_report(label="a", scores={})
    judged["evaluations"] = [
        {"target": "easy", "metric": "process_judge", "value": v, "n": 250,
         "judge": model(j)} for j, v in (("prm-a", 0.5), ("prm-b", 0.9))]
    reps.append(judged)
    conds = {c.condition for c in frontier.load_cells(write_reports(tmp_path, reps))}
    assert len([c for c in conds if c.metric == "pass@1"]) == 3
    assert {c.judge for c in conds if c.metric == "process_judge"} == {"prm-a", "prm-b"}
    assert {c.band for c in conds} >= {"1-2", "3-4"}


def test_seeds_are_averaged_per_allocation(tmp_path):
    reps = [make_report(label="a1", seed=s, p=0.3 + 0.01 * s, scores={("easy", "pass@1"): v})
            for s, v in enumerate([0.4, 0.6, 0.5])]
    reps.append(make_report(label="a2", p=0.6, scores={("easy", "pass@1"): 0.55}))
    cells = [c for c in frontier.load_cells(write_reports(tmp_path, reps)) if c.condition.metric == "pass@1"]
    a1, a2 = frontier.allocations(cells)
    assert (a1.label, a1.n, a2.n) == ("a1", 3, 1)
    assert a1.score == pytest.approx(0.5) and a1.score_sd == pytest.approx(0.1) and a1.p == pytest.approx(0.31)
    assert frontier.best([a1, a2]) is a2  # the mean decides, not the luckiest seed


@pytest.mark.parametrize("edit, match", [
    (lambda r: r.pop("totals"), "no field 'totals.update_share'"),
    (lambda r: r["evaluations"][0].pop("value"), r"evaluations\[0\]: report has no field 'value'"),
    (lambda r: r["totals"].update(update_share="high"), "must be a finite number"),
])
def test_bad_reports_name_the_file_and_field(tmp_path, edit, match):
    r = make_report(scores={("easy", "pass@1"): 0.5})
    edit(r)
    write_reports(tmp_path, [r])
    with pytest.raises(RaceError, match=match) as e:
        frontier.load(tmp_path)
    assert "report.json" in e.value.message


def test_unreadable_json_is_a_clean_error(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "report.json").write_text('{"schema_version": NaN}')
    with pytest.raises(RaceError, match="not valid JSON"):
        frontier.load(tmp_path)
    assert main(["frontier", str(tmp_path)]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert main(["frontier", str(tmp_path / "missing")]) == 2


def test_frontier_cli_writes_table_and_plots(tmp_path, capsys):
    reps = [make_report(model_name=m, label=f"a{i}", p=p, scores={("easy", "pass@1"): p * k, ("hard", "pass@1"): 1 - p})
            for m, k in (("tiny-1m", 1.0), ("tiny-4m", 0.5)) for i, p in enumerate(PS)]
    write_reports(tmp_path / "runs", reps)
    assert main(["frontier", str(tmp_path / "runs"), "--out", str(tmp_path / "f")]) == 0
    out = capsys.readouterr().out
    assert "| tiny-4m |" in out and "How p* moves" in out
    md = (tmp_path / "f" / "frontier.md").read_text()
    assert md.count("| tiny-1m |") == 3  # easy, hard, native reward
    for stem in ("score_vs_update_share", "score_vs_total_flops"):
        assert (tmp_path / "f" / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert ET.parse(tmp_path / "f" / f"{stem}.svg").getroot().tag.endswith("svg")
    assert main(["frontier", str(tmp_path / "runs"), "--out", str(tmp_path / "g"), "--no-plots", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not list((tmp_path / "g").glob("*.png"))
    best = {(c["condition"]["model"], c["condition"]["target"]): c["best"]["label"] for c in doc["conditions"]}
    assert best[("tiny-1m", "easy")] == "a2" and best[("tiny-1m", "hard")] == "a0"
    # the two targets disagree on the best allocation, and the moves say so
    easy_hard = [m for m in doc["moves"] if m["factor"] == "evaluation" and m["from"] == "easy/pass@1"
                 and m["to"] == "hard/pass@1" and "tiny-1m" in m["held"]]
    assert len(easy_hard) == 1 and not easy_hard[0]["same_allocation"]
    assert easy_hard[0]["delta"] == pytest.approx(0.1 - 0.5)


def test_no_evaluated_cells(tmp_path):
    write_reports(tmp_path, [make_report(scores={}, native=None)])
    assert main(["frontier", str(tmp_path)]) == 2


def test_compute_frontier_is_a_running_maximum_in_flop_order():
    """The one compute-frontier rule of the figures and the site: a point is on the frontier when
    it scores higher than every cheaper point; equal FLOPs put the higher score first."""
    pts = [(3e18, 0.6), (1e17, 0.3), (1e18, 0.2), (1e18, 0.5), (5e18, 0.6)]
    assert frontier.compute_frontier(pts) == [(1, True), (3, True), (2, False), (0, True), (4, False)]
    assert frontier.compute_frontier([]) == []
