"""Evaluating a run folder (RUN_DIR/adapter of `race run`) and writing the rows into its report,
or a base model without adapter into evaluations.json: which models a run used, and the merge
of new rows into the report's evaluations.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import RaceError
from .harness import EvalConfig, evaluate, model_entry
from .targets import DEFAULT_TARGETS

def merge_evaluations(existing: list[dict], new: list[dict]) -> list[dict]:
    """Existing rows with the new ones in place of any with the same (target, metric)."""
    keys = {(r["target"], r["metric"]) for r in new}
    return [r for r in existing if (r.get("target"), r.get("metric")) not in keys] + list(new)


def _embedded_model(name: str) -> Path:
    from ..paths import tasks

    return tasks() / "arith" / "models" / name


def _resolve_model(value: str | None, run_dir: Path) -> Path | None:
    """A model folder from a run's cell/report: a path (absolute, or relative to the run or the
    working folder) or the name of an embedded model."""
    if not value:
        return None
    for p in (Path(value), run_dir / value, _embedded_model(value)):
        if (p / "config.json").is_file():
            return p
    return None


def run_models(run_dir: Path, native_reward: str | None = None, native_reward_model: str | None = None,
               model: str | None = None) -> tuple[Path, str | None, str | None]:
    """(base model folder, reward system, reward model folder or None) of a run folder: from
    its cell.yaml (suite.train.cell: policy, reward system and model_path), else from report.json
    (policy.name, reward.system, reward.model.name) resolved as paths or embedded model names.
    `native_reward` (and its model) replaces the run's own reward system; `model` (--model) is the
    base model, whatever the run names (a RaceLedger report names the policy, not its folder)."""
    from ..record.report import read_report

    report = read_report(run_dir / "report.json", check=False)
    policy, system, reward_model = None, None, None
    if (run_dir / "cell.yaml").is_file():
        from ..train.cell import load_cell

        cell = load_cell(run_dir / "cell.yaml", check_paths=False)
        policy, system = cell.policy, cell.reward.system
        reward_model = cell.reward.options.get("model_path")
        if reward_model is None and system in ("prm", "proxy_prm"):
            from ..train.rewards import default_model_path

            reward_model = str(default_model_path("prm" if system == "prm" else "prm-proxy"))
    policy = model or policy or report.model
    if native_reward == "none":              # evaluate without a native reward
        return _base_of(policy, run_dir), None, None
    if native_reward is None and native_reward_model:
        from ..train.rewards import is_sequence_classifier

        if is_sequence_classifier(native_reward_model):
            native_reward = "orm"            # a TRL reward model folder scores as an outcome reward model
        else:
            raise RaceError("--native-reward-model needs --native-reward NAME (orm for a sequence classifier, "
                            "prm for a process reward model)")
    if native_reward:
        system, reward_model = native_reward, native_reward_model
    system = system or report.reward_system
    reward_model = reward_model or (report.reward_model if report.reward_kind != "rule" and not native_reward
                                    else None)
    from ..train.rewards import REWARD_SYSTEMS

    if system not in REWARD_SYSTEMS:
        raise RaceError(f"run {run_dir} was trained with reward {system!r}, which the suite cannot rerun as its "
                        "native_reward", f"pass --native-reward NAME ({', '.join(sorted(REWARD_SYSTEMS))}) to score "
                                         "with one of the suite's reward systems")
    base = _base_of(policy, run_dir)
    resolved = _resolve_model(reward_model, run_dir) if reward_model else None
    if reward_model and resolved is None:
        raise RaceError(f"reward model of run {run_dir} not found ({reward_model!r})",
                        "the native reward needs the run's reward model folder")
    return base, system, str(resolved) if resolved else None


def _base_of(policy, run_dir: Path) -> Path:
    base = _resolve_model(policy, run_dir)
    if base is None:
        raise RaceError(f"base model of run {run_dir} not found (policy {policy!r})",
                        "pass --model with the policy folder the run trained")
    return base


def check_valid(doc: dict, path: Path, section: str = "$.evaluations", *, with_ledger: bool = False) -> None:
    """Refuse (RaceError, the first finding) rows that would make the report at `path` invalid:
    error findings under `section` (a JSON path prefix); `with_ledger`: checked against the
    ledger beside it too."""
    from ..validate import validate_report

    found = validate_report(doc, file=str(path), base_dir=path.parent if with_ledger else None)
    errors = [f for f in found if f.severity == "error" and f.path.startswith(section)]
    if errors:
        e = errors[0]
        raise RaceError(f"evaluations would make {path} invalid: {e.path}: {e.message}", e.hint or None)


def evaluate_run(run_dir: str | Path, targets=DEFAULT_TARGETS, limit: int | None = None, backend: str = "hf", *,
                 model: str | None = None, judge: str | None = None, data_dir: str | None = None,
                 batch_size: int = 64, device: str = "cpu", native_reward: str | None = None,
                 native_reward_model: str | None = None) -> list[dict]:
    """Evaluate RUN_DIR/adapter on `targets` with all three metrics, keep lm-eval's per-sample
    logs in RUN_DIR/eval/, and write the rows into RUN_DIR/report.json atomically (rows for the
    same target and metric are replaced; the report stays valid). `native_reward` overrides the
    run's own reward system. Returns the new rows."""
    from ..record.report import update_report

    run_dir = Path(run_dir)
    report_path = run_dir / "report.json"
    if not report_path.is_file():
        raise RaceError(f"run folder {run_dir} has no report.json", "pass a folder written by `race run`")
    adapter = run_dir / "adapter"
    full = not (adapter / "adapter_config.json").is_file() and (adapter / "config.json").is_file()
    if not full and not (adapter / "adapter_config.json").is_file():
        raise RaceError(f"adapter not found: {adapter} has no adapter_config.json",
                        "race run and RaceLedger save it to RUN_DIR/adapter when training ends; a run that stopped "
                        "before (a crash, a kill) has none: resume it (race run --resume RUN_DIR)")
    base, system, reward_model = run_models(run_dir, native_reward, native_reward_model, model)
    if full:  # LoRA rank 0: the run saved the fully fine-tuned model itself
        base, adapter = adapter, None
    config = EvalConfig(model=str(base), adapter=str(adapter) if adapter else None, targets=tuple(targets),
                        limit=limit, backend=backend, judge=judge, native_reward=system, native_reward_model=reward_model,
                        data_dir=data_dir, out_dir=str(run_dir / "eval"), batch_size=batch_size, device=device)
    rows = evaluate(config)
    update_report(report_path, lambda doc: doc.update(evaluations=merge_evaluations(doc.get("evaluations") or [], rows)),
                  check=lambda doc: check_valid(doc, report_path))
    return rows


def evaluate_base(model: str | Path, out: str | Path, targets=DEFAULT_TARGETS, limit: int | None = None,
                  backend: str = "hf", *, native_reward: str | None = None, native_reward_model: str | None = None,
                  judge: str | None = None, data_dir: str | None = None, batch_size: int = 64,
                  device: str = "cpu") -> dict:
    """Score a base model without adapter (the reference row): OUT/evaluations.json holds
    {"model": <report model object>, "adapter": null, "evaluations": [...]}; logs in OUT/eval/."""
    from ..atomic import write_json_atomic

    out = Path(out)
    if native_reward == "none":
        native_reward = native_reward_model = None
    config = EvalConfig(model=str(model), adapter=None, targets=tuple(targets), limit=limit, backend=backend,
                        judge=judge, native_reward=native_reward, native_reward_model=native_reward_model,
                        data_dir=data_dir, out_dir=str(out / "eval"), batch_size=batch_size, device=device)
    rows = evaluate(config)
    doc = {"model": model_entry(model), "adapter": None, "evaluations": rows}
    write_json_atomic(out / "evaluations.json", doc)
    return doc
