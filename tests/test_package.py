"""The installed package, not the checkout: the wheel and sdist are built as a user builds them,
the wheel is installed (not editable, with the constraints) into fresh virtual environments, and
the commands run from a temporary folder that is not the checkout.

- The wheel carries schemas/, tasks/ and reporters/ byte for byte as the checkout has them, holds
  one import name (`suite`), and stays under 25 MB; the sdist builds it.
- The light core pulls no torch (nor any engine) and runs validate, flops, plan, report, submit,
  leaderboard build, schema, diagnose, frontier tables and `quickstart --help`; `race run` and the
  frontier's figures name the extra they need.
- With the engines, the README tour's commands without training run as written, and a short
  `race run` of the smallest shipped cell writes a report that validates. Installing the 2 GB
  engine stack afresh costs minutes on this machine (docs/install.md), so that venv installs the
  wheel itself and finds the engines of the test venv behind its own site-packages (a .pth file):
  `pip install 'WHEEL[train]' -c constraints.txt` then resolves every requirement of the extra
  against the pinned versions without fetching them again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from suite.paths import DATA

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints.txt"
ENGINES = ("torch", "transformers", "trl", "peft", "lm-eval", "accelerate", "datasets", "math-verify")
MAX_WHEEL_BYTES = 25 * 1024 * 1024


def _run(cmd, *, cwd, env=None, timeout=600, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check:
        assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{(r.stdout + r.stderr)[-4000:]}"
    return r


def _env(venv: Path) -> dict:
    """The environment of a shell in `venv` only: nothing of the test venv or the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "RACE_HOME")}
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}/usr/local/bin:/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _pip_install(venv: Path, *requirements: str) -> None:
    _run([str(venv / "bin" / "pip"), "install", "-q", "-c", str(CONSTRAINTS), *requirements], cwd=venv,
         env=_env(venv))


def _data_files(root: Path) -> dict[str, bytes]:
    """sha256 of every file of the data folders under `root`, as the wheel would name it (hatch
    leaves out __pycache__ and compiled files)."""
    out = {}
    for name in DATA:
        for p in sorted((root / name).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo", ".pyd"):
                out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> tuple[Path, Path]:
    """(wheel, sdist), built with `python -m build` (isolated, as a user would): the sdist first,
    then the wheel from the sdist, so the sdist is proven complete."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=out)
    return next(out.glob("race_suite-*.whl")), next(out.glob("race_suite-*.tar.gz"))


@pytest.fixture(scope="module")
def light(dist, tmp_path_factory) -> Path:
    """A fresh venv with the wheel and nothing else it does not require."""
    venv = tmp_path_factory.mktemp("light") / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=venv.parent)
    _pip_install(venv, str(dist[0]))
    return venv


@pytest.fixture(scope="module")
def engines(dist, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed and the test venv's packages behind its own
    site-packages (a .pth file; .pth files found there are not run, so the checkout's editable
    install stays invisible): pip installs the wheel and finds every requirement of `[train]`."""
    venv = tmp_path_factory.mktemp("engines") / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=venv.parent)
    purelib = Path(_run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        cwd=venv).stdout.strip())
    (purelib / "zz_race_engines.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _pip_install(venv, f"{dist[0]}[train]")
    return venv


def _installed_data(venv: Path) -> Path:
    out = _run([str(venv / "bin" / "python"), "-c", "import suite; print(suite.data_home())"], cwd=venv,
               env=_env(venv)).stdout.strip()
    return Path(out)


def test_wheel_carries_the_checkouts_data_and_one_import_name(dist):
    wheel, sdist = dist
    assert wheel.stat().st_size < MAX_WHEEL_BYTES, f"wheel is {wheel.stat().st_size:,} bytes"
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if not n.endswith("/")]
        tops = {n.split("/")[0] for n in names}
        assert {t for t in tops if not t.endswith(".dist-info")} == {"suite"}
        shipped = {n.removeprefix("suite/_data/"): hashlib.sha256(z.read(n)).hexdigest()
                   for n in names if n.startswith("suite/_data/")}
        code = {n for n in names if n.startswith("suite/") and n.endswith(".py") and not n.startswith("suite/_data/")}
        catalog = {n for n in names if n.startswith("suite/accounting/catalog/")}
    assert shipped == _data_files(ROOT), "the wheel's data differ from the checkout's schemas/, tasks/, reporters/"
    assert code == {p.relative_to(ROOT).as_posix() for p in (ROOT / "suite").rglob("*.py")}
    assert catalog == {p.relative_to(ROOT).as_posix() for p in (ROOT / "suite/accounting/catalog").rglob("*")
                       if p.is_file()} != set()
    with tarfile.open(sdist) as t:
        members = {m.name.split("/", 1)[1] for m in t.getmembers() if m.isfile()}
    assert {"pyproject.toml", "hatch_build.py", "constraints.txt"} <= members
    assert set(_data_files(ROOT)) <= members


def test_light_core_pulls_no_engine(light):
    py = str(light / "bin" / "python")
    dists = json.loads(_run([py, "-c", "import importlib.metadata as m, json; "
                                       "print(json.dumps(sorted(d.metadata['Name'].lower() for d in m.distributions())))"],
                            cwd=light, env=_env(light)).stdout)
    assert "race-suite" in dists
    assert [d for d in dists if d.replace("_", "-") in ENGINES] == []
    listed = json.loads(_run([str(light / "bin" / "pip"), "list", "--format", "json"], cwd=light,
                             env=_env(light)).stdout)
    assert not {p["name"].lower() for p in listed} & set(ENGINES)
    # the package runs from the venv, with its data inside it
    data = _installed_data(light)
    assert data.is_relative_to(light) and data.name == "_data" and data.parent.name == "suite"


def test_light_core_commands_from_a_foreign_folder(light, tmp_path):
    env, data = _env(light), _installed_data(light)
    examples = data / "schemas" / "examples"

    def race(*args, status=0):
        r = _run(["race", *map(str, args)], cwd=tmp_path, env=env, check=False)
        said = r.stdout + r.stderr
        assert r.returncode == status, f"race {' '.join(map(str, args))}: exit {r.returncode}\n{said[-3000:]}"
        assert "Traceback" not in said
        return said

    assert "no findings" in race("validate", examples / "valid")
    # every invalid example fails with exactly the rules its .expect file declares
    cases = {e.stem: set(e.read_text().split()) for e in (examples / "invalid").glob("*.expect")}
    r = _run(["race", "validate", "--format", "json", *[examples / "invalid" / f"{c}.json" for c in cases]],
             cwd=tmp_path, env=env, check=False)
    assert r.returncode == 2     # the set holds unreadable documents (INPUT rules): exit 2 wins
    got: dict[str, set] = {c: set() for c in cases}
    for f in json.loads(r.stdout)["findings"]:
        got[Path(f["file"]).name.split(".")[0]].add(f["rule_id"])
    assert got == cases
    assert "total" in race("flops", "--model", "Qwen2.5-1.5B-Instruct", "--lora-rank", "64", "--steps", "100")
    assert "Qwen2.5-7B-Instruct" in race("plan", "--budget", "1e18")
    assert "| run |" in race("report", "--format", "markdown", *sorted((examples / "valid").glob("*.json")))
    (tmp_path / "board").mkdir()
    assert "submitted" in race("submit", examples / "valid" / "paper-qwen1.5b-lora64-sparse.json",
                               "--submissions", "board")
    assert "1 submission(s) listed" in race("leaderboard", "build", "--submissions", "board", "--out", "site")
    assert (tmp_path / "site" / "index.html").is_file()
    assert json.loads(race("schema", "report"))["$id"] == "https://race-suite.org/schemas/report/v1.json"
    assert "--limit" in race("quickstart", "--help")
    from test_race import _grid     # evaluated pilot reports: RACE and the frontier tables need no engine

    _grid(tmp_path / "pilot")
    assert "Wrote" in race("diagnose", "pilot", "--out", "race", "--quiet")
    assert json.loads((tmp_path / "race" / "race.json").read_text())["conditions"]
    race("frontier", "pilot", "--no-plots", "--out", "frontier")
    assert (tmp_path / "frontier" / "frontier.md").is_file()
    assert "'train' extra: matplotlib" in race("frontier", "pilot", "--out", "figures", status=2)
    said = race("run", "tasks/cells/s-sparse.yaml", "--out", "run", status=2)
    assert "'train' extra" in said and "pip install 'race-suite[train]'" in said
    assert not (tmp_path / "run").exists()


def test_readme_tour_and_a_short_run_from_the_wheel(engines, tmp_path):
    from test_readme import tour_lines

    env, data = _env(engines), _installed_data(engines)
    where = _run(["python", "-c", "import suite, torch; print(suite.__file__)"], cwd=tmp_path, env=env).stdout
    assert Path(where.strip()).is_relative_to(engines)         # the wheel's suite, the test venv's torch
    shutil.copytree(data / "schemas" / "examples", tmp_path / "schemas" / "examples")   # the user's reports
    for command, status, words in tour_lines():   # tasks/grids/quickstart.yaml is the shipped grid
        r = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        said = r.stdout + r.stderr
        assert r.returncode == status, f"README line `{command}`: exit {r.returncode}\n{said[-3000:]}"
        assert "Traceback" not in said and all(w in said for w in words), f"`{command}`\n{said[-3000:]}"
    assert not (tmp_path / "tasks").exists()
    r = _run(["race", "run", "tasks/cells/s-sparse.yaml", "--out", "run", "--max-steps", "2", "--threads", "1",
              "--no-progress"], cwd=tmp_path, env=env)
    assert "2 steps" in r.stdout, r.stdout
    _run(["race", "validate", "run/report.json"], cwd=tmp_path, env=env)
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["totals"]["steps"] == 2 and report["totals"]["flops"]["total"] > 0
