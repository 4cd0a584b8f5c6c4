"""The ledger: one flushed JSON line per optimizer step; torn tails reported, never dropped
silently; streaming reads; the fast record check agrees with the JSON Schema."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from suite.errors import RaceError
from suite.accounting import TOKEN_KEYS
from suite.record.ledger import LedgerReader, LedgerWriter, iter_ledger, read_ledger
from suite.record.recordcheck import record_problem
from suite.record.summary import LedgerSummary
from suite.record.schemas import ledger_record_validator

TOK = dict.fromkeys(TOKEN_KEYS, 3)
FLOPS = {"rollout": 10, "update": 20, "reward": 0}


def _write(path, n, start=1):
    with LedgerWriter(path, fsync=False) as w:
        for s in range(start, start + n):
            w.append(s, tokens=TOK, work={"rollout.tokens": s}, flops=FLOPS, time="2026-11-29T20:00:00Z")


def test_each_step_is_on_disk_before_the_next(tmp_path):
    p = tmp_path / "l.jsonl"
    w = LedgerWriter(p)
    w.append(1, tokens=TOK, work={}, flops=FLOPS)
    # Another process (a crash-survivor reader) sees the record while the writer is still open.
    out = subprocess.run([sys.executable, "-c", f"print(open({str(p)!r}).read().count(chr(10)))"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
    w.append(2, tokens=TOK, work={}, flops=FLOPS)
    w.close()
    recs = read_ledger(p).records
    assert [r["step"] for r in recs] == [1, 2]
    assert recs[0]["time"].endswith("Z")


def test_torn_last_line_is_reported_not_dropped_silently(tmp_path):
    p = tmp_path / "l.jsonl"
    _write(p, 3)
    whole = p.read_bytes()
    p.write_bytes(whole + b'{"step": 4, "time": "2026-11-29T2')
    led = read_ledger(p)
    assert [r["step"] for r in led.records] == [1, 2, 3]
    assert led.torn is not None and led.torn.line == 4 and led.torn.offset == len(whole)
    assert "torn" in str(led.torn) and "line 3" in str(led.torn)


def test_resume_cuts_the_torn_line_and_continues(tmp_path):
    p = tmp_path / "l.jsonl"
    _write(p, 3)
    with open(p, "ab") as f:
        f.write(b'{"step": 4, "tim')
    with LedgerWriter(p, resume=True) as w:
        assert w.last_step == 3 and w.torn is not None
        w.append(4, tokens=TOK, work={}, flops=FLOPS)
    led = read_ledger(p)
    assert [r["step"] for r in led.records] == [1, 2, 3, 4] and led.torn is None


def test_writer_refuses_overwrite_bad_order_and_bad_records(tmp_path):
    p = tmp_path / "l.jsonl"
    _write(p, 2)
    with pytest.raises(RaceError, match="already exists"):
        LedgerWriter(p)
    with LedgerWriter(p, resume=True) as w:
        with pytest.raises(RaceError, match="does not follow"):
            w.append(2, tokens=TOK, work={}, flops=FLOPS)
        with pytest.raises(RaceError, match="malformed"):
            w.append(3, tokens={"rollout_prompt": -1}, work={}, flops=FLOPS)
        with pytest.raises(RaceError, match="seconds"):  # NaN never reaches the file
            w.append(3, tokens=TOK, work={}, flops=FLOPS, seconds={"rollout": float("nan")})
    assert len(read_ledger(p).records) == 2


def test_bad_middle_line_strict_raises_lenient_collects(tmp_path):
    p = tmp_path / "l.jsonl"
    _write(p, 3)
    lines = p.read_bytes().splitlines(keepends=True)
    p.write_bytes(lines[0] + b'{"step": 2, "step": 2}\n' + b"\n" + lines[1] + lines[2])
    with pytest.raises(RaceError, match="line 2"):
        read_ledger(p)
    led = read_ledger(p, strict=False)
    assert [r["step"] for r in led.records] == [1, 2, 3]
    assert [(x.line, x.kind) for x in led.problems] == [(2, "duplicate-key")]


def test_overlong_line_is_skipped_without_reading_it_whole(tmp_path):
    p = tmp_path / "l.jsonl"
    _write(p, 2)
    with open(p, "ab") as f:
        f.write(b'{"x": "' + b"a" * 5000 + b'"}\n')
    r = LedgerReader(p, max_line_bytes=1000)
    assert [x["step"] for x in r] == [1, 2]
    assert r.problems[0].kind == "too-long" and r.problems[0].line == 3
    assert r.sha256 == __import__("hashlib").sha256(p.read_bytes()).hexdigest()


def test_summary_sums_and_orders(tmp_path):
    p = tmp_path / "l.jsonl"
    _write(p, 4)
    s = LedgerSummary.scan(p)
    assert s.records == 4 and s.flops == {"rollout": 40, "update": 80, "reward": 0}
    assert s.work == {"rollout.tokens": 1 + 2 + 3 + 4} and s.tokens["update"] == 12
    assert (s.first_step, s.last_step, s.step_problems) == (1, 4, [])
    lines = p.read_bytes().splitlines(keepends=True)
    p.write_bytes(b"".join([lines[0], lines[1], lines[1], lines[3], lines[2]]))
    s = LedgerSummary.scan(p)
    assert [m for _, m in s.step_problems] == ["step 2 repeats step 2", "step 3 goes back from step 4"]
    with pytest.raises(RaceError, match="does not follow"):
        LedgerSummary.scan(p, strict=True)


def test_iter_ledger_streams(tmp_path):
    p = tmp_path / "l.jsonl"
    _write(p, 5)
    reader = iter_ledger(p)
    it = iter(reader)
    assert next(it)["step"] == 1 and reader.records == 1   # handed out one at a time, as read
    assert [r["step"] for r in it] == [2, 3, 4, 5] and reader.records == 5
    assert reader.sha256 == __import__("hashlib").sha256(p.read_bytes()).hexdigest()   # every byte read once


# ---- the fast record check is a faithful mirror of schemas/ledger-record-v1.schema.json

_count = st.one_of(st.integers(min_value=0, max_value=10**31), st.integers(max_value=-1), st.floats(allow_nan=False, allow_infinity=False),
                   st.booleans(), st.none(), st.text(max_size=3))
_good_count = st.integers(min_value=0, max_value=10**20)


@st.composite
def records(draw):
    rec = {
        "step": draw(st.one_of(st.integers(min_value=1, max_value=10**6), _count)),
        "time": draw(st.sampled_from(["2026-11-29T20:00:00Z", "2026-11-29T20:00:00.5+01:00", "2026-13-01T00:00:00Z",
                                      "yesterday", "2026-11-29 20:00:00Z"])),
        "tokens": {k: draw(st.one_of(_good_count, _good_count, _count)) for k in TOKEN_KEYS},
        "work": draw(st.dictionaries(st.sampled_from(["rollout.tokens", "update.train.tokens", "x"]),
                                     st.one_of(_good_count, _count), max_size=3)),
        "flops": {k: draw(st.one_of(_good_count, _good_count, _count)) for k in ("rollout", "update", "reward")},
    }
    if draw(st.booleans()):
        rec["seconds"] = draw(st.dictionaries(st.sampled_from(["rollout", "update", "reward", "other", "bogus"]),
                                              st.one_of(st.floats(min_value=0, max_value=1e6), st.floats(max_value=-0.1)),
                                              max_size=3))
    if draw(st.booleans()):
        rec["metrics"] = draw(st.dictionaries(st.text(max_size=5), st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=2)), max_size=2))
    if draw(st.integers(0, 9)) == 0:
        rec.pop(draw(st.sampled_from(sorted(rec))))
    if draw(st.integers(0, 9)) == 0:
        rec[draw(st.sampled_from(["stepp", "extra"]))] = 1
    if "tokens" in rec and draw(st.integers(0, 9)) == 0:
        rec["tokens"][draw(st.sampled_from(["rollout", "bogus"]))] = 1
    return rec


@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_fast_record_check_agrees_with_the_schema(rec):
    schema_ok = not any(True for _ in ledger_record_validator().iter_errors(json.loads(json.dumps(rec))))
    assert (record_problem(rec) is None) == schema_ok, (record_problem(rec), rec)


def test_batched_parsing_never_hides_a_bad_line(tmp_path):
    """Lines are parsed in batches as one JSON array; a batch that only parses when its lines
    run together must still be reported line by line."""
    p = tmp_path / "l.jsonl"
    _write(p, 4)
    good = p.read_bytes().splitlines()
    two_on_one = good[2] + b"," + good[3]  # two records on one line
    split = [b'{"a": [{"x": 1}', b'{"y": 2}]}']  # one array only when joined
    p.write_bytes(b"\n".join([good[0], good[1], two_on_one, *split, good[3].replace(b'"step":4', b'"step":5')]) + b"\n")
    r = LedgerReader(p)
    assert [x["step"] for x in r] == [1, 2, 5]
    assert [(x.line, x.kind) for x in r.problems] == [(3, "syntax"), (4, "syntax"), (5, "syntax")]
