"""Leaderboard build time from 1,000 submissions, and the main page's size: a rebuild (validation
cache warm) and rendering alone in under 5 s; a cold build (every report validated) reported. Run: .venv/bin/python -m pytest benchmarks/test_leaderboard_bench.py"""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from leaderboard_docs import EXAMPLES, valid_examples, variant  # noqa: E402

from suite import leaderboard as lb  # noqa: E402

N = 1000


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    """1,000 valid submissions: the shipped valid examples varied in identity and scores (their
    ledgers shared: a variant keeps the physics, so it keeps the ledger)."""
    bases = [d for _, d in valid_examples()]
    if not bases:
        pytest.fail("schemas/examples/valid holds no example reports")
    folder = tmp_path_factory.mktemp("submissions")
    for d in bases:                 # each report is validated against its ledger, as on submit
        (folder / d["ledger"]["path"]).write_bytes((EXAMPLES / d["ledger"]["path"]).read_bytes())
    rng = random.Random(7)
    for i in range(N):
        d = variant(bases[i % len(bases)], i, score=round(rng.random(), 4))
        (folder / f"{lb.submission_id(d)}.json").write_text(json.dumps(d, indent=2))
    return folder


def _report(benchmark, summary, label):
    assert summary["listed"] == N and summary["skipped"] == 0
    benchmark.extra_info["index_bytes"] = summary["index_bytes"]
    benchmark.extra_info["allocation_bytes"] = summary["allocation_bytes"]
    print(f"\n{label}: main page {summary['index_bytes']:,} bytes for {N} submissions "
          f"({summary['index_bytes'] / N:,.0f} bytes per row)")


def test_build_1000_submissions(benchmark, submissions, tmp_path):
    """The regular rebuild: the site exists, so findings of unchanged submissions come from its
    validation cache (keyed by content, ledger bytes and the validator's code) and only new ones
    are validated. Must take under 5 s."""
    out = tmp_path / "site"
    lb.build(submissions, out)                      # the previous build
    summary = benchmark.pedantic(lb.build, args=(submissions, out), rounds=3, iterations=1)
    _report(benchmark, summary, "rebuild")
    assert benchmark.stats.stats.mean < 5.0


def test_build_1000_submissions_cold(benchmark, submissions, tmp_path):
    """A first build: every report is validated (with its ledger). Reported, not bounded: the
    validator's own cost (a few ms per report) dominates."""
    out = tmp_path / "site"
    summary = benchmark.pedantic(lb.build, args=(submissions, out), rounds=1, iterations=1,
                                 setup=lambda: shutil.rmtree(out, ignore_errors=True))
    _report(benchmark, summary, "cold build")


def test_render_only_1000_submissions(benchmark, submissions, tmp_path):
    """Reading and rendering alone (no validator): the leaderboard's own share of a build."""
    out = tmp_path / "site"
    summary = benchmark.pedantic(lb.build, args=(submissions, out), kwargs={"check": False}, rounds=3,
                                 iterations=1)
    _report(benchmark, summary, "render only")
    assert benchmark.stats.stats.mean < 5.0
