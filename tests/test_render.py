"""Site rendering and paper tables: escaping, columns, charts, relative links, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from suite.site import charts, formatting, render, tables
from suite.errors import RaceError

from leaderboard_docs import PAYLOADS, ROOT, hostile, made_up_report, string_paths


def entries_of(docs):
    out = []
    for i, d in enumerate(docs):
        row = render.row_from_report(d, id=f"id{i:03d}", page=f"s/id{i:03d}.html")
        out.append(render.SiteEntry(row=row, doc=d, filename=f"file{i}.json"))
    return out


def test_made_up_reports_follow_the_schema():
    schema = json.loads((ROOT / "schemas" / "report-v1.schema.json").read_text())
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for d in (made_up_report(), made_up_report(rank=None, reward="prm", reward_share=0.1, band=(1, 10 ** 19))):
        assert list(v.iter_errors(d)) == []


def test_formatting():
    assert formatting.sci(1234567890123) == "1.23e12"
    assert formatting.sci(0) == "0" and formatting.sci(None) == "—"
    assert formatting.pct(0.1234) == "12.3%"
    assert formatting.size_label(1543714304) == "1.5B"
    assert formatting.size_label(7615616512) == "7.6B"
    assert formatting.size_label(1_070_000) == "1.1M"
    assert formatting.safe_href("https://arxiv.org/abs/2607.13389") == "https://arxiv.org/abs/2607.13389"
    for bad in ("javascript:alert(1)", "JaVaScRiPt:alert(1)", " javascript:x", "data:text/html,x", "//evil",
                "http:/nohost", "https://a.b/\nx", "vbscript:x"):
        assert formatting.safe_href(bad) is None, bad


def test_row_reads_the_report_numbers():
    d = made_up_report(total=4 * 10 ** 18, p=0.25, reward_share=0.1, rank=None, band=(10 ** 18, 5 * 10 ** 18),
                       scores={("gsm8k-250", "pass@1"): 0.61, ("math500-250", "process_judge"): 0.4})
    r = render.row_from_report(d, id="x")
    assert r.flops == d["totals"]["flops"] and r.update_share == d["totals"]["update_share"]
    assert r.lora_rank is None and r.group_size == 2 and r.size_label == "1.5B"
    assert r.scores == {"gsm8k-250 · pass@1": 0.61, "math500-250 · process_judge": 0.4}
    assert r.budget_band == "1.0e18–5.0e18"
    assert render.row_from_report(made_up_report(total=3 * 10 ** 17), id="y").budget_band == "1e17–1e18"


def test_main_table_has_every_required_column(tmp_path):
    docs = [made_up_report(run_id="a", scores={("gsm8k-250", "pass@1"): 0.5}),
            made_up_report(run_id="b", scores={("math500-250", "process_judge"): 0.7})]
    render.build_site(entries_of(docs), tmp_path)
    html = (tmp_path / "index.html").read_text()
    heads = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r'<button type="button">(.*?)</button>', html)]
    for label in ("run", "model", "model size", "reward system", "LoRA rank", "K", "steps", "total FLOPs",
                  "rollout / update / reward", "update share p", "engine profile", "attention", "provenance",
                  "gsm8k-250 · pass@1", "math500-250 · process_judge"):
        assert label in heads, label
    # The split is one bar column (no per-phase FLOPs or share columns), and p is one column.
    assert [h for h in heads if "share" in h] == ["update share p"] and not [h for h in heads if "FLOPs" in h
                                                                          and h != "total FLOPs"]
    # Every row has one cell per header; missing scores sort last (empty data-sort).
    rows = re.findall(r"<tr data-origin.*?</tr>", html, re.S)
    assert len(rows) == 2
    assert all(r.count("<td") == len(heads) for r in rows)
    assert 'class="num missing" data-sort=""' in html


def test_default_views_sort_by_total_and_by_update_share(tmp_path):
    docs = [made_up_report(run_id="small-high-p", total=10 ** 17, p=0.9),
            made_up_report(run_id="big-low-p", total=10 ** 19, p=0.1),
            made_up_report(run_id="mid", total=10 ** 18, p=0.5)]
    render.build_site(entries_of(docs), tmp_path)

    def order(page):
        return re.findall(r'<td class="text run" data-sort="([^"]*)"', (tmp_path / page).read_text())

    assert order("index.html") == ["big-low-p", "mid", "small-high-p"]
    assert order("allocation.html") == ["small-high-p", "mid", "big-low-p"]


def test_filters_offer_sizes_rewards_and_bands(tmp_path):
    docs = [made_up_report(run_id="a", model="Qwen2.5-7B-Instruct", reward="prm", reward_share=0.1, total=10 ** 19),
            made_up_report(run_id="b", model="Qwen2.5-1.5B-Instruct", reward="sparse", total=10 ** 17,
                           band=(5 * 10 ** 16, 2 * 10 ** 17))]
    render.build_site(entries_of(docs), tmp_path)
    html = (tmp_path / "index.html").read_text()
    options = dict(re.findall(r'<select name="(\w+)".*?</select>', html, re.S) and
                   [(m[0], re.findall(r'<option value="([^"]+)"', m[1]))
                    for m in re.findall(r'<select name="(\w+)"(.*?)</select>', html, re.S)])
    assert options == {"origin": ["submitted run"], "size": ["1.5B", "7.6B"], "reward": ["prm", "sparse"],
                       "band": ["5.0e16–2.0e17", "1e19–1e20"], "badge": []}   # badges: the board's (test_leaderboard)
    assert 'data-size="7.6B" data-reward="prm" data-band="1e19–1e20"' in html


def test_rows_carry_provenance_origin_notes_and_a_bar(tmp_path):
    est = made_up_report(run_id="est", label="a run whose long name must show in full, never cut", p=0.25,
                         reward_share=0.1)
    est["schema_version"] = "1.1"
    est["provenance"] = {"method": "estimated", "steps": 10, "means": {"prompt_tokens": 200, "completion_tokens": 900}}
    est["run"]["notes"] = "evaluation values are illustrative"
    ref = made_up_report(run_id="ref")
    ref["schema_version"] = "1.1"
    ref["provenance"] = {"method": "imported", "source": {"engine": "verl", "file": "m.jsonl", "fields": ["x"]},
                         "reference_cell": "s-sparse"}
    rows = [render.row_from_report(d, id=d["run"]["id"]) for d in (est, ref)]
    assert [(r.provenance, r.origin) for r in rows] == [("estimated", "submitted run"),
                                                        ("imported (verl)", "reference cell")]
    assert rows[0].notes == "evaluation values are illustrative" and rows[0].steps == 10
    bar = charts.split_bar(rows[0].shares)
    assert [(s["phase"], s["x"], s["width"]) for s in bar] == [("rollout", 0.0, 65.0), ("update", 65.0, 25.0),
                                                               ("reward", 90.0, 10.0)]
    render.build_site(entries_of([est, ref]), tmp_path)
    html = (tmp_path / "index.html").read_text()
    assert ">a run whose long name must show in full, never cut</a>" in html
    assert "R 65.0% · U 25.0% · W 10.0%" in html and 'fill="url(#fill-update)"' in html
    assert 'data-origin="reference cell"' in html and ">imported (verl)</span>" in html
    page = (tmp_path / "s" / "id000.html").read_text()
    assert '<p class="notes">evaluation values are illustrative</p>' in page and "no per-step ledger" in page


def test_run_page_shows_achieved_flops_per_second_and_utilization_per_phase(tmp_path):
    d = made_up_report(run_id="hw", reward="prm", reward_share=0.1)
    flops = d["totals"]["flops"]
    d["totals"]["seconds"] = {"rollout": 100.0, "update": 50.0, "reward": 10.0}
    peak = flops["total"] / 160.0 / 0.25          # all phases together run at 25% of 2 accelerators' peak
    d["schema_version"] = "1.1"
    d["provenance"] = {"method": "estimated", "steps": 10, "means": {"prompt_tokens": 200, "completion_tokens": 900}}
    d["hardware"] = {"accelerator": "H100", "count": 2, "peak_flops": peak / 2, "wall_seconds": 160.0}
    render.build_site(entries_of([d]), tmp_path)
    page = (tmp_path / "s" / "id000.html").read_text()
    for ph, s in d["totals"]["seconds"].items():
        rate = flops[ph] / s
        row = re.search(rf'<th scope="row">{ph}</th>.*?</tr>', page).group(0)
        assert f">{formatting.gflops(rate)}</td>" in row and f">{formatting.pct(rate / peak)}</td>" in row
    total = re.search(r'<th scope="row">total</th>.*?</tr>', page).group(0)
    assert f">{formatting.gflops(flops['total'] / 160.0)}</td>" in total and ">25.0%</td>" in total
    assert formatting.gflops(None) == "—" and formatting.gflops(2.5e9) == "2.5"


def test_hostile_strings_render_as_text_everywhere(tmp_path):
    bad, carried = hostile(made_up_report(scores={("gsm8k-250", "pass@1"): 0.5}), accept=lambda d: True)
    assert len(carried) >= 20
    bad["run"]["label"] = PAYLOADS[0]
    render.build_site(entries_of([bad]), tmp_path, skipped=[render.Skip(PAYLOADS[1], PAYLOADS[3])])
    pages = [tmp_path / "index.html", tmp_path / "allocation.html", tmp_path / "frontier.html",
             *sorted((tmp_path / "s").glob("*.html"))]
    for page in pages:
        html = page.read_text()
        # Only our own inline script, and it comes last; no payload survives unescaped.
        assert html.count("<script") == (1 if page.parent == tmp_path and page.name != "frontier.html" else 0)
        for p in PAYLOADS:
            assert p not in html
        assert "<img" not in html and "<iframe" not in html and "onerror=" not in html.replace("onerror=&#34;", "")
        assert 'href="javascript' not in html.lower()
        assert "Content-Security-Policy" in html
    sub = next((tmp_path / "s").glob("*.html")).read_text()
    assert "&lt;script&gt;window.__pwned=1" in sub     # shown, as text


def test_csp_hash_covers_the_inline_script(tmp_path):
    import base64
    import hashlib

    render.build_site(entries_of([made_up_report()]), tmp_path)
    html = (tmp_path / "index.html").read_text()
    script = re.search(r"<script>(.*?)</script>", html, re.S).group(1)
    style = re.search(r"<style>(.*?)</style>", html, re.S).group(1)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)

    def h(t):
        return "sha256-" + base64.b64encode(hashlib.sha256(t.encode()).digest()).decode()

    assert f"script-src '{h(script)}'" in csp and f"style-src '{h(style)}'" in csp
    assert "default-src 'none'" in csp


def test_pages_carry_no_absolute_local_paths(tmp_path):
    out = tmp_path / "site"
    docs = [made_up_report(run_id=f"r{i}", total=10 ** (17 + i)) for i in range(3)]
    render.build_site(entries_of(docs), out, skipped=[render.Skip("broken.json", "not JSON")])
    files = list(out.rglob("*.html"))
    assert len(files) == 6
    for f in files:
        text = f.read_text()
        for needle in (str(tmp_path), str(ROOT), str(Path.home()), "file://"):
            assert needle not in text, (f.name, needle)
        for href in re.findall(r'(?:href|src)="([^"]*)"', text):
            assert not href.startswith("/") and "://" not in href, href   # only relative links


def test_phase_chart_stacks_the_phases():
    steps = list(range(1, 11))
    flops = [{"rollout": 100, "update": 50 * (i % 2), "reward": 10} for i in range(10)]
    c = charts.phase_chart(steps, flops)
    assert [layer["phase"] for layer in c["layers"]] == ["rollout", "update", "reward"]
    assert [layer["total"] for layer in c["layers"]] == [1000, 250, 100]
    # The top of the stack reaches the chart's top at the tallest step (160 FLOPs).
    top_ys = [float(pt.split(",")[1]) for pt in c["layers"][2]["points"].split()[:10]]
    assert min(top_ys) == c["top"]
    one = charts.phase_chart([7], [{"rollout": 5, "update": 5, "reward": 0}])
    assert one["steps"] == 1 and len(one["layers"][0]["points"].split()) == 4      # a bar
    zero = charts.phase_chart([1, 2], [{"rollout": 0, "update": 0, "reward": 0}] * 2)
    assert all(float(pt.split(",")[1]) == zero["bottom"] for pt in zero["layers"][2]["points"].split())
    long = charts.phase_chart(list(range(1, 10001)), [{"rollout": 1, "update": 1, "reward": 0}] * 10000)
    assert long["binned"] and len(long["layers"][0]["points"].split()) <= 2 * 400


def test_frontier_is_a_running_maximum_per_series():
    docs = [made_up_report(run_id="a", total=10 ** 17, scores={("t", "m"): 0.3}),
            made_up_report(run_id="b", total=10 ** 18, scores={("t", "m"): 0.2}),   # worse and dearer: off
            made_up_report(run_id="c", total=10 ** 19, scores={("t", "m"): 0.6}),
            made_up_report(run_id="d", total=10 ** 18, model="Qwen2.5-7B-Instruct", scores={("t", "m"): 0.9})]
    rows = [render.row_from_report(d, id=d["run"]["id"], page=f"s/{d['run']['id']}.html") for d in docs]
    (chart,) = charts.frontier_charts(rows)
    by_name = {s["name"]: s for s in chart["series"]}
    assert set(by_name) == {"1.5B · sparse", "7.6B · sparse"}
    small = by_name["1.5B · sparse"]
    assert [p["best"] for p in small["points"]] == [True, False, True]
    assert len(small["frontier"].split()) == 2


TABLE_DOCS = [made_up_report(run_id="a_1", label="Qwen & co: 50% <b>", total=2 * 10 ** 18, p=0.25),
              made_up_report(run_id="b", rank=None, reward="prm", reward_share=0.2, total=10 ** 19,
                             scores={("gsm8k-250", "pass@1"): 0.61})]


def test_markdown_table():
    md = tables.render_table(tables.table_rows([("a", d) for d in TABLE_DOCS]), "markdown")
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert len(lines) == 4
    assert len({ln.count(" | ") for ln in lines[2:]}) == 1       # every row has the same cells
    assert "Qwen & co: 50% \\<b\\>" in md                      # markup escaped, text kept
    assert "2.00e18" in md and "0.250" in md and "25.0%" in md and "1,000 + 2,000" in md
    assert "race-analytic 1 (trl)" in md and "causal" in md and "LoRA r=64" in md and "| full |" in md


def test_latex_table_escapes_text():
    tex = tables.render_table(tables.table_rows([("a", d) for d in TABLE_DOCS]), "latex")
    assert r"Qwen \& co: 50\% \textless{}b\textgreater{}" in tex
    assert r"$2.00\times10^{18}$" in tex and r"25.0\%" in tex and r"LoRA $r=64$" in tex
    assert r"\begin{tabular}" in tex and r"\bottomrule" in tex
    assert "a_1" not in tex                           # underscores escaped in the caption
    hostile_doc = made_up_report(label=r"\input{/etc/passwd} $x$ #1 ~ ^")
    t2 = tables.render_table(tables.table_rows([("h", hostile_doc)]), "latex")
    assert r"\input" not in t2 and r"\textbackslash{}input\{/etc/passwd\}" in t2


def test_json_table_keeps_exact_numbers():
    out = json.loads(tables.render_table(tables.table_rows([("a", d) for d in TABLE_DOCS]), "json"))
    assert out["rows"][1]["flops"] == TABLE_DOCS[1]["totals"]["flops"]
    assert out["rows"][1]["lora_rank"] is None and out["rows"][1]["scores"] == {"gsm8k-250 · pass@1": 0.61}


def test_unknown_table_format_is_a_user_error():
    with pytest.raises(RaceError, match="markdown, latex, json"):
        tables.render_table([], "html")


def test_every_string_field_is_reachable_by_hostile():
    d = made_up_report()
    bad, carried = hostile(d, accept=lambda x: True)
    assert {p for p, _ in string_paths(bad)} - {("schema_version",)} == set(carried)
    assert {p for p, _ in string_paths(d)} - {("schema_version",)} < set(carried)
    assert {("run", "notes"), ("run", "label"), ("grpo", "loss_type")} <= set(carried)


def test_tables_from_checked_report_files(tmp_path):
    from leaderboard_docs import EXAMPLES

    files = sorted(str(p) for p in EXAMPLES.glob("*.json"))
    md = tables.table_from_files(files, "markdown")
    assert sum(ln.startswith("| ") for ln in md.splitlines()) == 1 + len(files)   # header + a row each
    docs = [json.loads(Path(f).read_text()) for f in files]
    rows = json.loads(tables.table_from_files(files, "json"))["rows"]
    assert [r["flops"] for r in rows] == [d["totals"]["flops"] for d in docs]
    assert [r["update_share"] for r in rows] == [d["totals"]["update_share"] for d in docs]
    # A report with error findings never makes it into a paper table; neither does junk.
    bad = docs[0]
    bad["totals"]["flops"]["total"] += 1
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(RaceError, match="error finding"):
        tables.table_from_files([str(tmp_path / "bad.json")], "latex")
    (tmp_path / "junk.json").write_text("[1, 2")
    with pytest.raises(RaceError, match="not JSON"):
        tables.table_from_files([str(tmp_path / "junk.json")], "markdown")
    with pytest.raises(RaceError, match="cannot read"):
        tables.table_from_files([str(tmp_path / "missing.json")], "markdown")


def test_race_report_prints_the_paper_table(capsys, tmp_path):
    from suite.cli import main as race

    from leaderboard_docs import EXAMPLES

    files = sorted(str(p) for p in EXAMPLES.glob("*.json"))
    assert race(["report", "--format", "markdown", *files]) == 0
    out = capsys.readouterr().out
    assert sum(ln.startswith("| ") for ln in out.splitlines()) == 1 + len(files)
    assert race(["report", "--format", "latex", files[0], "-o", str(tmp_path / "t.tex")]) == 0
    assert r"\begin{tabular}" in (tmp_path / "t.tex").read_text()
    assert race(["report", "--format", "json", str(tmp_path / "missing.json")]) == 2
    assert "Traceback" not in capsys.readouterr().err
