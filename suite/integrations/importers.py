"""Import other engines' training logs into the suite's ledger and report.

Runs made without the suite's TRL callback still have logs: verl's file logger (JSON Lines,
`{"step": N, "data": {...}}` per training step) and TRL's `trainer_state.json` (`log_history`).
Both carry mean prompt and completion lengths and token totals per step, which is what
suite.accounting needs (`work_from_means`) to price each phase with LoRA-correct FLOPs. The
cell YAML supplies what logs do not say: model, adapter, K, prompts per step, mu, beta.

Means, not per-sequence lengths, are logged, so attention work is computed as if every
sequence had the mean length (a slight underestimate of sum L^2) and TRL's padding is not
recoverable: both are stated in the report's notes.

verl's own FLOP figure is shown beside ours (`Comparison`): its estimator (6 FLOPs per
parameter per token, LoRA or not, embeddings included; rollout not counted) and what its
logged perf/mfu/actor implies (mfu x device peak x GPUs x update seconds).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from .. import jsonstrict
from ..errors import RaceError
from ..limits import MAX_IMPORT_STEPS

if TYPE_CHECKING:
    from ..train.cell import CellSpec

# ---- what each log must carry -------------------------------------------------------------------

VERL_NEEDED: dict[str, str] = {
    "prompt_length/mean": "computed every training step by verl's compute_data_metrics; logged to the file only "
                          "with trainer.logger including 'file' (and VERL_FILE_LOGGER_PATH set), on training steps "
                          "(trainer.val_only=False)",
    "response_length/mean": "computed every training step by verl's compute_data_metrics; logged with "
                            "trainer.logger=[console,file]",
    "perf/total_num_tokens": "computed by verl's compute_throughout_metrics every training step; logged with "
                             "trainer.logger=[console,file]",
}
"""verl metrics the import cannot do without, and the verl setting that puts them in the log."""

VERL_SECONDS = {"rollout": ("timing_s/gen",), "reward": ("timing_s/reward",),
                "update": ("timing_s/old_log_prob", "timing_s/ref", "timing_s/update_actor")}
"""verl timers summed into each phase's seconds (timing_s/step minus these is 'other')."""

VERL_KEPT = ("critic/score/mean", "critic/rewards/mean", "response_length/clip_ratio", "actor/entropy",
             "perf/mfu/actor", "perf/mfu/actor_infer", "perf/throughput", "response_length/min", "response_length/max",
             "prompt_length/min", "prompt_length/max")
"""verl metrics copied into each ledger record's metrics."""

TRL_NEEDED: dict[str, str] = {
    "num_tokens": "GRPOTrainer logs the running prompt+completion token count at every logging step; "
                  "trainer_state.json holds it when logging_steps > 0 and a checkpoint was saved (save_steps)",
    "completions/mean_length": "GRPOTrainer logs it at every logging step (logging_steps > 0)",
}
"""TRL log_history keys the import cannot do without."""

TRL_KEPT = ("reward", "reward_std", "kl", "entropy", "loss", "completions/clipped_ratio", "learning_rate",
            "completions/min_length", "completions/max_length")
"""TRL metrics copied into each ledger record's metrics."""

DEFAULT_PEAK_TFLOPS = 989.0
"""H100/H200 dense bf16 peak (verl's get_device_flops table), used to turn mfu into FLOPs."""


@dataclass(frozen=True)
class Step:
    """One imported log entry: the mean lengths of its generation batches and what else it says."""

    step: int
    """The engine's optimizer-step number (strictly increasing, >= 1)."""
    prompt_mean: float
    """Mean prompt tokens per completion."""
    completion_mean: float
    """Mean generated tokens per completion."""
    generations: int = 1
    """Generation batches this entry covers (TRL with logging_steps > mu covers several)."""
    seconds: Mapping[str, float] = field(default_factory=dict)
    """Wall seconds per phase, where the log has timers."""
    metrics: Mapping[str, float | None] = field(default_factory=dict)
    """Other numbers worth keeping (reward, mfu, ...)."""
    sequences: float | None = None
    """Sequences per generation the log implies (verl: total tokens / mean length)."""
    update_seconds: float | None = None
    """verl: timing_s/update_actor (the passes perf/mfu/actor measures)."""
    gpus: float | None = None
    """GPUs the log implies (verl: total tokens / (throughput x step seconds))."""
    kept: float | None = None
    """Completions the update trained on (None: all generated; MLPerf: global_valid_seqs)."""
    environment_tokens: float = 0
    """Multi-turn: environment/tool tokens per completion (prefill)."""
    turns: float = 1
    """Multi-turn: policy turns per completion."""
    completion_max: float | None = None
    """The longest completion of the entry's batches (TRL: completions/max_length): a padded
    profile pads every row to it, and prices it (padded_lengths)."""


def padded_lengths(prompt_mean: float, completion_mean: float, completion_max: float, prompts: int,
                   group_size: int) -> tuple[list[int], list[int]]:
    """Integer lengths of one generation batch with the logged means and longest completion: one
    completion at the maximum, the others sharing the rest as evenly as integers allow (each at
    least one token, at most the maximum); the prompts at the mean likewise. Priced under a padded
    profile (TRL's), every row runs to the longest completion, as TRL ran it: the padding the
    log bounds. Prompts are left-padded to the batch's longest too, which the log does not give:
    that part is priced at the mean (a lower bound)."""
    n = prompts * group_size
    top = max(1, round(completion_max))
    total = min(max(n, round(n * completion_mean)), n * top)
    rest, others = total - top, n - 1
    if others == 0:
        comps = [top]
    else:
        rest = min(max(rest, others), others * top)
        q, r = divmod(rest, others)
        comps = [top] + [q + 1] * r + [q] * (others - r)
    ptotal = max(prompts, round(prompts * prompt_mean))     # the prompts' tokens, as evenly as integers allow
    q, r = divmod(ptotal, prompts)
    return [q + 1] * r + [q] * (prompts - r), comps


def _need(entry: Mapping, key: str, needed: Mapping[str, str], where: str, engine: str) -> float:
    v = entry.get(key)
    if v is None:
        raise RaceError(f"{where}: {engine} log has no '{key}', which the import needs", needed[key])
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise RaceError(f"{where}: '{key}' = {v!r} is not a non-negative number")
    return float(v)


def _read_jsonl(path: Path) -> Iterable[tuple[int, Any]]:
    from .. import jsonlines    # the one JSON Lines reader (a killed run's torn last line ends the file)

    return jsonlines.records(path, torn_tail=True, hint="verl's file logger writes one JSON object a line")


def read_verl_log(path: str | Path) -> list[Step]:
    """Training steps of a verl file-logger JSON Lines file. Lines without training metrics
    (validation-only lines such as step 0's val-core/*) are skipped; a torn last line is ignored."""
    path = Path(path)
    if not path.is_file():
        raise RaceError(f"verl metrics file {path} not found",
                        "verl writes it where VERL_FILE_LOGGER_PATH points (trainer.logger=[console,file])")
    steps: list[Step] = []
    for n, rec in _read_jsonl(path):
        where = f"{path}:{n}"
        if not isinstance(rec, dict) or not isinstance(rec.get("data"), dict) or not isinstance(rec.get("step"), int):
            raise RaceError(f"{where}: not a verl file-logger record", 'expected {"step": N, "data": {...}} per line')
        data = rec["data"]
        if not any(k.startswith(("response_length/", "timing_s/", "actor/", "perf/")) for k in data):
            continue  # validation-only line
        if len(steps) >= MAX_IMPORT_STEPS:
            raise RaceError(f"{where}: more than {MAX_IMPORT_STEPS:,} training steps (limits.MAX_IMPORT_STEPS)",
                            "real GRPO logs hold far fewer; split the log or check it")
        if steps and rec["step"] <= steps[-1].step:
            raise RaceError(f"{where}: step {rec['step']} does not follow step {steps[-1].step}",
                            "a resumed verl run logs again from its checkpoint's step; import each attempt's "
                            "file (one VERL_FILE_LOGGER_PATH per attempt) or keep one line per step")
        p = _need(data, "prompt_length/mean", VERL_NEEDED, where, "verl")
        c = _need(data, "response_length/mean", VERL_NEEDED, where, "verl")
        total = _need(data, "perf/total_num_tokens", VERL_NEEDED, where, "verl")
        if p + c <= 0:
            raise RaceError(f"{where}: prompt and response lengths are both 0")
        seconds = {ph: sum(float(data[k]) for k in keys if isinstance(data.get(k), (int, float)))
                   for ph, keys in VERL_SECONDS.items() if any(k in data for k in keys)}
        if isinstance(data.get("timing_s/step"), (int, float)):
            seconds["other"] = max(0.0, float(data["timing_s/step"]) - sum(seconds.values()))
        gpus = None
        thr, tps = data.get("perf/throughput"), data.get("perf/time_per_step")
        if isinstance(thr, (int, float)) and isinstance(tps, (int, float)) and thr > 0 and tps > 0:
            gpus = total / (thr * tps)
        steps.append(Step(step=rec["step"], prompt_mean=p, completion_mean=c, seconds=seconds,
                          metrics={k: data[k] for k in VERL_KEPT if isinstance(data.get(k), (int, float))},
                          sequences=total / (p + c), update_seconds=data.get("timing_s/update_actor"), gpus=gpus))
    if not steps:
        raise RaceError(f"{path}: no training steps in the log",
                        "the file logger writes training metrics each step; was the run validation-only?")
    return steps


def read_trl_state(path: str | Path, cell: "CellSpec") -> list[Step]:
    """Logging steps of a TRL trainer_state.json (log_history). Each entry covers the
    generation batches since the previous one: (step delta) / mu of them, each of
    prompts_per_step x K completions; the prompt mean follows from the num_tokens delta."""
    path = Path(path)
    if path.is_dir():
        path = path / "trainer_state.json"
    if not path.is_file():
        raise RaceError(f"TRL state {path} not found", "TRL writes trainer_state.json into each checkpoint-N folder")
    try:    # strict: duplicate keys, NaN, huge numbers, deep nesting and non-UTF-8 bytes refused
        state = jsonstrict.load(path, allow_nan=True)
    except jsonstrict.JSONInputError as e:
        raise RaceError(f"{path}: not JSON ({e.message})", e.hint) from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise RaceError(f"{path}: no log_history list", "pass the trainer_state.json of a TRL Trainer run")
    mu, n = cell.num_iterations, cell.generation_batch
    steps: list[Step] = []
    last_step, last_tokens = 0, 0.0
    for i, entry in enumerate(history):
        where = f"{path}: log_history[{i}]"
        if not isinstance(entry, dict) or "train_runtime" in entry or any(k.startswith("eval_") for k in entry):
            continue  # the end-of-training summary and evaluation entries
        step = entry.get("step")
        if not isinstance(step, int) or step <= last_step:
            raise RaceError(f"{where}: step {step!r} does not follow step {last_step}")
        tokens = _need(entry, "num_tokens", TRL_NEEDED, where, "TRL")
        c = _need(entry, "completions/mean_length", TRL_NEEDED, where, "TRL")
        if (step - last_step) % mu:
            raise RaceError(f"{where}: {step - last_step} optimizer steps since the last entry is not a multiple "
                            f"of num_iterations={mu}", "log with logging_steps a multiple of num_iterations")
        gens = (step - last_step) // mu
        p = (tokens - last_tokens) / gens / n - c
        if p <= 0:
            raise RaceError(f"{where}: num_tokens grew by {tokens - last_tokens:g}, too little for {gens} "
                            f"generation(s) of {n} completions of mean length {c:g}",
                            "check the cell's prompts_per_step, K and num_iterations against the run")
        top = entry.get("completions/max_length")
        steps.append(Step(step=step, prompt_mean=p, completion_mean=c, generations=gens,
                          metrics={k: entry[k] for k in TRL_KEPT if isinstance(entry.get(k), (int, float))},
                          completion_max=float(top) if isinstance(top, (int, float)) and not isinstance(top, bool)
                          else None))
        last_step, last_tokens = step, tokens
    if not steps:
        raise RaceError(f"{path}: log_history has no training entries", TRL_NEEDED["num_tokens"])
    return steps


# ---- ledger and report --------------------------------------------------------------------------


@dataclass
class Comparison:
    """Our per-pass FLOPs beside the engine's own figures, summed over the imported steps."""

    ours: dict = field(default_factory=dict)
    """Our FLOPs: rollout, update (all passes), update_train (train forward+backward),
    update_recompute, update_logprob (old-policy and reference forwards), reward."""
    verl_estimator_update: int | None = None
    """verl's FlopsCounter formula over the actor update passes (6N per token, x ppo_epochs)."""
    verl_mfu_update: float | None = None
    """FLOPs implied by logged perf/mfu/actor: mfu x peak x GPUs x timing_s/update_actor."""
    peak_flops: float | None = None
    """Device peak used for verl_mfu_update."""

    def ratio(self) -> float | None:
        """verl's estimator over our train forward+backward: the LoRA factor for LoRA runs."""
        if self.verl_estimator_update is None or not self.ours.get("update_train"):
            return None
        return self.verl_estimator_update / self.ours["update_train"]

    def to_dict(self) -> dict:
        """JSON-able, with the ratio."""
        return {**asdict(self), "ratio_verl_estimator_to_ours_train": self.ratio()}

    def table(self) -> str:
        """Plain-text side-by-side table."""
        def f(x):
            return "-" if x is None else f"{x:.4g}"

        o = self.ours
        rows = [("rollout (generation)", o["rollout"], "not counted", ""),
                ("update: train fwd+bwd", o["update_train"], f(self.verl_estimator_update), f(self.verl_mfu_update)),
                ("update: ckpt recompute", o["update_recompute"], "not counted", ""),
                ("update: old-policy/ref fwd", o["update_logprob"], "(perf/mfu/actor_infer)", ""),
                ("reward", o["reward"], "not counted", ""),
                ("total", o["rollout"] + o["update"] + o["reward"], "update only", "")]
        lines = [f"{'FLOPs':28} {'ours (race-analytic)':>22} {'verl 6N estimator':>22} {'verl perf/mfu':>16}"]
        lines += [f"{a:28} {f(b):>22} {c:>22} {d:>16}" for a, b, c, d in rows]
        r = self.ratio()
        if r is not None:
            lines.append(f"verl's estimator / our train fwd+bwd = {r:.3f}x")
        return "\n".join(lines)


@dataclass(frozen=True)
class ImportResult:
    """Where the import wrote its files and what it found."""

    ledger: Path
    report: Path
    comparison_path: Path
    doc: dict
    comparison: Comparison


def import_steps(steps: list[Step], cell: "CellSpec", out: str | Path, *, engine: str, engine_version: str,
                 engine_profile: str, notes: str, source: dict, force: bool = False,
                 peak_tflops: float = DEFAULT_PEAK_TFLOPS, assumptions: list[dict] | None = None,
                 evaluations: list[dict] | None = None, hardware=None,
                 declared_steps: int | None = None) -> ImportResult:
    """Write ledger.jsonl, report.json and comparison.json for `steps` of `cell` into `out`.
    FLOPs come from suite.accounting under `engine_profile`; the report's provenance is
    `imported` from `source` ({engine, file, fields}), with `declared_steps` (the engine's own
    step count, TRL's global_step) as the steps the run took, by default the last logged step."""
    from dataclasses import replace

    from .. import accounting as acc
    from ..record.ledger import LedgerWriter
    from ..accounting.specs import spec_for
    from ..atomic import write_json_atomic
    from ..record.report import write_report
    from ..record.build import Provenance, build_report
    from ..record.runspec import EngineSpec

    from .sanity import check_steps

    if len(steps) > MAX_IMPORT_STEPS:
        raise RaceError(f"{source.get('file', engine)}: {len(steps):,} log entries, over the {MAX_IMPORT_STEPS:,} an "
                        "import accepts (limits.MAX_IMPORT_STEPS)", "real GRPO logs hold far fewer; check the log")

    # a log that contradicts itself (a mean outside its own [min, max], ...) is refused before anything is written
    check_steps(steps, cap=cell.max_completion_tokens, where=str(source.get("file", engine)))
    out = Path(out)
    ledger_path, report_path, cmp_path = out / "ledger.jsonl", out / "report.json", out / "comparison.json"
    if ledger_path.exists() and not force:
        raise RaceError(f"{ledger_path} already exists", "pass --force to replace it, or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    ledger_path.unlink(missing_ok=True)

    spec = replace(cell.run_spec(engine_profile), engine=EngineSpec(name=engine, version=engine_version),
                   label=cell.label or cell.name, notes=notes)
    if hardware is not None:
        spec = replace(spec, hardware=hardware)
    policy = spec_for(spec.policy)      # any family: the analytic recipe, else the traced path
    adapter, settings = spec.adapter, spec.grpo
    reward_model = spec_for(spec.reward.model) if spec.reward.model else None
    expected = settings.prompts_per_step * settings.group_size
    cmp = Comparison(ours=dict.fromkeys(("rollout", "update", "update_train", "update_recompute",
                                         "update_logprob", "reward"), 0))
    verl_est, mfu_flops = 0, 0.0
    # a padded profile is priced with the padding the log bounds (TRL: completions/max_length), marked in the source
    padded = acc.ENGINES[engine_profile].padded and "completions/max_length" in source.get("fields", ())
    # No fsync per record: an interrupted import is simply run again (--force).
    with LedgerWriter(ledger_path, fsync=False) as ledger:
        for s in steps:
            if s.sequences is not None and abs(s.sequences - expected) > 0.5:
                raise RaceError(f"step {s.step}: the log implies {s.sequences:.1f} sequences per step, the cell "
                                f"{cell.name} has prompts_per_step x K = {expected}",
                                "import with the cell the run was launched from (race export verl CELL)")
            rtok = s.prompt_mean + s.completion_mean if reward_model is not None else None
            if reward_model is not None:
                rtok += s.environment_tokens
            if padded:      # TRL pads every row to the batch's longest completion: priced at the logged maximum
                if s.completion_max is None or s.kept is not None or s.environment_tokens:
                    raise RaceError(f"step {s.step}: profile {engine_profile!r} pads every row to its batch's longest "
                                    "completion, and this log does not say how long that was (completions/max_length): "
                                    "priced from means, the import would not be comparable with measured runs",
                                    "import a log that has completions/max_length (TRL logs it every logging step)")
                ps, cs = padded_lengths(s.prompt_mean, s.completion_mean, s.completion_max, settings.prompts_per_step,
                                        settings.group_size)
                full = [p for p in ps for _ in range(settings.group_size)]
                one = acc.work_from_lengths(ps, cs, settings, engine_profile,
                                            [p + c for p, c in zip(full, cs)] if reward_model is not None else None,
                                            policy=policy, reward_model=reward_model)
            else:
                one = acc.work_from_means(s.prompt_mean, s.completion_mean, settings, engine=engine_profile,
                                          reward_tokens=rtok, policy=policy, reward_model=reward_model,
                                          # sequences are counted whole: a ledger's kept rows are integers (WORK-004)
                                          kept=None if s.kept is None else round(s.kept),
                                          environment_tokens=s.environment_tokens, turns=s.turns)
            work = acc.add_work(*([one] * s.generations))
            passes = acc.pass_breakdown(work, policy, adapter, settings, reward_model, engine_profile, cell.attention)
            flops = dict.fromkeys(acc.PHASES, 0)
            for phase, name, f in passes:
                flops[phase] += f
                key = {"train forward": "update_train", "train backward": "update_train",
                       "checkpoint recompute": "update_recompute", "old-policy forward": "update_logprob",
                       "reference forward": "update_logprob"}.get(name)
                if key:
                    cmp.ours[key] += f
            for ph in acc.PHASES:
                cmp.ours[ph] += flops[ph]
            ledger.append(s.step, tokens=acc.tokens_from_work(work), work=work, flops=flops,
                          seconds=dict(s.seconds) or None, metrics=dict(s.metrics) or None)
            if engine == "verl":
                n = round(s.sequences) if s.sequences else expected
                est = acc.verl_update_flops(policy, [s.prompt_mean + s.completion_mean] * n)
                # None: verl has no formula for this model type (it logs MFU 0)
                verl_est = None if est is None or verl_est is None else verl_est + settings.num_iterations * round(est)
                mfu = s.metrics.get("perf/mfu/actor")
                if isinstance(mfu, (int, float)) and 0 <= mfu <= 1 and s.update_seconds and s.gpus and mfu_flops is not None:
                    mfu_flops += mfu * peak_tflops * 1e12 * round(s.gpus) * s.update_seconds
                else:
                    mfu_flops = None
    if engine == "verl":
        from ..validate.evidence import mfu_mismatch

        cmp.verl_estimator_update, cmp.verl_mfu_update = verl_est, mfu_flops
        cmp.peak_flops = peak_tflops * 1e12
        why = mfu_mismatch(verl_est, mfu_flops)      # PROV-004: the engine's own MFU is outside evidence
        if why:
            ledger_path.unlink(missing_ok=True)
            raise RaceError(f"{source.get('file', 'verl log')}: {why}",
                            "import the run's own, unedited log with the --peak-tflops of its accelerator")

    report = build_report(ledger_path, spec, report_dir=out, evaluations=evaluations, provenance=Provenance(
        "imported", recorder=f"race import {source.get('engine', engine)}", steps=declared_steps or steps[-1].step,
        source=source, assumptions=tuple(assumptions) if assumptions else None))
    write_report(report_path, report)
    write_json_atomic(cmp_path, cmp.to_dict())
    return ImportResult(ledger_path, report_path, cmp_path, report.doc, cmp)


def import_verl(metrics: str | Path, cell: "CellSpec", out: str | Path, *, engine_version: str = "0.9.1",
                force: bool = False, peak_tflops: float = DEFAULT_PEAK_TFLOPS) -> ImportResult:
    """verl file-logger JSON Lines -> ledger, report (engine profile 'verl') and comparison.

    Args: `metrics`, the file logger's JSON Lines; `cell`, the run's CellSpec; `out`, the folder
    to write into; `peak_tflops`, the accelerator's peak for verl's MFU figure. Returns the
    ImportResult (ledger, report and comparison paths, the report document, the comparison).
    """
    steps = read_verl_log(metrics)
    notes = (f"Imported from verl's file logger ({Path(metrics).name}) by race import verl: per-step mean prompt "
             "and response lengths priced by suite.accounting (profile verl); attention work assumes every "
             "sequence has the mean length.")
    source = {"engine": "verl", "file": Path(metrics).name, "fields": list(VERL_NEEDED)}
    return import_steps(steps, cell, out, engine="verl", engine_version=engine_version, engine_profile="verl",
                        notes=notes, source=source, force=force, peak_tflops=peak_tflops)


def import_trl(state: str | Path, cell: "CellSpec", out: str | Path, *, engine_version: str | None = None,
               engine_profile: str = "trl", force: bool = False) -> ImportResult:
    """TRL trainer_state.json log_history -> ledger and report (engine profile 'trl' by default).

    Args: `state`, the trainer_state.json (or its folder); `cell`, the run's CellSpec; `out`, the
    folder to write into. Returns the ImportResult (ledger, report and comparison paths, the report
    document).
    """
    steps = read_trl_state(state, cell)
    declared = trl_global_step(state, steps[-1].step)
    if engine_version is None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            engine_version = version("trl")
        except PackageNotFoundError:
            engine_version = "unknown"
    from ..accounting import ENGINES

    padded = ENGINES[engine_profile].padded
    if padded and any(s.completion_max is None for s in steps):
        raise RaceError(f"{state}: profile {engine_profile!r} pads every row to its batch's longest completion, and "
                        "this log's entries do not all say how long that was (completions/max_length): priced from "
                        "means alone the import is not comparable with measured TRL runs",
                        "import a trainer_state.json whose log_history has completions/max_length (TRL logs it at "
                        "every logging step)")
    notes = (f"Imported from TRL's trainer_state.json log_history by race import trl: mean lengths per logging "
             f"step priced by suite.accounting (profile {engine_profile})"
             + ("; every row padded to the step's longest completion (completions/max_length), as TRL pads it; "
                "prompt padding is not in the log (prompts priced at their mean)." if padded else "."))
    source = {"engine": "trl", "file": Path(state).name if Path(state).is_file() else "trainer_state.json",
              "fields": list(TRL_NEEDED) + (["completions/max_length"] if padded else [])}
    return import_steps(steps, cell, out, engine="trl", engine_version=engine_version,
                        engine_profile=engine_profile, notes=notes, source=source, force=force,
                        declared_steps=declared)


def trl_global_step(state: str | Path, last_logged: int) -> int:
    """The optimizer steps a TRL run took: trainer_state.json's `global_step` (TRL writes it
    beside log_history on every save), so that a log that stops short of it is caught (PROV-002)
    rather than imported as a shorter run. Without it, the last logged step.

    Args: `state`, the trainer_state.json (or its folder); `last_logged`, the last logged step.
    Returns the declared step count. A global_step below the last logged step is a RaceError."""
    path = Path(state)
    if path.is_dir():
        path = path / "trainer_state.json"
    try:
        g = jsonstrict.load(path, allow_nan=True).get("global_step")
    except (OSError, ValueError, RaceError, AttributeError):   # JSONInputError is a ValueError or RaceError
        return last_logged  # read_trl_state has read it already: nothing new to say
    if isinstance(g, bool) or not isinstance(g, int):
        return last_logged
    if g < last_logged:
        raise RaceError(f"{path}: global_step {g} is below the last logged step {last_logged}",
                        "pass the trainer_state.json of one run (the checkpoint's own file)")
    return g
