"""Docs that agree with the repository (issue 39): no page names a path of one machine (a reader's
machine has no /work/study/run), and the field page's list of runs not here yet names none that
is here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ABSOLUTE = re.compile(r"(?:^|(?<=[\s`\"'(=,]))(/[A-Za-z_][\w.-]*(?:/[^\s`\"'),]*)?)")
"""An absolute POSIX path where a path starts (not a URL's, not a repo-relative path's tail)."""
DEVICES = {"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"}
"""Absolute paths every machine has."""


def absolute_paths(text: str) -> list[str]:
    """Absolute paths outside the repository that `text` names (devices every machine has excepted;
    placeholders such as <run>/report.json and repo-relative paths are no match)."""
    return [m for m in ABSOLUTE.findall(text) if m.rstrip(".:;") not in DEVICES and "/" in m[1:]]


def test_no_docs_page_names_a_machine_path():
    found = {p.relative_to(ROOT).as_posix(): absolute_paths(p.read_text(encoding="utf-8")) for p in PAGES}
    assert {page: paths for page, paths in found.items() if paths} == {}


def test_the_path_check_sees_machine_paths_and_nothing_else():
    assert absolute_paths("race findings /work/study/run --export docs/findings") == ["/work/study/run"]
    assert absolute_paths("--out /tmp/verl-import\n`/root/.cache/x`") == ["/tmp/verl-import", "/root/.cache/x"]
    assert absolute_paths("see https://github.com/a/b/blob/main/x.py, runs/a/report.json, <run>/report.json, "
                          "-o /dev/null, a ratio 1/3, and/or") == []


def test_runs_not_here_yet_names_no_run_that_is_here():
    """Every run description of leaderboard/published/*.yaml is priced on the page: its name's
    first word (deepscaler, deepcoder, polaris, ...) is not among the runs said to be missing."""
    text = (ROOT / "docs" / "field.md").read_text(encoding="utf-8")
    missing = re.search(r"\*\*Runs not here yet\*\*:(.*?)(?:\n- |\n\n|\Z)", text, re.S)
    assert missing, "docs/field.md lost its 'Runs not here yet' item"
    said_missing = missing.group(1).split("The staged runs")[0].lower()
    here = {p.stem.split("-")[0] for p in (ROOT / "leaderboard" / "published").glob("*.yaml")}
    assert {"deepscaler", "deepcoder", "polaris"} <= here
    assert [name for name in sorted(here) if name in said_missing] == []
