"""Options of the reference-cell benchmarks (benchmarks/test_reference_cells.py). Other
benchmark files are untouched: the gate only reads benchmarks whose extra_info names a cell.

    --race-gate[=KIND]     compare with benchmarks/baselines/KIND.json after the run; exit 1 when
                           the gate fails (compare() of benchmarks/gate.py: FLOPs/tokens exact, rewards and
                           pass@1 within tolerance, median time at most --race-slower-pct slower)
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    from benchmarks.gate import DEFAULT_SLOWER_PCT

    g = parser.getgroup("race", "RACE reference-cell gate")
    g.addoption("--race-gate", metavar="KIND", nargs="?", const="auto", default=None,
                help="after the run, compare the reference cells with benchmarks/baselines/KIND.json "
                     "(default KIND: this machine's kind, e.g. python-2core-cpu); exit 1 when the gate fails")
    g.addoption("--race-baseline", metavar="FILE", default=None,
                help="compare with this baseline file instead of benchmarks/baselines/KIND.json")
    g.addoption("--race-slower-pct", metavar="PCT", type=int, default=DEFAULT_SLOWER_PCT,
                help="time check: fail when a cell's median is more than PCT percent above the baseline's "
                     "(default %(default)s; pytest-benchmark's median:PCT%% semantics)")


def pytest_configure(config):
    config.addinivalue_line("markers", "race_fast: the fast lane of the reference-cell gate (race bench --fast)")


def _gate_enabled(config) -> bool:
    return bool(config.getoption("race_gate", None) or config.getoption("race_baseline", None))


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if not _gate_enabled(config) or exitstatus not in (0, pytest.ExitCode.OK):
        return
    from benchmarks import gate as bench
    from suite.errors import RaceError

    kind = config.getoption("race_gate")
    kind = bench.machine_kind() if kind in (None, "auto") else kind
    path = config.getoption("race_baseline") or bench.baseline_path(kind)
    runs = [b.as_dict(include_data=False) for b in config._benchmarksession.benchmarks if not b.has_error]
    now = {"benchmarks": [b for b in runs if isinstance(b.get("extra_info", {}).get("cell"), str)]}
    try:
        result = bench.compare(bench.load_baseline(path, kind), now, slower_pct=config.getoption("race_slower_pct"))
        text = bench.format_table(result)
        failed = result.failed
    except RaceError as e:
        text, failed = f"race gate: error: {e.message}" + (f"\n  hint: {e.hint}" if e.hint else ""), True
    config._race_gate_text = text
    if failed:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    text = getattr(config, "_race_gate_text", None)
    if text:
        terminalreporter.section("RACE reference-cell gate")
        terminalreporter.write_line(text)
