"""The house as docs/architecture.md draws it: imports only point down the layers and never
cycle (the import-linter contracts of pyproject.toml), the module map lists every module of
suite/ and nothing else, and a module over ~500 lines says why on its first line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP_BEGIN, MAP_END = "<!-- modules:begin -->", "<!-- modules:end -->"


def test_import_linter_contracts_are_kept():
    lint = Path(sys.executable).parent / "lint-imports"
    r = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in r.stdout


def test_module_map_lists_every_module_and_nothing_else():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = doc.split(MAP_BEGIN, 1)[1].split(MAP_END, 1)[0]
    listed = re.findall(r"^\| `([^`]+\.py)` \|", block, flags=re.M)
    assert len(listed) == len(set(listed)), "a module is listed twice"
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "suite").rglob("*.py")}
    assert modules - set(listed) == set(), "modules missing from docs/architecture.md"
    assert {m for m in listed if not (ROOT / m).is_file()} == set(), "listed but not in the tree"


def test_the_three_questions_have_one_file_each():
    head = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").split("## Layers", 1)[0]
    for question, path in (("update FLOPs computed", "suite/accounting/costs.py"),
                           ("a report read", "suite/record/report.py"),
                           ("correctness decided", "suite/answers.py")):
        line = next(x for x in head.splitlines() if question in x)
        assert f"`{path}`" in line and (ROOT / path).is_file()


def test_long_modules_say_why():
    files = [*(ROOT / "suite").rglob("*.py"), *(ROOT / "tools").glob("*.py"), ROOT / "benchmarks" / "gate.py"]
    unexplained = [p.relative_to(ROOT).as_posix() for p in files
                   if len(p.read_text(encoding="utf-8").splitlines()) > 500
                   and not p.read_text(encoding="utf-8").startswith("# Over 500 lines: ")]
    assert unexplained == []


def test_import_suite_installs_no_import_hook():
    """The flat module paths of before the layer packages (suite.modelspec, suite.report, ...) are
    gone, and `import suite` leaves the interpreter's import machinery as it found it."""
    import importlib

    import suite

    assert not [f for f in sys.meta_path if type(f).__module__.startswith("suite")]
    for old in ("suite.modelspec", "suite.ledger", "suite.report", "suite.grid", "suite.trl_callback"):
        try:
            importlib.import_module(old)
        except ModuleNotFoundError:
            continue
        raise AssertionError(f"{old} still imports")
    assert suite.__version__
