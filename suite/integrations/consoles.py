"""Readers of the engines' console output (registered in suite.integrations.logformats
LOG_FORMATS): verl's `step:N - k:v` lines and Ray job output, SkyRL's `Step N:` dicts, prime-rl's
`SUCCESS Step N | ...` lines, NeMo-RL's step blocks, slime's repr dicts, OpenRLHF's `Global step`
dicts, ROLL's `metrics_tag:` JSON and AReaL's stats tables. Each reader's `source` cites the
logging code (repository @ commit: file) its layout was read from; each streams the file through
logformats.text_lines (ANSI codes and Ray prefixes removed, \\r and \\n both end a line) and keeps
at most one record."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from ..errors import RaceError
from .logformats import MAX_RECORD, Row, head_text, log_format, number, read_jsonl, text_lines, values
from .logformats import literal as _literal

# ---- verl ------------------------------------------------------------------------------------------

_VERL_STEP = re.compile(r"(?:^|(?<=[\s\]|]))step:(\d+)(?: - (.*))?$")
VERL_SOURCE = ("volcengine/verl @ b178a3cd and 0.9.1 (installed): verl/utils/logger/aggregate_logger.py "
               "concat_dict_to_str ('step:N' + ' - '.join(f'{k}:{pprint.pformat(v)}'), full precision, since 18c6ffcf, "
               "Jul 2025) and LocalLogger; before it (v0.1 @ tag v0.1 .. v0.4.1) f'{k}:{v:.3f}' (3 decimals); Ray job "
               "output prefixes each line with '(TaskRunner pid=N)' ('(main_task pid=N)' in early 2025)")


def _sniff_verl(head: bytes, path: Path) -> bool:
    return any((m := _VERL_STEP.search(x)) and m.group(2) and ":" in m.group(2)
               for x in head_text(head).splitlines() if "step:" in x) or \
        b"(TaskRunner pid=" in head or b"(main_task pid=" in head


@log_format("verl-console", engine="verl", source=VERL_SOURCE, sniff=_sniff_verl,
            description="verl's console output (trainer.logger includes 'console'): the job's stdout, a Ray job's "
                        "log (ray job logs ID), or wandb's files/output.log")
def read_verl_console(path: Path, **_: Any) -> Iterator[Row]:
    """One row per `step:N - key:value - ...` line (3-decimal or full numbers, np.float64(...)
    reprs). A step number that goes back means the log holds two attempts of a resumed run: the
    redone steps were computed twice, so the log is refused rather than merged."""
    last = None
    for line in text_lines(path, b"step:"):
        m = _VERL_STEP.search(line)
        if not m or (m.start() > 0 and not m.group(2)):     # mid-line: only a whole 'step:N - k:v' record
            continue
        s = int(m.group(1))
        row: dict[str, Any] = {}
        for item in (m.group(2) or "").split(" - "):
            k, sep, v = item.rpartition(":")
            if not sep or not k or " " in k.strip():      # prose that happens to hold 'step:N - ...'
                row = {}
                break
            x = number(v)
            row[k.strip()] = x if x is not None else v.strip()
        if not row and m.group(2):
            continue
        if last is not None and s <= last and any(k.startswith(("timing_s/", "response_length/")) for k in row):
            raise RaceError(f"{path}: step {s} follows step {last}: the log holds more than one attempt of the run",
                            "a resumed verl run starts again at its checkpoint's step + 1; import each attempt's log "
                            "on its own (split the file where the step number goes back)")
        if any(k.startswith(("timing_s/", "response_length/")) for k in row):
            last = s
        yield s, row


# ---- SkyRL -----------------------------------------------------------------------------------------

_SKYRL_STEP = re.compile(r"(?:^|\W)Step (\d+): ?$")
_SKYRL_INFO = re.compile(r"(avg_response_length|avg_final_rewards): ([-+0-9.eE]+|nan|inf)")
_SKYRL_SEQS = re.compile(r"Number of sequences(?: before padding)?: (\d+)")
SKYRL_SOURCE = ("NovaSky-AI/SkyRL @ 021b9d65 (skyrl-train 0.3.0) and skyrl-train 0.3.1 (wheel): "
                "skyrl_train/utils/tracking.py ConsoleLogger.log (logger.info(f'Step {step}: \\n' + "
                "pprint.pformat(stringify_floats(data))), floats as f'{x:.4f}' strings); skyrl_train/trainer.py "
                "(logger.info 'Number of sequences: N', compute_advantages_and_returns 'avg_final_rewards: x, "
                "avg_response_length: y')")


def _sniff_skyrl(head: bytes, path: Path) -> bool:
    t = head_text(head)
    return "skyrl_train" in t or "skyrl.train" in t or bool(re.search(r"Step \d+: ?\n\s*\{'", t))


@log_format("skyrl-console", engine="skyrl", source=SKYRL_SOURCE, sniff=_sniff_skyrl,
            description="SkyRL's console (trainer.logger=console, or the stdout of any run): 'Step N:' then a "
                        "pprinted dict")
def read_skyrl_console(path: Path, **_: Any) -> Iterator[Row]:
    """One row per `Step N:` dict (string values made numbers), carrying the `Number of
    sequences` and `avg_response_length` / `avg_final_rewards` INFO lines logged during that step
    (they come before its dict) as `num_sequences`, `avg_response_length`, `avg_final_rewards`."""
    pending: dict[str, Any] = {}
    step: int | None = None
    buf: list[str] = []
    size = 0
    for line in text_lines(path):
        if step is not None:
            buf.append(line)
            size += len(line)
            if line.rstrip().endswith("}"):
                d = _literal("\n".join(buf), path, "SkyRL step dict")
                if isinstance(d, dict):
                    yield step, {**pending, **values(d)}
                    pending, step, buf, size = {}, None, [], 0
                    continue
            if size > MAX_RECORD:
                step, buf, size = None, [], 0
            continue
        m = _SKYRL_STEP.search(line)
        if m:
            step, buf, size = int(m.group(1)), [], 0
            continue
        for k, v in _SKYRL_INFO.findall(line):
            x = number(v)
            if x is not None:
                pending[k] = x
        m = _SKYRL_SEQS.search(line)
        if m:
            pending["num_sequences"] = float(m.group(1))


# ---- prime-rl --------------------------------------------------------------------------------------

_PRIME_STEP = re.compile(r"(?:^|\s)(?:SUCCESS|INFO)\s+(?:\[\w+\] )?Step (\d+) \| (.*)$")
_PRIME_KEYS = {"Time": "time/step", "Reward": "reward/mean", "Val. Reward": "val_reward/mean",
               "Throughput": "perf/throughput", "Seq. Length": "seq_len/mean", "Async Level": "async_level",
               "Max. Off-Policy Level": "off_policy/max", "Max Off-Policy": "off_policy/max", "Turns": "turns/mean"}
PRIME_SOURCE = ("PrimeIntellect-ai/prime-rl @ 1f6de8ff: src/prime_rl/orchestrator/orchestrator.py step_message "
                "('Step N | Time: X.XXs | Reward: R | Throughput: T tokens/s | Seq. Length: L tokens/sample | ...', "
                "logger.success) and src/prime_rl/utils/logger.py (format '{time:HH:mm:ss} {level: >7} {message}'); "
                "@ 559b4477 the line has no Throughput or Seq. Length")


@log_format("prime-rl-console", engine="prime-rl", source=PRIME_SOURCE,
            sniff=lambda head, path: bool(re.search(r"SUCCESS\s+(?:\[\w+\] )?Step \d+ \| ", head_text(head))),
            description="prime-rl orchestrator console (its stdout or logs/orchestrator.log)")
def read_prime_rl_console(path: Path, **_: Any) -> Iterator[Row]:
    """One row per `SUCCESS Step N | Name: value unit | ...` line; names mapped to the keys of
    metrics.jsonl where they mean the same (Seq. Length -> seq_len/mean: prompt + completion
    tokens per sample; Time -> time/step)."""
    for line in text_lines(path, b"Step "):
        m = _PRIME_STEP.search(line)
        if not m:
            continue
        row: dict[str, Any] = {}
        for part in m.group(2).split(" | "):
            name, sep, rest = part.partition(":")
            if not sep:     # 2026 layout: 'Reward 0.5000' without a colon
                name, _, rest = part.rpartition(" ")
            v = rest.strip().split(" ")[0].rstrip("s") if rest.strip() else ""
            x = number(v)
            if x is not None:
                row[_PRIME_KEYS.get(name.strip(), name.strip().lower())] = x
        yield int(m.group(1)), row


# ---- NeMo-RL ---------------------------------------------------------------------------------------

_NEMO_STEP = re.compile(r"^=+ Step (\d+)/(\d+) =+$")
_NEMO_ITEM = re.compile(r"^\s*•\s*(.+?):\s*([-+0-9.eE]+|nan|inf)(s)?(?: \(([0-9.]+)%\))?\s*$")
_NEMO_RESULTS = {"Loss": "train/loss", "Generation KL Error": "train/gen_kl_error", "Avg Reward": "train/reward",
                 "Avg Filtered Reward": "train/reward", "Mean Generation Length": "train/mean_gen_tokens_per_sample",
                 "Mean Total Tokens per Sample": "train/mean_total_tokens_per_sample",
                 "Total step time": "timing/train/total_step_time"}
NEMO_SOURCE = ("NVIDIA-NeMo/RL @ 7ea279ab: nemo_rl/algorithms/grpo.py (print of '=== Step N/M ===', "
               "'📊 Training Results:' with '  • Mean Generation Length: x', '⏱️  Timing:' with "
               "'  • Total step time: X.XXs' and '  • name: X.XXs (P%)'; async GRPO times exposed_generation) and "
               "nemo_rl/algorithms/utils.py print_performance_metrics ('  • Mean Total Tokens per Sample: x')")


@log_format("nemo-rl-console", engine="nemo-rl", source=NEMO_SOURCE,
            sniff=lambda head, path: bool(re.search(r"=+ Step \d+/\d+ =+", head_text(head))) and
            ("Training Results" in head_text(head) or "Timing:" in head_text(head)),
            description="NeMo-RL's GRPO console (the job's stdout)")
def read_nemo_rl_console(path: Path, **_: Any) -> Iterator[Row]:
    """One row per `=== Step N/M ===` block: its Training Results, Timing (`name: X.XXs (P%)` ->
    timing/train/<name>) and Performance Metrics bullets, keyed as NeMo-RL's wandb keys."""
    step: int | None = None
    row: dict[str, Any] = {}
    section = ""
    for line in text_lines(path):
        m = _NEMO_STEP.match(line.strip())
        if m:
            if step is not None and row:
                yield step, row
            step, row, section = int(m.group(1)), {}, ""
            continue
        if step is None:
            continue
        s = line.strip()
        if s.endswith(":") and not s.startswith("•"):
            section = s
            continue
        m = _NEMO_ITEM.match(line)
        if not m:
            continue
        name, v = m.group(1).strip(), number(m.group(2))
        if v is None:
            continue
        if "Validation" in section:
            row[f"validation/{name}"] = v
        elif name in _NEMO_RESULTS:
            row[_NEMO_RESULTS[name]] = v
        elif "Timing" in section and m.group(3):
            row[f"timing/train/{name}"] = v
        else:
            row[f"train/{name}"] = v
    if step is not None and row:
        yield step, row


# ---- slime -----------------------------------------------------------------------------------------

_SLIME = re.compile(r"(?:^|\W)(perf|rollout|eval) (\d+): (\{.*\})\s*$")
SLIME_SOURCE = ("THUDM/slime @ 624b824a: slime/observability/rollout_metrics.py log_rollout_data "
                "(logger.info(f'perf {rollout_id}: {log_dict}'), rollout/ and perf/ keys of the rollout manager), "
                "slime/observability/train_metric_utils.py (gather_log_data: f'rollout {rollout_id}: {...}' with "
                "rollout/response_lengths, rollout/total_lengths; the trainer's own f'perf {rollout_id}: {...}')")


@log_format("slime-console", engine="slime", source=SLIME_SOURCE,
            sniff=lambda head, path: bool(re.search(r"(?:^|\W)(perf|rollout) \d+: \{'", head_text(head), re.M)),
            description="slime's console (the job's stdout): Python-repr dicts per rollout")
def read_slime_console(path: Path, **_: Any) -> Iterator[Row]:
    """One row per `perf N: {...}` / `rollout N: {...}` dict (eval dicts with their eval/ keys),
    at step N + 1 (slime counts rollout ids from 0; the importer counts steps from 1). The
    rollout manager's and the trainer's perf dicts of one rollout are two rows of one step."""
    for line in text_lines(path, b": {"):
        m = _SLIME.search(line)
        if not m:
            continue
        d = _literal(m.group(3), path, "slime dict") if len(m.group(3)) < MAX_RECORD else None
        if isinstance(d, dict):
            yield int(m.group(2)) + 1, values(d)


# ---- OpenRLHF --------------------------------------------------------------------------------------

_OPENRLHF = re.compile(r"Global step (\d+): (\{.*\})\s*$")
OPENRLHF_SOURCE = ("OpenRLHF/OpenRLHF @ 3c3be623 and 0.11.2 (wheel): openrlhf/trainer/ppo_trainer.py "
                   "(logger.info(f'✨ Global step {global_step}: {log_status}'), timing/generation, "
                   "timing/make_experience, timing/ppo_train, timing/broadcast, timing/step_total = their sum) and "
                   "openrlhf/utils/logging_utils.py (format '%(levelname)s %(asctime)s %(filename)s:%(lineno)d] ...')")


@log_format("openrlhf-console", engine="openrlhf", source=OPENRLHF_SOURCE,
            sniff=lambda head, path: b"Global step " in head and b": {" in head,
            description="OpenRLHF's console (the driver's stdout)")
def read_openrlhf_console(path: Path, **_: Any) -> Iterator[Row]:
    """One row per `✨ Global step N: {...}` line (the async trainer's, without ✨, too)."""
    for line in text_lines(path, b"Global step "):
        m = _OPENRLHF.search(line)
        if m:
            d = _literal(m.group(2), path, "OpenRLHF status") if len(m.group(2)) < MAX_RECORD else None
            if isinstance(d, dict):
                yield int(m.group(1)), values(d)


# ---- ROLL ------------------------------------------------------------------------------------------

ROLL_SOURCE = ("alibaba/ROLL @ 8eb27cc2: roll/utils/tracking.py StdoutTracker.log (logger.info(f\"metrics_tag: "
               "{json.dumps({'step': step, 'metrics': values})}\")) behind roll/utils/logging.py's prefix "
               "'[%(asctime)s] [%(filename)s (%(lineno)d)] [%(levelname)s] [DRIVER 0 / 1][PID n] '")


@log_format("roll-console", engine="roll", source=ROLL_SOURCE,
            sniff=lambda head, path: b"metrics_tag: {" in head,
            description="ROLL's job log with track_with: stdout (the metrics_tag lines)")
def read_roll_console(path: Path, **_: Any) -> Iterator[Row]:
    """One row per `metrics_tag: {"step": N, "metrics": {...}}`, wherever it sits in the line."""
    yield from read_jsonl(path, step="step", nest="metrics", line_prefix="metrics_tag: ")


# ---- AReaL -----------------------------------------------------------------------------------------

_AREAL_STEP = re.compile(r"Train step (\d+)/(\d+) done")
AREAL_SOURCE = ("inclusionAI/AReaL 1.0.4 (wheel) and @ 4aef98d8: areal/utils/stats_logger.py commit "
                "('Epoch e/E Step s/S Train step g/G done.' with g = global_step + 1, then print_stats) and "
                "areal/utils/printing.py tabulate_stats (4 key/value column pairs, column-major, tabulate "
                "fancy_grid, floatfmt .4e)")


@log_format("areal-console", engine="areal", source=AREAL_SOURCE,
            sniff=lambda head, path: b"Train step " in head and ("│".encode() in head or b"done." in head),
            description="AReaL's console (the trainer's stdout): a stats table per train step")
def read_areal_console(path: Path, **_: Any) -> Iterator[Row]:
    """One row per `Train step g/G done.` line (g counts from 1, as the importer does; AReaL's
    wandb step is g - 1), with the key/value cells of the tables that follow it."""
    step: int | None = None
    row: dict[str, Any] = {}
    for line in text_lines(path):
        m = _AREAL_STEP.search(line)
        if m:
            if step is not None and row:
                yield step, row
            step, row = int(m.group(1)), {}
            continue
        if step is None or "│" not in line:
            continue
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        for k, v in zip(cells[0::2], cells[1::2]):
            x = number(v)
            if k and x is not None:
                row[k] = x
    if step is not None and row:
        yield step, row
