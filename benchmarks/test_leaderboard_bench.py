"""Leaderboard build time: a site from 1,000 submissions in under 5 s (validation included), and
the main page's size. Run: .venv/bin/python -m pytest benchmarks/test_leaderboard_bench.py"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from leaderboard_docs import valid_examples, variant  # noqa: E402

from suite import leaderboard as lb  # noqa: E402

N = 1000


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    """1,000 valid submissions: the shipped valid examples, each varied in identity and scores."""
    bases = [d for _, d in valid_examples()]
    if not bases:
        pytest.fail("schemas/examples/valid holds no example reports")
    folder = tmp_path_factory.mktemp("submissions")
    rng = random.Random(7)
    for i in range(N):
        d = variant(bases[i % len(bases)], i, score=round(rng.random(), 4))
        (folder / f"{lb.submission_id(d)}.json").write_text(json.dumps(d, indent=2))
    return folder


def test_build_1000_submissions(benchmark, submissions, tmp_path):
    out = tmp_path / "site"
    summary = benchmark.pedantic(lb.build, args=(submissions, out), rounds=3, iterations=1)
    assert summary["listed"] == N and summary["skipped"] == 0
    benchmark.extra_info["index_bytes"] = summary["index_bytes"]
    benchmark.extra_info["allocation_bytes"] = summary["allocation_bytes"]
    print(f"\nmain page: {summary['index_bytes']:,} bytes for {N} submissions "
          f"({summary['index_bytes'] / N:,.0f} bytes per row)")
    assert benchmark.stats.stats.mean < 5.0
