"""`race import mlperf LOG --cell RUN.yaml`: MLPerf Training 6.1 GRPO logs (`:::MLLOG {json}`
lines, as NeMo-RL's nemo_rl/algorithms/mlperf_grpo_logging.py writes them for the
`qwen35_397b_grpo` benchmark) into the suite's ledger and report.

What the log says, per step (two `tracked_stats` events carrying metadata.step):
- `global_valid_toks`, `global_valid_seqs`: NeMo-RL's loss normalizers (process_global_batch:
  sum(token_mask[:, 1:] * sample_mask) and sum(sample_mask)). token_mask is the token loss mask,
  1 only on the policy's own (assistant) tokens: prompt and environment tokens are *not* in it;
  sample_mask drops whole sequences (the log-probability error mask, overlong filtering), so
  global_valid_seqs of num_prompts_per_step x num_generations_per_prompt are the ones trained on.
- `train_step_time`, `policy_training_time`, `exposed_generation_time`, `weight_sync_time`
  (seconds) and `valid_tokens_per_sec_per_gpu` (global_valid_toks / train_step_time / GPUs, which
  gives the GPU count back).
and, once: hyper-parameters (num_prompts_per_step, num_generations_per_prompt, max_sequence_length,
parallelism, generation_backend, ...), `submission_platform`, `eval_accuracy`, `run_stop`.

What it does not say comes from the run description (a cell YAML): the model, the adapter, the
mean prompt tokens, the multi-turn shape (`rollouts.environment_tokens`, `rollouts.turns`), the
accelerator's peak. Every such value is written into `provenance.assumptions`, as are the lengths
of the discarded sequences (assumed as long as the kept ones: the log counts only kept tokens).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .. import jsonlines
from ..errors import RaceError
from .importers import ImportResult, Step, import_steps

PREFIX = ":::MLLOG "

NEEDED: dict[str, str] = {
    "global_valid_toks": "NeMo-RL's MLPerf logger writes it in each training step's tracked_stats",
    "global_valid_seqs": "NeMo-RL's MLPerf logger writes it in each training step's tracked_stats",
}
"""tracked_stats keys the import cannot do without."""

HYPER = ("num_prompts_per_step", "num_generations_per_prompt", "max_sequence_length")
"""Hyper-parameters the import takes from the log (they override the run description)."""

KEPT = ("reward", "reduced_train_loss", "grad_norm", "valid_tokens_per_sec_per_gpu", "weight_sync_time",
        "train_step_time")
"""Per-step numbers copied into the ledger's metrics."""

DESCRIBED = {
    "mean_prompt_tokens": "the log counts only the policy's own tokens (token_mask); prompt tokens are not logged",
    "rollouts.environment_tokens": "environment/tool tokens are masked out of global_valid_toks; not logged",
    "rollouts.turns": "turns per rollout are not logged",
}
"""What the run description must supply, and why the log cannot."""


def read_mllog(path: str | Path, keep: frozenset[str] | None = None) \
        -> tuple[dict[str, Any], dict[int, dict[str, float]], list[dict]]:
    """The events of an MLLOG file: (single values by key, tracked_stats merged per step, the
    events named in `keep` (default KEPT_EVENTS: block_stop and eval_accuracy)). Lines without the `:::MLLOG ` prefix (the job's other
    output) are skipped; a malformed field is refused naming its line; at most
    limits.MAX_IMPORT_STEPS training steps (streamed: memory stays bounded)."""
    path = Path(path)
    if not path.is_file():
        raise RaceError(f"MLPerf log {path} not found", "pass the .out file the MLPerf run wrote (rcp_logs/GBS*/seed_N.out)")
    from ..limits import MAX_IMPORT_STEPS

    values: dict[str, Any] = {}
    stats: dict[int, dict[str, float]] = {}
    keep = KEPT_EVENTS if keep is None else keep
    events: list[dict] = []     # only the events the caller reads again (`keep`): memory stays bounded
    seen = False
    # Lines without the prefix are the job's other output; a killed run's torn last line ends the log.
    for n, ev in jsonlines.records(path, prefix=PREFIX, torn_tail=True,
                                   hint="the MLPerf logger writes ':::MLLOG ' and one JSON object a line"):
        if not isinstance(ev, dict) or "key" not in ev:
            raise RaceError(f"{path}:{n}: MLLOG event without a key", 'expected {"key": ..., "value": ...}')
        if not isinstance(ev["key"], str):
            raise RaceError(f"{path}:{n}: field 'key' = {_short(ev['key'])} is not a string",
                            'the MLPerf logger writes {"key": "name", "value": ...}')
        seen = True
        meta = ev.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise RaceError(f"{path}:{n}: field 'metadata' = {_short(meta)} is not an object")
        meta = meta or {}
        step = meta.get("step")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
            raise RaceError(f"{path}:{n}: field 'metadata.step' = {_short(step)} is not a step number")
        if ev["key"] in keep:
            if len(events) >= 4 * MAX_IMPORT_STEPS:
                raise RaceError(f"{path}:{n}: more than {4 * MAX_IMPORT_STEPS:,} events of {', '.join(sorted(keep))}",
                                "more than a real MLPerf log holds; check the log")
            events.append(ev)
        if ev["key"] == "tracked_stats" and isinstance(ev.get("value"), dict) and step is not None:
            if "samples_count" in meta:  # training stats; validation_time has no samples_count
                for k, v in ev["value"].items():
                    if k in NUMERIC and (isinstance(v, bool) or not isinstance(v, (int, float))
                                         or not math.isfinite(v) or v < 0):
                        raise RaceError(f"{path}:{n}: field 'value.{k}' = {_short(v)} is not a non-negative number",
                                        "the MLPerf logger writes numbers in tracked_stats")
                if step not in stats and len(stats) >= MAX_IMPORT_STEPS:
                    raise RaceError(f"{path}:{n}: more than {MAX_IMPORT_STEPS:,} training steps (limits."
                                    "MAX_IMPORT_STEPS)", "real GRPO logs hold far fewer; split the log or check it")
                stats.setdefault(step, {}).update(ev["value"])
        elif ev.get("event_type") == "POINT_IN_TIME":
            values.setdefault(ev["key"], ev.get("value"))
    if not seen:
        raise RaceError(f"{path}: no ':::MLLOG ' lines", "pass the output of an MLPerf-logging run")
    return values, stats, events


KEPT_EVENTS = frozenset({"block_stop", "eval_accuracy"})
"""Events read_mllog keeps whole (the import reads them again); the rest is folded as it streams."""

NUMERIC = ("global_valid_toks", "global_valid_seqs", "train_step_time", "policy_training_time",
           "exposed_generation_time", "weight_sync_time", "valid_tokens_per_sec_per_gpu")
"""tracked_stats fields the import computes with: each a finite non-negative number, or refused
naming its line."""


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _num(d: dict, key: str, where: str) -> float:
    v = d.get(key)
    if v is None:
        raise RaceError(f"{where}: MLPerf log has no '{key}', which the import needs", NEEDED.get(key))
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise RaceError(f"{where}: '{key}' = {v!r} is not a non-negative number")
    return float(v)


def _gpus(stats: dict[int, dict[str, float]]) -> int | None:
    """GPUs implied by valid_tokens_per_sec_per_gpu = global_valid_toks / train_step_time / GPUs."""
    for s in stats.values():
        t, v, tok = s.get("train_step_time"), s.get("valid_tokens_per_sec_per_gpu"), s.get("global_valid_toks")
        if t and v and tok:
            return round(tok / t / v)
    return None


def import_mlperf(log: str | Path, cell, out: str | Path, *, engine_version: str = "0.6.0",
                  engine_profile: str | None = None, force: bool = False) -> ImportResult:
    """An MLPerf GRPO log -> ledger, report and comparison in `out`.

    Args: `log`, the MLLOG output; `cell`, the run description (CellSpec: policy, adapter, mean
    prompt tokens, rollouts.environment_tokens and turns, hardware accelerator and peak, and
    `assumed` {field: {low, high, why}} for the values it assumes); `out`, the folder.
    K, prompts per step and the sequence cap are the log's. Returns the ImportResult."""
    from ..record.runspec import Hardware

    log = Path(log)
    values, stats, events = read_mllog(log)
    where = str(log)
    for k in HYPER:
        if not isinstance(values.get(k), int):
            raise RaceError(f"{where}: MLPerf log has no integer '{k}'", "the MLPerf logger writes the hyper-parameters "
                            "at init; pass the whole log, not a slice of its steps")
    b, k, cap = (values[x] for x in HYPER)
    missing = [f for f in DESCRIBED if _described(cell, f) is None]
    if missing:
        raise RaceError(f"{where}: the run description {cell.name} lacks {', '.join(missing)}",
                        "; ".join(f"{f}: {DESCRIBED[f]}" for f in missing))
    p, e = float(cell.mean_prompt_tokens), float(cell.rollouts["environment_tokens"])
    turns = float(cell.rollouts.get("turns") or 1)
    cell = cell.with_changes(group_size=k, prompts_per_step=b, max_completion_tokens=cap)
    n = k * b
    if not stats:
        raise RaceError(f"{where}: no training tracked_stats in the log", "was the run stopped before its first step?")
    steps: list[Step] = []
    for step in sorted(stats):
        st, w = stats[step], f"{where}: step {step}"
        toks, seqs = _num(st, "global_valid_toks", w), _num(st, "global_valid_seqs", w)
        if not 0 < seqs <= n:
            raise RaceError(f"{w}: global_valid_seqs = {seqs:g}, not in 1..{n} (prompts x generations)",
                            "import with the log's own hyper-parameters (the run description may not change K)")
        c = toks / seqs
        if p + c + e > cap:
            raise RaceError(f"{w}: {c:.0f} policy tokens per sequence + the described {p:g} prompt and {e:g} "
                            f"environment tokens exceed max_sequence_length {cap}", "check rollouts.environment_tokens")
        seconds = {}
        if "exposed_generation_time" in st:
            seconds["rollout"] = float(st["exposed_generation_time"])
        if "policy_training_time" in st:
            seconds["update"] = float(st["policy_training_time"])
        if "train_step_time" in st:
            seconds["other"] = max(0.0, float(st["train_step_time"]) - sum(seconds.values()))
        steps.append(Step(step=step, prompt_mean=p, completion_mean=c, seconds=seconds, kept=seqs,
                          environment_tokens=e, turns=turns,
                          metrics={x: st[x] for x in KEPT if isinstance(st.get(x), (int, float))}))
    last_block = max((ev.get("metadata", {}).get("step") for ev in events
                      if ev.get("key") == "block_stop" and isinstance(ev.get("metadata", {}).get("step"), int)),
                     default=None)
    from .sanity import check_markers

    # block_stop's step is the step the next block would start at: steps 1..block_stop - 1 trained
    check_markers(steps[-1].step, {"block_stop": None if last_block is None else last_block - 1}, where=where)
    gpus = _gpus(stats)
    hw = None
    if cell.hardware is not None:
        h = dict(cell.hardware)
        if gpus is not None:
            h["count"] = gpus
        h["wall_seconds"] = sum(float(s.get("train_step_time", 0)) for s in stats.values())
        h.pop("accelerator_hours", None)
        hw = Hardware.from_dict(h, f"{cell.name}: hardware")
    assumptions = [{"field": "discarded sequence length", "value": "as the kept ones",
                    "why": "the log counts the tokens of the sequences trained on only (global_valid_toks); the "
                           f"{n} - global_valid_seqs discarded ones are priced at the step's mean"},
                   {"field": "discarded sequences in the update", "value": "not update compute",
                    "why": "NeMo-RL zeroes their sample_mask, so they may still pass the training forward with no "
                           "loss; the standard counts tokens no update used as rollout compute only"}]
    for f in DESCRIBED:
        a = {"field": f, "value": _described(cell, f), "why": DESCRIBED[f]}
        a.update({x: v for x, v in (cell.assumed or {}).get(f.split(".")[-1] if f.startswith("rollouts.") else f,
                                                           {}).items() if x in ("low", "high", "why")})
        assumptions.append(a)
    if hw is not None:
        assumptions.append({"field": "hardware.peak_flops", "value": hw.peak_flops,
                            "why": f"{hw.accelerator}: the run description's datasheet peak; the count ({hw.count}) "
                                   "is the log's (valid_tokens_per_sec_per_gpu), wall seconds the sum of train_step_time"})
    evaluations = []
    acc = [ev for ev in events if ev.get("key") == "eval_accuracy" and isinstance(ev.get("value"), (int, float))]
    if acc:
        evaluations.append({"target": "mlperf-qwen35_397b_grpo-validation", "metric": "pass@4",
                            "value": float(acc[-1]["value"]), "n": int(values.get("eval_samples") or 256)})
    platform = values.get("submission_platform")
    notes = (f"Imported from an MLPerf Training GRPO log ({log.name}, benchmark {values.get('submission_benchmark')}, "
             f"platform {platform!r}) by race import mlperf: per step the log's kept sequences and their policy "
             f"tokens; prompt ({p:g}) and environment ({e:g}, prefill, over {turns:g} turns) tokens per sequence from "
             f"the run description (provenance.assumptions). Rollout seconds are NeMo-RL's exposed_generation_time "
             f"(asynchronous generation overlaps training: the rest is hidden); 'other' is the rest of "
             f"train_step_time (weight sync included).")
    source = {"engine": "mlperf", "file": log.name, "fields": [*NEEDED, *HYPER]}
    return import_steps(steps, cell, out, engine="nemo-rl", engine_version=engine_version,
                        engine_profile=engine_profile or str(cell.engine.get("profile") or "nemo-rl-on-policy"),
                        notes=notes, source=source, force=force, assumptions=assumptions, evaluations=evaluations,
                        hardware=hw)


def _described(cell, field: str):
    if field.startswith("rollouts."):
        return (cell.rollouts or {}).get(field.split(".", 1)[1])
    return getattr(cell, field)


__all__ = ["read_mllog", "import_mlperf", "NEEDED", "HYPER"]
