"""RACE suite: where RL post-training compute goes.

Data flows one way: model config -> accounting; cell spec -> run -> ledger -> report;
reports -> validate / grid / frontier / diagnose -> reporters.

The public Python API is this package's top level (`__all__`): `from suite import phase_flops,
build_report, validate_path, RaceLedger, build_leaderboard`. Names load on first use, so
`import suite` stays light and the names that need the `train` extra (RaceLedger, run_grid,
quickstart, ...) say so when it is missing. The modules behind them are the implementation.
"""

__version__ = "0.1.0"

_API: dict[str, str] = {
    # errors and data
    "RaceError": "suite.errors",
    "data_home": "suite.paths:home",
    # accounting: model specs and per-phase FLOPs (docs/accounting.md)
    "ModelSpec": "suite.accounting.modelspec",
    "load_spec": "suite.accounting.modelspec",
    "catalog_names": "suite.accounting.modelspec",
    "Adapter": "suite.accounting.adapter",
    "GRPOSettings": "suite.accounting.settings",
    "work_from_lengths": "suite.accounting.work",
    "work_from_means": "suite.accounting.work",
    "add_work": "suite.accounting.work",
    "phase_flops": "suite.accounting.pricing",
    "tokens_from_work": "suite.accounting.work",
    "step_cost_bound": "suite.accounting.pricing",
    # ledgers, run specs, reports and the published schemas (docs/report.md)
    "LedgerWriter": "suite.record.ledger",
    "LedgerReader": "suite.record.ledger",
    "LedgerSummary": "suite.record.ledger",
    "read_ledger": "suite.record.ledger",
    "iter_ledger": "suite.record.ledger",
    "RunSpec": "suite.record.runspec",
    "load_run_spec": "suite.record.runspec",
    "load_run_description": "suite.train.cell",
    "Report": "suite.record.report",
    "build_report": "suite.record.report",
    "build_estimate": "suite.record.report",
    "read_report": "suite.record.report",
    "write_report": "suite.record.report",
    "update_report": "suite.record.report",
    "model_entry": "suite.record.report",
    "totals_from": "suite.record.report",
    "schema": "suite.record.published",
    "output_format": "suite.cli.commands.report",
    # validation (docs/validation.md)
    "validate_report": "suite.validate",
    "validate_ledger": "suite.validate",
    "validate_path": "suite.validate",
    "exit_code": "suite.validate",
    "Finding": "suite.validate",
    "Issue": "suite.validate",
    "rule": "suite.validate",
    "RULES": "suite.validate",
    # the TRL integration (docs/trl-integration.md; the `train` extra)
    "RaceLedger": "suite.train.trl_callback",
    "completion_text": "suite.train.rewards",
    "is_correct": "suite.answers",
    # leaderboard and paper tables (docs/leaderboard.md)
    "submit": "suite.site.leaderboard",
    "build_leaderboard": "suite.site.leaderboard:build",
    "paper_table": "suite.site.tables:table_from_files",
    # pilot grids, frontiers and the RACE diagnosis (docs/quickstart.md, docs/race.md)
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
    # where jobs run (docs/distributed.md)
    "Job": "suite.pipeline.executors",
    "Resources": "suite.pipeline.executors",
    "run_jobs": "suite.pipeline.executors",
}
"""Public name -> "module" (same name there) or "module:name"."""

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
