"""How numbers and names read on the site and in the paper tables: FLOP counts, shares, model
sizes, score columns, and which links may be followed."""

from __future__ import annotations

from typing import Any, Iterable
from urllib.parse import urlsplit

def sci(n: float | int | None, digits: int = 3) -> str:
    """A FLOP count in short scientific form (1.23e18); '—' for None."""
    if n is None:
        return "—"
    if n == 0:
        return "0"
    return f"{float(n):.{digits - 1}e}".replace("e+", "e")


def pct(x: float | None) -> str:
    """A share in [0, 1] as a percentage with one decimal."""
    return "—" if x is None else f"{100.0 * x:.1f}%"


def gflops(rate: float | None) -> str:
    """An achieved FLOP/s rate in GFLOP/s ('—' without one: no FLOPs or no seconds)."""
    return "—" if rate is None else f"{rate / 1e9:,.0f}" if rate >= 1e11 else f"{rate / 1e9:.3g}"


def fixed(x: float | None, digits: int = 3) -> str:
    """A number with a fixed number of decimals; '—' for None."""
    return "—" if x is None else f"{x:.{digits}f}"


def score(x: float | None) -> str:
    """An evaluation score: three decimals, or short scientific form outside +-10,000 and for
    tiny non-zero values (a finite score of 1e308 stays a short cell); '—' for None."""
    if x is None:
        return "—"
    return f"{x:.3f}" if x == 0 or 1e-3 <= abs(x) < 1e4 else f"{x:.3e}".replace("e+", "e")


def interval(e: dict | None, digits: int = 3) -> str:
    """An estimate with its interval (a findings.json estimate: value, low, high) as
    'value [low, high]'; '—' without one."""
    return "—" if not e else f"{e['value']:.{digits}f} [{e['low']:.{digits}f}, {e['high']:.{digits}f}]"


def thousands(n: int | None) -> str:
    """An integer with thousands separators; '—' for None."""
    return "—" if n is None else f"{n:,}"


def size_label(params: int) -> str:
    """Model size as people say it, from an exact parameter count: 1543714304 -> '1.5B'."""
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if params >= scale:
            v = params / scale
            return f"{v:.2g}{unit}" if v < 100 else f"{v:.0f}{unit}"
    return str(params)


def safe_href(value: Any) -> str | None:
    """The value itself when it is an absolute http(s) URL a reader may follow, else None.
    `javascript:`, `data:` and relative URLs are never emitted as links."""
    if not isinstance(value, str) or len(value) > 2000:
        return None
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return None
    if parts.scheme.lower() in ("http", "https") and parts.netloc and value == value.strip() \
            and not any(ord(ch) < 33 for ch in value):
        return value
    return None


def score_key(target: str, metric: str) -> str:
    """Column name of an evaluation: its target and metric."""
    return f"{target} · {metric}"


BOARD_SCORE_COLUMNS = 12
"""Score columns the main table shows at most: the targets most runs were evaluated on. Every
score stays on its run's own page; a table of every target would grow as runs x targets (30
runs of 1,000 targets each made a 150 MB site)."""

FRONTIER_CHARTS = 24
"""Frontier plots drawn at most, chosen the same way (one plot per target otherwise)."""


def top_score_keys(rows: Iterable, limit: int) -> list[str]:
    """The `limit` evaluation target·metric keys shared by the most rows (ties by name), sorted
    by name: the columns the main table shows and the plots the frontier page draws."""
    from collections import Counter

    counts = Counter(k for r in rows for k in r.scores)
    chosen = sorted(counts, key=lambda k: (-counts[k], k))[:limit]
    return sorted(chosen)


def all_score_keys(rows: Iterable) -> list[str]:
    """Every evaluation target·metric present in any row, sorted."""
    return sorted({k for r in rows for k in r.scores})
