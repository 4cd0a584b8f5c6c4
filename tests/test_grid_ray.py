"""A real pilot grid through Ray: `race grid --executor ray --address ADDR` against a Ray head
this test starts on 2 CPUs, the driver killed with SIGKILL once the first cell is finished and
evaluated, then the same command again: every cell ends evaluated, the finished ones are not
touched, and no ledger counts a step twice."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest


from test_executors import _finish, _kill_session

from suite.analysis import grid
from suite.pipeline import gridrun
from suite.paths import tasks

pytestmark = pytest.mark.skipif(not os.environ.get("CI") and shutil.which("ray", path=str(Path(sys.executable).parent))
                                is None, reason="Ray not installed (optional extra: pip install -c constraints.txt "
                                                "-e '.[ray]')")

# Ray >= 2.59 starts clusters with token authentication: the head and every driver share one token.
ENV = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(Path(__file__).resolve().parents[1]),
           RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_head():
    """`ray start --head --block` in its own session (so the test can remove all of it), ready
    when its GCS port accepts connections. Its temp dir is short: Ray's socket paths inside it
    must fit the 107-byte Unix socket limit, which pytest's tmp_path does not."""
    port, temp = _free_port(), tempfile.mkdtemp(prefix="ray", dir="/tmp")
    head = subprocess.Popen([str(Path(sys.executable).parent / "ray"), "start", "--head", "--block",
                             f"--port={port}", "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false",
                             "--disable-usage-stats", f"--temp-dir={temp}"],
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert head.poll() is None, head.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "the Ray head did not come up within 60 s"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        _kill_session(head)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def grid_file(tmp_path):
    """4 cells (1 random tiny policy x 2 allocations x 2 seeds), sparse reward, 2 problems per
    target evaluated: plumbing, not learning."""
    import yaml

    from eval_models import make_prm
    from tiny_policy import make_policy

    d = {"name": "ray4",
         "cell": {"dataset": str(tasks() / "arith" / "data" / "train.jsonl"), "prompts_per_step": 2,
                  "group_size": 2, "max_completion_tokens": 12},
         "models": {"s": str(make_policy(tmp_path / "small", hidden=64, seed=0))},
         "budgets": [6e8], "band": 0.9,
         "allocations": {"lo": {"mu": 1, "lora_rank": 4}, "hi": {"mu": 2, "lora_rank": 8}},
         "rewards": {"sparse": "sparse"}, "seeds": [0, 1],
         "eval": {"targets": ["arith-easy-250"], "limit": 2, "judge": str(make_prm(tmp_path / "prm"))}}
    f = tmp_path / "grid.yaml"
    f.write_text(yaml.safe_dump(d, sort_keys=False))
    return f


def _driver(grid_yaml: Path, out: Path, address: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "suite.cli", "grid", str(grid_yaml), "--out", str(out),
                             "--executor", "ray", "--address", address, "--threads", "1", "--no-progress"],
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _evaluated(out: Path, ev) -> set[str]:
    cells = out / "cells"
    return {d.name for d in cells.iterdir() if gridrun.evaluated(d / "report.json", ev)} if cells.is_dir() else set()


def _cell_tasks_alive() -> list[int]:
    """Ray workers still running a cell of some job (process title `ray::race:<cell>`)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "cmdline").read_bytes().startswith(b"ray::race:"):
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


def test_ray_grid_on_a_cluster_resumes_after_the_driver_is_killed(ray_head, grid_file, tmp_path):
    ev = grid.load(grid_file).evaluation
    out = tmp_path / "out"
    first = _driver(grid_file, out, ray_head)
    try:
        deadline = time.monotonic() + 180
        while not (done_before := _evaluated(out, ev)):
            assert first.poll() is None, first.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "no cell finished within 180 s"
            time.sleep(0.2)
    finally:
        _kill_session(first)
    # The cluster outlives the driver: it kills the dead job's tasks; wait until they are gone
    # so no straggler writes into a cell the second driver resumes.
    deadline = time.monotonic() + 60
    while _cell_tasks_alive():
        assert time.monotonic() < deadline, "the dead driver's cell tasks were not cleaned up"
        time.sleep(0.2)
    done_before = _evaluated(out, ev)
    assert 1 <= len(done_before) < 4, "the kill must land midway"
    stamps = {c: os.stat(out / "cells" / c / "ledger.jsonl").st_mtime_ns for c in done_before}

    second = _driver(grid_file, out, ray_head)
    log, _ = _finish(second, timeout=300)
    assert second.returncode == 0, log[-3000:]
    assert f"{4 - len(done_before)} cells run, {len(done_before)} already done, 0 failed" in log, log[-2000:]
    cells = {c.name for c in (out / "cells").iterdir()}
    assert len(cells) == 4 and _evaluated(out, ev) == cells
    for c in done_before:  # finished cells were skipped, not rerun
        assert os.stat(out / "cells" / c / "ledger.jsonl").st_mtime_ns == stamps[c]
    for d in (out / "cells").iterdir():  # a resumed cell counts no step twice
        steps = [json.loads(line)["step"] for line in (d / "ledger.jsonl").read_text().splitlines()]
        assert steps == list(range(1, len(steps) + 1)) and steps, d.name


def test_ray_options_need_the_ray_executor(grid_file, tmp_path, capsys):
    from suite.cli import main

    assert main(["grid", str(grid_file), "--out", str(tmp_path / "o"), "--address", "auto"]) != 0
    assert "--address and --gpus-per-cell are options of the ray executor" in capsys.readouterr().err
    assert main(["grid", str(grid_file), "--out", str(tmp_path / "o"), "--executor", "ray",
                 "--gpus-per-cell", "-1"]) != 0
    assert "--gpus-per-cell must be >= 0" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
