"""The built leaderboard in a real browser: Debian's chromium, headless, driven over the Chrome
DevTools Protocol. Clicks a column header (the row order changes), applies filters (only the
matching rows stay; reference cells apart from submitted runs), checks that the board shows
where compute went -- a stacked bar per row whose segments read apart in greyscale in the
screenshot's own pixels, full run names, every column inside 1400 px -- and loads hostile
submissions whose every free-text field is a script/markup payload: none of them may run.

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

from chromium_cdp import Browser, find_chromium, png_pixels
from leaderboard_docs import EXAMPLES, PAYLOADS, hostile, reference_cell_report, valid_examples, variant

SCORES = (0.12, 0.87, 0.45, 0.66, 0.31, 0.95, 0.08, 0.52)
FINDINGS = Path(__file__).parent / "fixtures" / "findings-ci" / "findings.json"


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


PUBLISHED = Path(__file__).resolve().parents[1] / "leaderboard" / "published"
MAINTAINED = "deepscaler-1.5b"      # the maintained published run the site lists


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A site built through the validation gate and the board's rules from varied valid reports,
    a maintained published run (its run description beside the submissions), one of the suite's
    own cells, two hostile reports, a broken file and a report impersonating a published run."""
    from suite.site import board

    examples = [d for _, d in valid_examples()]
    assert examples, "schemas/examples/valid holds no example reports"
    root = tmp_path_factory.mktemp("browser")
    subs, out, published = root / "submissions", root / "site", root / "published"
    subs.mkdir()
    published.mkdir()
    shutil.copy(PUBLISHED / f"{MAINTAINED}.yaml", published)
    for d in examples:                       # the ledgers the reports are checked against
        if "ledger" in d:
            shutil.copy(EXAMPLES / d["ledger"]["path"], subs / d["ledger"]["path"])

    def no_errors(doc: dict) -> bool:
        return not lb.errors_of(lb.validate(doc, base_dir=subs))

    own = [d for d in examples if not board.claims_published(d)]
    impostor = next(d for d in examples if board.claims_published(d))     # not a maintained description
    docs = [variant(own[i % len(own)], i, score=s) for i, s in enumerate(SCORES)]
    docs.append(board.rebuild(published / f"{MAINTAINED}.yaml"))
    reference = reference_cell_report(subs)                             # one of the suite's own cells
    docs.append(reference)
    bad, carried = hostile(examples[0], accept=no_errors)
    bad2, _ = hostile(examples[-1], accept=no_errors)
    bad2["run"]["id"] = bad["run"]["id"] + " (2)"                        # one row per run id
    for d in (*docs, bad, bad2):
        (subs / f"{lb.submission_id(d)}.json").write_text(json.dumps(d))
    (subs / "impostor.json").write_text(json.dumps(impostor))
    (subs / "broken.json").write_text("{ this is not json")
    findings = json.loads(FINDINGS.read_text())        # a study's findings, every claim text hostile
    for c, payload in zip(findings["claims"], PAYLOADS):
        c["claim"] = c["summary"] = payload
    (root / "findings.json").write_text(json.dumps(findings))
    summary = lb.build(subs, out, findings=root / "findings.json")
    listed = {lb.submission_id(d): d for d in (*docs, bad, bad2)}
    return {"out": out, "summary": summary, "docs": docs, "hostile": bad, "carried": carried, "reference": reference,
            "n": len(listed), "published": sum(board.claims_published(d) for d in listed.values())}


def _rows(b: Browser, col: int, body: str = "") -> list[str]:
    """The visible rows' sort keys in column `col` (of one body: runs or reference)."""
    return b.eval(f"Array.from(document.querySelectorAll('#board tbody{body} tr[data-origin]'))"
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
    skipped = dict(s["skipped_files"])
    assert sorted(skipped) == ["broken.json", "impostor.json"]
    assert skipped["impostor.json"].startswith("BOARD-002")        # a published run not maintained: not listed
    # The hostile report kept payloads in its free-text fields and still passed validation.
    carried = {p[:2] for p in site["carried"]}
    assert {("run", "id"), ("run", "label")} <= carried, carried
    assert len(site["carried"]) >= 5


def test_sort_filter_and_screenshot(browser, site, tmp_path):
    b, out = browser, site["out"]
    b.open((out / "index.html").as_uri())
    assert b.eval("document.querySelectorAll('#board tbody tr[data-origin]').length") == site["n"]
    heads = b.eval("Array.from(document.querySelectorAll('#board thead th')).map(th => th.textContent.trim())")
    ev = site["docs"][0]["evaluations"][0]
    score_col = heads.index(f"{ev['target']} · {ev['metric']}")
    total_col = heads.index("total FLOPs")

    # The default view is by total FLOPs, largest first; the reference cells kept apart below.
    totals = [float(x) for x in _rows(b, total_col, ".runs")]
    assert totals == sorted(totals, reverse=True) and len(totals) == site["n"] - 1

    before = _rows(b, 0)
    _click(b, f"#board thead th:nth-child({score_col + 1}) button")
    after = _rows(b, 0)
    assert after != before, "clicking a score header did not reorder the rows"
    scores = [float(x) for x in _rows(b, score_col, ".runs") if x]
    assert scores == sorted(scores, reverse=True) and len(scores) >= len(SCORES)
    assert b.eval("document.querySelectorAll('#board tbody.reference tr[data-origin]').length") == 1  # still apart
    assert b.eval(f"document.querySelectorAll('#board thead th')[{score_col}].getAttribute('aria-sort')") == "descending"
    _click(b, f"#board thead th:nth-child({score_col + 1}) button")
    again = [float(x) for x in _rows(b, score_col, ".runs") if x]
    assert again == sorted(again)                                  # second click reverses

    # Filter by reward system, then by model size as well: only matching rows stay visible.
    options = b.eval("Array.from(document.querySelectorAll('#filter-reward option')).map(o => o.value).filter(v => v)")
    assert options
    want = options[0]
    b.eval(f"(() => {{ const s = document.getElementById('filter-reward'); s.value = {json.dumps(want)};"
           " s.dispatchEvent(new Event('change')); })()")
    visible = b.eval("Array.from(document.querySelectorAll('#board tbody tr[data-origin]')).filter(r => !r.hidden)"
                     ".map(r => r.getAttribute('data-reward'))")
    hidden = b.eval("Array.from(document.querySelectorAll('#board tbody tr[data-origin]')).filter(r => r.hidden).length")
    assert visible and set(visible) == {want}
    assert len(visible) + hidden == site["n"]
    assert b.eval("document.getElementById('shown').textContent") == str(len(visible))
    expected = sum(1 for d in (*site["docs"],) if d["reward"]["system"] == want)
    assert len(visible) >= expected
    size = b.eval("Array.from(document.querySelectorAll('#filter-size option')).map(o => o.value).filter(v => v)")[-1]
    b.eval(f"(() => {{ const s = document.getElementById('filter-size'); s.value = {json.dumps(size)};"
           " s.dispatchEvent(new Event('change')); })()")
    both = b.eval("Array.from(document.querySelectorAll('#board tbody tr[data-origin]')).filter(r => !r.hidden)"
                  ".map(r => [r.getAttribute('data-reward'), r.getAttribute('data-size')])")
    matching = b.eval(f"Array.from(document.querySelectorAll('#board tbody tr[data-origin]')).filter(r =>"
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


def _luma(png: bytes) -> list[float]:
    """Grey levels (ITU-R 601 luma) of every pixel of a PNG: what a reader without colour sees."""
    _, _, rows = png_pixels(png)
    return [0.299 * r[i] + 0.587 * r[i + 1] + 0.114 * r[i + 2] for r in rows for i in range(0, len(r), 3)]


def _stats(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    return mean, (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5


def test_the_board_shows_where_compute_went(browser, site, tmp_path):
    b, out = browser, site["out"]
    b.open((out / "index.html").as_uri())
    heads = b.eval("Array.from(document.querySelectorAll('#board thead th')).map(th => th.textContent.trim())")
    for label in ("run", "steps", "rollout / update / reward", "update share p", "engine profile", "attention",
                  "provenance"):
        assert label in heads, label
    assert sum("share" in h for h in heads) == 1                 # one update-share column, no per-phase ones
    assert not any(h in heads for h in ("rollout FLOPs", "update FLOPs", "reward FLOPs"))

    # Every column fits a 1400 px window: nothing scrolls sideways, none is cut.
    assert b.eval("window.innerWidth") == 1400
    assert b.eval("document.querySelector('.table-wrap').scrollWidth <= document.querySelector('.table-wrap')"
                  ".clientWidth && document.documentElement.scrollWidth <= window.innerWidth")
    assert b.eval("Array.from(document.querySelectorAll('#board th')).every(th => th.getBoundingClientRect().right"
                  " <= window.innerWidth)")

    # Full run names: the text is the whole label, and no cell clips it.
    names = b.eval("Array.from(document.querySelectorAll('#board td.run')).map(td => [td.textContent.trim(),"
                   " td.scrollWidth <= td.clientWidth, td.title])")
    labels = {d["run"]["label"] for d in site["docs"]}
    shown = {n for n, _, _ in names}
    assert labels <= shown
    assert all(fits and name in title for name, fits, title in names)

    # A bar per row whose segments are the phase shares, with the shares as text beside it.
    rows = b.eval("Array.from(document.querySelectorAll('#board tbody tr[data-origin]')).map(tr => { const td ="
                  " tr.querySelector('td.split'); const w = td.querySelector('svg').getBoundingClientRect().width;"
                  " return [tr.querySelector('td.run').textContent.trim(), td.querySelector('.shares').textContent,"
                  " Object.fromEntries(Array.from(td.querySelectorAll('rect')).map(r => [r.getAttribute('class'),"
                  " r.getBoundingClientRect().width / w]))]; })")
    by_label = {d["run"]["label"]: d for d in site["docs"]}
    checked = 0
    for name, text, segs in rows:
        d = by_label.get(name)
        if d is None:
            continue
        for ph, short in (("rollout", "R"), ("update", "U"), ("reward", "W")):
            share = d["totals"]["shares"][ph]
            assert f"{short} {100 * share:.1f}%" in text
            assert abs(segs.get(f"seg-{ph}", 0.0) - share) < 0.01, (name, ph, segs)
        checked += 1
    assert checked == len(site["docs"])

    # The screenshot itself: in grey levels alone the three segments read apart -- rollout a flat
    # fill, update hatched (light and dark stripes), reward a light ground with dark dots.
    png = b.screenshot(tmp_path / "board.png")
    assert struct.unpack(">II", png[16:24])[0] == 1400
    prm = next(d for d in site["docs"] if d["totals"]["shares"]["reward"] > 0.1)
    b.eval("window.scrollTo(0, 0)")
    greys = {}
    for ph in ("rollout", "update", "reward"):
        box = b.eval(f"(() => {{ const tr = Array.from(document.querySelectorAll('#board tbody tr[data-origin]')).find(tr =>"
                     f" tr.querySelector('td.run').textContent.trim() === {json.dumps(prm['run']['label'])});"
                     f" const r = tr.querySelector('rect.seg-{ph}').getBoundingClientRect();"
                     f" return {{x: r.x + 2, y: r.y + 2, width: r.width - 4, height: r.height - 4}}; }})()")
        assert box["width"] > 8 and box["height"] > 4, (ph, box)
        greys[ph] = _stats(_luma(b.screenshot(clip=box)))
    (r_mean, r_sd), (u_mean, u_sd), (w_mean, w_sd) = greys["rollout"], greys["update"], greys["reward"]
    assert r_sd < 3 and u_sd > 25 and w_sd > 10, greys          # flat, striped, dotted
    assert w_mean > u_mean + 15 and w_mean > r_mean + 40, greys   # the reward ground is the lightest
    keep = os.environ.get("RACE_SCREENSHOT_DIR")
    if keep:
        shutil.copy(tmp_path / "board.png", Path(keep) / "board.png")


def test_reference_cells_filter_apart_from_submitted_runs(browser, site):
    b = browser
    b.open((site["out"] / "index.html").as_uri())
    options = b.eval("Array.from(document.querySelectorAll('#filter-origin option')).map(o => o.value)")
    assert options == ["", "submitted run", "reference cell", "published run"]
    published = site["published"]
    assert published >= 1                               # the published example (schemas/examples/valid)
    for value, want in (("reference cell", 1), ("published run", published), ("submitted run", site["n"] - 1 - published)):
        b.eval(f"(() => {{ const s = document.getElementById('filter-origin'); s.value = {json.dumps(value)};"
               " s.dispatchEvent(new Event('change')); })()")
        visible = b.eval("Array.from(document.querySelectorAll('#board tbody tr[data-origin]')).filter(r => !r.hidden)"
                         ".map(r => [r.getAttribute('data-origin'), r.querySelector('td.run').textContent.trim()])")
        assert len(visible) == want and {o for o, _ in visible} == {value}
    assert visible and site["reference"]["run"]["label"] not in {n for _, n in visible}


def test_published_rows_link_their_paper_and_show_ranges(browser, site, tmp_path):
    """A published run's row: the paper linked (only an http(s) URL), the total's range over the
    assumptions under it, the share of pretraining compute with the EU verdict; score headers name
    the evaluation set with the metric on a line of its own beneath it."""
    b = browser
    b.open((site["out"] / "index.html").as_uri())
    _not_pwned(b)
    pub = next(d for d in site["docs"] if "sources" in d)
    row = b.eval(f"(() => {{ const tr = Array.from(document.querySelectorAll('#board tr[data-origin]')).find(tr =>"
                 f" tr.querySelector('td.run').textContent.trim() === {json.dumps(pub['run']['label'])});"
                 " return Array.from(tr.cells).map(td => [td.textContent.trim(), (td.querySelector('a') || {}).href"
                 " || null, (td.querySelector('.sub') || {}).textContent || null]); })()")
    heads = b.eval("Array.from(document.querySelectorAll('#board thead th')).map(th => th.textContent.trim())")
    cell = dict(zip(heads, row))
    assert cell["provenance"][1] == pub["sources"]["published"]["url"] and cell["provenance"][2] == "published"
    lo, hi = pub["sources"]["range"]["flops"]["low"], pub["sources"]["range"]["flops"]["high"]
    assert cell["total FLOPs"][2] == f"{lo:.1e}–{hi:.1e}".replace("e+", "e")
    ratio = pub["pretraining"]["ratio"]
    assert cell["post / pre-training"][0].startswith(f"{ratio:.1e}") and cell["post / pre-training"][2] == "EU: below"
    # Every link a row carries goes to an http(s) address or to the site's own pages.
    hrefs = b.eval("Array.from(document.querySelectorAll('#board a')).map(a => a.getAttribute('href'))")
    assert all(h.startswith(("https://", "http://", "s/")) for h in hrefs), hrefs
    ev = site["docs"][0]["evaluations"][0]
    th = heads.index(f"{ev['target']} · {ev['metric']}")
    lines = b.eval(f"(() => {{ const th = document.querySelectorAll('#board thead th')[{th}];"
                   " const m = th.querySelector('.label2'); const b = th.querySelector('button');"
                   " return [b.firstChild.textContent, m.textContent.replace(' · ', ''),"
                   " m.getBoundingClientRect().top - b.getBoundingClientRect().top]; })()")
    assert lines[0] == ev["target"] and lines[1] == ev["metric"] and lines[2] > 8   # the metric on its own line
    png = b.screenshot(tmp_path / "published.png")
    assert struct.unpack(">II", png[16:24])[0] == 1400
    keep = os.environ.get("RACE_SCREENSHOT_DIR")
    if keep:
        shutil.copy(tmp_path / "published.png", Path(keep) / "published.png")


def test_run_page_shows_notes_and_provenance(browser, site):
    b = browser
    est = next(d for d in site["docs"] if d["provenance"]["method"] == "estimated")
    b.open((site["out"] / "s" / f"{lb.submission_id(est)}.html").as_uri())
    assert b.eval("document.querySelector('p.notes').textContent") == est["run"]["notes"]
    assert b.eval("document.querySelector('strong.provenance').textContent") == "estimated"
    text = b.eval("document.body.textContent")
    assert "there is no per-step ledger" in text and "of their peak" in text
    assert b.eval("document.querySelectorAll('svg.split rect').length") >= 2


def test_findings_page_in_the_site_frame(browser, site):
    """The study's findings page: the site's own style admitted by its CSP (verdict rows coloured),
    hostile claim texts shown as text and never run, the views' navigation, no sideways scrolling."""
    b = browser
    b.open((site["out"] / "findings.html").as_uri())
    _not_pwned(b)
    assert b.eval("Array.from(document.querySelectorAll('nav.views a')).map(a => a.textContent)") == [
        "by total FLOPs", "by allocation", "frontier", "findings"]
    cells = b.eval("Array.from(document.querySelectorAll('#claims tbody tr')).map(r => "
                   "[r.className, getComputedStyle(r.cells[1]).backgroundColor, r.cells[2].textContent])")
    assert len(cells) == 6
    colour = {"v-reproduced": "rgb(227, 244, 225)", "v-not-reproduced": "rgb(251, 227, 227)",
              "v-inconclusive": "rgb(253, 245, 216)"}
    assert all(bg == colour[cls] for cls, bg, _ in cells), cells
    assert [text for _, _, text in cells] == list(PAYLOADS[:6])
    assert b.eval("document.documentElement.scrollWidth <= window.innerWidth")
    b.open((site["out"] / "index.html").as_uri())
    assert b.eval("document.querySelector('nav.views a[href=\"findings.html\"]') !== null")


def test_every_row_carries_the_badge_the_board_decided(browser, site, tmp_path):
    """Every row carries one badge of how it was obtained, decided from what the board checked (the
    stored ledger, the maintained published runs), never from the report's own words; the legend
    names each badge on the page and the filter keeps only the rows with the chosen one."""
    from suite.site import board

    b = browser
    b.open((site["out"] / "index.html").as_uri())
    rows = b.eval("Array.from(document.querySelectorAll('#board tbody tr[data-origin]')).map(tr => [tr.querySelector("
                  "'td.run').textContent.trim(), Array.from(tr.querySelectorAll('span.badge')).map(s => "
                  "[s.getAttribute('data-badge'), s.textContent.trim(), s.getBoundingClientRect().width])])")
    assert len(rows) == site["n"]
    assert all(len(badges) == 1 and badges[0][0] in board.BADGES and badges[0][2] > 10 for _, badges in rows), rows
    by_label = {name: badges[0] for name, badges in rows}
    want = {}
    for d in site["docs"]:
        method = d.get("provenance", {}).get("method")
        want[d["run"]["label"]] = ("published" if board.claims_published(d) else "measured"
                                   if method in (None, "measured") else method)
    for label, key in want.items():
        assert by_label[label][0] == key and by_label[label][1] == board.BADGES[key].label, (label, by_label[label])
    legend = b.eval("Array.from(document.querySelectorAll('#badge-legend dt span.badge')).map(s => "
                    "s.getAttribute('data-badge'))")
    assert legend == [k for k in board.BADGES if k in {x[0] for x in by_label.values()}]
    assert {"measured", "estimated", "published"} <= set(legend)
    label = board.BADGES["measured"].label
    b.eval(f"(() => {{ const s = document.getElementById('filter-badge'); s.value = {json.dumps(label)};"
           " s.dispatchEvent(new Event('change')); })()")
    visible = b.eval("Array.from(document.querySelectorAll('#board tbody tr[data-origin]')).filter(r => !r.hidden)"
                     ".map(r => r.querySelector('span.badge').getAttribute('data-badge'))")
    assert visible and set(visible) == {"measured"}
    assert len(visible) == sum(1 for k, _, _ in by_label.values() if k == "measured")
    png = b.screenshot(tmp_path / "badges.png")
    assert struct.unpack(">II", png[16:24])[0] == 1400
    keep = os.environ.get("RACE_SCREENSHOT_DIR")
    if keep:
        shutil.copy(tmp_path / "badges.png", Path(keep) / "badges.png")
