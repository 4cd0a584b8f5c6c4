"""Extension points: a plugin package, built and pip-installed as docs/plugins.md writes it, adds an
engine (one engine file: its profile and its log), a reward system and a validation rule through
the `race.engines`, `race.rewards` and `race.rules` entry points; `race flops`, `race import`,
`race run --plan` and `race validate` (subprocesses, the plugin on their path) use each. A plugin
that fails to import is one line naming it; an unknown name is a RaceError naming the known ones."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from suite.cli import main
from suite.errors import RaceError
from suite.validate import validate_path

ROOT = Path(__file__).resolve().parents[1]
VALID = ROOT / "schemas" / "examples" / "valid" / "paper-qwen1.5b-lora64-sparse.json"
FLOPS = ["flops", "--model", "Qwen2.5-0.5B-Instruct", "--group-size", "4", "--prompts-per-step", "2", "--json"]


def _install(src: Path, target: Path) -> Path:
    """pip-install the package in `src` into `target` (no index, no build isolation: setuptools
    from the suite's environment builds it), as a user's `pip install ./acme-race` would."""
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                        "--no-build-isolation", "--target", str(target), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return target


def _write_plugin(folder: Path, pyproject: str, module: str, engine: str | None = None) -> Path:
    (folder / "src" / "acme_race").mkdir(parents=True)
    (folder / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    (folder / "src" / "acme_race" / "__init__.py").write_text(module, encoding="utf-8")
    if engine is not None:
        (folder / "src" / "acme_race" / "acme.yaml").write_text(engine, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """The plugin of docs/plugins.md (its three files, read from the page), installed; and a broken
    one (its module raises on import), installed into a folder of its own."""
    root = tmp_path_factory.mktemp("plugins")
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    (pyproject,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    (module,) = re.findall(r"```python\n(.*?)```", text, re.S)
    (engine,) = re.findall(r"```yaml\n(.*?)```", text, re.S)
    good = _install(_write_plugin(root / "acme", pyproject, module, engine), root / "site")
    broken = _install(_write_plugin(root / "broken", pyproject.replace('"acme-race"', '"acme-broken"'),
                                    "raise ImportError('acme_race needs acme-cluster, which is not installed')\n"),
                      root / "site-broken")
    return {"good": good, "broken": broken}


def _race(site: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "suite.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_race_flops_prices_under_the_plugins_engine_profile(plugin, capsys):
    r = _race(plugin["good"], *FLOPS, "--engine-profile", "acme")
    assert r.returncode == 0, r.stderr
    acme = json.loads(r.stdout)
    assert main([*FLOPS, "--engine-profile", "generic"]) == 0          # this process has no plugin
    generic = json.loads(capsys.readouterr().out)
    assert acme["engine_profile"] == "acme"
    # Acme's profile prefills each prompt once for its K = 4 completions; the generic one K times.
    assert 4 * acme["per_step"]["tokens"]["rollout_prompt"] == generic["per_step"]["tokens"]["rollout_prompt"]
    assert acme["per_step"]["flops"]["rollout"] < generic["per_step"]["flops"]["rollout"]
    assert acme["per_step"]["flops"]["update"] == generic["per_step"]["flops"]["update"]
    assert main([*FLOPS, "--engine-profile", "acme"]) == 2
    assert "unknown engine profile 'acme'" in capsys.readouterr().err


def test_race_import_reads_the_plugins_log_and_work_008_holds_it_to_its_profile(plugin, tmp_path):
    """The engine file of docs/plugins.md registers AND imports: `race import acme` reads the log
    its `logs` entry describes, prices it under its profile, and the report validates under the
    plugin's engine (its alias too); without the plugin `acme` is unknown."""
    cell = tmp_path / "run.yaml"
    cell.write_text("name: acme-run\npolicy: Qwen2.5-0.5B-Instruct\nreward: sparse\nlora_rank: 16\ngroup_size: 4\n"
                    "prompts_per_step: 2\nmax_completion_tokens: 1024\n", encoding="utf-8")
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps({"iteration": s, "prompt_len": 100.0, "gen_len": 200.0 + s, "t_gen": 3.0,
                                       "t_train": 1.0}) + "\n" for s in (1, 2, 3)), encoding="utf-8")
    r = _race(plugin["good"], "import", "acme", str(log), "--cell", str(cell), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["accounting"]["engine_profile"] == "acme" and doc["run"]["engine"]["name"] == "acme"
    assert doc["totals"]["tokens"]["rollout_completion"] == 8 * (201 + 202 + 203)
    assert doc["totals"]["tokens"]["rollout_prompt"] == 3 * 2 * 100          # one prefill per prompt: acme's profile
    doc["run"]["notes"] = "cluster: acme-1"                                   # the plugin's house rule, ACME-001
    for name, code in (("AcmeTrainer", 0), ("trl", 1)):         # acme's profile is acme's own
        doc["run"]["engine"]["name"] = name
        (tmp_path / "out" / "report.json").write_text(json.dumps(doc))
        r = _race(plugin["good"], "validate", "--strict", str(tmp_path / "out" / "report.json"))
        assert r.returncode == code and ("WORK-008" in r.stdout) == bool(code), r.stdout + r.stderr
    assert main(["import", "acme", str(log), "--cell", str(cell), "--out", str(tmp_path / "o2")]) == 2  # no plugin


def test_race_run_plan_takes_the_plugins_reward_system(plugin, tmp_path):
    cell = tmp_path / "cell.yaml"
    cell.write_text(f"policy: {ROOT / 'tasks/arith/models/policy-s'}\n"
                    f"dataset: {ROOT / 'tests/fixtures/gsm8k_head.jsonl'}\n"
                    "reward: acme-brief\nbudget_flops: 1e13\ngroup_size: 4\nprompts_per_step: 2\n", encoding="utf-8")
    r = _race(plugin["good"], "run", str(cell), "--plan")
    assert r.returncode == 0, r.stderr
    assert "reward: acme-brief (rule, 0 FLOPs)" in r.stdout and "format gsm8k" in r.stdout
    assert "nothing was trained" in r.stdout and not (tmp_path / "runs").exists()
    from suite.train.cell import load_cell

    with pytest.raises(RaceError, match="unknown reward system 'acme-brief'"):   # without the plugin
        load_cell(cell)


def test_race_validate_runs_the_plugins_rule(plugin):
    assert validate_path(VALID) == []                          # the suite alone: a clean report
    r = _race(plugin["good"], "validate", "--strict", str(VALID))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ACME-001" in r.stdout and "run.notes does not name the cluster" in r.stdout
    r = _race(plugin["good"], "validate", "--list-rules")
    assert re.search(r"^ACME-001\s+warning\s+the run's notes do not name its cluster$", r.stdout, re.M)


def test_a_plugin_that_fails_to_import_is_one_line_naming_it(plugin):
    r = _race(plugin["broken"], "validate", "--list-rules")
    assert r.returncode == 2 and r.stdout == ""
    (line, hint) = r.stderr.strip().splitlines()
    assert line.startswith("race validate: error: plugin acme = acme_race of entry point group race.rules "
                           "(package acme-broken 0.1.0) failed to load: ImportError: acme_race needs acme-cluster")
    assert "uninstall" in hint


def test_unknown_names_are_race_errors_naming_the_known_ones():
    from suite.accounting.engines import ENGINES
    from suite.registry import Registry, UnknownName

    with pytest.raises(UnknownName) as e:
        ENGINES["acme"]
    assert isinstance(e.value, RaceError) and isinstance(e.value, KeyError)
    assert e.value.message == "unknown engine profile 'acme'" and e.value.hint == "known: " + ", ".join(sorted(ENGINES))
    assert "generic" in ENGINES and "trl" in ENGINES
    r: Registry[int] = Registry("thing")
    r.add("a", 1)
    assert r.get("b") is None and "b" not in r and [] not in r    # still a mapping
