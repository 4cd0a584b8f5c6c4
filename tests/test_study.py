"""Studies: the shipped study file meets the issue's design rules (planned, not run); bad study files
are refused in one line; cost calibration; the committed findings regenerate from their reports; and
(slow) the CI-sized study end to end — killed and resumed, intervals, RACE held out, the findings."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml

from suite.analysis import study
from suite.cli import main
from suite.errors import RaceError
from suite.paths import home, tasks

PAPER = tasks() / "studies" / "paper.yaml"
CI = tasks() / "studies" / "ci.yaml"
#: Folders holding committed study evidence whose findings must regenerate byte for byte: the CI
#: study's export (a fixture), the full study's (docs/findings), the decisive one's and (f)'s.
COMMITTED = [Path(__file__).parent / "fixtures" / "findings-ci", home() / "docs" / "findings",
             home() / "docs" / "decisive", home() / "docs" / "f-can-fail"]


@pytest.fixture(scope="module")
def paper():
    return study.plan(study.load(PAPER))


def test_the_shipped_study_spans_the_four_axes_with_seeds_and_a_held_out_budget(paper):
    s, cells = paper.study, paper.cells
    assert len(cells) == len({pc.cell.id for pc in cells})
    assert {pc.cell.model for pc in cells} >= {"policy-s", "policy-m"}                     # model size
    assert {pc.cell.spec.reward.system for pc in cells} >= {"sparse", "prm", "dense"}      # feedback
    assert {pc.cell.spec.num_iterations for pc in cells} >= {1, 2, 4, 8}                   # learning
    assert {pc.cell.spec.lora_rank for pc in cells} >= {8, 32}
    at_pilot = [pc for pc in cells if pc.cell.budget == s.pilot]
    ks = {pc.cell.spec.group_size for pc in at_pilot}
    assert {2, 8} <= ks                                                                     # search, equal budget
    # at least 3 seeds per allocation
    seeds = Counter((pc.cell.model, pc.cell.budget, pc.cell.reward, pc.cell.allocation) for pc in cells)
    assert min(seeds.values()) >= 3
    # two budgets, the validation one >= 4x the pilot's, and RACE's conditions exist at both
    assert s.validation >= 4 * s.pilot and {pc.cell.budget for pc in cells} == {s.pilot, s.validation}
    held = {(pc.cell.model, pc.cell.reward, pc.cell.allocation) for pc in cells if pc.cell.budget == s.validation}
    assert held and held <= {(pc.cell.model, pc.cell.reward, pc.cell.allocation) for pc in at_pilot}
    # the larger policy buys >= 20 optimizer steps in every cell (the plan's expected steps)
    from suite.accounting.specs import spec_for

    params = {pc.cell.model: spec_for(pc.cell.spec.policy).params_total for pc in cells}
    largest = max(params, key=params.get)
    assert min(pc.steps for pc in cells if pc.cell.model == largest) >= 20
    # every evaluation scores all 250 problems of both targets
    assert paper.evaluation.limit is None and set(paper.evaluation.targets) == {"arith-easy-250", "arith-hard-250"}
    # every claim is answered by some block
    assert all(study.claim_cells(paper).values())


def test_the_ci_study_plans_and_answers_every_claim():
    sp = study.plan(study.load(CI))
    assert all(study.claim_cells(sp).values())
    assert sp.evaluation.limit is not None and len(sp.cells) <= 24


def _write(tmp_path, d) -> Path:
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(d, sort_keys=False))
    return f


def _ci_dict():
    return yaml.safe_load(CI.read_text())


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(colour="red"), "unknown key 'colour'"),
    (lambda d: d["blocks"]["pilot"].update(modles=["policy-s"]), "unknown block key 'modles'"),
    (lambda d: d["blocks"]["pilot"].update(claims=["z"]), "unknown claim 'z'"),
    (lambda d: d["blocks"]["pilot"].update(models=["policy-x"]), "model 'policy-x' is not declared"),
    (lambda d: (d["race"].update(validation=1.2e10), d["blocks"]["holdout"].update(budgets=[1.2e10])),
     "less than 4x the pilot budget"),
    (lambda d: d["race"].update(pilot=7e9), "race.pilot 7e9 is not a budget of any block"),
    (lambda d: d["blocks"]["pilot"].pop("budgets"), "`budgets` is required"),
    (lambda d: d.update(analysis={"replicas": 3}), "unknown analysis key 'replicas'"),
    (lambda d: d.update(analysis={"replicates": 0}), "analysis.replicates must be a positive integer"),
    (lambda d: d.update(analysis={"level": 95}), "analysis.level must be a fraction in (0, 1)"),
])
def test_bad_study_files_are_refused_in_one_line(tmp_path, capsys, change, message):
    d = _ci_dict()
    change(d)
    assert main(["study", str(_write(tmp_path, d)), "--plan"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[0] and len(err) <= 2 and "Traceback" not in "".join(err)


def test_a_study_extends_another_and_replaces_the_keys_it_names(tmp_path, capsys):
    """tasks/studies/paper-curves.yaml is the committed study scored along the run: paper.yaml's
    blocks and cells, its eval replaced (one curve plan for every cell); a loop is one line."""
    base, again = study.load(PAPER), study.load(tasks() / "studies" / "paper-curves.yaml")
    assert again.name == "paper-curves" and [b.name for b in again.blocks] == [b.name for b in base.blocks]
    for b, c in zip(base.blocks, again.blocks):
        assert c.grid.evaluation.targets == b.grid.evaluation.targets and b.grid.evaluation.curve is None
        assert c.grid.evaluation.curve.every == 5 and (c.grid.allocations, c.grid.seeds) == (b.grid.allocations, b.grid.seeds)
    (tmp_path / "a.yaml").write_text("extends: b.yaml\nname: a\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    assert main(["study", str(tmp_path / "a.yaml"), "--plan"]) == 2
    assert "leads back to itself" in capsys.readouterr().err


def test_timing_records_each_stage_and_nothing_for_one_that_fails(tmp_path):
    from suite.record.timing import read_timing, timed

    with timed(tmp_path, "train", 1, resumed=True):
        pass
    with pytest.raises(ZeroDivisionError), timed(tmp_path, "eval", 1):
        1 / 0
    t = read_timing(tmp_path)
    assert t["train_seconds"] >= 0 and t["train_resumed"] is True and t["threads"] == 1
    assert "eval_seconds" not in t and "train_load_average" in t
    with timed(tmp_path, "eval", 1):
        pass
    assert {"train_seconds", "eval_seconds"} <= set(read_timing(tmp_path))     # stages add up in one file


def test_ray_options_need_the_ray_executor(capsys):
    assert main(["study", str(CI), "--out", "x", "--address", "auto"]) == 2
    assert "options of the ray executor" in capsys.readouterr().err


def test_a_cell_two_blocks_share_runs_once(tmp_path):
    d = _ci_dict()
    d["blocks"]["again"] = {"budgets": [6.0e9], "models": ["policy-s"], "rewards": ["sparse"],
                            "allocations": ["mu1-r4"], "seeds": [0, 5]}
    sp = study.plan(study.load(_write(tmp_path, d)))
    assert len(sp.cells) == 21 + 1                                   # seed 0 is the pilot block's cell
    assert sp.blocks["again"] == ("policy-s-6e9-sparse-mu1-r4-s0", "policy-s-6e9-sparse-mu1-r4-s5")


def test_calibration_prices_cells_from_measured_phase_rates(tmp_path, paper):
    cell = tmp_path / "cells" / "m"
    cell.mkdir(parents=True)
    rep = {"policy": {"name": "policy-m"}, "reward": {"system": "sparse"},
           "totals": {"flops": {"rollout": 1e11, "update": 3e11, "reward": 0},
                      "seconds": {"rollout": 10.0, "update": 15.0, "reward": 1.0},
                      "work": {"count.completions": 1000}}}
    (cell / "report.json").write_text(json.dumps(rep))
    (cell / "timing.json").write_text(json.dumps({"train_seconds": 30.0, "eval_seconds": 20.0,
                                                   "train_load_average": [1.0, 1.0, 1.0]}))
    rates = study.calibrate(tmp_path)
    assert rates.phase["policy-m", "rollout"] == pytest.approx(1e-10)
    assert rates.reward["policy-m", "sparse"] == ("completions", pytest.approx(1e-3))
    assert rates.overhead["policy-m"] == pytest.approx(4.0)
    pc = next(pc for pc in paper.cells if pc.cell.model == "policy-m" and pc.cell.reward == "sparse")
    gens = pc.cell.budget / sum(pc.step_flops.values())
    want = (1e-10 * pc.step_flops["rollout"] + 5e-11 * pc.step_flops["update"]) * gens \
        + 1e-3 * pc.cell.spec.generation_batch * gens + 4.0 + 20.0
    assert study.estimate(pc, rates) == pytest.approx(want)
    assert study.estimate(next(pc for pc in paper.cells if pc.cell.model == "policy-s"), rates) is None
    text = study.plan_text(paper, rates)
    assert "estimated wall time" in text and "not priced" in text
    total = float(re.search(r"estimated wall time: \d+ s = ([0-9.]+) h with one worker \(", text).group(1))
    halved = float(re.search(r"with one worker, about ([0-9.]+) h on 2 \(", study.plan_text(paper, rates, 2)).group(1))
    assert halved == pytest.approx(total / 2, abs=0.01)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RaceError, match="no measured cells"):
        study.calibrate(tmp_path / "empty")


def test_calibration_prices_evaluation_per_problem_and_the_points_along_the_run(tmp_path, paper):
    """A plan that scores other problems than the measured cells (a larger set, points along the
    run) is priced per problem scored: the end at its rate, each curve point at the curve stage's."""
    from dataclasses import replace

    from suite.analysis.grid import CurvePlan

    cell = tmp_path / "cells" / "m"
    cell.mkdir(parents=True)
    rows = [{"target": t, "metric": "pass@1", "value": 0.4, "n": 250} for t in ("arith-easy-250", "arith-hard-250")]
    rep = {"policy": {"name": "policy-m"}, "reward": {"system": "sparse"}, "evaluations": rows,
           "curve": {"points": [{"step": s, "evaluations": [{**rows[0], "n": 100}]} for s in (0, 10, 20, 30)]},
           "totals": {"flops": {"rollout": 1e11, "update": 3e11, "reward": 0},
                      "seconds": {"rollout": 10.0, "update": 15.0, "reward": 1.0}, "work": {"count.completions": 1000}}}
    (cell / "report.json").write_text(json.dumps(rep))
    (cell / "timing.json").write_text(json.dumps({"train_seconds": 30.0, "eval_seconds": 20.0, "curve_seconds": 8.0}))
    rates = study.calibrate(tmp_path)
    assert rates.per_problem["policy-m", "sparse"] == pytest.approx(20.0 / 500)
    assert rates.curve_per_problem["policy-m", "sparse"] == pytest.approx(8.0 / 400)
    pc = next(pc for pc in paper.cells if pc.cell.model == "policy-m" and pc.cell.reward == "sparse")
    ev = replace(paper.evaluation, targets=("arith-easy-2000",), curve=CurvePlan(every=10, limit=200))
    train = study.estimate(pc, rates) - 20.0                         # without the plan: the measured mean
    points = 1 + (pc.steps - 1) // 10
    assert study.estimate(pc, rates, ev) == pytest.approx(train + 20.0 / 500 * 2000 + 8.0 / 400 * points * 200)


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: str(p.relative_to(home())))
def test_committed_findings_regenerate_from_their_reports(folder, tmp_path, capsys):
    """The findings table is one documented command away from the committed reports (the run
    folders of the CI fixture, the packed runs.jsonl.xz of docs/findings and docs/decisive):
    computed once, compared byte for byte (what `race findings DIR --check` compares;
    test_check_fails_when_a_committed_number_changes runs --check itself)."""
    assert main(["findings", str(folder), "--out", str(tmp_path), "--no-plots"]) == 0
    for name in ("findings.json", "findings.md"):
        assert (tmp_path / name).read_bytes() == (folder / name).read_bytes(), name
    # ... and it says how to put them on the site: that command, run as printed, builds the page
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("On the leaderboard site: race ")]
    argv = shlex.split(line.removeprefix("On the leaderboard site: race "))
    assert argv[:4] == ["leaderboard", "build", "--findings", str(tmp_path / "findings.json")]
    (tmp_path / "subs").mkdir()
    assert main(argv[:-1] + [str(tmp_path / "site"), "--submissions", str(tmp_path / "subs")]) == 0
    assert "(f) RACE" in (tmp_path / "site" / "findings.html").read_text()


def test_committed_study_data_weighs_under_10_mb():
    """Issue 39: the tree holds under 10 MB of study data. Every folder of docs/ and tests/fixtures
    that holds a study (its study.json) is counted whole: packed runs, findings, figures."""
    folders = {p.parent for root in (home() / "docs", home() / "tests" / "fixtures") for p in root.rglob("study.json")}
    assert {home() / "docs" / "findings", home() / "docs" / "decisive"} <= folders
    size = sum(f.stat().st_size for d in folders for f in d.rglob("*") if f.is_file())
    assert size < 10 * 1024 ** 2, f"{size / 1024 ** 2:.1f} MB of study data"
    assert not list((home() / "docs").rglob("*.samples.jsonl"))      # per-sample logs go into runs.jsonl.xz


def test_check_fails_when_a_committed_number_changes(tmp_path, capsys):
    if not COMMITTED:
        pytest.fail("no committed findings fixture (tests/fixtures/findings-ci)")
    import shutil

    copy = tmp_path / "f"
    shutil.copytree(COMMITTED[0], copy)
    assert main(["findings", str(copy), "--check"]) == 0, capsys.readouterr().out
    md = copy / "findings.md"
    md.write_text(md.read_text().replace("reproduced", "REPRODUCED", 1))
    assert main(["findings", str(copy), "--check"]) == 1
    assert "findings.md" in capsys.readouterr().out


# ---------------------------------------------------------------- the CI-sized study, end to end


def _evaluated(out: Path) -> list[Path]:
    from suite.analysis.grid import EvalPlan
    from suite.pipeline.gridrun import evaluated

    ev = study.plan(study.load(CI)).evaluation
    assert isinstance(ev, EvalPlan)
    return [p for p in sorted((out / "cells").glob("*")) if evaluated(p / "report.json", ev)]


@pytest.mark.slow
def test_ci_study_end_to_end_killed_and_resumed(tmp_path, capsys):
    out = tmp_path / "study"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # two workers of one torch thread each, as the paper study ran (and half the wall time on two cores)
    proc = subprocess.Popen([sys.executable, "-m", "suite.cli", "study", str(CI), "--out", str(out), "--no-progress",
                             "--no-plots", "--workers", "2"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.time() + 600
        while len(_evaluated(out)) < 2 and proc.poll() is None and time.time() < deadline:
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)                # the driver and its workers, mid-study
        proc.wait()
    done = _evaluated(out)
    assert 2 <= len(done) < 21, "the kill should land mid-study"
    before = {p.name: (p / "ledger.jsonl").stat().st_mtime_ns for p in done}

    assert main(["study", str(CI), "--out", str(out), "--no-progress", "--workers", "2"]) == 0
    printed = capsys.readouterr().out
    assert f"{21 - len(done)} cells run, {len(done)} already done, 0 failed" in printed
    assert f"On the leaderboard site: race leaderboard build --findings {out / 'findings.json'} --out site" in printed
    assert {p.name: (p / "ledger.jsonl").stat().st_mtime_ns for p in done} == before   # not rerun
    assert len(_evaluated(out)) == 21
    for p in _evaluated(out):
        t = json.loads((p / "timing.json").read_text())
        assert t["eval_seconds"] > 0 and "train_seconds" in t

    doc = json.loads((out / "findings.json").read_text())
    assert [c["id"] for c in doc["claims"]] == list("abcdef")
    verdicts = {c["id"]: c["verdict"] for c in doc["claims"]}
    assert set(verdicts.values()) <= {"reproduced", "not reproduced", "inconclusive"}
    assert verdicts["a"] == "reproduced" and verdicts["b"] == "reproduced"   # exact FLOP accounting, no noise
    # intervals over problems and seeds: every allocation has one around its mean
    seeds_seen = defaultdict(set)
    for c in doc["conditions"]:
        for a in c["allocations"]:
            assert a["score"]["low"] <= a["score"]["value"] <= a["score"]["high"]
            seeds_seen[c["condition"]["reward_system"]].add(a["seeds"])
    assert seeds_seen["sparse"] == {2} and seeds_seen["prm"] == {1}
    # RACE diagnosed at the pilot budget and checked at the held-out one
    h = doc["race_holdout"]
    assert h["settings"]["pilot_budget"] == 6_000_000_000 and h["settings"]["validation_budget"] == 24_000_000_000
    assert len(h["trials"]) == 4 and h["summary"]["trials"] == 4                # policy-m x 2 targets x 2 metrics
    assert 0 <= h["summary"]["hit_rate"]["low"] <= h["summary"]["hit_rate"]["high"] <= 1
    md = (out / "findings.md").read_text()
    assert md.count("| (") == 6 and "## RACE validated on the held-out budget" in md
    assert str(home()) not in (out / "study.json").read_text()               # committable: no local folders
    sessions = json.loads((out / "study.json").read_text())["sessions"]
    assert sessions[-1]["ran"] == 21 - len(done) and sessions[-1]["versions"]["trl"]
    assert (out / "frontier_intervals.svg").is_file()

    # export: a committable folder whose findings regenerate from it alone, byte for byte
    dest = tmp_path / "export"
    assert main(["findings", str(out), "--export", str(dest), "--no-plots"]) == 0
    assert (dest / "findings.json").read_text() == (out / "findings.json").read_text()
    assert main(["findings", str(dest), "--check"]) == 0
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    assert size < 400_000 and not list(dest.rglob("adapter")) and not list(dest.rglob("ledger.jsonl"))


def test_the_docs_claim_table_matches_the_plan(paper):
    import re

    text = (home() / "docs" / "findings.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| \(([a-f])\) [^|]+\| (\d+) \|", text, re.M))
    assert rows == {c: str(len(ids)) for c, ids in study.claim_cells(paper).items()}
    blocks = dict(re.findall(r"^\| `(\w+)` \| (\d+) \|", text, re.M))
    assert blocks == {b: str(len(ids)) for b, ids in paper.blocks.items()}


def test_the_rest_of_the_decisive_study_is_one_resumable_command(tmp_path, capsys):
    """tasks/studies/decisive-seeds8-15.yaml is decisive.yaml's 104 cells with seeds 8-15 ordered one
    seed at a time; `--from docs/decisive` unpacks the 64 done cells (reports and logs, as they were
    exported) so that exactly the 40 of seeds 8-15 remain to run, and a second call unpacks nothing."""
    from suite.cli.commands.study import seed_from
    from suite.pipeline.gridrun import evaluated

    rest, whole = (study.plan(study.load(tasks() / "studies" / f)) for f in ("decisive-seeds8-15.yaml", "decisive.yaml"))
    assert sorted(pc.cell.id for pc in rest.cells) == sorted(pc.cell.id for pc in whole.cells) and len(rest.cells) == 104
    order = [pc.cell.id for pc in rest.cells]
    assert [int(i.rsplit("-s", 1)[1]) for i in order[64:]] == [s for s in range(8, 16) for _ in range(5)]
    out = tmp_path / "decisive"
    assert seed_from(rest, home() / "docs" / "decisive", out).startswith(f"from {home() / 'docs' / 'decisive'}: 64 of")
    todo = [pc.cell.id for pc in rest.cells if not evaluated(out / "cells" / pc.cell.id / "report.json", rest.evaluation)]
    assert len(todo) == 40 and all(int(i.rsplit("-s", 1)[1]) >= 8 for i in todo)
    assert (out / "study.json").is_file()
    assert " 0 of the plan's 104 cells" in seed_from(rest, home() / "docs" / "decisive", out)


def test_the_f_study_that_can_fail_is_planned_where_the_measured_best_moves():
    """tasks/studies/f-can-fail.yaml: policy-m with the PRM, where the committed
    90-cell study measured the update-heavy mu4-r8 best at 1e12 and mu1-r8 best at 4e12 (the claim
    is checked here against docs/findings/findings.json, so the file's premise cannot drift)."""
    sp = study.plan(study.load(tasks() / "studies" / "f-can-fail.yaml"))
    assert (sp.study.pilot, sp.study.validation) == (10**12, 4 * 10**12) and study.claim_cells(sp)["f"]
    at = {b: {pc.cell.allocation for pc in sp.cells if pc.cell.budget == b} for b in (sp.study.pilot, sp.study.validation)}
    assert at[sp.study.pilot] == at[sp.study.validation] == {"mu1-r8", "mu2-r8", "mu4-r8"}
    assert {pc.cell.reward for pc in sp.cells} == {"prm"} and sp.evaluation.curve.every == 5
    committed = json.loads((home() / "docs" / "findings" / "findings.json").read_text())
    best = {c["condition"]["budget_band"]["high"]: c["best"] for c in committed["conditions"]
            if c["name"].startswith("policy-m") and " prm " in c["name"] and c["name"].endswith("arith-easy-250/pass@1")}
    assert best == {10**12: "mu4-r8", 4 * 10**12: "mu1-r8"}
    # ... and its run (docs/f-can-fail) met the condition it was built for: on both metrics the pilot's
    # best is not the validation's, and RACE's call on it is recorded (it missed: a test that can fail)
    ran = json.loads((home() / "docs" / "f-can-fail" / "findings.json").read_text())
    best = {(c["condition"]["budget_band"]["high"], c["condition"]["metric"]): c["best"] for c in ran["conditions"]}
    for metric in ("pass@1", "process_judge"):
        assert best[(10**12, metric)] != best[(4 * 10**12, metric)] == "mu1-r8"
    trials = ran["race_holdout"]["trials"]
    assert len(trials) == 2 and all(t["chosen"] == best[(10**12, t["condition"]["metric"])] != t["best"] for t in trials)
    assert {c["id"]: c["verdict"] for c in ran["claims"]}["f"] == "inconclusive"
