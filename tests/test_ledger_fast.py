"""The ledger reader's fast paths never change a verdict: a whole block of lines parsed as one
JSON array and checked column-wise (suite.record.recordcheck.batch_ok, fast_records) reads exactly what
the strict line-by-line reader reads, with the same problems on the same lines."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_ledger import records

from suite import jsonstrict
from suite.record.ledger import LedgerReader
from suite.record.recordcheck import batch_ok, fast_records, record_problem
from suite.record.summary import LedgerSummary

GOOD = {"step": 1, "time": "2026-11-29T20:00:00Z", "tokens": {"rollout_prompt": 1, "rollout_completion": 2,
                                                               "update": 3, "reward": 0},
        "work": {"rollout.tokens": 5, "update.train.tokens": 7}, "flops": {"rollout": 10, "update": 20, "reward": 0},
        "seconds": {"rollout": 0.5, "update": 1}}


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records(), min_size=1, max_size=4))
def test_batch_check_accepts_only_what_the_record_check_accepts(recs):
    """batch_ok(recs) is True exactly when every record passes record_problem."""
    good = all(record_problem(r) is None for r in recs)
    assert batch_ok(recs) == good
    text = json.dumps(recs)
    if "true" not in text and "false" not in text and "-" not in text.replace("2026-11-29", "").replace("2026-13-01", ""):
        assert batch_ok(recs, plain=True) == good


def test_a_time_ending_in_a_newline_is_left_to_the_record_check(tmp_path):
    """The one record the batch check refuses although record_problem accepts it: a time with a
    trailing newline (the RFC 3339 regex's `$` matches before it). batch_ok says False, so the
    reader checks that batch line by line and reads the record all the same."""
    rec = {**GOOD, "time": GOOD["time"] + "\n"}
    assert record_problem(rec) is None and not batch_ok([rec]) and batch_ok([GOOD])
    path = tmp_path / "l.jsonl"
    path.write_text(json.dumps(rec) + "\n" + json.dumps({**GOOD, "step": 2}) + "\n")
    r = LedgerReader(path)
    assert [x["time"] for x in r] == [rec["time"], GOOD["time"]] and r.n_problems == 0


# Lines a ledger may hold: good records, and everything the strict reader must refuse.
_BAD_LINES = [
    b'{"step": 2, "step": 2}',                                  # duplicate key
    json.dumps({**GOOD, "work": {"a": 1, "b": 2}}).replace('"b"', '"a"').encode(),  # duplicate nested key
    json.dumps({**GOOD, "seconds": {"rollout": 1.5}}).replace("1.5", "NaN").encode(),
    json.dumps({**GOOD, "seconds": {"rollout": 1.5}}).replace("1.5", "1e999").encode(),
    json.dumps({**GOOD, "work": {"x": True}}).encode(),
    json.dumps({**GOOD, "work": {"x": -1}}).encode(),
    json.dumps({**GOOD, "work": {"x": 10**31}}).encode(),
    json.dumps({**GOOD, "work": {"x": 1.0}}).encode(),
    json.dumps({**GOOD, "work": {"a\"b": 1}}).encode(),          # an escaped quote in a key: still fine
    json.dumps({**GOOD, "time": "2026-02-30T00:00:00Z"}).encode(),
    json.dumps({**GOOD, "metrics": {"loss": -0.5, "kl": None}}).encode(),  # negative metrics are fine
    b'{"a": [{"x": 1}',                                           # only an array when joined
    b"",                                                           # blank line
    b"   ",
    b"[1, 2]",
    b"\xff\xfe",
    b"{" + b'"k": 1, ' * 3 + b'"step": 1}',
]


def _reference(lines: list[bytes]):
    """The plain strict reading: each line alone through jsonstrict and record_problem."""
    recs, problems, torn = [], [], None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = jsonstrict.loads(line, max_depth=None)
        except jsonstrict.JSONInputError as e:
            problems.append((i, e.kind))
            continue
        p = record_problem(rec)
        if p:
            problems.append((i, "record"))
        else:
            recs.append((i, rec))
    return recs, problems, torn


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.integers(1, 10**6), st.sampled_from(range(len(_BAD_LINES)))).map(str), max_size=40),
       st.integers(200, 5000))
def test_reader_reads_what_the_strict_line_reader_reads(picks, max_line):
    """Any mix of good and bad lines, read with any block size (max_line_bytes sets it), gives
    the records, problems and line numbers the one-line-at-a-time strict reading gives."""
    import tempfile
    from pathlib import Path

    lines = []
    for p in picks:
        n = int(p)
        lines.append(_BAD_LINES[n] if n < len(_BAD_LINES) else
                     json.dumps({**GOOD, "step": n}, separators=(",", ":")).encode())
    data = b"".join(line + b"\n" for line in lines)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "l.jsonl"
        path.write_bytes(data)
        r = LedgerReader(path, max_line_bytes=max_line)
        got = [(r.line, rec) for rec in r]
        want, problems, _ = _reference(lines)
        too_long = {i for i, line in enumerate(lines, 1) if len(line) > max_line}
        assert got == [(i, rec) for i, rec in want if i not in too_long]
        assert [(p.line, p.kind) for p in r.problems] == sorted(
            [(i, k) for i, k in problems if i not in too_long] + [(i, "too-long") for i in too_long])
        assert r.records == len(got) and r.size == len(data)
        s, plain = LedgerSummary.scan(path), LedgerReader(path)
        assert [rec["step"] for rec in plain] == [rec["step"] for _, rec in want]
        assert s.records == plain.records and s.n_problems == plain.n_problems


def test_fast_records_refuses_what_it_cannot_prove():
    """The array fast path returns None (the caller reads line by line) on a duplicate key,
    NaN, a backslash, non-UTF-8, or anything that is not a list of valid records."""
    good = json.dumps(GOOD, separators=(",", ":"))
    assert fast_records(f"[{good},{good}]".encode()) == [GOOD, GOOD]
    assert fast_records(f"[{good}]".replace('"update":3', '"update":3,"update":3').encode()) is None
    assert fast_records(f"[{good}]".replace("0.5", "NaN").encode()) is None
    assert fast_records(f"[{good}]".replace("rollout.tokens", "rollout\\u002etokens").encode()) is None
    assert fast_records(b"[" + good.encode() + b"\xff]") is None
    assert fast_records(b"[1]") is None


def test_integers_past_64_bits_stay_integers(tmp_path):
    """orjson reads integers past 64 bits as floats; the fast path must still yield what the
    json module yields (an int) where a float would also be accepted."""
    big = 2**70
    good = json.dumps({**GOOD, "metrics": {"n": big}, "seconds": {"rollout": big}}, separators=(",", ":"))
    recs = fast_records(f"[{good},{good}]".encode())
    assert recs is not None and type(recs[0]["metrics"]["n"]) is int and recs[0]["seconds"]["rollout"] == big
    # In a count field orjson's float fails the record check: the fast path declines the batch ...
    counted = json.dumps({**GOOD, "work": {"x": big}}, separators=(",", ":"))
    assert fast_records(f"[{counted}]".encode()) is None
    # ... and the strict reader, line by line, reads the integer.
    path = tmp_path / "l.jsonl"
    path.write_text(counted + "\n")
    (rec,) = LedgerReader(path)
    assert rec["work"]["x"] == big and type(rec["work"]["x"]) is int


def test_without_orjson_the_json_module_reads_the_same(tmp_path, monkeypatch):
    import suite.record.recordcheck as recordcheck

    lines = [json.dumps({**GOOD, "step": i}, separators=(",", ":")).encode() for i in range(1, 300)]
    lines[100] = _BAD_LINES[0]
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with_orjson = LedgerSummary.scan(path)
    monkeypatch.setattr(recordcheck, "_array_loads", None)
    without = LedgerSummary.scan(path)
    assert (without.records, without.flops, without.work, without.n_problems, without.sha256) == \
        (with_orjson.records, with_orjson.flops, with_orjson.work, with_orjson.n_problems, with_orjson.sha256)
    assert without.records == 298 and without.problems[0].line == 101
