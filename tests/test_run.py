"""`race run`: crash safety (kill -9, then --resume counts no step twice), the run folder's
contents, and bad input answered in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from suite.cli import main
from suite.answers import is_correct
from suite.record.ledger import read_ledger
from suite.train.rewards import RewardSystem, reward_system
from tiny_policy import make_policy, write_cell

ROOT = Path(__file__).resolve().parents[1]
RACE = [sys.executable, "-c", "import sys; from suite.cli import main; sys.exit(main())"]


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return make_policy(tmp_path_factory.mktemp("policy") / "tiny")


def _race(*args, timeout=300) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return subprocess.run([*RACE, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _checkpoint_steps(out: Path) -> list[int]:
    return sorted(int(c.name.split("-")[1]) for c in (out / "checkpoints").glob("checkpoint-*")
                  if (c / "trainer_state.json").is_file())


def test_kill_9_then_resume_counts_no_step_twice(tmp_path, policy):
    cell = write_cell(tmp_path / "cell.yaml", policy, engine={"torch_threads": 1, "checkpoint_every": 3,
                                                             "snapshot_every": 2})
    out = tmp_path / "run"
    steps = 10
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([*RACE, "run", str(cell), "--out", str(out),
                             "--max-steps", str(steps), "--no-progress"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ledger = out / "ledger.jsonl"
    deadline = time.time() + 240
    try:
        # Kill between checkpoints (every 3 steps), so the ledger is ahead of the last checkpoint.
        while time.time() < deadline and proc.poll() is None:
            n = sum(1 for _ in open(ledger)) if ledger.exists() else 0
            if n >= 4 and n % 3 and _checkpoint_steps(out):
                break
            time.sleep(0.02)
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read()[-2000:]}"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()

    # After kill -9: every complete line is a valid record, steps 1..n in order.
    killed = read_ledger(ledger)  # strict: a bad line in the middle would raise
    done = [r["step"] for r in killed.records]
    assert done == list(range(1, len(done) + 1)) and len(done) >= 4
    ckpt = _checkpoint_steps(out)[-1]
    assert ckpt <= done[-1]
    from suite.train.snapshots import snapshots

    before = {step: p.stat().st_mtime_ns for step, p in snapshots(out)}
    assert set(before) <= set(range(2, done[-1] + 1, 2))       # every 2nd step, none ahead of the ledger

    r = _race("run", "--resume", str(out), "--max-steps", str(steps), "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    final = read_ledger(ledger)
    assert [x["step"] for x in final.records] == list(range(1, steps + 1))
    assert final.torn is None
    # Steps after the checkpoint ran twice; the first runs of them are set aside, not counted.
    discarded = out / "ledger.discarded.jsonl"
    redo = [s for s in done if s > ckpt]
    if redo:
        assert [x["step"] for x in read_ledger(discarded).records] == redo
    else:
        assert not discarded.exists()
    # Steps before the checkpoint were kept byte for byte.
    assert final.records[:ckpt] == killed.records[:ckpt]
    # Snapshots: all of them, those before the checkpoint kept, those after it made again.
    after = {step: p.stat().st_mtime_ns for step, p in snapshots(out)}
    assert sorted(after) == [2, 4, 6, 8, 10]
    assert all(after[s] == t for s, t in before.items() if s <= ckpt)
    assert all(after[s] != t for s, t in before.items() if s > ckpt)
    for name in ("cell.yaml", "report.json", "adapter/adapter_config.json"):
        assert (out / name).is_file(), name
    import json

    report = json.loads((out / "report.json").read_text())
    assert report["totals"]["steps"] == steps
    assert report["totals"]["flops"]["total"] == sum(sum(x["flops"].values()) for x in final.records)
    v = _race("validate", str(out / "report.json"))
    assert v.returncode == 0, v.stdout + v.stderr


def test_budget_that_cannot_buy_one_step_says_what_a_step_costs(tmp_path, policy, capsys):
    cell = write_cell(tmp_path / "cell.yaml", policy, budget_flops=1000)
    assert main(["run", str(cell), "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "cannot buy one step" in err and "one step costs up to" in err
    assert len(err.strip().splitlines()) == 2  # message + hint, no traceback
    assert not (tmp_path / "run").exists()  # nothing written for a run that cannot start


def test_unknown_reward_and_missing_model_are_one_line_errors(tmp_path, policy, capsys):
    cell = write_cell(tmp_path / "a.yaml", policy, reward="sparkle")
    assert main(["run", str(cell), "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "sparkle" in err and "sparse" in err and "prm" in err and "Traceback" not in err
    cell = write_cell(tmp_path / "b.yaml", tmp_path / "policies" / "gone")
    assert main(["run", str(cell), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "gone" in err and "policy" in err and "Traceback" not in err


def test_refuses_to_overwrite_a_run_and_resume_needs_one(tmp_path, policy, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "ledger.jsonl").write_text("")
    cell = write_cell(tmp_path / "c.yaml", policy)
    assert main(["run", str(cell), "--out", str(out)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert main(["run", "--resume", str(tmp_path / "empty")]) == 2
    assert "no run to resume" in capsys.readouterr().err


class _RecordedAnswers(RewardSystem):
    """The sparse reward, remembering the gold answers TRL hands it (the dataset's `answer` column)."""

    seen: list[str] = []

    def score(self, prompts, texts, answers, kwargs):
        _RecordedAnswers.seen += list(answers)
        return [float(is_correct(t, a)) for t, a in zip(texts, answers)]


@pytest.fixture
def recorded_answers():
    """_RecordedAnswers registered for one test only (other tests count the registry's systems)."""
    from suite.train.rewards import REWARD_SYSTEMS

    reward_system("test-recorded-answers")(_RecordedAnswers)
    yield
    REWARD_SYSTEMS._items.pop("test-recorded-answers")


@pytest.mark.slow
def test_runs_on_gsm8k_and_math500_rows_submit_into_one_folder(tmp_path, policy, capsys, recorded_answers):
    """race run trains on rows as GSM8K and MATH-500 publish them (tests/fixtures: their first test
    rows), and the gold answers the reward gets are the final answers, not GSM8K's worked "#### n"
    text; every race run names its ledger ledger.jsonl, and race submit stores each under a name
    of its own."""
    import json

    fixtures = ROOT / "tests" / "fixtures"
    data = {"gsm8k_head.jsonl": {"18", "3"},
            "math500_head.jsonl": {"\\left( 3, \\frac{\\pi}{2} \\right)", "\\frac{14}{3}"}}
    subs = tmp_path / "submissions"
    subs.mkdir()
    for seed, (name, gold) in enumerate(data.items(), 1):
        _RecordedAnswers.seen = []
        cell = write_cell(tmp_path / f"cell-{seed}.yaml", policy, seed=seed, label=f"tiny seed {seed}",
                          dataset=str(fixtures / name), reward="test-recorded-answers")
        out = tmp_path / f"run-{seed}"
        assert main(["run", str(cell), "--out", str(out), "--max-steps", "2", "--no-progress"]) == 0
        assert set(_RecordedAnswers.seen) == gold and len(_RecordedAnswers.seen) == 2 * 2 * 2  # steps x prompts x K
        assert (out / "ledger.jsonl").is_file() and (out / "adapter" / "adapter_config.json").is_file()
        report = json.loads((out / "report.json").read_text())
        assert report["provenance"] == {"method": "measured", "recorder": "race RaceLedger (TRL callback)",
                                        "steps": 2}
        assert main(["submit", str(out / "report.json"), "--submissions", str(subs)]) == 0
    capsys.readouterr()
    stored = sorted(subs.glob("*.json"))
    assert len(stored) == 2 and len(list(subs.glob("ledger-*.jsonl"))) == 2
    assert {json.loads(p.read_text())["ledger"]["path"] for p in stored} == {p.name for p in subs.glob("ledger-*")}
    assert main(["validate", "--strict", str(subs)]) == 0
    assert main(["leaderboard", "build", "--submissions", str(subs), "--out", str(tmp_path / "site")]) == 0
    assert "2 submission(s) listed, 0 skipped" in capsys.readouterr().out
