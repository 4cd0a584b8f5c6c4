"""One ledger record checked fast: the record shape of schemas/ledger-record-v1.schema.json applied
to a record alone (`record_problem`, which the writer and the reader's slow path run) and to a
batch of records column by column (`batch_ok`), and a batch of lines parsed by a C decoder when
that provably reads what strict parsing would (`fast_records`). suite.record.ledger's writer
and reader share these, so the two agree on what a record is.
"""

from __future__ import annotations

import json
import math
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

from .schemas import record_shape

# The shape comes from the ledger-record schema (suite.record.schemas.record_shape);
# running jsonschema itself costs ~100 us a record, too slow for 100,000-step ledgers, so this
# fast check applies that shape to every record and the schema only explains the records it
# rejects (tests keep the two verdicts in agreement).

_INT = {int}
_NUM = {int, float}
_S = None


class _Shape:
    """record_shape() as the sets the checks test against (built once)."""

    def __init__(self):
        s = record_shape()
        self.keys, self.required, self.required_set = s.keys, s.required, frozenset(s.required)
        self.tokens, self.token_set = s.tokens, frozenset(s.tokens)
        self.flops, self.flop_set = s.flops, frozenset(s.flops)
        self.seconds, self.seconds_set = s.seconds, frozenset(s.seconds)
        self.max_count = s.max_count


def _shape() -> _Shape:
    global _S
    if _S is None:
        _S = _Shape()
    return _S


def _counts(d: Any) -> bool:
    """A dict whose values are all non-negative ints (bool excluded), checked at C speed."""
    if type(d) is not dict:
        return False
    v = d.values()
    return not v or (set(map(type, v)) <= _INT and min(v) >= 0 and max(v) <= _shape().max_count)


def _seconds(d: Any) -> bool:
    if type(d) is not dict or not d.keys() <= _shape().seconds_set:
        return False
    v = d.values()
    return not v or (set(map(type, v)) <= _NUM and all(map(math.isfinite, v)) and min(v) >= 0)


def record_problem(rec: Any) -> str | None:
    """None if `rec` is a well-formed ledger record, else a one-line reason (fast path)."""
    if type(rec) is not dict:
        return f"a record must be a JSON object, not {type(rec).__name__}"
    shape = _shape()
    keys = rec.keys()
    if not keys <= shape.keys:
        return f"unknown key {sorted(keys - shape.keys)[0]!r}"
    if not shape.required_set <= keys:
        return f"missing key {next(k for k in shape.required if k not in rec)!r}"
    step = rec["step"]
    if type(step) is not int or step < 1:
        return "step must be an integer >= 1"
    if type(rec["time"]) is not str or not _is_datetime(rec["time"]):
        return "time must be an RFC 3339 date-time"
    tokens = rec["tokens"]
    if not _counts(tokens) or tokens.keys() != shape.token_set:
        return f"tokens must hold exactly {', '.join(shape.tokens)} as non-negative integers"
    flops = rec["flops"]
    if not _counts(flops) or flops.keys() != shape.flop_set:
        return f"flops must hold exactly {', '.join(shape.flops)} as non-negative integers"
    if not _counts(rec["work"]):
        return "work must map names to non-negative integers"
    if "seconds" in rec and not _seconds(rec["seconds"]):
        return f"seconds must map some of {', '.join(shape.seconds)} to non-negative numbers"
    if "metrics" in rec:
        m = rec["metrics"]
        if type(m) is not dict or not set(map(type, m.values())) <= {int, float, type(None)} \
                or not all(math.isfinite(v) for v in m.values() if v is not None):
            return "metrics must map names to numbers or null"
    return None


_METRIC_TYPES = {int, float, type(None)}


def _count_column(dicts: list, plain: bool) -> bool:
    """_counts of every one of `dicts`, a whole column at once. `plain` (see batch_ok): the
    values hold no bool and no negative number, so one sum proves them integers (a float makes
    it a float, anything else a TypeError) and in range (each is at most the sum)."""
    if set(map(type, dicts)) - {dict}:
        return False
    if plain:
        try:
            total = sum(chain.from_iterable(map(dict.values, dicts)))
        except TypeError:
            return False
        if type(total) is int and total <= _shape().max_count:
            return True
    v = list(chain.from_iterable(map(dict.values, dicts)))
    return not v or (set(map(type, v)) <= _INT and min(v) >= 0 and max(v) <= _shape().max_count)


def batch_ok(recs: list, *, plain: bool = False) -> bool:
    """True only when record_problem(rec) is None for every record of `recs`, checked column
    by column at C speed (a few set/sum/min calls per batch instead of a dozen calls per
    record). False says nothing about which record is bad: check them one by one then.

    plain=True is a promise about the JSON text the records were parsed from: it has no
    `true`/`false` literal and no '-' outside the time strings (so no bool and no negative
    number anywhere); it lets sums stand in for type and range checks."""
    if not recs or set(map(type, recs)) != {dict}:
        return not recs
    shape = _shape()
    for keys in set(map(tuple, recs)):          # the records of one run share a key order
        ks = set(keys)
        if not (ks <= shape.keys and shape.required_set <= ks):
            return False
    steps = list(map(itemgetter("step"), recs))
    times = list(map(itemgetter("time"), recs))
    if set(map(type, steps)) != _INT or min(steps) < 1 or set(map(type, times)) != {str} \
            or not _all_datetimes(times):
        return False
    for name, want in (("tokens", shape.token_set), ("flops", shape.flop_set)):
        col = list(map(itemgetter(name), recs))
        if not _count_column(col, plain) or any(set(k) != want for k in set(map(tuple, col))):
            return False
    if not _count_column(list(map(itemgetter("work"), recs)), plain):
        return False
    seconds = [r["seconds"] for r in recs if "seconds" in r]
    if seconds:
        if set(map(type, seconds)) != {dict} or not set().union(*seconds) <= shape.seconds_set:
            return False
        v = list(chain.from_iterable(map(dict.values, seconds)))
        if plain:   # non-negative: the sum is finite only when every value is
            try:
                total = sum(v)
            except TypeError:
                return False
            if type(total) not in _NUM or not math.isfinite(total):
                return False
        elif v and not (set(map(type, v)) <= _NUM and all(map(math.isfinite, v)) and min(v) >= 0):
            return False
    metrics = [r["metrics"] for r in recs if "metrics" in r]
    if metrics:
        if set(map(type, metrics)) != {dict}:
            return False
        v = list(chain.from_iterable(map(dict.values, metrics)))
        if not set(map(type, v)) <= _METRIC_TYPES or not all(math.isfinite(x) for x in v if x is not None):
            return False
    return True


def _strings(recs: list) -> int:
    """How many JSON strings a batch of records that passed batch_ok holds: every key of every
    object, and one value per record (its time). Nothing else in such a record is a string."""
    n = len(recs) + sum(map(len, recs))
    for name in ("tokens", "flops", "work"):
        n += sum(map(len, map(itemgetter(name), recs)))
    for name in ("seconds", "metrics"):
        n += sum(len(r[name]) for r in recs if name in r)
    return n


try:  # a faster parser for the fast path; the strict reader stays the json module's
    from orjson import loads as _array_loads
except ImportError:  # pragma: no cover - orjson is a dependency; the stdlib path is exact too
    _array_loads = None

# orjson reads integers past 64 bits as floats. In count fields a float fails the record check
# (the batch is then read line by line, strictly); where floats are allowed (seconds, metrics) a
# value that large sends the batch to the json module, which keeps it an integer.
_BIG = float(2**63)


def _big_float(recs: list) -> bool:
    """A seconds or metrics value that may be an integer orjson read as a float."""
    for name in ("seconds", "metrics"):
        v = [x for r in recs if type(r) is dict and type(r.get(name)) is dict
             for x in r[name].values() if type(x) is float]
        if v and max(map(abs, v)) >= _BIG:
            return True
    return False


def fast_records(data: bytes) -> list | None:
    """A batch `[{...},{...}]` of lines parsed by a C decoder with no per-object hook, when
    that provably gives what the strict reader would: UTF-8, no backslash (so every '"' in the
    text delimits a string), every element a well-formed record (batch_ok: this also refuses
    NaN, Infinity and overflowing floats, which plain json lets through), and as many strings in
    the text as keys and times in the records (a duplicate key would have collapsed into one).
    None otherwise: the caller parses strictly, line by line, and names the problem."""
    if b"\\" in data:
        return None
    try:
        recs = _array_loads(data) if _array_loads is not None else None    # checks UTF-8 itself
        if recs is None or type(recs) is list and _big_float(recs):
            recs = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):        # orjson's and json's decode errors are ValueErrors
        return None
    if type(recs) is not list or set(map(type, recs)) != {dict}:
        return None
    times = list(map(dict.get, recs, repeat("time")))
    if set(map(type, times)) != {str}:
        return None
    plain = b"true" not in data and b"false" not in data and data.count(b"-") == "".join(times).count("-")
    if not batch_ok(recs, plain=plain) or data.count(b'"') != 2 * _strings(recs):
        return None
    return recs


_DAYS_OK: dict[str, bool] = {}
_TIMES_RE = None


def _all_datetimes(times: list[str]) -> bool:
    """_is_datetime of every time, in one regex pass over the times joined by newlines (the
    record check's regex repeated) plus the calendar check per distinct day."""
    global _TIMES_RE
    if _TIMES_RE is None:
        import re

        from rfc3339_validator import RFC3339_REGEX

        one = RFC3339_REGEX.pattern.replace("^", "").replace("$", "")   # its only anchors
        _TIMES_RE = re.compile(rf"(?:{one})(?:\n(?:{one}))*", RFC3339_REGEX.flags)
    text = "\n".join(times)
    # A time holding a newline would split into two matches: refuse (the caller checks one by one).
    if text.count("\n") != len(times) - 1 or _TIMES_RE.fullmatch(text) is None:
        return False
    return all(_day_ok(day) for day in set(map(itemgetter(slice(0, 10)), times)))


def _day_ok(day: str) -> bool:
    from rfc3339_validator import validate_rfc3339

    ok = _DAYS_OK.get(day)
    if ok is None:
        ok = _DAYS_OK[day] = validate_rfc3339(day + "T00:00:00Z")
    return ok


def _is_datetime(s: str) -> bool:
    """The check jsonschema's date-time format uses (rfc3339-validator: its regex, then the
    calendar), with the calendar part cached per date: ledgers hold a few distinct dates and
    100,000s of times."""
    from rfc3339_validator import RFC3339_REGEX, validate_rfc3339

    if RFC3339_REGEX.match(s) is None:
        return False
    day = s[:10]  # the regex fixes YYYY-MM-DD at the start
    ok = _DAYS_OK.get(day)
    if ok is None:
        ok = _DAYS_OK[day] = validate_rfc3339(day + "T00:00:00Z")
    return ok

__all__ = ["record_problem", "batch_ok", "fast_records"]
