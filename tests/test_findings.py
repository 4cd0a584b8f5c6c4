"""suite.analysis.findings and .holdout on runs made in memory: the decision rule of every claim, RACE's
held-out replay, byte-for-byte reproducibility, the document's schema and its pages (suite.site.findings).
suite.analysis.evidence on run folders written here."""

from __future__ import annotations

import json
import re
import shlex
import zlib
from pathlib import Path

import numpy as np
import pytest

from suite.analysis import findings
from suite.analysis.evidence import Run, load_runs, read_run
from suite.analysis.findings import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Settings, analyse
from suite.cli import main
from suite.errors import RaceError
from suite.paths import home
from suite.site import findings as page

N = 250
SIZES = {"small": 200_000, "large": 1_000_000}
P = {"u1": 0.77, "u2": 0.89, "u4": 0.94, "u8": 0.97}


def _scores(mean: float, seed: int, n: int = N) -> np.ndarray:
    """n per-problem 0/1 scores with exactly round(mean * n) ones, shuffled by seed."""
    k = int(round(mean * n))
    x = np.array([1.0] * k + [0.0] * (n - k))
    np.random.default_rng(seed).shuffle(x)
    return x


def make_run(model="small", budget=10**12, reward="sparse", label="u1", seed=0, pass1=0.4, judge=None,
             native=None, steps=None, p=None) -> Run:
    """A run with the given means on one target (pass@1, process judge and native reward)."""
    params = SIZES[model]
    judge = pass1 if judge is None else judge
    native = pass1 if native is None else native
    h = zlib.crc32(f"{model}{budget}{reward}{label}".encode()) % 1000
    scores = {("easy", "pass@1"): _scores(pass1, seed + h), ("easy", "process_judge"): _scores(judge, seed + h + 1),
              ("easy", "native_reward"): _scores(native, seed + h + 2)}
    share = 0.0 if reward != "prm" else (0.6 if model == "small" else 0.25)
    base = 100 if model == "small" else 20
    return Run(path=f"{model}-{budget:.0e}-{reward}-{label}-s{seed}", model=model, params=params,
               band=(int(budget * 0.75), budget), reward=reward, reward_kind="prm" if reward == "prm" else "rule",
               label=label, lora_rank=8, group_size=4, num_iterations=int(label[1:]) if label[1:].isdigit() else 1, seed=seed,
               p=P.get(label, 0.8) if p is None else p, reward_share=share, steps=steps or base,
               completions=(steps or base) * 32, flops=budget, judge="prm",
               scores=scores, values={k: float(v.mean()) for k, v in scores.items()})


def grid(means: dict, seeds=(0, 1, 2), **kw) -> list[Run]:
    """Runs for each (model, budget, reward, label) -> pass@1 mean (or a dict of run fields)."""
    out = []
    for (model, budget, reward, label), m in means.items():
        fields = m if isinstance(m, dict) else {"pass1": m}
        out += [make_run(model, budget, reward, label, s, **{**kw, **fields}) for s in seeds]
    return out


FAST = Settings(replicates=300, race_replicates=60)


def judged(runs, cid: str, settings=FAST) -> dict:
    return findings.CLAIMS[cid].judge(findings.with_holdout(analyse(runs, settings)))


def test_claim_a_reads_reward_shares():
    runs = grid({("small", 10**12, "sparse", "u1"): 0.4, ("small", 10**12, "prm", "u1"): 0.4}, seeds=(0,))
    r = judged(runs, "a")
    assert r["verdict"] == REPRODUCED and r["evidence"]["rule_max_share"] == 0
    weak = [make_run(reward="prm"), make_run()]
    weak[0] = Run(**{**weak[0].__dict__, "reward_share": 0.01})
    assert judged(weak, "a")["verdict"] == NOT_REPRODUCED
    assert judged(grid({("small", 10**12, "sparse", "u1"): 0.4}), "a")["verdict"] == INCONCLUSIVE


def test_claim_b_compares_matched_runs():
    runs = grid({("small", 10**12, "sparse", "u1"): 0.4, ("large", 10**12, "sparse", "u1"): 0.4})
    r = judged(runs, "b")
    assert r["verdict"] == REPRODUCED and r["evidence"]["pairs"] == 3
    assert r["evidence"]["step_ratio"]["max"] == pytest.approx(0.2)
    same = grid({("small", 10**12, "sparse", "u1"): {"steps": 50}, ("large", 10**12, "sparse", "u1"): {"steps": 50}})
    assert judged(same, "b")["verdict"] == NOT_REPRODUCED


@pytest.mark.parametrize("small, large, verdict", [(0.60, 0.30, REPRODUCED), (0.30, 0.60, NOT_REPRODUCED),
                                                   (0.42, 0.40, INCONCLUSIVE)])
def test_claim_c_small_against_large(small, large, verdict):
    runs = grid({("small", 10**12, "sparse", "u1"): small, ("small", 10**12, "sparse", "u2"): small - 0.05,
                 ("large", 10**12, "sparse", "u1"): large, ("large", 10**12, "sparse", "u2"): large - 0.05})
    r = judged(runs, "c")
    assert r["verdict"] == verdict, r["summary"]


def test_claim_d_needs_a_significant_reversal_for_every_factor():
    B, V = 10**12, 4 * 10**12
    flip = {}
    for model in SIZES:
        for budget in (B, V):
            for reward in ("sparse", "prm"):
                # u1 wins for the small model at the pilot budget with the sparse reward, u4 elsewhere...
                up = model == "small" and budget == B and reward == "sparse"
                flip[model, budget, reward, "u1"] = 0.7 if up else 0.2
                flip[model, budget, reward, "u4"] = 0.2 if up else 0.7
    r = judged(grid(flip), "d")
    ev = r["evidence"]
    assert ev["model"]["verdict"] == ev["budget"]["verdict"] == ev["reward"]["verdict"] == REPRODUCED
    assert ev["target"]["verdict"] == INCONCLUSIVE and ev["target"]["tests"] == 0   # one target only
    assert r["verdict"] == INCONCLUSIVE
    same = {k: (0.7 if k[3] == "u4" else 0.2) for k in flip}
    r = judged(grid(same), "d")
    assert r["evidence"]["model"]["verdict"] == NOT_REPRODUCED and r["verdict"] == NOT_REPRODUCED


def test_claim_e_metric_reversal():
    runs = grid({("small", 10**12, "sparse", "u1"): {"pass1": 0.7, "judge": 0.2},
                 ("small", 10**12, "sparse", "u4"): {"pass1": 0.2, "judge": 0.7}})
    r = judged(runs, "e")
    assert r["verdict"] == REPRODUCED and len(r["evidence"]["reversals"]) == 1
    agree = grid({("small", 10**12, "sparse", "u1"): 0.7, ("small", 10**12, "sparse", "u4"): 0.2})
    assert judged(agree, "e")["verdict"] == NOT_REPRODUCED
    close = grid({("small", 10**12, "sparse", "u1"): {"pass1": 0.42, "judge": 0.40},
                  ("small", 10**12, "sparse", "u4"): {"pass1": 0.40, "judge": 0.42}})
    assert judged(close, "e")["verdict"] == INCONCLUSIVE


def _holdout_runs(pilot: dict, val: dict) -> list[Run]:
    B, V = 10**12, 4 * 10**12
    means = {}
    for label in P:
        means["small", B, "sparse", label] = pilot[label]
        means["small", V, "sparse", label] = val[label]
    return grid(means)


def test_race_holdout_hits_when_the_validation_budget_agrees():
    rising = {"u1": 0.2, "u2": 0.4, "u4": 0.6, "u8": 0.8}
    r = judged(_holdout_runs(rising, rising), "f")
    s = r["evidence"]["summary"]
    assert r["verdict"] == REPRODUCED and s["trials"] == 2 and s["hits"] == 2   # pass@1 and the judge
    assert s["hit_rate"]["low"] == 1.0 and s["mean_regret"]["value"] == 0.0
    t = r["evidence"]["trials"][0]
    assert (t["regime"], t["side"], t["truth_side"], t["chosen"], t["best"]) == \
        ("high-update", "high", "high", "u8", "u8")
    falling = {k: 1.0 - v for k, v in rising.items()}
    r = judged(_holdout_runs(rising, falling), "f")
    assert r["verdict"] == NOT_REPRODUCED and r["evidence"]["summary"]["hits"] == 0
    assert r["evidence"]["summary"]["mean_regret"]["low"] > 0.5        # picked u8, u1 was best by 0.6


def test_race_holdout_needs_three_common_allocations():
    runs = grid({("small", 10**12, "sparse", "u1"): 0.4, ("small", 10**12, "sparse", "u2"): 0.5,
                 ("small", 4 * 10**12, "sparse", "u1"): 0.4, ("small", 4 * 10**12, "sparse", "u2"): 0.5})
    r = judged(runs, "f")
    assert r["verdict"] == INCONCLUSIVE and r["evidence"]["trials"] == []


def test_one_budget_holds_nothing_out():
    rising = {"u1": 0.2, "u2": 0.4, "u4": 0.6, "u8": 0.8}
    runs = grid({("small", 10**12, "sparse", k): v for k, v in rising.items()})
    r = judged(runs, "f")
    assert r["verdict"] == INCONCLUSIVE and r["evidence"]["trials"] == [] and "larger" in r["summary"]


def test_findings_are_byte_identical_whatever_the_order_of_the_runs():
    runs = _holdout_runs({"u1": 0.3, "u2": 0.5, "u4": 0.45, "u8": 0.4}, {"u1": 0.35, "u2": 0.45, "u4": 0.5, "u8": 0.4})
    a = findings.to_json(findings.findings(analyse(runs, FAST)))
    b = findings.to_json(findings.findings(analyse(list(reversed(runs)), FAST)))
    assert a == b
    doc = json.loads(a)
    assert [c["id"] for c in doc["claims"]] == list("abcdef")
    assert all(c["verdict"] in (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE) for c in doc["claims"])
    for c in doc["conditions"]:
        assert sum(a["prob_best"] for a in c["allocations"]) == pytest.approx(1.0, abs=1e-3)
        for a in c["allocations"]:
            assert a["score"]["low"] <= a["score"]["value"] <= a["score"]["high"]
    findings.check(doc)                                   # the document follows schemas/findings-v1
    md = page.markdown(doc)
    assert "| claim | verdict |" in md and "## RACE validated on the held-out budget" in md
    assert md.count("\n| (") == 6


def test_a_document_off_its_schema_is_not_written(tmp_path):
    doc = findings.findings(analyse(grid({("small", 10**12, "sparse", "u1"): 0.4}), FAST))
    doc["claims"][0]["verdict"] = "sort of"
    with pytest.raises(RaceError, match=r"at \$\.claims\[0\]\.verdict"):
        page.write(doc, tmp_path, plots=False)
    assert list(tmp_path.iterdir()) == []


def test_a_seed_twice_is_refused():
    runs = grid({("small", 10**12, "sparse", "u1"): 0.4}, seeds=(0, 0))
    with pytest.raises(RaceError, match="share allocation, budget and seed"):
        analyse(runs, FAST)


# ---------------------------------------------------------------- evidence on disk


def _write_run(folder, mean_in_report: float, scores: list[float]):
    folder.mkdir(parents=True)
    doc = {"run": {"label": "u1", "seed": 0}, "policy": {"name": "small", "params_total": 10},
           "budget": {"flops": 100, "band": {"low": 75, "high": 100}}, "reward": {"system": "sparse", "kind": "rule"},
           "adapter": {"rank": 8}, "grpo": {"group_size": 4, "num_iterations": 1},
           "totals": {"update_share": 0.8, "shares": {"reward": 0.0}, "steps": 3, "flops": {"total": 99},
                      "work": {"count.completions": 96}},
           "evaluations": [{"target": "arith-easy-250:first-4", "metric": "pass@1", "value": mean_in_report}]}
    (folder / "report.json").write_text(json.dumps(doc))
    (folder / "eval").mkdir()
    (folder / "eval" / "arith-easy-250.samples.jsonl").write_text(
        "".join(json.dumps({"doc_id": i, "doc": {"q": "..."}, "race": {"pass@1": s}}) + "\n"
                for i, s in reversed(list(enumerate(scores)))))


def test_evidence_reads_per_problem_scores_in_doc_order(tmp_path):
    _write_run(tmp_path / "cells" / "a", 0.5, [1, 0, 0, 1])
    (run,) = load_runs(tmp_path)
    assert run.path == "cells/a" and run.completions == 96
    assert run.scores["arith-easy-250:first-4", "pass@1"].tolist() == [1, 0, 0, 1]


def test_evidence_refuses_a_log_that_disagrees_with_its_report(tmp_path):
    _write_run(tmp_path / "a", 0.75, [1, 0, 0, 1])
    with pytest.raises(RaceError, match="averages 0.5"):
        read_run(tmp_path / "a", tmp_path)


def test_evidence_refuses_a_run_without_logs(tmp_path):
    _write_run(tmp_path / "a", 0.5, [1, 0, 0, 1])
    (tmp_path / "a" / "eval" / "arith-easy-250.samples.jsonl").unlink()
    with pytest.raises(RaceError, match="no per-problem scores"):
        load_runs(tmp_path)


def test_a_packed_export_reads_as_its_run_folders_and_unpacks_to_the_same_bytes(tmp_path, capsys):
    """The committed form of a study (suite.analysis.evidence.PACKED): the CI study's trimmed run
    folders packed into one xz file read as the same runs, unpack to the same files byte for byte,
    and give the same findings; a damaged or hostile pack is refused in one line."""
    import lzma
    import shutil

    from suite.analysis import evidence

    ci = home() / "tests" / "fixtures" / "findings-ci"
    dest = tmp_path / "packed"
    assert main(["findings", str(ci), "--export", str(dest), "--no-plots"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in dest.iterdir()) == ["findings.json", "findings.md", evidence.PACKED, "study.json"]
    assert (dest / "findings.json").read_bytes() == (ci / "findings.json").read_bytes()
    assert (dest / "findings.md").read_bytes() == (ci / "findings.md").read_bytes()
    folders, packed = load_runs(ci), load_runs(dest)
    assert [r.path for r in packed] == [r.path for r in folders] and len(packed) == 21
    for a, b in zip(folders, packed):
        assert a.scores.keys() == b.scores.keys() and all(np.array_equal(a.scores[k], b.scores[k]) for k in a.scores)
        assert (a.ids, a.steps, a.flops, a.curve == (), b.curve == ()) == (b.ids, b.steps, b.flops, True, True)
    evidence.unpack(dest / evidence.PACKED, tmp_path / "back")
    files = sorted(p.relative_to(ci / "cells") for p in (ci / "cells").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "back" / "cells") for p in (tmp_path / "back" / "cells").rglob("*")
                           if p.is_file())
    assert all((ci / "cells" / f).read_bytes() == (tmp_path / "back" / "cells" / f).read_bytes() for f in files)
    assert evidence.pack_text(ci) == (dest / evidence.PACKED).read_bytes()          # deterministic: no time stamp

    # both forms in one folder: which one is meant? refused, not guessed
    shutil.copytree(ci / "cells", dest / "cells")
    with pytest.raises(RaceError, match="holds both"):
        load_runs(dest)
    shutil.rmtree(dest / "cells")
    text = lzma.decompress((dest / evidence.PACKED).read_bytes()).decode()
    for spoil, says in [(lambda t: t.replace('"race-runs"', '"other"', 1), "not a race-runs v1 file"),
                        (lambda t: t.replace('"path":"cells/', '"path":"../cells/', 1), "path inside the folder"),
                        (lambda t: re.sub(r'("pass@1":\[[0-9.,]*?)1\.0', r"\g<1>0.0", t, count=1), "averages")]:
        assert spoil(text) != text
        (dest / evidence.PACKED).write_bytes(lzma.compress(spoil(text).encode()))
        assert main(["findings", str(dest), "--check"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert says in err[0] and "Traceback" not in "".join(err), err
    (dest / evidence.PACKED).write_bytes(lzma.compress(text.encode())[:-40])
    with pytest.raises(RaceError, match="truncated|not a readable xz"):
        load_runs(dest)


# ---------------------------------------------------------------- on the leaderboard site

FIXTURE = home() / "tests" / "fixtures" / "findings-ci" / "findings.json"


def _docs_example() -> list[str]:
    """The one `race leaderboard build --findings` line of docs/leaderboard.md, the same in docs/findings.md."""
    lines = [{ln.strip() for ln in (home() / "docs" / name).read_text(encoding="utf-8").splitlines()
              if ln.strip().startswith("race leaderboard build") and "--findings tests/" in ln}
             for name in ("leaderboard.md", "findings.md")]
    assert len(lines[0]) == 1 and lines[0] == lines[1], lines
    return shlex.split(lines[0].pop())[1:]


def _build(tmp_path, findings_file, subs=None) -> Path:
    if subs is None:
        subs = tmp_path / "subs"
        subs.mkdir(exist_ok=True)
    out = tmp_path / "site"
    assert main(["leaderboard", "build", "--submissions", str(subs), "--findings", str(findings_file),
                 "--out", str(out)]) == 0
    return out


def test_the_docs_example_puts_the_committed_findings_on_the_site(tmp_path, monkeypatch, capsys):
    from markupsafe import escape

    from suite.site.render import csp_hash

    argv = _docs_example()
    assert argv[argv.index("--findings") + 1] == str(FIXTURE.relative_to(home()))
    monkeypatch.chdir(home())                       # the docs run it from the checkout
    argv[argv.index("--out") + 1] = str(tmp_path / "site")
    assert main(argv) == 0
    assert "findings.html" in capsys.readouterr().out
    site = tmp_path / "site"
    doc = json.loads(FIXTURE.read_text())
    pages = sorted(site.rglob("*.html"))
    assert len(list((site / "s").glob("*.html"))) >= 1           # the committed submissions' own pages too
    for f in pages:                                 # the findings page beside the views, on every page
        root = "../" if f.parent.name == "s" else ""
        nav = re.search(r'<nav class="views".*?</nav>', f.read_text(), re.S).group(0)
        assert f'<a href="{root}findings.html"' in nav and f'<a href="{root}frontier.html"' in nav, f
    html = (site / "findings.html").read_text()
    assert '<a href="findings.html" aria-current="page">findings</a>' in html
    for c in doc["claims"]:                         # one row per claim: id, claim, verdict, the numbers
        row = (f'<tr class="v-{c["verdict"].replace(" ", "-")}"><td>({c["id"]}) {escape(c["claim"])}</td>'
               f'<td class="verdict"><strong>{c["verdict"]}</strong></td><td class="text">{escape(c["summary"])}</td>')
        assert row in html, c["id"]
    s = doc["race_holdout"]["summary"]["hit_rate"]
    assert f"Same-regime hit rate {s['value']:.3f} [{s['low']:.3f}, {s['high']:.3f}]" in html
    predictors = 3 if doc["race_holdout"]["summary"].get("predictors") else 0     # RACE, baseline, curves
    assert html.count('<tr><td>') == len(doc["race_holdout"]["trials"]) + predictors + sum(
        len(c["allocations"]) for c in doc["conditions"])
    assert predictors and '<table class="study" id="predictors">' in html
    assert "frontier_intervals" not in html         # no figure beside the fixture: none linked
    # the site's Content-Security-Policy: its one inline style by hash, no script on this page
    style = re.search(r"<style>(.*?)</style>", html, re.S).group(1)
    assert f"style-src '{csp_hash(style)}'" in html and "<script" not in html


def test_a_site_without_findings_has_no_findings_page(tmp_path):
    out = tmp_path / "site"
    (tmp_path / "subs").mkdir()
    assert main(["leaderboard", "build", "--submissions", str(tmp_path / "subs"), "--out", str(out)]) == 0
    assert not (out / "findings.html").exists() and "findings.html" not in (out / "index.html").read_text()


def test_hostile_claim_text_is_shown_as_text(tmp_path):
    from leaderboard_docs import PAYLOADS

    doc = json.loads(FIXTURE.read_text())
    for c, payload in zip(doc["claims"], PAYLOADS):
        c["summary"] = c["claim"] = payload
    doc["race_holdout"]["trials"][0]["name"] = PAYLOADS[0]
    (tmp_path / "findings.json").write_text(json.dumps(doc))
    html = (_build(tmp_path, tmp_path / "findings.json") / "findings.html").read_text()
    for p in PAYLOADS[:len(doc["claims"])]:
        assert p not in html
    assert "&lt;script&gt;window.__pwned=1" in html and "<iframe" not in html and "<svg" not in html
    assert html.count("<script") == 0 and 'href="javascript' not in html.lower()


def test_the_figure_beside_the_findings_is_copied_and_linked(tmp_path):
    doc = json.loads(FIXTURE.read_text())
    study = tmp_path / "study"
    study.mkdir()
    (study / "findings.json").write_text(FIXTURE.read_text())
    drawn = page.plot(doc, study)                   # what `race findings` draws beside findings.json
    png = study / f"{page.FIGURE}.png"
    assert png in drawn
    out = _build(tmp_path, study / "findings.json")
    assert (out / png.name).read_bytes() == png.read_bytes()
    assert f'<a href="{png.name}">' in (out / "findings.html").read_text()
    assert not list(out.glob("*.svg"))              # an SVG is a document that could run script: not copied

    png.write_text("<svg onload='x()'/>")           # not a PNG: refused, nothing rebuilt
    before = (out / "findings.html").read_text()
    assert main(["leaderboard", "build", "--submissions", str(tmp_path / "subs"), "--findings",
                 str(study / "findings.json"), "--out", str(out)]) == 2
    assert (out / "findings.html").read_text() == before


def _off_schema(doc):
    doc["claims"][0]["verdict"] = "sort of"


def _no_claims(doc):
    del doc["claims"]


@pytest.mark.parametrize("spoil, says", [
    (_off_schema, r"does not follow findings-v1\.schema\.json: claims\.0\.verdict must be one of"),
    (_no_claims, r"does not follow findings-v1\.schema\.json: .*'claims'"),
    ("{not json", r"not JSON"),
    ('{"format": "race-findings", "format": "race-findings"}', r"duplicate key"),
    (None, r"is a folder, not a findings\.json"),
    ('{"schema_version": "1.0", "run": {}}', r'is not a findings document \(no "format": "race-findings"\)'),
], ids=["verdict", "missing", "syntax", "duplicate", "folder", "a-report"])
def test_a_bad_findings_file_is_refused_in_one_line_and_nothing_is_built(tmp_path, capsys, spoil, says):
    bad = tmp_path / "findings.json"
    if spoil is None:
        bad = tmp_path
    elif callable(spoil):
        doc = json.loads(FIXTURE.read_text())
        spoil(doc)
        bad.write_text(json.dumps(doc))
    else:
        bad.write_text(spoil)
    (tmp_path / "subs").mkdir()
    capsys.readouterr()
    rc = main(["leaderboard", "build", "--submissions", str(tmp_path / "subs"), "--findings", str(bad),
               "--out", str(tmp_path / "site")])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) <= 2 and re.search(says, err[0]), err    # the problem, then its fix
    assert err[0].startswith("race leaderboard: error: ") and str(bad) in err[0]
    assert not (tmp_path / "site").exists() and not list(tmp_path.glob(".site*"))


# ---------------------------------------------------------------- the current verdicts


def test_the_docs_first_table_is_race_findings_headline(capsys):
    """docs/findings.md opens with the current verdict of each claim; the table between its markers
    is what `race findings --headline --format markdown` prints from the committed exports, and the
    default (every export under docs/) is the same."""
    text = (home() / "docs" / "findings.md").read_text(encoding="utf-8")
    first = text.index("<!-- headline: ")
    assert text.index("| claim |") > first and "| claim |" not in text[:first]       # the first table
    marker, rest = text[first:].split("-->", 1)
    argv = shlex.split(marker.removeprefix("<!-- headline: race "))
    block = rest.split("<!-- /headline -->", 1)[0].strip()
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == block
    assert main(["findings", "--headline", "--format", "markdown"]) == 0
    assert capsys.readouterr().out.strip() == block
    rows = [ln for ln in block.splitlines()[2:]]
    assert [ln.split(" ", 2)[1] for ln in rows] == [f"({c})" for c in "abcdef"]
    assert all(" [" in ln or "exact:" in ln or " in " in ln for ln in rows)           # each with its number


def test_the_latest_study_designed_for_a_claim_decides_it(tmp_path, capsys):
    """A later export decides only the claims its design names; its verdicts on the others stand
    beside the deciding one."""
    import shutil

    from suite.analysis.headline import headline

    paper, decisive = home() / "docs" / "findings", home() / "docs" / "decisive"
    rows = {r["id"]: r for r in headline([paper, decisive])}
    assert {c: rows[c]["folder"] for c in "abcdef"} == {"a": "docs/findings", "b": "docs/findings", "c": "docs/decisive",
                                                         "d": "docs/findings", "e": "docs/findings", "f": "docs/decisive"}
    assert rows["d"]["others"] == [{"study": "decisive", "folder": "docs/decisive", "verdict": "not reproduced",
                                    "designed": False}]
    # the same decisive study, dated before the 90-cell one: the older design no longer decides
    early = tmp_path / "early"
    early.mkdir()
    shutil.copy(decisive / "findings.json", early)
    study = json.loads((decisive / "study.json").read_text())
    study["sessions"][-1]["finished"] = "2026-11-30T00:00:00Z"
    (early / "study.json").write_text(json.dumps(study))
    rows = {r["id"]: r for r in headline([paper, early])}
    assert rows["c"]["folder"] == "docs/findings" and rows["c"]["verdict"] == "inconclusive"
    assert main(["findings", "--headline", str(tmp_path / "nothing")]) == 2
    assert "no findings.json" in capsys.readouterr().err
