"""The one JSON Lines reader (suite.jsonlines): what each caller relies on, on small files."""

import pytest

from suite import jsonlines
from suite.errors import RaceError


def test_lines_are_numbered_blank_lines_skipped_and_a_bad_line_named(tmp_path):
    f = tmp_path / "a.jsonl"
    f.write_bytes(b'{"a": 1}\n\n  \n{"b": NaN}\n')
    got = list(jsonlines.records(f))
    assert got[0] == (1, {"a": 1}) and got[1][0] == 4 and got[1][1]["b"] != got[1][1]["b"]   # NaN read
    f.write_bytes(b'{"a": 1}\n{"a": 1, "a": 2}\n{"c": 3}\n')
    with pytest.raises(RaceError, match=r"a\.jsonl: line 2: not valid JSON \(duplicate key 'a'"):
        list(jsonlines.records(f, hint="fix it"))
    f.write_bytes(b"[1]\n[NaN]\n")
    with pytest.raises(RaceError, match="line 2: not valid JSON .*NaN"):
        list(jsonlines.records(f, allow_nan=False))


def test_a_torn_last_line_ends_the_file_only_where_asked(tmp_path):
    f = tmp_path / "killed.jsonl"
    f.write_bytes(b'{"step": 1}\n{"step": 2}\n{"step": 3, "lo')
    assert [v["step"] for v in jsonlines.values(f, torn_tail=True)] == [1, 2]
    with pytest.raises(RaceError, match="line 3: not valid JSON"):
        list(jsonlines.values(f))
    f.write_bytes(b'{"step": 1}\n{"step": 2, "lo\n{"step": 3}\n')      # torn in the middle: never tolerated
    with pytest.raises(RaceError, match="line 2: not valid JSON"):
        list(jsonlines.values(f, torn_tail=True))


def test_prefix_lines_only_bytes_in_memory_and_the_line_bound(tmp_path):
    log = tmp_path / "job.out"
    log.write_bytes(b'starting\n:::MLLOG {"key": "a"}\nnoise {"x": 1}\n0: :::MLLOG {"key": "b"}\n')
    assert list(jsonlines.records(log, prefix=":::MLLOG ")) == [(2, {"key": "a"}), (4, {"key": "b"})]
    assert list(jsonlines.records(b'{"x": 1}\n\n[2]', name="packed.xz")) == [(1, {"x": 1}), (3, [2])]
    with pytest.raises(RaceError, match=r"packed\.xz: line 2: longer than 9 bytes"):     # 9 bytes and its newline pass
        list(jsonlines.records(b'[1234567]\n[12345678]\n', name="packed.xz", max_line_bytes=9))
    assert list(jsonlines.values(b'[1234567]\n[123456]', max_line_bytes=9)) == [[1234567], [123456]]
    assert jsonlines.first(log) is None and jsonlines.first(tmp_path / "missing") is None
    assert jsonlines.first(tmp_path / "killed.jsonl") is None
    (tmp_path / "l.jsonl").write_bytes(b'{"step": 1}\n' + b"x" * 10_000)
    assert jsonlines.first(tmp_path / "l.jsonl") == {"step": 1}
