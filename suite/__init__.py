"""RACE suite: where RL post-training compute goes.

Data flows one way: model config -> accounting; cell spec -> run -> ledger -> report;
reports -> validate / grid / frontier / diagnose -> reporters.

The public Python API is this package's top level (`__all__`): under 40 names, grouped by what a
user does (`API`: account, report, validate, run, import, analyse, publish, extend, errors;
docs/install.md lists them), each the defining module's own name (no aliases):
`from suite import phase_flops, build_report, validate_path, RaceLedger`. Names load on first
use, so `import suite` stays light and the names that need the `train` extra (RaceLedger,
run_cell, quickstart, ...) say so when it is missing. The modules behind them are the
implementation: they may move; these names do not.
"""

__version__ = "0.1.0"

API: dict[str, dict[str, str]] = {
    "account": {      # what GRPO steps cost, per phase (docs/accounting.md)
        "spec_for": "suite.accounting.specs",
        "Adapter": "suite.accounting.adapter",
        "GRPOSettings": "suite.accounting.settings",
        "work_from_lengths": "suite.accounting.work",
        "work_from_means": "suite.accounting.work",
        "tokens_from_work": "suite.accounting.work",
        "phase_flops": "suite.accounting.pricing",
    },
    "report": {       # ledgers, run descriptions and reports (docs/report.md)
        "LedgerWriter": "suite.record.ledger",
        "read_ledger": "suite.record.ledger",
        "load_run_description": "suite.train.cell",
        "Provenance": "suite.record.build",
        "build_report": "suite.record.build",
        "build_estimate": "suite.record.build",
        "read_report": "suite.record.report",
        "write_report": "suite.record.report",
    },
    "validate": {     # the rules a report and its ledger must pass (docs/validation.md)
        "validate_report": "suite.validate",
        "validate_ledger": "suite.validate",
        "validate_path": "suite.validate",
        "exit_code": "suite.validate",
    },
    "run": {          # one GRPO cell with TRL and the live ledger (docs/trl-integration.md; the `train` extra)
        "run_cell": "suite.train.run",
        "RaceLedger": "suite.train.trl_callback",
        "completion_text": "suite.train.rewards",
        "is_correct": "suite.answers",
        "data_home": "suite.paths",
    },
    "import": {       # other engines' training logs into a ledger and a report (docs/import.md)
        "import_verl": "suite.integrations.importers",
        "import_trl": "suite.integrations.importers",
    },
    "analyse": {      # pilot grids and the RACE diagnosis (docs/quickstart.md, docs/race.md)
        "plan_grid": "suite.analysis.grid",
        "plan_table": "suite.analysis.grid",
        "quickstart": "suite.pipeline.quickstart",
        "diagnose": "suite.analysis.race",
    },
    "publish": {      # the leaderboard (docs/leaderboard.md)
        "submit": "suite.site.leaderboard",
    },
    "extend": {       # what plugins register (docs/plugins.md)
        "engine": "suite.accounting.engines",
        "engine_file": "suite.accounting.engines",
        "RewardSystem": "suite.train.rewards",
        "reward_system": "suite.train.rewards",
        "rule": "suite.validate",
        "Issue": "suite.validate",
        "key_map": "suite.integrations.keymaps",
    },
    "errors": {       # what every refusal raises: one line naming the problem, a hint naming the fix
        "RaceError": "suite.errors",
    },
}
"""What a user does -> public name -> the module that defines it under that name (no aliases)."""

_API: dict[str, str] = {name: target for group in API.values() for name, target in group.items()}

__all__ = sorted(_API)


def __getattr__(name: str):
    target = _API.get(name)
    if target is None:
        raise AttributeError(f"module 'suite' has no attribute {name!r}")
    import importlib

    try:
        value = getattr(importlib.import_module(target), name)
    except ModuleNotFoundError as e:
        from .extras import extra_for, install_hint

        extra = extra_for(e.name)
        if extra is None:
            raise
        raise ModuleNotFoundError(f"suite.{name} needs the '{extra}' extra ({e.name} is not installed): "
                                  f"{install_hint(extra)}", name=e.name) from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
