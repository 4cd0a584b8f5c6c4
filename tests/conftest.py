"""What the tests share. Helper modules (tiny_policy, race_helpers, leaderboard_docs, ...) and
the test fixtures' builders (fixtures/eval_models.py) are importable by name: pyproject.toml's
[tool.pytest.ini_options] pythonpath puts tests/, tests/fixtures/ and the checkout's root (for
tools/ and benchmarks/, which are never installed) on the path, so no test edits sys.path."""

from __future__ import annotations

import pytest


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test (two torch jobs on two cores each run ~4x slower),
    restored afterwards."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(autouse=True, scope="session")
def traced_cache_of_this_session(tmp_path_factory):
    """Traced coefficients (suite.accounting.traced) persist in a folder of this test session,
    never in ~/.cache: tests stay hermetic and their timings are those of a fresh machine (CI)."""
    import os

    old = os.environ.get("RACE_TRACED_CACHE")
    os.environ["RACE_TRACED_CACHE"] = path = str(tmp_path_factory.mktemp("traced-cache"))
    yield path
    if old is None:
        os.environ.pop("RACE_TRACED_CACHE", None)
    else:
        os.environ["RACE_TRACED_CACHE"] = old


def pytest_collection_modifyitems(config, items):
    """The long lane (tests marked `long`) runs only with RACE_LONG=1: CI's time is a budget
    (README), and these repeat at length what a representative few already check in CI.
    Files holding a `slow` test go first (order within a file kept): with one file per core
    (README command 2's `--dist loadfile`) the longest work starts first instead of ending alone."""
    import os

    if not os.environ.get("RACE_LONG"):
        long = [i for i in items if i.get_closest_marker("long")]
        if long:
            config.hook.pytest_deselected(items=long)
            items[:] = [i for i in items if not i.get_closest_marker("long")]
    slow = {i.path for i in items if i.get_closest_marker("slow")}
    items.sort(key=lambda i: i.path not in slow)
