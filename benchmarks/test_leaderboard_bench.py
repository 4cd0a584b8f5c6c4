"""Leaderboard build time from 1,000 distinct submissions (each its own ledger; varied models,
reward systems, adapters, ranks, GRPO settings and run lengths: benchmarks/leaderboard_corpus.py),
and the main page's size. Targets: a cold build (every report validated with its ledger), a
rebuild (validation cache warm) and rendering alone each under 5 s of CPU time. The machine is
shared, so CPU time (time.process_time) is asserted and wall time printed with the load average.
Run: .venv/bin/python -m pytest benchmarks/test_leaderboard_bench.py -s"""

from __future__ import annotations

import os
import shutil
import time

import pytest


from leaderboard_corpus import make_corpus

from suite.site import leaderboard as lb

N = 1000
CPU_LIMIT_S = 5.0


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    """1,000 distinct valid submissions, each with a ledger of its own (10-60 steps)."""
    folder = tmp_path_factory.mktemp("submissions")
    make_corpus(folder, N, seed=7)
    return folder


def _timed(fn, *args, **kw):
    cpu = []

    def run():
        c = time.process_time()
        try:
            return fn(*args, **kw)
        finally:
            cpu.append(time.process_time() - c)

    return run, cpu


def _report(benchmark, summary, cpu, label):
    assert summary["listed"] == N and summary["skipped"] == 0, summary["skipped_files"][:3]
    wall = benchmark.stats.stats
    benchmark.extra_info.update(index_bytes=summary["index_bytes"], allocation_bytes=summary["allocation_bytes"],
                                cpu_s_min=min(cpu), load_avg_1m=os.getloadavg()[0])
    print(f"\n{label}: cpu {min(cpu):.2f} s (min of {len(cpu)}), wall {wall.min:.2f} s, load {os.getloadavg()[0]:.2f}; "
          f"main page {summary['index_bytes']:,} bytes for {N} submissions ({summary['index_bytes'] / N:,.0f} per row)")
    assert min(cpu) < CPU_LIMIT_S


def test_build_1000_submissions_cold(benchmark, submissions, tmp_path):
    """A first build: every report is validated with its ledger (schema, arithmetic against
    the ledger, physics), every ledger charted."""
    out = tmp_path / "site"
    run, cpu = _timed(lb.build, submissions, out)
    summary = benchmark.pedantic(run, rounds=2, iterations=1, setup=lambda: shutil.rmtree(out, ignore_errors=True))
    _report(benchmark, summary, cpu, "cold build")


def test_build_1000_submissions(benchmark, submissions, tmp_path):
    """The regular rebuild: the site exists, so findings of unchanged submissions come from its
    validation cache (keyed by content, ledger bytes and the validator's code) and only new ones
    are validated."""
    out = tmp_path / "site"
    lb.build(submissions, out)                      # the previous build
    run, cpu = _timed(lb.build, submissions, out)
    summary = benchmark.pedantic(run, rounds=2, iterations=1)
    _report(benchmark, summary, cpu, "rebuild")


def test_render_only_1000_submissions(benchmark, submissions, tmp_path):
    """Reading and rendering alone (no validator): the leaderboard's own share of a build."""
    out = tmp_path / "site"
    run, cpu = _timed(lb.build, submissions, out, check=False)
    summary = benchmark.pedantic(run, rounds=2, iterations=1)
    _report(benchmark, summary, cpu, "render only")
