"""Submissions: content-hash ids, atomic no-clobber writes under concurrency, folder loading."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from suite.site import leaderboard as lb
from suite.errors import RaceError

from leaderboard_docs import made_up_report


def test_id_is_a_content_hash_independent_of_formatting():
    d = made_up_report()
    same = json.loads(json.dumps(d, indent=4, sort_keys=False))
    assert lb.submission_id(d) == lb.submission_id(same)
    # the first 16 hex digits of sha256 over the canonical JSON: sorted keys, no spaces
    canonical = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert lb.submission_id(d) == hashlib.sha256(canonical).hexdigest()[:16]
    assert lb.submission_id(made_up_report(run_id="other")) != lb.submission_id(d)


def test_write_new_never_clobbers(tmp_path):
    target = tmp_path / "x.json"
    assert lb.write_new(target, b"first")
    assert not lb.write_new(target, b"second")
    assert target.read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]     # no temp file left behind


def _race_to_write(args):
    path, payload, start = args
    while time.time() < start:        # line up all writers on the same instant
        pass
    return lb.write_new(Path(path), payload)


def test_concurrent_writers_leave_exactly_one_complete_file(tmp_path):
    target = tmp_path / "same.json"
    payloads = [bytes([65 + i]) * 200_000 for i in range(8)]
    start = time.time() + 0.5
    with mp.get_context("fork").Pool(8) as pool:
        won = pool.map(_race_to_write, [(str(target), p, start) for p in payloads])
    assert sum(won) == 1
    assert target.read_bytes() == payloads[won.index(True)]
    assert [p.name for p in tmp_path.iterdir()] == ["same.json"]


def test_interrupted_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "big.json"
    code = ("from pathlib import Path; from suite.site.leaderboard import write_new; "
            "write_new(Path(%r), b'x' * (128 * 1024 * 1024))") % (str(target),)
    proc = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.time() + 30
    while not any(p.name.endswith(".tmp") for p in tmp_path.iterdir()):   # it has started writing
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # Killed mid-write: the final name never holds a partial file.
    assert not target.exists() or target.stat().st_size == 128 * 1024 * 1024
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert all(p.name.startswith(".") for p in leftovers)   # hidden: builds ignore it


def test_folder_loading_skips_what_it_cannot_read(tmp_path):
    good = made_up_report(run_id="good")
    (tmp_path / "good.json").write_text(json.dumps(good))
    (tmp_path / "copy.json").write_text(json.dumps(good, indent=2))
    (tmp_path / "broken.json").write_text('{"schema_version": "1.0", ')
    (tmp_path / "nan.json").write_text('{"x": NaN}')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "notes.txt").write_text("ignored")
    (tmp_path / ".good.json.123.tmp").write_text("half")
    (tmp_path / "link.json").symlink_to(tmp_path / "good.json")
    loaded = lb.load_submissions(tmp_path, check=False)
    assert [s.filename for s in loaded.submissions] == ["copy.json"]
    reasons = {s.name: s.reason for s in loaded.skipped}
    assert set(reasons) == {"broken.json", "nan.json", "list.json", "good.json", "link.json"}
    assert "symbolic link" in reasons["link.json"]
    assert "duplicate of copy.json" in reasons["good.json"]
    assert "NaN" in reasons["nan.json"] or "nan" in reasons["nan.json"].lower()


def test_missing_folder_is_a_user_error(tmp_path):
    with pytest.raises(RaceError, match="does not exist"):
        lb.load_submissions(tmp_path / "nope")


def test_ledger_outside_the_folder_is_never_read(tmp_path):
    (tmp_path / "secret.jsonl").write_text("{}\n")
    sub = tmp_path / "subs"
    sub.mkdir()
    doc = made_up_report()
    doc["ledger"]["path"] = "../secret.jsonl"
    steps, note = lb.ledger_steps(sub, doc)
    assert steps is None and "not available" in note


def _write_ledger(path: Path, steps: int) -> str:
    from suite.digest import file_sha256
    from suite.record.ledger import LedgerWriter

    with LedgerWriter(path, fsync=False) as w:
        for s in range(1, steps + 1):
            w.append(s, tokens={"rollout_prompt": 10, "rollout_completion": 20, "update": 30, "reward": 0},
                     work={}, flops={"rollout": 1000 + s, "update": 500, "reward": 0},
                     time="2026-11-29T20:00:00Z")
    return file_sha256(path)


def test_site_charts_a_ledger_stored_beside_the_submissions(tmp_path):
    subs, site = tmp_path / "subs", tmp_path / "site"
    subs.mkdir()
    with_ledger, without = made_up_report(run_id="charted", steps=25), made_up_report(run_id="bare")
    sha = _write_ledger(subs / "charted.ledger.jsonl", 25)
    with_ledger["ledger"].update(path="charted.ledger.jsonl", sha256=sha)
    without["ledger"]["path"] = "absent.ledger.jsonl"
    mismatched = made_up_report(run_id="wrong-sha")
    mismatched["ledger"].update(path="charted.ledger.jsonl", sha256="f" * 64)
    for d in (with_ledger, without, mismatched):
        (subs / f"{d['run']['id']}.json").write_text(json.dumps(d))
    summary = lb.build(subs, site, check=False)
    assert summary["listed"] == 3 and summary["skipped"] == 0
    pages = {lb.submission_id(d): d["run"]["id"] for d in (with_ledger, without, mismatched)}
    html = {name: (site / "s" / f"{sid}.html").read_text() for sid, name in pages.items()}
    assert html["charted"].count("<polygon") == 3 and "25 optimizer steps" in html["charted"]
    assert "<polygon" not in html["bare"] and "not available beside the report" in html["bare"]
    assert "<polygon" not in html["wrong-sha"] and "sha256 does not match" in html["wrong-sha"]


# ----------------------------------------------------------------------------- through the gate

from leaderboard_docs import EXAMPLES, valid_examples, variant  # noqa: E402
from suite.cli import main as race  # noqa: E402


@pytest.fixture
def example(tmp_path):
    """A valid shipped example report with its ledger beside it, copied to a scratch folder."""
    name, doc = next((n, d) for n, d in valid_examples() if "ledger" in d)
    src = tmp_path / "run"
    src.mkdir()
    (src / name).write_bytes((EXAMPLES / name).read_bytes())
    ledger = doc["ledger"]["path"]
    (src / ledger).write_bytes((EXAMPLES / ledger).read_bytes())
    subs = tmp_path / "subs"
    subs.mkdir()
    return src / name, doc, subs


def stored(doc: dict) -> dict:
    """A report as `race submit` stores it: its ledger path pointing at the ledger's own name."""
    return {**doc, "ledger": {**doc["ledger"], "path": lb.stored_ledger_name(doc)}}


def test_submit_stores_the_report_and_its_ledger(example):
    report, doc, subs = example
    done = lb.submit(report, subs)
    assert done.path == subs / f"{lb.submission_id(stored(doc))}.json"
    assert json.loads(done.path.read_text()) == stored(doc)       # only ledger.path changed
    assert done.ledger == subs / f"ledger-{doc['ledger']['sha256'][:16]}.jsonl"
    assert done.ledger.read_bytes() == (report.parent / doc["ledger"]["path"]).read_bytes()
    assert not lb.errors_of(lb.validate(json.loads(done.path.read_text()), base_dir=subs))


def test_runs_whose_ledgers_share_a_name_submit_into_one_folder(tmp_path):
    """Every suite-made run names its ledger ledger.jsonl: each is stored under its own name."""
    subs = tmp_path / "subs"
    subs.mkdir()
    measured = [(name, doc) for name, doc in valid_examples() if doc.get("provenance", {}).get("method") == "measured"]
    for i, (name, doc) in enumerate(measured):
        run = tmp_path / f"run-{i}"
        run.mkdir()
        (run / "ledger.jsonl").write_bytes((EXAMPLES / doc["ledger"]["path"]).read_bytes())
        (run / "report.json").write_text(json.dumps({**doc, "ledger": {**doc["ledger"], "path": "ledger.jsonl"}}))
        assert race(["submit", str(run / "report.json"), "--submissions", str(subs)]) == 0
    ledgers = {doc["ledger"]["sha256"] for _, doc in measured}     # a ledger two reports share is stored once
    assert len(list(subs.glob("ledger-*.jsonl"))) == len(ledgers) >= 2 and len(list(subs.glob("*.json"))) == len(measured)
    assert lb.build(subs, tmp_path / "site")["listed"] == len(measured)


def test_duplicates_are_refused_whatever_their_name(example, tmp_path):
    report, doc, subs = example
    lb.submit(report, subs)
    with pytest.raises(lb.SubmissionRefused, match="duplicate"):
        lb.submit(report, subs)
    other = report.parent / "renamed.json"
    other.write_text(json.dumps(doc, indent=1))                   # same content, other bytes
    with pytest.raises(lb.SubmissionRefused, match="duplicate"):
        lb.submit(other, subs)
    (subs / "by-pr.json").write_text(json.dumps(variant(doc, 1)))  # arrived by pull request
    with pytest.raises(lb.SubmissionRefused, match="duplicate of by-pr.json"):
        copy = report.parent / "again.json"
        copy.write_text(json.dumps(variant(doc, 1)))
        lb.submit(copy, subs)
    assert sorted(p.name for p in subs.glob("*.json")) == sorted(["by-pr.json", f"{lb.submission_id(stored(doc))}.json"])


def test_error_findings_refuse_the_submission_and_name_them(example, tmp_path, capsys):
    report, doc, subs = example
    bad = json.loads(report.read_text())
    bad["totals"]["flops"]["total"] += 12345                     # the phases no longer sum to it
    bad["totals"]["flops"]["update"] = -1                        # and a schema error
    path = report.parent / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(lb.SubmissionRefused) as e:
        lb.submit(path, subs)
    assert "error finding(s)" in e.value.message and "$.totals.flops" in e.value.message
    assert list(subs.iterdir()) == []                       # nothing written, not even the ledger
    assert race(["submit", str(path), "--submissions", str(subs)]) == 1
    err = capsys.readouterr().err
    assert "refused" in err and "Traceback" not in err


def test_cli_exit_codes(example, tmp_path, capsys):
    report, doc, subs = example
    assert race(["submit", str(report), "--submissions", str(subs)]) == 0
    assert lb.submission_id(stored(doc)) in capsys.readouterr().out
    assert race(["submit", str(report), "--submissions", str(subs)]) == 1
    junk = tmp_path / "junk.json"
    junk.write_text("{\"a\": 1} trailing")
    assert race(["submit", str(junk), "--submissions", str(subs)]) == 2
    assert race(["submit", str(tmp_path / "missing.json"), "--submissions", str(subs)]) == 2
    assert race(["submit", str(report), "--submissions", str(tmp_path / "nowhere")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_damaged_stored_ledger_is_refused(example):
    report, doc, subs = example
    (subs / lb.stored_ledger_name(doc)).write_text("not the ledger its name says\n")
    with pytest.raises(lb.SubmissionRefused, match="other bytes"):
        lb.submit(report, subs)
    assert not list(subs.glob("*.json"))


def _submit_in_process(args):
    report, subs, start = args
    while time.time() < start:
        pass
    try:
        lb.submit(Path(report), Path(subs))
        return "ok"
    except lb.SubmissionRefused as e:
        return "duplicate" if "duplicate" in e.message else e.message


def test_concurrent_submits_of_one_report(example):
    report, doc, subs = example
    start = time.time() + 1.0
    with mp.get_context("fork").Pool(6) as pool:
        results = pool.map(_submit_in_process, [(str(report), str(subs), start)] * 6)
    assert sorted(results) == ["duplicate"] * 5 + ["ok"]
    assert [p.name for p in subs.glob("*.json")] == [f"{lb.submission_id(stored(doc))}.json"]
    assert not [p for p in subs.rglob("*") if p.name.endswith(".tmp")]


def test_build_lists_the_valid_and_names_what_it_skipped(example, tmp_path, capsys):
    report, doc, subs = example
    lb.submit(report, subs)
    bad = json.loads(report.read_text())
    bad["totals"]["update_share"] = 0.999
    (subs / "inconsistent.json").write_text(json.dumps(bad))
    (subs / "truncated.json").write_text(report.read_text()[:200])
    no_ledger = variant(doc, 3)
    no_ledger["ledger"]["path"] = "not-shipped.ledger.jsonl"
    (subs / "no-ledger.json").write_text(json.dumps(no_ledger))
    site = tmp_path / "site"
    assert race(["leaderboard", "build", "--submissions", str(subs), "--out", str(site)]) == 0
    captured = capsys.readouterr()
    assert "1 submission(s) listed, 3 skipped" in captured.out
    assert "skipped no-ledger.json" in captured.err and "not-shipped.ledger.jsonl" in captured.err
    assert "skipped inconsistent.json" in captured.err and "skipped truncated.json" in captured.err
    index = (site / "index.html").read_text()
    assert "Skipped files (3)" in index and "inconsistent.json" in index and "truncated.json" in index
    page = (site / "s" / f"{lb.submission_id(stored(doc))}.html").read_text()
    assert "<polygon" in page and f"{doc['totals']['steps']} optimizer steps" in page
    assert str(tmp_path) not in index and str(tmp_path) not in page


def test_rebuild_reuses_findings_only_for_unchanged_bytes(example, tmp_path):
    report, doc, subs = example
    lb.submit(report, subs)
    site = tmp_path / "site"
    assert lb.build(subs, site)["listed"] == 1
    cache = json.loads((site / lb.CACHE_FILE).read_text())
    assert cache["fingerprint"] == lb.validator_fingerprint()
    assert list(cache["findings"]) == [f"{lb.content_digest(stored(doc))}:{doc['ledger']['sha256']}"]
    # The ledger is swapped for other bytes: the cached verdict must not be reused.
    ledger = subs / lb.stored_ledger_name(doc)
    ledger.write_bytes(ledger.read_bytes() + b"\n")
    again = lb.build(subs, site)
    assert again["listed"] == 0 and "sha256" in again["skipped_files"][0][1]


def test_out_must_be_new_empty_or_a_built_site(example, tmp_path, capsys):
    report, doc, subs = example
    lb.submit(report, subs)
    precious = tmp_path / "docs"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    assert race(["leaderboard", "build", "--submissions", str(subs), "--out", str(precious)]) == 2
    assert "not a site built by race" in capsys.readouterr().err
    assert [p.name for p in precious.iterdir()] == ["thesis.tex"]
    assert not [p for p in tmp_path.iterdir() if ".building-" in p.name]      # staging removed
    site = tmp_path / "site"
    for _ in range(2):                                                        # new, then a rebuild
        assert race(["leaderboard", "build", "--submissions", str(subs), "--out", str(site)]) == 0
    assert (site / "index.html").is_file() and len(list((site / "s").iterdir())) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]     # no old/staging left


def _build_in_process(args):
    subs, out, start = args
    while time.time() < start:
        pass
    try:
        lb.build(Path(subs), Path(out), check=False)
        return "ok"
    except RaceError as e:
        return e.message


def test_concurrent_builds_leave_one_whole_site(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "site"
    subs.mkdir()
    for i in range(20):
        (subs / f"r{i}.json").write_text(json.dumps(made_up_report(run_id=f"r{i}", total=10 ** 17 + i)))
    start = time.time() + 1.0
    with mp.get_context("fork").Pool(3) as pool:
        results = pool.map(_build_in_process, [(str(subs), str(out), start)] * 3)
    assert "ok" in results
    assert all(r == "ok" or "at the same time" in r for r in results)
    assert len(list((out / "s").glob("*.html"))) == 20 and (out / "index.html").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def _extreme_board(subs: Path, runs: int = 30, targets: int = 1000) -> dict:
    """A submissions folder of `runs` valid reports, each scored on `targets` evaluation targets of
    its own (no two runs share one), with scores at the ends of the floating-point range: 1e308,
    ±1.7976931348623157e308 (the largest finite doubles), the smallest subnormal, and ordinary ones."""
    from leaderboard_docs import EXAMPLES, valid_examples, variant

    base = dict(valid_examples())["paper-qwen1.5b-lora64-sparse.json"]
    shutil.copy(EXAMPLES / base["ledger"]["path"], subs / base["ledger"]["path"])
    extremes = (1e308, 1.7976931348623157e308, -1.7976931348623157e308, 5e-324, 0.5)
    docs = {}
    for i in range(runs):
        d = variant(base, i)
        d["evaluations"] = [{"target": f"t{i}-{j}-heldout", "metric": "native_reward", "n": 10,
                             "value": extremes[(i + j) % len(extremes)] if j < 3 else j / targets}
                            for j in range(targets)]
        docs[f"{i:02d}.json"] = d
        (subs / f"{i:02d}.json").write_text(json.dumps(d))
    return docs


def test_a_board_of_extreme_scores_and_many_targets_builds_bounded(tmp_path):
    """30 submissions of 1,000 targets each (30,000 distinct targets) with scores of 1e308 and
    ±1.8e308 build through `race leaderboard build` (validated), in bounded size and memory: the
    main table shows the 12 targets most runs share, the frontier page 24, every score stays on
    its run's page. Measured here: 3.6 MB of site, 57 MB peak RSS, 8-14 s (docs/benchmarks.md)."""
    from suite.site.formatting import BOARD_SCORE_COLUMNS

    subs = tmp_path / "subs"
    subs.mkdir()
    docs = _extreme_board(subs)
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child of a big pytest process
    # would report the parent's peak; VmHWM is this process's own high-water mark (KiB).
    code = ("import re, sys; from suite.cli import main; rc = main(sys.argv[1:]); "
            "print('maxrss', re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1]); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, "leaderboard", "build", "--submissions", str(subs),
                           "--out", str(tmp_path / "site")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rss_mb = int(done.stdout.split("maxrss ")[1].split()[0]) / 1024   # the build's own peak (Linux: KiB)
    assert rss_mb < 200, rss_mb              # 57 MB measured; 465 MB before the bound (docs/benchmarks.md)
    assert "30 submission(s) listed, 0 skipped" in done.stdout
    site = tmp_path / "site"
    size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    assert size < 10 * 2 ** 20, size                                     # was 152-204 MB before the bound
    index = (site / "index.html").read_text()
    assert index.count('<th scope="col" class="col-score') == BOARD_SCORE_COLUMNS
    assert "29988 more evaluation target(s) are listed on the runs' own pages" in index
    assert ">1.000e308<" in index and ">1.798e308<" in index        # short cells, not 309 digits
    page = (site / "s" / f"{lb.submission_id(docs['00.json'])}.html").read_text()
    assert ">-1.798e308<" in page and ">4.941e-324<" in (site / "s" / f"{lb.submission_id(docs['01.json'])}.html").read_text()
    assert page.count("<th scope=\"row\">t0-") == 1000                  # every score on the run's own page
    frontier = (site / "frontier.html").read_text()
    coords = re.findall(r' (?:cx|cy|x|y|x1|x2|y1|y2|points)="([^"]*)"', frontier)
    assert frontier.count("<figure>") == 24 and coords and not any(re.search(r"nan|inf", c) for c in coords)


def test_a_proportion_metric_out_of_range_is_refused(example, tmp_path):
    """pass@1 lies in [0, 1]: a report claiming 7.5 is refused by the schema, naming the field."""
    report, doc, subs = example
    doc = json.loads(report.read_text())
    doc["evaluations"][0]["value"] = 7.5
    assert doc["evaluations"][0]["metric"] == "pass@1"
    report.write_text(json.dumps(doc))
    with pytest.raises(lb.SubmissionRefused, match=r"SCHEMA-002 at \$\.evaluations\[0\]\.value: a proportion metric"):
        lb.submit(report, subs)


def test_reference_cell_is_held_to_the_suites_own_cells(tmp_path):
    """REF-001: a report naming one of the suite's cells must be one by content -- a shipped tiny
    policy spec for spec, measured with a ledger under trl-cpu, and a tasks/cells file's settings.
    The real cell's report passes; the same claim on a 1.5B run, or with another K, is refused."""
    from leaderboard_docs import EXAMPLES, reference_cell_report, valid_examples

    real = reference_cell_report(tmp_path)
    assert not lb.validate(real, base_dir=tmp_path)
    other_k = json.loads(json.dumps(real))
    other_k["grpo"]["group_size"] = 4
    found = [f for f in lb.validate(other_k, base_dir=tmp_path) if f.rule_id == "REF-001"]
    assert [f.path for f in found] == ["$.grpo.group_size"] and "sets group_size = 8" in found[0].message
    big = dict(valid_examples())["paper-qwen1.5b-lora64-sparse.json"]
    shutil.copy(EXAMPLES / big["ledger"]["path"], tmp_path / big["ledger"]["path"])
    assert not lb.errors_of(lb.validate(big, base_dir=tmp_path))
    big["provenance"]["reference_cell"] = "s-sparse"
    found = [f for f in lb.validate(big, base_dir=tmp_path) if f.rule_id == "REF-001"]
    assert len(found) == 1 and "not one of the models shipped" in found[0].message
    sub = tmp_path / "subs"
    sub.mkdir()
    shutil.copy(EXAMPLES / big["ledger"]["path"], sub / big["ledger"]["path"])
    (sub / "claims.json").write_text(json.dumps(big))
    skipped = dict((s.name, s.reason) for s in lb.load_submissions(sub).skipped)
    assert "REF-001" in skipped["claims.json"]


def test_one_row_per_run_id_and_the_maintained_run_keeps_its_id(tmp_path):
    """BOARD-001/002 at build time: of two valid reports under one run id the first listed wins;
    a maintained published run keeps its id whatever the file names; a report carrying
    sources.published that is not a maintained rebuild is not listed at all."""
    from leaderboard_docs import EXAMPLES, valid_examples, variant
    from suite.site import board

    root = tmp_path
    subs, pub = root / "submissions", root / "published"
    subs.mkdir()
    pub.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "leaderboard" / "published" / "tina-still.yaml", pub)
    maintained = board.rebuild(pub / "tina-still.yaml")
    a = dict(valid_examples())["paper-qwen1.5b-lora64-sparse.json"]
    shutil.copy(EXAMPLES / a["ledger"]["path"], subs / a["ledger"]["path"])
    twin = variant(a, 1)
    twin["run"]["id"] = a["run"]["id"]                               # another report, the same run id
    squatter = variant(a, 2)
    squatter["run"]["id"] = maintained["run"]["id"]                 # a run id the published run owns
    impostor = json.loads(json.dumps(maintained))
    impostor["run"]["notes"] = "the same run, re-labelled"          # not the maintained rebuild
    for name, d in (("a.json", a), ("b-twin.json", twin), ("0-squatter.json", squatter),
                    ("zz-maintained.json", maintained), ("c-impostor.json", impostor)):
        (subs / name).write_text(json.dumps(d))
    loaded = lb.load_submissions(subs, maintained=board.maintained(pub))
    assert sorted(s.filename for s in loaded.submissions) == ["a.json", "zz-maintained.json"]
    reasons = {s.name: s.reason for s in loaded.skipped}
    assert reasons["b-twin.json"].startswith("BOARD-001") and "a.json" in reasons["b-twin.json"]
    assert reasons["0-squatter.json"].startswith("BOARD-001") and "zz-maintained.json" in reasons["0-squatter.json"]
    assert reasons["c-impostor.json"].startswith("BOARD-002")
    summary = lb.build(subs, root / "site")                          # ../published found beside the folder
    assert summary["listed"] == 2
    html = (root / "site" / "index.html").read_text()
    assert 'data-origin="published run"' in html and html.count("<tr data-origin=") == 2
