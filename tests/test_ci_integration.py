"""Validation in other people's CI (docs/ci.md), tested mechanically: the SARIF that
`race validate --format sarif` writes is valid SARIF 2.1.0 (the OASIS schema, vendored in
tests/fixtures/sarif/); the documented GitHub Actions workflow's validation step, run as written,
writes the file its upload step reads; and `pre-commit try-repo` of this repository blocks an
invalid report and passes a valid one in a temporary repository."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft4Validator

from suite.paths import schemas

ROOT = Path(__file__).resolve().parents[1]
SARIF_SCHEMA = Path(__file__).parent / "fixtures" / "sarif" / "sarif-schema-2.1.0.json"
SARIF_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
EXAMPLES = schemas() / "examples"
VALID = EXAMPLES / "valid" / "paper-qwen1.5b-lora64-sparse.json"
INVALID = EXAMPLES / "invalid" / "lora-priced-as-full.json"      # LoRA priced as full fine-tuning
INVALID_RULES = set(INVALID.with_suffix(".expect").read_text().split())   # PHYS-003 and what follows from it


def sarif_problems(doc) -> list[str]:
    """Every violation of the SARIF 2.1.0 schema (formats checked), as path: message."""
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    v = Draft4Validator(schema, format_checker=Draft4Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]


def _copy_report(report: Path, folder: Path, name: str | None = None) -> None:
    """`report` (as `name`) and its ledger into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(report, folder / (name or report.name))
    ledger = json.loads(report.read_text())["ledger"]["path"]
    shutil.copy(report.parent / ledger, folder / ledger)


def _race_env() -> dict:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def test_vendored_schema_is_the_oasis_one():
    assert hashlib.sha256(SARIF_SCHEMA.read_bytes()).hexdigest() == SARIF_SHA256
    schema = json.loads(SARIF_SCHEMA.read_text())
    assert schema["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    # it refuses what it should: the schema itself is no SARIF log
    assert sarif_problems({"version": "2.1.0"}) and sarif_problems({"version": "2.0.0", "runs": []})


def test_sarif_of_every_example_is_valid_sarif_2_1_0(tmp_path):
    out = tmp_path / "all.sarif"
    r = subprocess.run([sys.executable, "-m", "suite.cli", "validate", str(EXAMPLES), "--format", "sarif",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr       # the invalid examples include unreadable input
    doc = json.loads(out.read_text())
    assert sarif_problems(doc) == []
    run = doc["runs"][0]
    assert len(run["results"]) >= 38          # one or more per invalid example
    rules = [x["id"] for x in run["tool"]["driver"]["rules"]]
    assert all(res["ruleId"] in rules and rules[res["ruleIndex"]] == res["ruleId"] for res in run["results"])


def _workflow() -> dict:
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "upload-sarif" in b)
    return yaml.safe_load(block)


def test_documented_workflow_validates_and_uploads_the_sarif_it_wrote(tmp_path):
    wf = _workflow()
    assert wf["permissions"]["security-events"] == "write"
    steps = next(iter(wf["jobs"].values()))["steps"]
    assert any(s.get("run", "").startswith("pip install race-suite") for s in steps)
    validate = next(s for s in steps if "race validate" in s.get("run", ""))
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    assert steps.index(upload) > steps.index(validate)
    assert upload["if"] in ("${{ !cancelled() }}", "always()", "${{ always() }}")   # uploads when validation fails
    folder = re.search(r"race validate (\S+)", validate["run"]).group(1)
    _copy_report(VALID, tmp_path / folder)
    _copy_report(INVALID, tmp_path / folder)
    r = subprocess.run(["bash", "-c", validate["run"]], cwd=tmp_path, env=_race_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr          # the job fails on the invalid report
    sarif = tmp_path / upload["with"]["sarif_file"]
    doc = json.loads(sarif.read_text())
    assert sarif_problems(doc) == []
    results = doc["runs"][0]["results"]
    assert {res["ruleId"] for res in results} == INVALID_RULES
    uris = {res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for res in results}
    assert uris == {f"{folder.rstrip('/')}/{INVALID.name}"}   # relative to the repository root: annotations land


def test_documented_pre_commit_config_names_the_shipped_hook():
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    config = yaml.safe_load(next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "hooks:" in b))
    used = [h["id"] for repo in config["repos"] for h in repo["hooks"]]
    assert used == ["race-validate"] and set(used) <= set(hooks)
    hook = hooks["race-validate"]
    assert hook["entry"] == "race validate" and hook["language"] == "python"
    assert re.search(hook["files"], "runs/a/report.json") and not re.search(hook["files"], "package.json")


def _git(*args, cwd):
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=120)


def _snapshot(dest: Path) -> Path:
    """A git repository holding the checkout's files as they are now (tracked and new, not
    ignored), committed: what try-repo installs the hook from, without touching the checkout."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    _git("init", "-q", cwd=dest)
    _git("add", "-A", cwd=dest)
    _git("commit", "-qm", "snapshot", cwd=dest)
    return dest


@pytest.mark.slow
def test_pre_commit_try_repo_blocks_the_invalid_report_and_passes_the_valid_one(tmp_path):
    hook_repo = _snapshot(tmp_path / "race-suite")
    paper = tmp_path / "paper"
    _copy_report(VALID, paper / "runs" / "good", "report.json")
    _copy_report(INVALID, paper / "runs" / "bad", "report.json")
    _git("init", "-q", cwd=paper)
    _git("add", "-A", cwd=paper)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-cache"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    pre_commit = [str(Path(sys.executable).parent / "pre-commit"), "try-repo", str(hook_repo), "race-validate"]

    def hook(*files):
        r = subprocess.run([*pre_commit, "--files", *files], cwd=paper, env=env, capture_output=True, text=True,
                           timeout=600)
        return r.returncode, r.stdout + r.stderr

    code, said = hook("runs/good/report.json")
    assert code == 0 and "Passed" in said, said[-3000:]
    code, said = hook("runs/bad/report.json")
    assert code == 1 and "Failed" in said and "runs/bad/report.json" in said, said[-3000:]
    assert all(rule in said for rule in INVALID_RULES), said[-3000:]
    assert "Traceback" not in said
    code, said = hook("runs/good/report.json", "runs/bad/report.json")
    assert code == 1 and "PHYS-003" in said and "runs/good/report.json" not in said, said[-3000:]
