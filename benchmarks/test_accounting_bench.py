"""Timing of the accounting, each a ratio to a reference measured in the same run
(benchmarks/ratio.py): `race flops` for a 7B model in-process against one ModelSpec load, so
scripts and validators can call it per report; one ledger step's accounting against writing
that step's ledger line, so the ledger never costs more than a few serializations per step."""

import contextlib
import io
import json

from benchmarks.ratio import Limit, check, interleaved
from suite.accounting import Adapter, GRPOSettings, phase_flops, tokens_from_work, work_from_lengths
from suite.accounting.specs import spec_for
from suite.cli import main

#: Measured 2026-12-01 (2 cores, load ~2.3): 31x (4 ms against 0.13 ms).
RACE_FLOPS = Limit(50.0, "argument parsing (most of it), two model specs loaded (policy and reward model; the "
                         "reference is one), every phase priced and the JSON written: about 31x; it was 60x while "
                         "the parser configured every subcommand, which is the regression this catches")
#: Measured 2026-12-01: 14x (0.17 ms against 0.012 ms).
STEP = Limit(30.0, "work from 512 real lengths (a few passes over the completions, lengths checked at C speed) and "
                   "the phases priced, against serializing the ledger line the step writes anyway: about 14x; "
                   "checking each length in Python made it 100x, per-token work would be thousands")


def _race_flops_7b():
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(["flops", "--model", "Qwen2.5-7B-Instruct", "--lora-rank", "64", "--reward-model",
                     "Qwen2.5-Math-PRM-7B", "--num-iterations", "2", "--beta", "0.04", "--steps", "500", "--json"])
    assert code == 0
    return out.getvalue()


def test_race_flops_7b(benchmark):
    _race_flops_7b()  # warm imports
    timing = interleaved(benchmark, _race_flops_7b, lambda: spec_for("Qwen2.5-7B-Instruct"), rounds=20)
    assert '"update_share"' in timing.result
    check(benchmark, timing, RACE_FLOPS)


def test_ledger_step_accounting(benchmark):
    """One ledger record: work from 512 real lengths, then per-phase FLOPs."""
    policy, adapter = spec_for("Qwen2.5-7B-Instruct"), Adapter.from_rank(64)
    settings = GRPOSettings(group_size=2, prompts_per_step=256, max_completion_tokens=2048)
    prompts = [100 + (i * 37) % 400 for i in range(256)]
    comps = [1 + (i * 997) % 2048 for i in range(512)]

    def step():
        return [phase_flops(work_from_lengths(prompts, comps, settings, "trl"), policy, adapter, settings)
                for _ in range(20)]

    work = work_from_lengths(prompts, comps, settings, "trl")
    record = {"step": 1, "time": "2026-12-01T00:00:00Z", "tokens": tokens_from_work(work), "work": work,
              "flops": phase_flops(work, policy, adapter, settings), "seconds": {"rollout": 1.0, "update": 1.0}}

    def line():
        return [json.dumps(record, separators=(",", ":")) for _ in range(20)]

    timing = interleaved(benchmark, step, line, rounds=10)
    flops = timing.result[0]
    assert flops["update"] > flops["rollout"] > 0
    check(benchmark, timing, STEP)
