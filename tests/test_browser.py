"""The built leaderboard in a real browser: Debian's chromium, headless, driven over the Chrome
DevTools Protocol. Clicks a column header (the row order changes), applies filters (only the
matching rows stay), saves a screenshot, and loads hostile submissions whose every free-text
field is a script/markup payload: none of them may run.

In CI (CI set) a missing chromium is a failure; elsewhere the test is skipped with the reason.
Install it with scripts/install-browser.sh."""

from __future__ import annotations

import json
import os
import shutil
import struct
import time
from pathlib import Path

import pytest

from suite.site import leaderboard as lb

from chromium_cdp import Browser, find_chromium
from leaderboard_docs import EXAMPLES, PAYLOADS, hostile, valid_examples, variant

SCORES = (0.12, 0.87, 0.45, 0.66, 0.31, 0.95, 0.08, 0.52)


def _need(what: str, ok: bool) -> None:
    if ok:
        return
    reason = f"{what} is missing: run scripts/install-browser.sh (and pip install -e '.[test]')"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    binary = find_chromium()
    _need("chromium (Debian package)", binary is not None)
    try:
        import websocket  # noqa: F401
    except ImportError:
        _need("the websocket-client package", False)
    b = Browser(binary)
    yield b
    b.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A site built through the validation gate from varied valid reports, two hostile ones and a
    broken file."""
    examples = [d for _, d in valid_examples()]
    assert examples, "schemas/examples/valid holds no example reports"
    root = tmp_path_factory.mktemp("browser")
    subs, out = root / "submissions", root / "site"
    subs.mkdir()
    for d in examples:                       # the ledgers the reports are checked against
        shutil.copy(EXAMPLES / d["ledger"]["path"], subs / d["ledger"]["path"])

    def no_errors(doc: dict) -> bool:
        return not lb.errors_of(lb.validate(doc, base_dir=subs))

    docs = [variant(examples[i % len(examples)], i, score=s) for i, s in enumerate(SCORES)]
    bad, carried = hostile(examples[0], accept=no_errors)
    bad2, _ = hostile(examples[-1], accept=no_errors)
    for d in (*docs, bad, bad2):
        (subs / f"{lb.submission_id(d)}.json").write_text(json.dumps(d))
    (subs / "broken.json").write_text("{ this is not json")
    summary = lb.build(subs, out)
    return {"out": out, "summary": summary, "docs": docs, "hostile": bad, "carried": carried,
            "n": len({lb.submission_id(d) for d in (*docs, bad, bad2)})}


def _rows(b: Browser, col: int) -> list[str]:
    return b.eval(f"Array.from(document.querySelectorAll('#board tbody tr'))"
                  f".filter(r => !r.hidden).map(r => r.cells[{col}].getAttribute('data-sort'))")


def _click(b: Browser, selector: str) -> None:
    """A real mouse click at the element's centre (Input events, not element.click())."""
    box = b.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView();"
                 f" const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()")
    for kind in ("mousePressed", "mouseReleased"):
        b.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)


def _not_pwned(b: Browser) -> None:
    assert b.eval("typeof window.__pwned") == "undefined"
    assert b.eval("Array.from(document.querySelectorAll('iframe')).length") == 0
    assert b.eval("document.title") != "pwned"          # what the payloads would set


def test_gate_lists_the_valid_and_hostile_and_skips_the_broken(site):
    s = site["summary"]
    assert s["listed"] == site["n"]
    assert [name for name, _ in s["skipped_files"]] == ["broken.json"]
    # The hostile report kept payloads in its free-text fields and still passed validation.
    carried = {p[:2] for p in site["carried"]}
    assert {("run", "id"), ("run", "label")} <= carried, carried
    assert len(site["carried"]) >= 5


def test_sort_filter_and_screenshot(browser, site, tmp_path):
    b, out = browser, site["out"]
    b.open((out / "index.html").as_uri())
    assert b.eval("document.querySelectorAll('#board tbody tr').length") == site["n"]
    heads = b.eval("Array.from(document.querySelectorAll('#board thead th')).map(th => th.textContent.trim())")
    ev = site["docs"][0]["evaluations"][0]
    score_col = heads.index(f"{ev['target']} · {ev['metric']}")
    total_col = heads.index("total FLOPs")

    # The default view is by total FLOPs, largest first.
    totals = [float(x) for x in _rows(b, total_col)]
    assert totals == sorted(totals, reverse=True)

    before = _rows(b, 0)
    _click(b, f"#board thead th:nth-child({score_col + 1}) button")
    after = _rows(b, 0)
    assert after != before, "clicking a score header did not reorder the rows"
    scores = [float(x) for x in _rows(b, score_col) if x]
    assert scores == sorted(scores, reverse=True) and len(scores) >= len(SCORES)
    assert b.eval(f"document.querySelectorAll('#board thead th')[{score_col}].getAttribute('aria-sort')") == "descending"
    _click(b, f"#board thead th:nth-child({score_col + 1}) button")
    again = [float(x) for x in _rows(b, score_col) if x]
    assert again == sorted(again)                                  # second click reverses

    # Filter by reward system, then by model size as well: only matching rows stay visible.
    options = b.eval("Array.from(document.querySelectorAll('#filter-reward option')).map(o => o.value).filter(v => v)")
    assert options
    want = options[0]
    b.eval(f"(() => {{ const s = document.getElementById('filter-reward'); s.value = {json.dumps(want)};"
           " s.dispatchEvent(new Event('change')); })()")
    visible = b.eval("Array.from(document.querySelectorAll('#board tbody tr')).filter(r => !r.hidden)"
                     ".map(r => r.getAttribute('data-reward'))")
    hidden = b.eval("Array.from(document.querySelectorAll('#board tbody tr')).filter(r => r.hidden).length")
    assert visible and set(visible) == {want}
    assert len(visible) + hidden == site["n"]
    assert b.eval("document.getElementById('shown').textContent") == str(len(visible))
    expected = sum(1 for d in (*site["docs"],) if d["reward"]["system"] == want)
    assert len(visible) >= expected
    size = b.eval("Array.from(document.querySelectorAll('#filter-size option')).map(o => o.value).filter(v => v)")[-1]
    b.eval(f"(() => {{ const s = document.getElementById('filter-size'); s.value = {json.dumps(size)};"
           " s.dispatchEvent(new Event('change')); })()")
    both = b.eval("Array.from(document.querySelectorAll('#board tbody tr')).filter(r => !r.hidden)"
                  ".map(r => [r.getAttribute('data-reward'), r.getAttribute('data-size')])")
    matching = b.eval(f"Array.from(document.querySelectorAll('#board tbody tr')).filter(r =>"
                      f" r.getAttribute('data-reward') === {json.dumps(want)} &&"
                      f" r.getAttribute('data-size') === {json.dumps(size)}).length")
    assert all(x == [want, size] for x in both) and len(both) == matching
    assert b.eval("document.getElementById('shown').textContent") == str(matching)

    b.eval("document.querySelector('form.filters').reset()")
    time.sleep(0.1)
    assert b.eval("document.getElementById('shown').textContent") == str(site["n"])
    b.eval("document.querySelector('.table-wrap').scrollLeft = 0; window.scrollTo(0, 0)")
    png = b.screenshot(tmp_path / "leaderboard.png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width >= 1000 and height >= 400 and len(png) > 20_000
    keep = os.environ.get("RACE_SCREENSHOT_DIR")
    if keep:
        shutil.copy(tmp_path / "leaderboard.png", Path(keep) / "leaderboard.png")
    _not_pwned(b)


def test_hostile_submission_renders_as_text(browser, site):
    b, out = browser, site["out"]
    sid = lb.submission_id(site["hostile"])
    for page in ("index.html", "allocation.html", "frontier.html", f"s/{sid}.html"):
        b.open((out / page).as_uri())
        time.sleep(0.2)          # give any injected onerror/onload handler time to fire
        _not_pwned(b)
        text = b.eval("document.body.textContent")
        if page.startswith("s/"):
            # The payloads are visible as the text they are.
            assert sum(p in text for p in PAYLOADS) >= 3
            assert b.eval("Array.from(document.querySelectorAll('a')).filter(a => /^\\s*javascript:/i"
                          ".test(a.getAttribute('href') || '')).length") == 0
            assert b.eval("document.querySelectorAll('script').length") == 0
    # The main page's own script still ran (sorting works) under the page's CSP.
    b.open((out / "index.html").as_uri())
    assert b.eval("document.getElementById('shown').textContent") == str(site["n"])
