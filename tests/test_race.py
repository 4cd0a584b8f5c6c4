"""RACE mechanics on synthetic score surfaces with a known optimum: the fitted regime, the
fallback to the best pilot cell, validation arithmetic (hit rate, regret, baseline), race.json."""

from __future__ import annotations

import json
import math

import jsonschema
import numpy as np
import pytest

from race_helpers import make_report, surface_reports, write_reports
from suite.analysis import fits, frontier, race
from suite import paths
from suite.cli import main
from suite.errors import RaceError
from suite.analysis.frontier import Allocation

GRID = [0.10, 0.18, 0.26, 0.34, 0.42, 0.50, 0.58]  # centre sqrt(0.1 * 0.58) ~ 0.241


def points(ps, scores, *, ranks=None, reward_share=0.0):
    """Allocations a0..an at update shares ps with the given scores."""
    return [Allocation(label=f"a{i}", lora_rank=ranks[i] if ranks else 16, p=float(p), score=float(y),
                       score_sd=0.0, reward_share=reward_share, total_flops=1e12, n=1)
            for i, (p, y) in enumerate(zip(ps, scores))]


def surface(f, ps=GRID, **kw):
    return points(ps, [f(p) for p in ps], **kw)


# ---------------------------------------------------------------- regimes and fallbacks


@pytest.mark.parametrize("peak, side", [(0.38, "high"), (0.17, "low")])
def test_interior_optimum_is_found_and_named(peak, side):
    d = race.diagnose_points(surface(lambda p: 0.7 - 3 * (p - peak) ** 2))
    assert d.fallback is None and not d.edge
    assert d.chosen.model.name == "quadratic"
    assert d.p_hat == pytest.approx(peak, abs=0.005)
    assert d.p_low <= peak <= d.p_high
    # the region brackets the optimum with the pilot cells on either side, and stays in the grid
    assert GRID[0] <= d.p_low < d.p_high <= GRID[-1]
    assert d.regime == f"{side}-update" and d.update_side == side


@pytest.mark.parametrize("sign, side, end", [(+1, "high", -1), (-1, "low", 0)])
def test_optimum_on_the_edge_falls_back_to_best_pilot_cell(sign, side, end):
    d = race.diagnose_points(surface(lambda p: 0.5 + sign * 0.4 * p))
    assert d.chosen.model.name == "linear"  # exactly linear: the simpler of the tied exact fits
    assert d.edge and d.fallback == "edge"
    assert d.best.p == GRID[end] and d.p_hat == pytest.approx(GRID[end])
    assert d.regime == f"{side}-update"
    assert d.p_low == d.p_high == GRID[end]
    assert ("upward" if sign > 0 else "downward") in d.detail


def test_log_linear_surface_picks_log_model():
    d = race.diagnose_points(surface(lambda p: 0.2 + 0.1 * math.log(p)))
    assert d.chosen.model.name == "log-linear"
    assert d.chosen.loo_rmse < 1e-9 < min(f.loo_rmse for f in d.fits if f.model.name == "linear")


def test_flat_surface_falls_back():
    d = race.diagnose_points(surface(lambda p: 0.42))
    assert d.chosen.model.name == "constant" and d.fallback == "flat" and d.p_hat is None
    # all tied: the best pilot cell is the cheapest in update compute
    assert d.best.p == GRID[0] and d.regime == "low-update"


def test_small_noise_keeps_the_interior_optimum():
    rng = np.random.default_rng(7)
    for _ in range(20):
        d = race.diagnose_points(surface(lambda p: 0.7 - 3 * (p - 0.38) ** 2 + rng.normal(0, 0.003)))
        assert d.fallback is None and abs(d.p_hat - 0.38) < 0.05 and d.regime == "high-update"


def test_pure_noise_mostly_falls_back():
    """A surface with no signal must rarely produce a confident interior optimum."""
    rng = np.random.default_rng(11)
    fits_used = sum(race.diagnose_points(surface(lambda p: rng.normal(0, 1))).fallback is None
                    for _ in range(200))
    assert fits_used / 200 < 0.15


def test_too_few_points_and_no_variation():
    d = race.diagnose_points(points([0.2, 0.4], [0.5, 0.6]))
    assert d.fallback == "too-few-points" and d.chosen is None and d.best.label == "a1"
    assert "at least 3" in d.detail
    d = race.diagnose_points(points([0.3, 0.3, 0.3], [0.5, 0.7, 0.6]))
    assert d.fallback == "no-variation" and d.best.label == "a1"


def test_ill_conditioned_fit_falls_back(monkeypatch):
    # The standardised quadratic design of this grid has condition number > 1.5: with the bar
    # lowered below it, the same interior surface must be refused as ill-conditioned.
    monkeypatch.setattr(race, "MAX_CONDITION", 1.5)
    d = race.diagnose_points(surface(lambda p: 0.7 - 3 * (p - 0.38) ** 2))
    assert d.fallback == "ill-conditioned" and d.chosen.cond > 1.5


def test_feedback_heavy_threshold():
    pts = surface(lambda p: 0.7 - 3 * (p - 0.38) ** 2, reward_share=0.2)
    assert race.diagnose_points(pts).regime == "feedback-heavy"
    d = race.diagnose_points(pts, feedback_threshold=0.25)
    assert d.regime == "high-update" and d.update_side == "high"


def test_loo_error_is_exact():
    """The hat-matrix shortcut equals refitting without each point."""
    rng = np.random.default_rng(3)
    p = np.array(GRID)
    y = 0.5 + p - p ** 2 + rng.normal(0, 0.01, len(p))
    for m in fits.MODELS.values():
        f = fits.fit(m, p, y)
        errs = []
        for i in range(len(p)):
            keep = np.arange(len(p)) != i
            g = fits.fit(m, p[keep], y[keep])
            errs.append(y[i] - g.predict(p[i:i + 1])[0])
        assert f.loo_rmse == pytest.approx(math.sqrt(np.mean(np.square(errs))), rel=1e-6)


# ---------------------------------------------------------------- validation arithmetic


def test_in_grid_hit_rate_and_regret_arithmetic():
    # Scores 0,1,2,3 on a doubling grid: exactly log-linear and rising. Leaving out the top cell
    # leaves a fit that peaks at 0.4 (edge) -> RACE validates 0.4, losing 3 - 2 = 1; leaving out any
    # other cell keeps the top cell as best pilot -> loss 0. Every trial names high-update.
    ps = [0.1, 0.2, 0.4, 0.8]
    pts = points(ps, [math.log2(p / 0.1) for p in ps])
    # The baseline recipe is a0 (lowest p) everywhere: its loss is 3 in every trial.
    base = race.Baseline(label="a0", p=0.1, native_reward=1.0, runs=1)
    trials = race.in_grid_trials(0, pts, race.FEEDBACK_THRESHOLD, base)
    assert [t.held_out for t in trials] == ["a0", "a1", "a2", "a3"]
    assert [t.regret for t in trials] == pytest.approx([0, 0, 0, 1])
    assert all(t.hit and t.predicted == t.truth == "high-update" for t in trials)
    s = race.summarize(trials)
    assert s["trials"] == 4 and s["hits"] == 4 and s["hit_rate"] == 1.0
    assert s["mean_regret"] == pytest.approx(0.25) and s["max_regret"] == pytest.approx(1.0)
    assert s["baseline"] == {"trials": 4, "mean_regret": pytest.approx(3.0), "race_better": 4,
                             "ties": 0, "baseline_better": 0}


def test_summary_counts_misses_and_ties():
    t = [race.Trial(0, "a", "high-update", "high-update", True, "x", 0.0, 0.0),
         race.Trial(0, "b", "low-update", "high-update", False, "x", 0.3, 0.1),
         race.Trial(1, "c", "low-update", "low-update", True, "x", 0.1, 0.5)]
    s = race.summarize(t)
    assert s["hits"] == 2 and s["hit_rate"] == pytest.approx(2 / 3)
    assert s["mean_regret"] == pytest.approx(0.4 / 3) and s["max_regret"] == pytest.approx(0.3)
    assert s["baseline"]["race_better"] == 1 and s["baseline"]["ties"] == 1 and s["baseline"]["baseline_better"] == 1
    assert race.summarize([])["hit_rate"] is None


def test_held_out_rank_predicts_that_ranks_regime():
    # Ranks interleave on a rising surface (score = p).
    ps = [0.10, 0.15, 0.22, 0.30, 0.41, 0.60]
    pts = points(ps, ps, ranks=[8, 32, 8, 32, 8, 32])
    trials = race.rank_trials(0, pts, race.FEEDBACK_THRESHOLD, None)
    assert [t.held_out for t in trials] == ["rank=8", "rank=32"]
    assert all(t.hit and t.predicted == t.truth == "high-update" for t in trials)
    # rank 8 held out: the fit on rank 32 peaks at 0.60; the nearest rank-8 cell is 0.41, that
    # rank's best: loss 0. rank 32 held out: the fit on rank 8 peaks at 0.41; in log p, 0.30 is
    # nearer (0.31) than 0.60 (0.38), so RACE validates 0.30 and loses 0.60 - 0.30.
    assert [t.regret for t in trials] == pytest.approx([0.0, 0.30])
    assert [t.chosen for t in trials] == ["a4", "a3"]
    assert all(t.baseline_regret is None for t in trials)


def test_only_fittable_conditions_are_validated(tmp_path):
    reps = [make_report(label=f"a{i}", p=p, scores={("easy", "pass@1"): p}, native=None)
            for i, p in enumerate([0.1, 0.2, 0.3, 0.4])]
    reps += [make_report(model_name="tiny-4m", label=f"a{i}", p=p, scores={("easy", "pass@1"): p}, native=None)
             for i, p in enumerate([0.1, 0.2])]
    doc = race.diagnose(frontier.load_cells(write_reports(tmp_path, reps)))
    small, big = doc["conditions"]
    assert small["validation"]["in_grid"]["trials"] == 4 and big["validation"]["in_grid"]["trials"] == 0
    assert big["fallback"]["reason"] == "too-few-points"
    assert doc["validation"]["in_grid"]["trials"] == 4 and doc["baseline"] is None


def test_baseline_pools_native_reward_per_run_across_conditions(tmp_path):
    # two models, two evaluations per run: each run must count once; a2 has the best pooled native reward
    reps = []
    for m in ("tiny-1m", "tiny-4m"):
        for i, p in enumerate([0.1, 0.3, 0.5]):
            reps.append(make_report(model_name=m, label=f"a{i}", p=p, native=[0.2, 0.3, 0.9][i] if m == "tiny-1m"
                                    else [0.5, 0.4, 0.3][i],
                                    scores={("easy", "pass@1"): p, ("hard", "pass@1"): 1 - p}))
    cells = frontier.load_cells(write_reports(tmp_path, reps))
    b = race.baseline(cells)
    assert b.label == "a2" and b.runs == 2 and b.native_reward == pytest.approx(0.6)
    assert b.p == pytest.approx(0.5)


# ---------------------------------------------------------------- the directory level and race.json


def _grid(tmp_path, **kw):
    reps = surface_reports(lambda p: 0.7 - 3 * (p - 0.38) ** 2, GRID, seeds=(0, 1), ranks=[8, 32],
                           native=lambda p: p, **kw)
    reps += surface_reports(lambda p: 0.3 + p, GRID, model_name="tiny-4m", reward="prm", reward_share=0.2,
                            native=lambda p: 1 - p)
    return write_reports(tmp_path, reps)


def test_diagnose_directory_writes_valid_race_json(tmp_path):
    cells = frontier.load_cells(_grid(tmp_path))
    doc = race.diagnose(cells)
    written = race.write(doc, tmp_path / "out")
    on_disk = json.loads(written["json"].read_text())
    schema = json.loads((paths.schemas() / "race-v1.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(on_disk)
    by_model = {(c["condition"]["model"], c["condition"]["metric"]): c for c in on_disk["conditions"]}
    small = by_model[("tiny-1m", "pass@1")]
    assert small["regime"] == "high-update" and small["recommendation"]["source"] == "fit"
    assert small["p_hat"] == pytest.approx(0.38, abs=0.005)
    assert small["cells"] == 14 and len(small["points"]) == 7  # two seeds averaged per allocation
    big = by_model[("tiny-4m", "pass@1")]
    assert big["regime"] == "feedback-heavy" and big["fallback"] == {"used": True, "reason": "edge"}
    assert on_disk["validation"]["held_out_rank"]["trials"] > 0
    text = written["summary"].read_text()
    assert "not an optimizer" in text and "no guaranteed held-out gain" in text
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no temp files left


def test_schema_refuses_a_broken_document(tmp_path):
    doc = race.diagnose(frontier.load_cells(_grid(tmp_path)))
    doc["conditions"][0]["regime"] = "medium-update"
    with pytest.raises(RaceError, match="regime"):
        race.write(doc, tmp_path / "out")
    assert not (tmp_path / "out" / "race.json").exists()


def test_too_few_cells_says_how_many_are_needed(tmp_path, capsys):
    reps = [make_report(label=f"a{i}", p=p, scores={("easy", "pass@1"): p}) for i, p in enumerate([0.2, 0.4])]
    reps.append(make_report(model_name="tiny-4m", label="a9", p=0.6, scores={("easy", "pass@1"): 0.1}))
    write_reports(tmp_path, reps)
    with pytest.raises(RaceError, match="at least 3"):
        race.diagnose(frontier.load_cells(tmp_path))
    assert main(["diagnose", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "at most 2 distinct allocation(s)" in err and "Traceback" not in err


def test_diagnose_cli(tmp_path, capsys):
    _grid(tmp_path)
    assert main(["diagnose", str(tmp_path), "--out", str(tmp_path / "r"), "--feedback-threshold", "0.5"]) == 0
    doc = json.loads((tmp_path / "r" / "race.json").read_text())
    assert doc["settings"]["feedback_threshold"] == 0.5
    assert "feedback-heavy" not in {c["regime"] for c in doc["conditions"]}
    assert doc["source"]["reports"] == 21 and doc["source"]["cells"] == 42  # 7x2 + 7 runs, 2 evaluations each
    assert "RACE diagnosis" in capsys.readouterr().out
    assert main(["diagnose", str(tmp_path), "--feedback-threshold", "2"]) == 2
