"""RACE suite: where RL post-training compute goes.

Data flows one way: model config -> accounting; cell spec -> run -> ledger -> report;
reports -> validate / grid / frontier / diagnose -> reporters.

The public Python API is this package's top level (`__all__`), grouped by what a user does
(`API`: account, report, validate, run, import, analyse, publish, extend; docs/install.md lists
them): `from suite import phase_flops, build_report, validate_path, RaceLedger`. Names load on
first use, so `import suite` stays light and the names that need the `train` extra (RaceLedger,
run_cell, run_grid, quickstart, ...) say so when it is missing. The modules behind them are the
implementation: they may move; these names do not.
"""

__version__ = "0.1.0"

API: dict[str, dict[str, str]] = {
    "account": {      # what GRPO steps cost, per phase (docs/accounting.md)
        "ModelSpec": "suite.accounting.modelspec",
        "spec_for": "suite.accounting.specs",
        "catalog_names": "suite.accounting.specs",
        "Adapter": "suite.accounting.adapter",
        "GRPOSettings": "suite.accounting.settings",
        "work_from_lengths": "suite.accounting.work",
        "work_from_means": "suite.accounting.work",
        "tokens_from_work": "suite.accounting.work",
        "phase_flops": "suite.accounting.pricing",
        "step_flops": "suite.accounting.pricing",
        "step_cost_bound": "suite.accounting.pricing",
    },
    "report": {       # ledgers, run descriptions, reports and the published schemas (docs/report.md)
        "LedgerWriter": "suite.record.ledger",
        "LedgerSummary": "suite.record.ledger",
        "read_ledger": "suite.record.ledger",
        "iter_ledger": "suite.record.ledger",
        "RunSpec": "suite.record.runspec",
        "load_run_description": "suite.train.cell",
        "Provenance": "suite.record.report",
        "Means": "suite.record.report",
        "Report": "suite.record.report",
        "build_report": "suite.record.report",
        "build_estimate": "suite.record.report",
        "read_report": "suite.record.report",
        "write_report": "suite.record.report",
        "update_report": "suite.record.report",
        "schema": "suite.record.published",
    },
    "validate": {     # the rules a report and its ledger must pass (docs/validation.md)
        "validate_report": "suite.validate",
        "validate_ledger": "suite.validate",
        "validate_path": "suite.validate",
        "exit_code": "suite.validate",
        "Finding": "suite.validate",
    },
    "run": {          # one GRPO cell with TRL and the live ledger (docs/trl-integration.md; the `train` extra)
        "CellSpec": "suite.train.cell",
        "load_cell": "suite.train.cell",
        "run_cell": "suite.train.run",
        "RaceLedger": "suite.train.trl_callback",
        "completion_text": "suite.train.rewards",
        "is_correct": "suite.answers",
        "Job": "suite.pipeline.executors",
        "Resources": "suite.pipeline.executors",
        "run_jobs": "suite.pipeline.executors",
    },
    "import": {       # other engines' training logs into a ledger and a report (docs/report.md)
        "import_verl": "suite.integrations.importers",
        "import_trl": "suite.integrations.importers",
    },
    "analyse": {      # pilot grids, frontiers and the RACE diagnosis (docs/quickstart.md, docs/race.md)
        "load_grid": "suite.analysis.grid:load",
        "plan_grid": "suite.analysis.grid",
        "plan_table": "suite.analysis.grid",
        "run_grid": "suite.pipeline.gridrun:run",
        "quickstart": "suite.pipeline.quickstart",
        "quickstart_summary": "suite.pipeline.quickstart:summary_text",
        "load_pilot": "suite.analysis.frontier:load",
        "allocation_frontier": "suite.analysis.frontier:frontier",
        "frontier_moves": "suite.analysis.frontier:moves",
        "write_frontier": "suite.analysis.frontier:write",
        "diagnose": "suite.analysis.race",
        "diagnose_points": "suite.analysis.race",
        "write_diagnosis": "suite.analysis.race:write",
        "diagnosis_summary": "suite.analysis.race:summary",
    },
    "publish": {      # the leaderboard and the paper tables (docs/leaderboard.md)
        "submit": "suite.site.leaderboard",
        "build_leaderboard": "suite.site.leaderboard:build",
        "paper_table": "suite.site.tables:table_from_files",
    },
    "extend": {       # what plugins register (docs/plugins.md)
        "EngineProfile": "suite.accounting.engines",
        "engine": "suite.accounting.engines",
        "RewardSystem": "suite.train.rewards",
        "reward_system": "suite.train.rewards",
        "rule": "suite.validate",
        "Issue": "suite.validate",
        "key_map": "suite.integrations.keymaps",
    },
    "errors and data": {
        "RaceError": "suite.errors",
        "data_home": "suite.paths:home",
    },
}
"""What a user does -> public name -> "module" (the same name there) or "module:name"."""

_API: dict[str, str] = {name: target for group in API.values() for name, target in group.items()}

__all__ = sorted(_API)


def __getattr__(name: str):
    target = _API.get(name)
    if target is None:
        raise AttributeError(f"module 'suite' has no attribute {name!r}")
    import importlib

    module, _, attr = target.partition(":")
    try:
        value = getattr(importlib.import_module(module), attr or name)
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
