"""Leaderboard build time from 1,000 distinct submissions (each its own ledger; varied models,
reward systems, adapters, ranks, GRPO settings and run lengths: benchmarks/leaderboard_corpus.py),
and the main page's size. A cold build (every report validated with its ledger), a rebuild
(validation cache warm) and rendering alone, each as a ratio of CPU time to a plain site of the
same pages measured in the same run (benchmarks/ratio.py): every report read, its row rendered
into one table through one plain Jinja template and into a page of its own, the files written.
Run: .venv/bin/python -m pytest benchmarks/test_leaderboard_bench.py -s"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from leaderboard_corpus import make_corpus

from benchmarks.ratio import Limit, check, interleaved
from suite.site import leaderboard as lb

N = 1000
#: Measured 2026-12-01 (2 cores, load 2-2.7, two runs): 15-28x cold, 9.5-12.6x rebuild, 7.3-8.5x render only
#: (the plain site took 0.24-0.41 s: writing 1,000 small files is the noisy part of both).
COLD = Limit(50.0, "every report validated (schema, arithmetic against its streamed ledger, physics: each phase "
                   "priced again) and every ledger charted, on top of what the plain site does: 15-28x")
REBUILD = Limit(30.0, "findings from the validation cache, every ledger still read for its chart, the sortable "
                      "table, filters, charts and the allocation page: about 10-13x")
RENDER = Limit(18.0, "no validator; ledgers read for the charts, the sortable table, filters, charts and the "
                     "allocation page on top of the plain site: about 7-8.5x")

PLAIN_INDEX = """<table>{% for r in rows %}<tr><td><a href="s/{{ r.id }}.html">{{ r.run }}</a></td><td>{{ r.model }}</td>
<td>{{ r.reward }}</td><td>{{ r.rank }}</td><td>{{ r.total }}</td><td>{{ r.rollout }}</td><td>{{ r.update }}</td>
<td>{{ r.reward_flops }}</td><td>{{ r.p }}</td>{% for v in r.scores %}<td>{{ v }}</td>{% endfor %}</tr>{% endfor %}</table>"""
PLAIN_PAGE = """<h1>{{ r.run }}</h1><dl>{% for k, v in r.items() %}<dt>{{ k }}</dt><dd>{{ v }}</dd>{% endfor %}</dl>"""


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    """1,000 distinct valid submissions, each with a ledger of its own (10-60 steps)."""
    folder = tmp_path_factory.mktemp("submissions")
    make_corpus(folder, N, seed=7)
    return folder


def plain_site(folder: Path, out: Path) -> int:
    """The reference: every report read, one row each rendered through one plain Jinja template
    into a table and into a page of its own, the files written."""
    import jinja2

    env = jinja2.Environment(autoescape=True)
    index, page = env.from_string(PLAIN_INDEX), env.from_string(PLAIN_PAGE)
    rows = []
    for f in sorted(folder.glob("*.json")):
        d = json.loads(f.read_text())
        t = d["totals"]
        rows.append({"id": f.stem, "run": d["run"].get("label") or d["run"]["id"], "model": d["policy"]["name"],
                     "reward": d["reward"]["system"], "rank": d["adapter"].get("rank"), "total": t["flops"]["total"],
                     "rollout": t["flops"]["rollout"], "update": t["flops"]["update"],
                     "reward_flops": t["flops"]["reward"], "p": t["update_share"],
                     "scores": [e["value"] for e in d.get("evaluations", [])]})
    (out / "s").mkdir(parents=True, exist_ok=True)
    (out / "index.html").write_text(index.render(rows=rows))
    for r in rows:
        (out / "s" / f"{r['id']}.html").write_text(page.render(r=r))
    return len(rows)


def _measure(benchmark, submissions, tmp_path, limit, label, setup=None, **build):
    out, plain = tmp_path / "site", tmp_path / "plain"
    timing = interleaved(benchmark, lambda: lb.build(submissions, out, **build), lambda: plain_site(submissions, plain),
                         rounds=2, setup=setup)
    summary = timing.result
    assert summary["listed"] == N and summary["skipped"] == 0, summary["skipped_files"][:3]
    check(benchmark, timing, limit, index_bytes=summary["index_bytes"], allocation_bytes=summary["allocation_bytes"])
    print(f"{label}: main page {summary['index_bytes']:,} bytes for {N} submissions "
          f"({summary['index_bytes'] / N:,.0f} per row)")


def test_build_1000_submissions_cold(benchmark, submissions, tmp_path):
    """A first build: every report is validated with its ledger (schema, arithmetic against
    the ledger, physics), every ledger charted."""
    _measure(benchmark, submissions, tmp_path, COLD, "cold build",
             setup=lambda: shutil.rmtree(tmp_path / "site", ignore_errors=True))


def test_build_1000_submissions(benchmark, submissions, tmp_path):
    """The regular rebuild: the site exists, so findings of unchanged submissions come from its
    validation cache (keyed by content, ledger bytes and the validator's code) and only new ones
    are validated."""
    lb.build(submissions, tmp_path / "site")                      # the previous build
    _measure(benchmark, submissions, tmp_path, REBUILD, "rebuild")


def test_render_only_1000_submissions(benchmark, submissions, tmp_path):
    """Reading and rendering alone (no validator): the leaderboard's own share of a build."""
    _measure(benchmark, submissions, tmp_path, RENDER, "render only", check=False)
