"""Executors run independent jobs, skip finished ones, and survive a killed driver.

The Ray test starts a local Ray instance on 2 CPUs inside a driver subprocess, kills the
driver with SIGKILL after the first job finished, runs the same job list again, and counts
marker files: every job finished exactly once, and no job finished before the kill started again.
This file doubles as the driver script (run as __main__), so Ray pickles the job by value.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from suite.errors import RaceError
from suite.pipeline.executors import EXECUTORS, Job, Resources, run_jobs


def marker_job(root: str, key: str, seconds: float) -> str:
    """A cheap idempotent cell: marks its start, works, writes its result atomically, marks
    its finish. Returns the result path."""
    root_p = Path(root)
    (root_p / "started" / f"{key}.{uuid.uuid4().hex}").touch()
    time.sleep(seconds)
    out = root_p / "results" / f"{key}.json"
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(f'{{"key": "{key}"}}')
    os.replace(tmp, out)
    (root_p / "finished" / f"{key}.{uuid.uuid4().hex}").touch()
    return str(out)


def failing_job() -> None:
    raise ValueError("bad cell")


def make_jobs(root: Path, n: int, seconds: float) -> list[Job]:
    for d in ("started", "finished", "results"):
        (root / d).mkdir(parents=True, exist_ok=True)
    return [Job(key=f"cell{i}", fn=marker_job, args=(str(root), f"cell{i}", seconds),
                resources=Resources(cpus=1), done=root / "results" / f"cell{i}.json") for i in range(n)]


def count(root: Path, kind: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in (root / kind).iterdir():
        key = p.name.split(".")[0]
        out[key] = out.get(key, 0) + 1
    return out


def test_registry_has_local_and_ray():
    assert {"local", "ray"} <= set(EXECUTORS)


def test_unknown_executor_and_duplicate_keys_are_user_errors(tmp_path):
    with pytest.raises(RaceError, match="unknown executor"):
        list(run_jobs([], executor="slurm"))
    jobs = make_jobs(tmp_path, 1, 0.0) * 2
    with pytest.raises(RaceError, match="duplicate job keys: cell0"):
        list(run_jobs(jobs))


def test_local_runs_jobs_in_worker_processes_and_skips_done(tmp_path):
    jobs = make_jobs(tmp_path, 3, 0.0)
    results = {r.key: r for r in run_jobs(jobs, executor="local", workers=1)}
    assert {k: r.status for k, r in results.items()} == {"cell0": "ok", "cell1": "ok", "cell2": "ok"}
    assert results["cell1"].value == str(tmp_path / "results" / "cell1.json")
    # Second pass: every job's done file exists, so nothing starts again.
    again = list(run_jobs(jobs, executor="local"))
    assert [r.status for r in again] == ["skipped"] * 3
    assert count(tmp_path, "started") == {"cell0": 1, "cell1": 1, "cell2": 1}


def test_local_reports_a_failing_job_without_stopping_others(tmp_path):
    jobs = [Job("bad", failing_job)] + make_jobs(tmp_path, 1, 0.0)
    results = {r.key: r for r in run_jobs(jobs, executor="local")}
    assert results["bad"].status == "failed" and "ValueError: bad cell" in results["bad"].error
    assert results["cell0"].ok


def test_auto_workers_is_one_per_core_capped_and_one_on_a_gpu(monkeypatch):
    import torch

    from suite.pipeline import executors

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(executors.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert executors.auto_workers(1, 12) == executors.AUTO_WORKER_CAP == 4   # memory: copies of torch
    assert executors.auto_workers(4, 12) == 4 and executors.auto_workers(8, 12) == 2
    assert executors.auto_workers(1, 3) == 3 and executors.auto_workers(1, 0) == 1
    monkeypatch.setattr(executors.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert executors.auto_workers(1, 12) == 2 and executors.auto_workers(2, 12) == 1
    assert executors.resolve_workers("auto", 1, 12) == 2 and executors.resolve_workers(3, 1, 12) == 3
    assert executors.resolve_workers("auto", 1, 12, "ray") == 1                # Ray places cells itself
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)              # local workers would share it
    assert executors.auto_workers(1, 12) == 1


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_bad_workers_value_is_a_usage_error(value, tmp_path, capsys):
    from suite.cli import main

    with pytest.raises(SystemExit) as e:
        main(["grid", "g.yaml", "--out", str(tmp_path), "--workers", value])
    assert e.value.code == 2
    assert f"--workers: expected a positive integer or auto, got '{value}'" in capsys.readouterr().err


def _driver(root: str, n: int, seconds: float) -> None:
    """Run the job list through a fresh local Ray instance on 2 CPUs, printing each result."""
    for r in run_jobs(make_jobs(Path(root), n, seconds), executor="ray", num_cpus=2):
        print(r.key, r.status, flush=True)


def _start_driver(root: Path, n: int, seconds: float) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]), RAY_USAGE_STATS_ENABLED="0")
    # Own session: the driver and everything Ray starts under it share one process group
    # that the test can clean up by id.
    return subprocess.Popen([sys.executable, __file__, root, str(n), str(seconds)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _session_pids(sid: int) -> list[int]:
    """Processes in session `sid` (the driver's own session: everything it and Ray started)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(d.name))
    return pids


def _kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL what the driver left behind (Ray workers run in their own process groups but
    stay in the driver's session) and wait until it is gone: a resumed grid must not race a
    straggler of the killed run."""
    deadline = time.monotonic() + 10
    while pids := _session_pids(proc.pid):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert time.monotonic() < deadline, f"processes {pids} outlived SIGKILL"
        time.sleep(0.1)


def _finish(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """The driver's (stdout, stderr) once it exits; whatever it left behind is killed."""
    try:
        return proc.communicate(timeout=timeout)
    finally:
        _kill_session(proc)


@pytest.mark.skipif(not os.environ.get("CI") and
                    __import__("importlib").util.find_spec("ray") is None,
                    reason="Ray not installed (optional extra: pip install -c constraints.txt -e '.[ray]')")
def test_ray_grid_resumes_after_driver_killed_without_rerunning(tmp_path):
    n, seconds = 6, 1.5
    first = _start_driver(tmp_path, n, seconds)
    try:
        deadline = time.monotonic() + 90
        # Kill the driver as soon as the first job has finished (2 CPUs: 2 jobs at a time).
        while not (tmp_path / "finished").exists() or not any((tmp_path / "finished").iterdir()):
            assert first.poll() is None, first.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "no job finished within 90 s"
            time.sleep(0.1)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        # The driver is gone; drop whatever it left (raylet, workers) so nothing finishes late.
        _kill_session(first)
    done_before = set(count(tmp_path, "finished"))
    assert 1 <= len(done_before) < n, "the kill must land midway"

    second = _start_driver(tmp_path, n, seconds)
    out, err = _finish(second, timeout=60)
    assert second.returncode == 0, err[-3000:]
    statuses = dict(line.split() for line in out.splitlines())
    assert {k for k, s in statuses.items() if s == "skipped"} == done_before
    assert {k for k, s in statuses.items() if s == "ok"} == {f"cell{i}" for i in range(n)} - done_before

    finished = count(tmp_path, "finished")
    assert finished == {f"cell{i}": 1 for i in range(n)}, "some job finished twice or never"
    started = count(tmp_path, "started")
    assert all(started[k] == 1 for k in done_before), "a finished job was started again"


if __name__ == "__main__":
    _driver(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
