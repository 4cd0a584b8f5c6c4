"""No engine name hard-coded in suite/ outside the engine files, the readers, the importers and
the docs (issue 38): everything that names engines reads the one registry (tasks/engines/*.yaml via
suite.accounting.enginefile). A string literal of the code that is an engine's name, alias,
profile or log name (after the same normalisation as engine identity) is a hit; a file may hold
hits only when it is on the short list below, each with its reason."""

from __future__ import annotations

import ast
from pathlib import Path

from suite.accounting.enginefile import ENGINE_FILES, normalise

ROOT = Path(__file__).resolve().parents[1]

ALLOWED = {
    # importers and readers: each reads one engine's own log layout (docs/import.md)
    "suite/integrations/importers.py": "verl's FileLogger and TRL's trainer_state.json importers",
    "suite/integrations/mlperf.py": "the importer of MLPerf's GRPO logs (NeMo-RL runs them)",
    "suite/integrations/mlperf_power.py": "the importer of MLPerf's power logs names the log format they go with",
    "suite/integrations/keymaps.py": "'mlperf' there is a log format name, the reader its log entries name",
    "suite/integrations/logformats": "the readers of engines' console, TensorBoard and wandb output (prefix)",
    "suite/integrations/consoles.py": "the readers of the engines' consoles, each registered under its format's name",
    "suite/integrations/choose.py": "'mlperf' there is a log format name (a file holding :::MLLOG lines)",
    # the exporter: `race export verl` writes verl's launch command; its module names its one engine
    "suite/integrations/verl.py": "the exporter of a cell to verl's main_ppo (ENGINE)",
    # the suite's own runs train with TRL: one place says so (OWN_ENGINE, OWN_PROFILE, OWN_CPU_PROFILE) ...
    "suite/record/runspec.py": "the engine and profiles of the suite's own runs",
    # ... and the TRL integration itself (its callback picks TRL's profile by device and vLLM settings)
    "suite/train/run.py": "the suite's TRL runner picks TRL's profile by device",
    "suite/train/trlsetup.py": "the suite's TRL integration: TRL's profiles by device and vLLM mode",
    "suite/train/trl_callback.py": "the TRL callback: an engine the caller names must agree with the trainer's vLLM mode",
    # the referee (race compare): each engine's own FLOP counter, run from its installed code or transcribed
    # from its repository, is named for that engine; these are counters, not profiles or logs
    "suite/accounting/counters.py": "the engines' counters run from their installed packages (verl, TRL)",
    "suite/accounting/transcribed.py": "the engines' counters transcribed from their code (prime-rl, NeMo-RL, slime)",
    "suite/accounting/refcase.py": "a referee case names the engines whose counters it is built to show",
    "suite/accounting/conformance.py": "the conformance matrix's columns are the engines' counters",
    # not engine references: a pip distribution and a comparison column
    "suite/pipeline/studyrun.py": "'trl' is the pip distribution whose version a study records",
    "suite/site/field.py": "'verl' keys the column of verl's own FLOP estimator (suite.accounting.compare)",
}


def _names() -> set[str]:
    out = set()
    for name, rec in ENGINE_FILES.items():
        if any(p for p in rec.profiles if not rec.data["profiles"][p].get("any_engine")):   # not generic
            out |= {name, *rec.aliases, *rec.profiles, *(log["name"] for log in rec.logs)}
    return {normalise(n) for n in out}


def _hits() -> dict[str, list[tuple[int, str]]]:
    names, hits = _names(), {}
    for path in sorted((ROOT / "suite").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and normalise(node.value) in names:
                hits.setdefault(rel, []).append((node.lineno, node.value))
    return hits


def _allowed(rel: str) -> bool:
    return any(rel == a or (not a.endswith(".py") and rel.startswith(a)) for a in ALLOWED)


def test_no_engine_name_is_hard_coded_outside_the_engine_files_readers_and_importers():
    names = _names()
    assert {"trl", "verl", "nemo-rl", "prime-rl", "slime", "skyrl", "openrlhf", "roll", "areal", "trl-vllm",
            "huggingface-trl", "mlperf"} <= names and "generic" not in names
    hits = _hits()
    stray = {f: h for f, h in hits.items() if not _allowed(f)}
    assert not stray, f"engine names hard-coded (read them from suite.accounting.enginefile instead): {stray}"
    # every allowance is still needed (a file that no longer names engines leaves the list)
    unused = [a for a in ALLOWED if a.endswith(".py") and a not in hits]
    assert not unused, f"allowances no longer needed: {unused}"


def test_the_scan_finds_a_hard_coded_dispatch():
    """The scan sees what item 5 removed: `if args.engine not in ("verl", "trl", "mlperf")`."""
    tree = ast.parse('if args.engine not in ("verl", "TRL ", "mlperf"):\n    pass\n')
    got = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and normalise(n.value) in _names()]
    assert got == ["verl", "TRL ", "mlperf"]
