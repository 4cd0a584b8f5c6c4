"""Readers for what engines write (suite.integrations.logformats) and `race import auto`: for each
engine, a log written by its own logger where it runs here (verl 0.9.1's LocalLogger, FileLogger;
torch's SummaryWriter; Python logging with the engine's format; tabulate as AReaL calls it), else
laid out as its logging code writes it (tests/fixtures/engine_logs.py cites file and commit), is
recognised, read, and imported into a report whose completion tokens are exactly what the log
states. Refusals are one line naming what is wrong: a critic, a renamed key, a version-ambiguous key,
an unrecognised file."""

from __future__ import annotations

import importlib.util
import json
import os

import engine_logs as W
import pytest

from suite.cli import main
from suite.errors import RaceError
from suite.integrations.keymaps import KEY_MAPS, import_metric_log
from suite.integrations.logformats import LOG_FORMATS, sniff
from suite.train.cell import cell_from_dict
from suite.validate import validate_report

N = 8   # prompts_per_step 2 x K 4
P = 120.0
TRUTH = {1: (P, 300.0), 2: (P, 340.5), 3: (P, 380.5)}
CELL = {"name": "engine-log", "policy": "Qwen2.5-0.5B-Instruct", "reward": "sparse", "lora_rank": 16,
        "group_size": 4, "prompts_per_step": 2, "max_completion_tokens": 4096, "mean_prompt_tokens": P,
        "assumed": {"mean_prompt_tokens": {"low": 100, "high": 140, "why": "test: the prompt set's range"}}}

needs_verl = pytest.mark.skipif(not os.environ.get("CI") and importlib.util.find_spec("verl") is None,
                                reason="verl not installed (pip install --no-deps verl==0.9.1); required in CI")
needs_tb = pytest.mark.skipif(not os.environ.get("CI") and importlib.util.find_spec("tensorboard") is None,
                              reason="tensorboard not installed (the logs extra); required in CI")


def _cell_file(tmp_path, **changes):
    import yaml

    p = tmp_path / "cell.yaml"
    p.write_text(yaml.safe_dump({k: v for k, v in {**CELL, **changes}.items() if k != "name"}))
    return p


def _import(tmp_path, engine, log, *extra, cell=None):
    out = tmp_path / "out"
    rc = main(["import", engine, str(log), "--cell", str(cell or _cell_file(tmp_path)), "--out", str(out),
               "--force", *extra])
    assert rc == 0
    return json.loads((out / "report.json").read_text()), [json.loads(x) for x in
                                                          (out / "ledger.jsonl").read_text().splitlines()]


CONSOLES = {   # writer, the reader that must recognise it, the key map auto must choose
    "skyrl": (W.skyrl_console, "skyrl-console", "skyrl-console"),
    "prime-rl": (W.prime_rl_console, "prime-rl-console", "prime-rl-console"),
    "nemo-rl": (W.nemo_rl_console, "nemo-rl-console", "nemo-rl-console"),
    "slime": (W.slime_console, "slime-console", "slime-console"),
    "openrlhf": (W.openrlhf_console, "openrlhf-console", "openrlhf-console"),
    "roll": (W.roll_console, "roll-console", "roll"),
    "areal": (W.areal_console, "areal-console", "areal-console"),
}


@pytest.mark.parametrize("engine", sorted(CONSOLES))
def test_console_of_each_engine_imports_with_the_tokens_it_states(engine, tmp_path, capsys):
    write, fmt, mapname = CONSOLES[engine]
    log = write(tmp_path / f"{engine}.log", TRUTH, N)
    assert sniff(log).name == fmt
    steps = sorted({s for s, _ in LOG_FORMATS[fmt].rows(log)})
    assert steps == [1, 2, 3]
    doc, ledger = _import(tmp_path, "auto", log)
    assert f"'{mapname}' log" in capsys.readouterr().out
    assert validate_report(doc) == []
    assert doc["run"]["engine"]["name"] == KEY_MAPS[mapname].engine
    assert [r["tokens"]["rollout_completion"] for r in ledger] == [N * c for _, c in TRUTH.values()]
    assert all(r["seconds"]["rollout"] > 0 and r["seconds"]["update"] > 0 for r in ledger if "rollout" in
               KEY_MAPS[mapname].seconds)
    # What the description supplied is written down with its range.
    assumed = {a["field"]: a for a in doc["provenance"].get("assumptions", [])}
    if engine in ("skyrl", "prime-rl"):
        assert assumed["mean_prompt_tokens"]["low"] == 100 and assumed["mean_prompt_tokens"]["value"] == P
    if engine != "skyrl":   # SkyRL logs 'Number of sequences'; the others do not count them
        assert assumed["sequences per step"]["value"] == N


def test_nemo_rl_async_console_times_exposed_generation(tmp_path):
    log = W.nemo_rl_console(tmp_path / "nemo.log", TRUTH, N, exposed=True)
    rows = dict(LOG_FORMATS["nemo-rl-console"].rows(log))
    assert rows[2]["timing/train/exposed_generation"] == 20.0 and "timing/train/generation" not in rows[2]
    _, ledger = _import(tmp_path, "nemo-rl-console", log)
    assert [r["seconds"]["rollout"] for r in ledger] == [20.0] * 3


@needs_verl
def test_verl_ray_job_log_written_by_verls_local_logger(tmp_path):
    log = W.verl_console(tmp_path / "job.log", TRUTH, N)
    assert b"np.float64(" in log.read_bytes() and b"\r" in log.read_bytes()   # verl 0.9.1 prints numpy reprs
    rows = list(LOG_FORMATS["verl-console"].rows(log))
    assert [s for s, _ in rows] == [0, 1, 2, 3]              # step 0: validation keys only
    assert set(rows[0][1]) == {"val-core/openai/gsm8k/reward/mean@1"}
    assert rows[2][1]["response_length/mean"] == 340.5 and rows[2][1]["perf/total_num_tokens"] == N * (P + 340.5)
    doc, ledger = _import(tmp_path, "auto", log)
    assert validate_report(doc) == [] and doc["run"]["engine"]["name"] == "verl"
    assert [r["step"] for r in ledger] == [1, 2, 3]
    assert [r["tokens"]["rollout_completion"] for r in ledger] == [N * c for _, c in TRUTH.values()]
    # sequences from perf/total_num_tokens: nothing assumed about them
    assert "sequences per step" not in {a["field"] for a in doc["provenance"].get("assumptions", [])}
    assert ledger[0]["metrics"]["response_length/max"] == 400.0       # min/max pass through
    assert ledger[0]["seconds"]["update"] == 1.5 + 1.25 + 6.0


def test_verl_three_decimal_console_and_its_renamed_mfu_key(tmp_path):
    log = W.verl_console_3dp(tmp_path / "output.log", TRUTH, N)
    cell = _cell_file(tmp_path)
    doc, ledger = _import(tmp_path, "verl", log, "--engine-version", "0.2.0", cell=cell)
    assert [r["tokens"]["rollout_completion"] for r in ledger] == [N * c for _, c in TRUTH.values()]
    # perf/mfu/actor was mfu/actor before verl 0.3 (kept as printed: 3 decimals)
    assert ledger[0]["metrics"]["mfu/actor"] == round(W.verl_mfu(*TRUTH[1], N), 3)
    assert {a["field"] for a in doc["provenance"]["assumptions"]} >= {"sequences per step"}
    _, ledger = _import(tmp_path, "verl", log, "--engine-version", "0.4.0", cell=cell)
    assert "mfu/actor" not in ledger[0]["metrics"] and "perf/mfu/actor" not in ledger[0]["metrics"]


def test_verl_resumed_attempts_in_one_log_are_refused(tmp_path, capsys):
    log = W.verl_console_3dp(tmp_path / "a.log", TRUTH, N)
    log.write_text(log.read_text() + log.read_text())      # the run resumed from step 0's checkpoint
    assert main(["import", "auto", str(log), "--cell", str(_cell_file(tmp_path)), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "step 1 follows step 3" in err and len(err.strip().splitlines()) == 2


def test_verl_log_starting_past_step_one_prices_the_steps_it_holds(tmp_path):
    log = W.verl_console_3dp(tmp_path / "r.log", {101: TRUTH[1], 102: TRUTH[2]}, N)
    doc, ledger = _import(tmp_path, "auto", log)
    assert validate_report(doc) == [] and [r["step"] for r in ledger] == [1, 2]
    assert [r["metrics"]["log/step"] for r in ledger] == [101, 102] and doc["provenance"]["steps"] == 2


def test_verl_ppo_critic_is_refused_naming_its_keys(tmp_path, capsys):
    log = W.verl_console_3dp(tmp_path / "ppo.log", TRUTH, N)
    text = log.read_text().replace("timing_s/adv:", "timing_s/values:0.578 - critic/vf_loss:0.053 - timing_s/adv:")
    log.write_text(text)
    assert main(["import", "auto", str(log), "--cell", str(_cell_file(tmp_path)), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "PPO critic (critic/vf_loss, timing_s/values)" in err


@needs_verl
def test_verl_file_logger_jsonl_goes_to_verls_importer(tmp_path, capsys):
    log = W.verl_file_logger(tmp_path, TRUTH, N)
    doc, ledger = _import(tmp_path, "auto", log)
    assert doc["provenance"]["recorder"] == "race import verl"
    assert [r["tokens"]["rollout_completion"] for r in ledger] == [N * c for _, c in TRUTH.values()]


@needs_tb
def test_tensorboard_events_read_through_the_engines_key_map(tmp_path):
    rows = {s: {"train/mean_prompt_length": p, "train/mean_gen_tokens_per_sample": c,
                "train/mean_env_tokens_per_sample": 0.0, "train/global_valid_seqs": float(N),
                "timing/train/generation": 30.0, "timing/train/policy_training": 10.0,
                "timing/train/policy_and_reference_logprobs": 4.0, "timing/train/total_step_time": 50.0}
            for s, (p, c) in TRUTH.items()}
    folder = W.tensorboard(tmp_path / "tb", rows)
    assert sniff(folder).name == "tensorboard"
    read = {}
    for s, r in LOG_FORMATS["tensorboard"].rows(folder):
        read.setdefault(s, {}).update(r)
    assert read == rows
    doc, ledger = _import(tmp_path, "nemo-rl", folder)
    assert validate_report(doc) == []
    assert [r["tokens"]["rollout_completion"] for r in ledger] == [N * c for _, c in TRUTH.values()]
    doc, _ = _import(tmp_path, "auto", folder)       # the keys name the engine
    assert doc["run"]["engine"]["name"] == "nemo-rl"


needs_wandb = pytest.mark.skipif(not os.environ.get("CI") and importlib.util.find_spec("wandb") is None,
                                 reason="wandb not installed (the logs extra); required in CI")


@needs_verl
@needs_wandb
def test_wandb_offline_run_folder_written_by_wandb(tmp_path):
    from suite.integrations.logformats import wandb_summary

    run = W.wandb_offline_run(tmp_path, TRUTH, N)
    assert (run / "files" / "output.log").is_file() and list(run.glob("run-*.wandb"))
    assert sniff(run).name == "wandb"
    (run / "files" / "wandb-summary.json").write_text(json.dumps({"_step": 3, "response_length/mean": 380.5}))
    assert wandb_summary(run)["response_length/mean"] == 380.5     # what an online run leaves on finish
    doc, ledger = _import(tmp_path, "auto", run)
    assert doc["run"]["engine"]["name"] == "verl"
    assert [r["tokens"]["rollout_completion"] for r in ledger] == [N * c for _, c in TRUTH.values()]


def test_skyrl_character_counts_are_read_only_with_the_version(tmp_path):
    import csv

    log = tmp_path / "skyrl.csv"
    with open(log, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["_step", "generate/avg_num_tokens", "generate/avg_assistant_tokens",
                                          "timing/generate", "timing/fwd_logprobs_values_reward",
                                          "timing/policy_train", "timing/step"])
        w.writeheader()
        for s, (_, c) in TRUTH.items():
            w.writerow({"_step": s, "generate/avg_num_tokens": c + 60, "generate/avg_assistant_tokens": c,
                        "timing/generate": 25, "timing/fwd_logprobs_values_reward": 3, "timing/policy_train": 9,
                        "timing/step": 40})
    cell = cell_from_dict(CELL, check_paths=False)
    with pytest.raises(RaceError, match="key 'generate/avg_num_tokens' is read only where the engine version is known: "
                                        "skyrl-train before 0.3.1 counted decoded characters"):
        import_metric_log(log, KEY_MAPS["skyrl"], cell, tmp_path / "a")
    with pytest.raises(RaceError, match=r"reads logs of skyrl >=0\.3\.1, not skyrl 0\.3\.0"):
        import_metric_log(log, KEY_MAPS["skyrl"], cell, tmp_path / "b", engine_version="0.3.0")
    res = import_metric_log(log, KEY_MAPS["skyrl"], cell, tmp_path / "c", engine_version="0.3.1")
    assert res.doc["totals"]["tokens"]["rollout_completion"] == N * sum(c for _, c in TRUTH.values())


def test_renamed_key_fails_in_one_line_naming_key_file_and_version(tmp_path, capsys):
    log = tmp_path / "metrics.jsonl"    # prime-rl before 0.6.1.dev31: prefill/decode tokens, samples
    with open(log, "w") as f:
        for s, (p, c) in TRUTH.items():
            f.write(json.dumps({"step": s, "time": 1.78e9 + s, "progress/prefill_tokens": N * p,
                                "progress/decode_tokens": N * c, "progress/samples": N, "time/step": 40.0}) + "\n")
        f.write(json.dumps({"step": None, "producer": "inference", "time": 1.78e9}) + "\n")
    cell = _cell_file(tmp_path)
    assert main(["import", "prime-rl", str(log), "--cell", str(cell), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and str(log) in err[0] and "key 'progress/input_tokens'" in err[0]
    assert "prime-rl version unknown" in err[0] and "'progress/prefill_tokens'" in err[1]
    doc, ledger = _import(tmp_path, "prime-rl", log, "--engine-version", "0.6.0", cell=cell)
    assert [r["tokens"]["rollout_completion"] for r in ledger] == [N * c for _, c in TRUTH.values()]


def test_auto_says_what_it_saw_when_nothing_fits(tmp_path, capsys):
    log = tmp_path / "notes.txt"
    log.write_text("epoch 1 loss 0.3\nepoch 2 loss 0.2\n")
    assert main(["import", "auto", str(log), "--cell", str(_cell_file(tmp_path)), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "no reader recognises this file" in err[0]
    assert "epoch 1 loss 0.3" in err[1] and "verl-console" in err[1]


def test_every_reader_cites_its_source_and_every_console_has_a_map():
    for name, r in LOG_FORMATS.items():
        assert r.source and r.description, name
        if r.engine is not None:
            assert any(km.format == name for km in KEY_MAPS.values()), name


def test_giant_line_and_ansi_do_not_break_a_step_line(tmp_path):
    log = tmp_path / "big.log"
    with open(log, "wb") as f:
        f.write(b"x" * (3 << 20))    # a 3 MiB tqdm redraw without any newline
        f.write(b"\r\x1b[36m(main_task pid=7)\x1b[0m step:1 - response_length/mean:300.000 - prompt_length/mean:120.000"
                b" - timing_s/gen:1.000 - timing_s/update_actor:2.000\n")
    assert list(LOG_FORMATS["verl-console"].rows(log)) == [
        (1, {"response_length/mean": 300.0, "prompt_length/mean": 120.0, "timing_s/gen": 1.0,
             "timing_s/update_actor": 2.0})]


def test_docs_import_table_commands_run(tmp_path, capsys):
    """docs/import.md's 'you have this file; run this' rows run as written, on the example logs
    tests/fixtures/engine_logs.py writes, and each reaches the engine the row names."""
    import re
    import shlex
    from pathlib import Path

    folder = tmp_path / "engine-logs"
    W.write_examples(folder)
    text = (Path(__file__).resolve().parents[1] / "docs" / "import.md").read_text()
    rows = re.findall(r"^\| [^|]+ \| ([^|]+) \| `[^`]+` \| `(race import [^`]* engine-logs/[^`]*)` \|$", text, re.M)
    assert len(rows) >= 10
    for engine, cmd in rows:      # the page's relative folders (engine-logs/, out/) here under tmp_path
        argv = [str(folder / a.split("/", 1)[1]) if a.startswith("engine-logs/") else
                str(tmp_path / a) if a.startswith("out/") else a for a in shlex.split(cmd)[1:]]
        if not (folder / Path(argv[2]).relative_to(folder)).exists():
            continue     # verl / tensorboard not installed here: their example was not written
        assert main(argv) == 0, cmd
        out = Path(argv[argv.index("--out") + 1])
        assert json.loads((out / "report.json").read_text())["run"]["engine"]["name"] == \
            {"NeMo-RL": "nemo-rl", "SkyRL": "skyrl", "OpenRLHF": "openrlhf", "AReaL": "areal", "ROLL": "roll",
             "prime-rl": "prime-rl", "slime": "slime", "verl": "verl"}[engine.strip()], cmd
    capsys.readouterr()


def test_a_reader_of_a_new_layout_registers_and_imports(tmp_path):
    """docs/import.md: a function decorated with log_format is a reader that a key map's format
    names and `race import auto` sniffs (a plugin registers it through `race.logformats`)."""
    import re

    from suite.integrations.logformats import log_format
    from suite.integrations.keymaps import as_key_map

    if "acme-console" not in LOG_FORMATS:
        @log_format("acme-console", engine=None, description="acme's 'it N p=.. c=..' lines",
                    source="a/acme @ 0123456: train.py", sniff=lambda head, path: head.startswith(b"ACME"))
        def read_acme(path, **_):
            for line in open(path, encoding="utf-8"):
                m = re.match(r"it (\d+) p=([\d.]+) c=([\d.]+) t=([\d.]+)", line)
                if m:
                    yield int(m.group(1)), {"p": float(m.group(2)), "c": float(m.group(3)), "t": float(m.group(4))}

    log = tmp_path / "acme.log"
    log.write_text("ACME trainer\n" + "".join(f"it {s} p={p} c={c} t=9.5\n" for s, (p, c) in TRUTH.items()))
    assert sniff(log).name == "acme-console"
    km = as_key_map({"name": "acme", "engine": "acme", "profile": "generic", "logger": "acme's stdout",
                     "source": {"repo": "a/acme", "commit": "0123456789abcdef0123456789abcdef01234567",
                                "files": ["train.py"]},
                     "format": "acme-console", "step": "it", "tokens": {"prompt": "p", "completion": "c"},
                     "seconds": {"rollout": ["t"]}})
    res = import_metric_log(log, km, cell_from_dict(CELL, check_paths=False), tmp_path / "o")
    assert res.doc["totals"]["tokens"]["rollout_completion"] == N * sum(c for _, c in TRUTH.values())


@needs_tb
def test_tensorboard_steps_counted_from_zero_are_numbered_from_one(tmp_path):
    """AReaL's StatsLogger writes summary_writer.add_scalar(key, val, log_step) with log_step =
    global_step from 0 (areal/utils/stats_logger.py @ 4aef98d8)."""
    rows = {s - 1: {"ppo_actor/prompt_len/avg": p, "ppo_actor/seq_len/avg": p + c, "timeperf/rollout": 24.0,
                    "timeperf/recompute_logp": 2.0, "timeperf/train_step": 10.0} for s, (p, c) in TRUTH.items()}
    folder = W.tensorboard(tmp_path / "areal-tb", rows)
    doc, ledger = _import(tmp_path, "areal", folder)
    assert validate_report(doc) == [] and [r["step"] for r in ledger] == [1, 2, 3]
    assert [r["metrics"]["log/step"] for r in ledger] == [0, 1, 2]
    assert [r["tokens"]["rollout_completion"] for r in ledger] == [N * c for _, c in TRUTH.values()]


def test_auto_names_the_engine_of_exported_histories_by_their_keys(tmp_path):
    """JSON Lines and CSV carry no engine's mark: `auto` compares their keys with every log
    entry's (the exports of tests/test_keymaps.py, as each engine's logging code names them)."""
    import test_keymaps as K

    from suite.integrations.choose import choose

    truth = {s: (p, c, 60.0) for s, (p, c, _) in K.TRUTH.items()}
    for name, write in sorted(K.WRITERS.items()):
        (tmp_path / name).mkdir()
        assert choose("auto", write(tmp_path / name, truth)).name == name
