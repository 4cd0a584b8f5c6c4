"""The leaderboard's pull-request workflow (.github/workflows/leaderboard.yml), run as its steps
are: the suite's own commands on a scratch git repository with a real history. A main branch
holds a maintained published run and a submitted one; a branch adding a valid report passes and
gets its comparison comment; one adding a forged report fails naming the rule; one editing another
submission fails naming it; one resubmitting the published run with other means fails on
BOARD-002. The workflow file itself passes GitHub's workflow schema (check-jsonschema's vendored
copy) and actionlint where one is installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from suite.site import board
from suite.site import leaderboard as lb

from leaderboard_docs import EXAMPLES, valid_examples

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "leaderboard.yml"
MAINTAINED = "deepscaler-1.5b"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def race(repo: Path, *args: str) -> subprocess.CompletedProcess:
    """The `race` the workflow runs, in the scratch repository's root (this checkout's code)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "suite.cli", *args], cwd=repo, capture_output=True, text=True,
                          env=env, timeout=300)


def _example(name: str) -> dict:
    return dict(valid_examples())[name]


def _stage(tmp: Path, name: str, doc: dict | None = None) -> Path:
    """A run folder holding an example report (or `doc`) and its ledger, as a submitter has it."""
    doc = doc or _example(name)
    run = tmp / f"run-{Path(name).stem}"
    run.mkdir()
    if "ledger" in doc:
        shutil.copy(EXAMPLES / doc["ledger"]["path"], run / doc["ledger"]["path"])
    (run / "report.json").write_text(json.dumps(doc, indent=2))
    return run / "report.json"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    tmp = tmp_path_factory.mktemp("workflow")
    repo = tmp / "repo"
    subs, pub = repo / "leaderboard" / "submissions", repo / "leaderboard" / "published"
    subs.mkdir(parents=True)
    pub.mkdir(parents=True)
    shutil.copy(ROOT / "leaderboard" / "published" / f"{MAINTAINED}.yaml", pub)
    lb.submit(_stage(tmp, "published", board.rebuild(pub / f"{MAINTAINED}.yaml")), subs,
              maintained=board.maintained(pub))
    assert race(repo, "submit", str(_stage(tmp, "paper-qwen1.5b-lora64-sparse.json"))).returncode == 0
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "main: a published run and a submitted one")
    return {"repo": repo, "tmp": tmp, "subs": subs, "pub": pub}


def _branch(repo: Path, name: str) -> None:
    git(repo, "switch", "-q", "main")
    git(repo, "switch", "-q", "-c", name)


def _commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def test_a_valid_report_passes_and_gets_its_comparison(repo):
    r, subs = repo["repo"], repo["subs"]
    _branch(r, "good")
    doc = _example("paper-qwen1.5b-lora64-prm.json")
    done = race(r, "submit", str(_stage(repo["tmp"], "good-prm", doc)))
    assert done.returncode == 0, done.stderr
    assert "next: open a pull request" in done.stdout and "race submit --check --base" in done.stdout
    _commit(r, "submit a PRM run")
    check = race(r, "submit", "--check", "--base", "main", "--sarif", "findings.sarif")
    assert check.returncode == 0, check.stdout + check.stderr
    accepted = [line for line in check.stdout.splitlines() if line.startswith("accepted")]
    assert len(accepted) == 1 and accepted[0].endswith(doc["run"]["id"])      # only the change is checked
    assert json.loads((r / "findings.sarif").read_text())["runs"][0]["results"] == []
    listed = git(r, "diff", "--name-status", "--no-renames", "main...HEAD")     # the same change, as a list
    by_list = subprocess.run([sys.executable, "-m", "suite.cli", "submit", "--check", "--changed", "-"], cwd=r,
                             input=listed, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert by_list.returncode == 0 and by_list.stdout == check.stdout
    out = race(r, "leaderboard", "comment", "--base", "main", "--out", "comment.md")
    assert out.returncode == 0, out.stderr
    text = (r / "comment.md").read_text()
    me = next(line for line in text.splitlines() if "(this pull request)" in line)
    s = doc["totals"]["shares"]
    assert f"R {100 * s['rollout']:.1f}% · U {100 * s['update']:.1f}% · W {100 * s['reward']:.1f}%" in me
    from suite.site.pullrequest import text_bar

    bar = text_bar(s)
    assert f"`{bar}`" in me and len(bar) == 20 and bar.count("W") == round(20 * s["reward"])
    assert f"| {doc['totals']['update_share']:.3f} |" in me
    per_token = doc["totals"]["flops"]["total"] / doc["totals"]["tokens"]["update"]
    assert f"{per_token:.2e}".replace("e+", "e") in me and "measured with ledger" in me
    neighbour = _example("paper-qwen1.5b-lora64-sparse.json")["run"]["label"]
    assert neighbour in text                                          # the run at similar total FLOPs
    published = next(line for line in text.splitlines() if line.startswith("| DeepScaleR"))
    assert "estimated from a published setup" in published and "% of 32 × NVIDIA A100" in published


def test_a_forged_report_fails_naming_the_rule(repo):
    r, subs = repo["repo"], repo["subs"]
    _branch(r, "forged")
    doc = _example("paper-qwen1.5b-lora64-prm.json")
    doc["run"]["id"] = "forged-prm"
    t = doc["totals"]
    t["flops"]["update"] //= 2                      # update FLOPs halved, the totals rebuilt to match
    t["flops"]["total"] = sum(t["flops"][ph] for ph in ("rollout", "update", "reward"))
    t["shares"] = {ph: t["flops"][ph] / t["flops"]["total"] for ph in ("rollout", "update", "reward")}
    t["update_share"] = t["shares"]["update"]
    shutil.copy(EXAMPLES / doc["ledger"]["path"], subs / lb.stored_ledger_name(doc))     # the run's real ledger
    doc["ledger"]["path"] = lb.stored_ledger_name(doc)
    (subs / "forged.json").write_text(json.dumps(doc, indent=2))   # pushed by hand: `race submit` refuses it
    _commit(r, "a forged report")
    check = race(r, "submit", "--check", "--base", "main", "--sarif", "forged.sarif")
    assert check.returncode == 1, check.stdout
    results = json.loads((r / "forged.sarif").read_text())["runs"][0]["results"]
    rules = {x["ruleId"] for x in results}
    assert rules and all(x["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] ==
                         "leaderboard/submissions/forged.json" for x in results)
    assert any(rule in check.stdout for rule in rules) and "refused" in check.stdout
    assert "PHYS-001" in rules and "LEDGER-003" not in rules, rules     # the update recomputed from the tokens
    assert "PHYS-001" in check.stdout and "$.totals.flops.update" in check.stdout
    comment = race(r, "leaderboard", "comment", "--base", "main")
    assert comment.returncode == 0 and "No report of this pull request passed the check" in comment.stdout


def test_editing_another_submission_fails_naming_it(repo):
    r, subs = repo["repo"], repo["subs"]
    _branch(r, "edit")
    theirs = next(p for p in sorted(subs.glob("*.json")) if "sources" not in json.loads(p.read_text()))
    doc = json.loads(theirs.read_text())
    doc["run"]["label"] = "mine now"
    theirs.write_text(json.dumps(doc, indent=2))
    _commit(r, "edit someone else's row")
    check = race(r, "submit", "--check", "--base", "main")
    assert check.returncode == 1
    assert "BOARD-003" in check.stdout and f"edits {theirs.name}" in check.stdout
    _branch(r, "remove")
    git(r, "rm", "-q", str(theirs.relative_to(r)))
    _commit(r, "remove someone else's row")
    check = race(r, "submit", "--check", "--base", "main")
    assert check.returncode == 1 and "BOARD-003" in check.stdout and f"removes {theirs.name}" in check.stdout


def test_a_resubmitted_published_run_with_other_means_is_refused(repo):
    """The same run id, label and sources as the maintained DeepScaleR row, every stage's mean
    completion length cut to 70% (inside the assumed ranges, so the estimate itself validates):
    `race submit` refuses it and the gate fails on BOARD-002; a second report under a listed run
    id fails on BOARD-001."""
    r, subs = repo["repo"], repo["subs"]
    _branch(r, "impostor")
    desc = yaml.safe_load((repo["pub"] / f"{MAINTAINED}.yaml").read_text())
    for st in desc["stages"]:
        st["mean_completion_tokens"] = int(st["mean_completion_tokens"] * 0.7)
    other = repo["tmp"] / "impostor.yaml"
    other.write_text(yaml.safe_dump(desc))
    doc = board.rebuild(other)
    assert doc["run"]["id"] == MAINTAINED and doc["sources"]["published"]["url"].startswith("https://")
    # Two defences: the validator holds a published run's means to the maintained description
    # (PUB-005), and the board lists a published row only as a rebuild of it (BOARD-002,
    # test_leaderboard.py checks it on its own).
    assert {f.rule_id for f in lb.errors_of(lb.validate(doc, base_dir=None))} == {"PUB-005"}
    with pytest.raises(lb.SubmissionRefused, match="PUB-005|BOARD-002"):
        lb.submit(_stage(repo["tmp"], "impostor", doc), subs)
    (subs / "impostor.json").write_text(json.dumps(doc))
    _commit(r, "a published run, with its means cut")
    check = race(r, "submit", "--check", "--base", "main")
    assert check.returncode == 1 and "impostor.json" in check.stdout
    assert "PUB-005" in check.stdout, check.stdout      # the validation gate refuses it before the board's rules
    _branch(r, "same-id")
    twin = _example("paper-qwen1.5b-lora64-sparse-curve.json")
    twin["run"]["id"] = _example("paper-qwen1.5b-lora64-sparse.json")["run"]["id"]
    twin["ledger"]["path"] = lb.stored_ledger_name(twin)
    shutil.copy(EXAMPLES / _example("paper-qwen1.5b-lora64-sparse-curve.json")["ledger"]["path"],
                subs / twin["ledger"]["path"])
    (subs / "twin.json").write_text(json.dumps(twin))
    _commit(r, "a second report under a listed run id")
    check = race(r, "submit", "--check", "--base", "main")
    assert check.returncode == 1 and "BOARD-001" in check.stdout, check.stdout


def test_a_link_or_a_stray_file_is_refused(repo):
    """BOARD-005: a symbolic link added as a report (it could point anywhere on the runner), a file
    in a sub-folder and a ledger no report of the change references are each refused by name."""
    r, subs = repo["repo"], repo["subs"]
    _branch(r, "stray")
    (subs / "link.json").symlink_to("/etc/hostname")
    (subs / "deep").mkdir()
    (subs / "deep" / "x.json").write_text("{}")
    (subs / "ledger-0000000000000000.jsonl").write_text("")
    _commit(r, "stray files")
    check = race(r, "submit", "--check", "--base", "main")
    assert check.returncode == 1
    for name in ("link.json is not a plain file", "deep/x.json is not a file of the submissions folder",
                 "ledger-0000000000000000.jsonl is referenced by no report"):
        assert name in check.stdout, (name, check.stdout)
    assert check.stdout.count("BOARD-005") == 3


def test_bad_input_is_one_line(repo):
    r = repo["repo"]
    for args, words in ((("submit", "--check", "--base", "no-such-ref"), "no-such-ref"),
                        (("submit", "--check"), "--check needs the change"),
                        (("submit", "--check", "--changed", "-"), "not 'STATUS<TAB>PATH'")):
        done = subprocess.run([sys.executable, "-m", "suite.cli", *args], cwd=r, capture_output=True, text=True,
                              input="leaderboard/submissions/x.json\n", env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_workflow_runs_the_suites_commands_and_passes_the_linters():
    flow = yaml.safe_load(WORKFLOW.read_text())
    steps = [s.get("run", "") for job in flow["jobs"].values() for s in job["steps"]]
    text = "\n".join(steps)
    for command in ("race\" submit --check --base", "race\" leaderboard comment --base", "race leaderboard build"):
        assert command in text, command
    assert "pull_request" in flow[True] and flow["jobs"]["publish"]["steps"][0]["uses"].startswith("actions/deploy-pages")
    from check_jsonschema import main as check_jsonschema

    with pytest.raises(SystemExit) as done:
        check_jsonschema(["--builtin-schema", "vendor.github-workflows", str(WORKFLOW)])
    assert done.value.code == 0
    actionlint = shutil.which("actionlint")
    if actionlint:                  # where a real actionlint is on PATH (CI images often carry one)
        lint = subprocess.run([actionlint, str(WORKFLOW)], capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout


def test_the_first_submission_walkthrough_runs_as_written(repo, tmp_path):
    """docs/leaderboard.md's first-submission block, run line by line with bash in a clone of the
    scratch repository (so origin/main exists), `race` being this checkout's CLI: the report is
    submitted, committed, accepted by the check and compared in comment.md."""
    text = (ROOT / "docs" / "leaderboard.md").read_text()
    block = text.split("<!-- first-submission:begin -->", 1)[1].split("<!-- first-submission:end -->", 1)[0]
    lines = [line for line in block.strip().strip("`").splitlines()[1:] if line.strip()]
    assert any(line.startswith("race submit --check") for line in lines)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "-b", "main", str(repo["repo"]), str(clone))
    doc = _example("paper-qwen1.5b-lora64-prm.json")
    (clone / "my-run").mkdir()
    shutil.copy(EXAMPLES / doc["ledger"]["path"], clone / "my-run" / doc["ledger"]["path"])
    (clone / "my-run" / "report.json").write_text(json.dumps(doc, indent=2))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "race").write_text(f"#!/bin/sh\nexec {sys.executable} -m suite.cli \"$@\"\n")
    (bin_dir / "race").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    outputs = []
    for line in lines:
        done = subprocess.run(["bash", "-c", line], cwd=clone, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        outputs.append(done.stdout)
    submitted = next(o for line, o in zip(lines, outputs) if line.startswith("race submit my-run"))
    assert "next: open a pull request" in submitted
    checked = next(o for line, o in zip(lines, outputs) if line.startswith("race submit --check"))
    assert checked.startswith("accepted ") and doc["run"]["id"] in checked
    comment = (clone / "comment.md").read_text()
    assert "(this pull request)" in comment and "DeepScaleR" in comment
