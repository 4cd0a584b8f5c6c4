"""Compute-performance curves (suite.analysis.curves, `race curves`) on runs made in memory and on
run folders written here as suite.evaluate.curve writes them: the fit recovers a known curve,
short and flat curves are refused by name, the pilot curves' prediction stands beside RACE's on
a held-out budget (suite.analysis.holdout), and the points along a run are stamped from its ledger.
No training: the scores are chosen; tests/test_evaluate_e2e.py scores a real run's snapshots."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from suite.analysis import curves, findings
from suite.analysis.evidence import CurveScores, Run, load_runs
from suite.cli import main
from suite.errors import RaceError
from suite.paths import schemas

N = 1000          # problems: a mean is exact to 1e-3
TARGET = "arith-easy-250"
R0 = 0.3


def _scores(mean: float, seed: int, n: int = N) -> np.ndarray:
    """n per-problem 0/1 scores with exactly round(mean * n) ones, shuffled by seed."""
    k = int(round(mean * n))
    x = np.array([1.0] * k + [0.0] * (n - k))
    np.random.default_rng(seed).shuffle(x)
    return x


def truth(c, a, b, c_mid, r0=R0):
    return r0 + (a - r0) / (1 + (c_mid / c) ** b)


def curve_run(label: str, seed: int, a: float, b: float, c_mid: float, *, steps=range(10, 110, 10),
              per_step: float = 1e10, budget: int = 10**12, flat: bool = False, base: bool = True,
              lora_rank: int = 8, p: float = 0.8) -> Run:
    """A run whose snapshots (and end, the last step) score exactly the curve (a, b, c_mid) at
    their cumulative FLOPs; `flat`: R0 everywhere."""
    steps = list(steps)
    ids = tuple(range(N))
    at = (lambda c: R0) if flat else (lambda c: truth(c, a, b, c_mid))
    pts = [CurveScores(0, 0, {(TARGET, "pass@1"): _scores(R0, 7)}, {TARGET: ids})] if base else []
    pts += [CurveScores(s, int(s * per_step), {(TARGET, "pass@1"): _scores(at(s * per_step), 100 * seed + s)},
                        {TARGET: ids}) for s in steps[:-1]]
    end = steps[-1] * per_step
    return Run(path=f"{label}-{budget:.0e}-s{seed}", model="policy-m", params=1_000_000, band=(budget * 3 // 4, budget),
               reward="sparse", reward_kind="rule", label=label, lora_rank=lora_rank, group_size=4, num_iterations=1, seed=seed,
               p=p, reward_share=0.0, steps=steps[-1], completions=32 * steps[-1], flops=int(end), judge="",
               scores={(TARGET, "pass@1"): _scores(at(end), 100 * seed + 999)}, values={}, ids={TARGET: ids},
               curve=tuple(pts))


def doc_of(runs, **kw) -> dict:
    return curves.curves_of(runs, replicates=kw.pop("replicates", 100), **kw)


def test_the_fit_recovers_a_known_curve_and_extrapolates_it_with_an_interval():
    runs = [curve_run("u1", s, a=0.7, b=1.5, c_mid=3e11) for s in (0, 1, 2)]
    (cond,) = doc_of(runs, budget=4e12)["conditions"]
    (a,) = cond["allocations"]
    assert a["status"] == "fitted" and a["reason"] is None and a["seeds"] == 3
    assert a["A"]["value"] == pytest.approx(0.7, abs=0.02) and a["B"]["value"] == pytest.approx(1.5, rel=0.1)
    assert a["C_mid"]["value"] == pytest.approx(3e11, rel=0.1)
    assert a["r0"]["value"] == pytest.approx(R0, abs=1e-3)       # fixed from step 0
    for k in ("A", "B", "C_mid", "at_budget"):
        assert a[k]["low"] <= a[k]["value"] <= a[k]["high"], k
    assert a["A"]["low"] <= 0.7 <= a["A"]["high"]
    want = truth(4e12, 0.7, 1.5, 3e11)
    assert a["at_budget"]["value"] == pytest.approx(want, abs=0.02) and a["at_budget"]["low"] <= want <= a["at_budget"]["high"]
    assert len(a["points"]) == 3 * 10 and a["steps"] == list(range(10, 110, 10))
    band = a["band"]
    assert band["flops"][-1] == pytest.approx(4e12) and all(lo <= v <= hi for lo, v, hi in
                                                            zip(band["low"], band["value"], band["high"]))


def test_flat_short_and_unbent_curves_are_refused_by_name():
    runs = ([curve_run("flat", s, 0.7, 1.5, 3e11, flat=True) for s in (0, 1)]
            + [curve_run("short", s, 0.7, 1.5, 3e11, steps=(10, 20, 30)) for s in (0, 1)]
            + [curve_run("unbent", s, 1.0, 3.0, 2e12) for s in (0, 1)]        # the lower tail only: no bend yet
            + [curve_run("good", s, 0.7, 1.5, 3e11) for s in (0, 1)])
    doc = doc_of(runs)
    by = {a["label"]: a for a in doc["conditions"][0]["allocations"]}
    assert by["good"]["status"] == "fitted"
    assert "too flat to fit" in by["flat"]["reason"] and "includes 0" in by["flat"]["reason"]
    assert "too short to fit: 3 scored point(s) after step 0" in by["short"]["reason"]
    assert "too short" in by["unbent"]["reason"] and "A is not identified" in by["unbent"]["reason"]
    for label in ("flat", "short", "unbent"):
        assert by[label]["A"] is None and by[label]["status"] == "refused"
    lines = curves.refusals(doc)
    assert len(lines) == 3 and all(" · " in x and "\n" not in x for x in lines)
    lead = doc["conditions"][0]["highest_asymptote"]
    assert lead == {"label": "good", "prob": 1.0, "of": 1}


def test_which_allocation_has_the_highest_asymptote_and_the_best_efficiency():
    runs = [curve_run("high", s, 0.8, 1.2, 3e11) for s in (0, 1)] + [curve_run("fast", s, 0.6, 4.0, 2e11) for s in (0, 1)]
    doc = doc_of(runs)
    cond = doc["conditions"][0]
    assert cond["highest_asymptote"]["label"] == "high" and cond["highest_asymptote"]["prob"] >= 0.95
    assert cond["best_efficiency"]["label"] == "fast" and cond["best_efficiency"]["of"] == 2
    curves.check(doc)
    # The one output check (suite.record.schemas.check_output) refuses a broken document by its path.
    cond["name"] = 2
    with pytest.raises(RaceError, match=r"curves\.json would not follow curves-v1\.schema\.json: "
                                        r"at \$\.conditions\[0\]\.name: 2 is not of type 'string'") as e:
        curves.check(doc)
    assert "bug in the curve fits" in e.value.hint


def test_the_same_runs_give_the_same_document():
    runs = [curve_run("u1", s, 0.7, 1.5, 3e11) for s in (0, 1)] + [curve_run("u2", s, 0.6, 2.0, 2e11) for s in (0, 1)]
    assert curves.to_json(doc_of(runs, budget=2e12, replicates=40)) == \
        curves.to_json(doc_of(list(reversed(runs)), budget=2e12, replicates=40))


def test_the_pilot_curves_predict_the_held_out_winner_beside_race():
    """u2 rises later but higher: behind at the pilot budget, best at 4x. RACE (a fit over p at
    the pilot budget) cannot know; the pilot curves, extrapolated to the validation compute, can."""
    shapes = {"u1": (0.45, 2.0, 1e11, 0.77), "u2": (0.75, 2.0, 6e11, 0.89), "u4": (0.66, 3.0, 2e11, 0.94)}
    runs = []
    for label, (a, b, c_mid, p) in shapes.items():
        runs += [curve_run(label, s, a, b, c_mid, p=p) for s in (0, 1, 2)]
        runs += [curve_run(label, s, a, b, c_mid, p=p, budget=4 * 10**12, steps=range(40, 440, 40))
                 for s in (0, 1, 2)]
    an = findings.with_holdout(findings.analyse(runs, findings.Settings(replicates=120, race_replicates=40)))
    h = an.holdout
    (t,) = h["trials"]
    assert t["best"] == "u2" and t["chosen"] != "u2"            # RACE calls the pilot's winner
    cv = t["curves"]
    assert cv["chosen"] == "u2" and cv["hit"] and cv["regret"]["value"] == 0.0
    assert cv["predicted"]["value"] == pytest.approx(truth(4e12, 0.75, 2.0, 6e11), abs=0.05)
    assert sorted(cv["fitted"]) == ["u1", "u2", "u4"] and cv["at_pilot_score"] == []
    pr = h["summary"]["predictors"]
    assert pr["curves"]["pick_hit_rate"]["value"] == 1.0 and pr["race"]["pick_hit_rate"]["value"] == 0.0
    assert pr["race"]["mean_regret"]["value"] > 0.05
    doc = findings.findings(an)
    findings.check(doc)
    f = next(c for c in doc["claims"] if c["id"] == "f")
    assert "the pilot curves extrapolated to the validation compute pick its best allocation" in f["summary"]
    from suite.site import findings as page

    md = page.markdown(doc)
    assert "| pilot curves extrapolated (ScaleRL's form) | 1.000 [" in md and "u2 (predicted" in md


def test_without_curves_the_findings_say_so():
    runs = [Run(**{**curve_run(lb, s, 0.6, 2.0, 2e11, budget=bud).__dict__, "curve": ()})
            for lb in ("u1", "u2", "u4") for s in (0, 1) for bud in (10**12, 4 * 10**12)]
    doc = findings.findings(findings.analyse(runs, findings.Settings(replicates=60, race_replicates=20)))
    assert doc["race_holdout"]["trials"][0]["curves"] is None
    assert doc["race_holdout"]["summary"]["predictors"]["curves"] is None
    from suite.site import findings as page

    assert "these runs were scored at their end only" in page.markdown(doc)


# ---------------------------------------------------------------- on disk, as race eval --curve writes it

EXAMPLE = schemas() / "examples" / "valid" / "paper-qwen1.5b-lora64-sparse-curve.json"


def _write(folder, label: str, seed: int, means: list[float], n: int = 400):
    """A run folder: the example report scored along the run (curve points at the example's steps,
    the end after them), with per-sample logs where suite.evaluate.curve and .harness put them."""
    from suite.evaluate.curve import point_dir

    doc = json.loads(EXAMPLE.read_text())
    doc["run"].update(label=label, seed=seed)
    folder.mkdir(parents=True)
    pts = doc["curve"]["points"]
    logs = [point_dir(folder, p["step"]) for p in pts] + [folder / "eval"]
    for i, (where, m) in enumerate(zip(logs, means)):
        x = _scores(m, 31 * seed + i, n)
        where.mkdir(parents=True, exist_ok=True)
        (where / f"{TARGET}.samples.jsonl").write_text(
            "".join(json.dumps({"doc_id": j, "doc": {"q": "..."}, "race": {"pass@1": v}}) + "\n" for j, v in enumerate(x)))
        row = {"target": f"{TARGET}:first-{n}", "metric": "pass@1", "value": float(x.mean()), "n": n}
        if i < len(pts):
            pts[i]["evaluations"] = [row]
        else:
            doc["evaluations"] = [row]
    (folder / "report.json").write_text(json.dumps(doc))


def test_race_curves_reads_the_points_from_disk_and_refuses_the_flat_ones_in_one_line(tmp_path, capsys):
    for seed in (0, 1, 2):
        _write(tmp_path / "study" / f"rise-s{seed}", "rise", seed, [0.2, 0.45, 0.6, 0.64, 0.65])
        _write(tmp_path / "study" / f"flat-s{seed}", "flat", seed, [0.4, 0.4, 0.4, 0.4, 0.4])
    runs = load_runs(tmp_path / "study")
    rise = next(r for r in runs if r.label == "rise")
    assert [p.step for p in rise.curve] == [0, 10, 20, 30] and rise.curve[1].flops > 0
    assert rise.curve[2].scores[TARGET, "pass@1"].mean() == pytest.approx(0.6)
    assert main(["curves", str(tmp_path / "study"), "--replicates", "100", "--budget", "1e17", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "rise " in out and "flat         refused: too flat to fit" in out and "1 curve(s) fitted, 1 refused" in out
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (tmp_path / "curves.svg").is_file()
    doc = json.loads((tmp_path / "curves.json").read_text())
    rise = next(a for a in doc["conditions"][0]["allocations"] if a["label"] == "rise")
    assert rise["band"]["flops"][-1] == pytest.approx(1e17) and rise["at_budget"]["low"] <= rise["at_budget"]["high"]
    curves.check(doc)
    assert doc["conditions"][0]["problems"] == 400 and doc["source"]["runs"] == 6

    for seed in (0, 1, 2):
        shutil.rmtree(tmp_path / "study" / f"rise-s{seed}")
    assert main(["curves", str(tmp_path / "study"), "--no-plots"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("race curves: error: no curve could be fitted:") and "flat: too flat to fit" in err[0]
    assert len(err) == 2 and "Traceback" not in "".join(err)


def test_runs_without_points_along_the_way_are_refused_in_one_line(tmp_path, capsys):
    folder = tmp_path / "a"
    _write(folder, "rise", 0, [0.2, 0.45, 0.6, 0.64, 0.65])
    doc = json.loads((folder / "report.json").read_text())
    del doc["curve"]
    (folder / "report.json").write_text(json.dumps(doc))
    assert main(["curves", str(tmp_path), "--no-plots"]) == 2
    assert "no report has `curve` points" in capsys.readouterr().err
    with pytest.raises(RaceError, match="unknown metric"):
        from argparse import Namespace

        from suite.cli.commands.curves import run

        run(Namespace(runs=[str(tmp_path)], budget=None, out=None, metric=["pass@2"], replicates=10, seed=0,
                      no_plots=True))


# ---------------------------------------------------------------- the points are stamped from the ledger


def test_points_are_stamped_with_the_ledgers_cumulative_flops():
    from suite.evaluate.curve import cumulative_flops
    from suite.record.ledger import read_ledger

    ledger = EXAMPLE.parent / json.loads(EXAMPLE.read_text())["ledger"]["path"]
    recs = read_ledger(ledger).records
    got = cumulative_flops(ledger, [0, 10, 25])
    assert got[0] == {"rollout": 0, "update": 0, "reward": 0, "total": 0}
    for step in (10, 25):
        want = {k: sum(r["flops"][k] for r in recs if r["step"] <= step) for k in ("rollout", "update", "reward")}
        assert got[step] == {**want, "total": sum(want.values())}
    with pytest.raises(RaceError, match="ends before step 41"):
        cumulative_flops(ledger, [41])


def test_a_grid_key_keeps_snapshots_in_every_cell_and_typos_are_one_line(tmp_path, capsys):
    import yaml

    from suite.analysis import grid

    d = yaml.safe_load((schemas().parent / "tasks" / "grids" / "quickstart.yaml").read_text())
    d.setdefault("eval", {})["curve"] = {"every": 5, "limit": 20}
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(d))
    g = grid.load(path)
    assert g.evaluation.curve == grid.CurvePlan(every=5, limit=20)
    cells = grid.expand(g, check_paths=False)
    assert {c.spec.engine["snapshot_every"] for c in cells} == {5}
    assert g.evaluation.curve_problems() == 20 * len(g.evaluation.targets)
    d["eval"]["curve"] = {"evry": 5}
    path.write_text(yaml.safe_dump(d))
    assert main(["grid", str(path), "--plan"]) == 2
    err = capsys.readouterr().err
    assert "unknown eval.curve key 'evry'" in err and "every" in err and "Traceback" not in err


def test_a_scored_run_whose_snapshots_are_gone_stays_done(tmp_path):
    """An exported study keeps reports, not snapshots: resuming a study over it (race study --out on
    a copy of docs/decisive) must not rescore its cells, nor count one with a missing point done."""
    from suite.evaluate.curve import curve_done
    from suite.paths import home

    from suite.analysis.evidence import PACKED, unpack

    name = "cells/policy-m-4e12-sparse-mu1-r8-s0"
    unpack(home() / "docs" / "decisive" / PACKED, tmp_path, only=name.__eq__)      # as race study --from does
    cell = tmp_path / name
    assert not (cell / "snapshots").exists()
    assert curve_done(cell, ["arith-easy-2000"], 200)
    assert not curve_done(cell, ["arith-easy-2000"], 100)          # scored on another subset
    doc = json.loads((cell / "report.json").read_text())
    assert [p["step"] for p in doc["curve"]["points"]] == [0, 25, 50, 75, 100, 125, 150]   # 155 steps, every 25
    doc["curve"]["points"] = [p for p in doc["curve"]["points"] if p["step"] != 75]
    (cell / "report.json").write_text(json.dumps(doc))
    assert not curve_done(cell, ["arith-easy-2000"], 200)
