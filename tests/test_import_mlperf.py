"""`race import mlperf`: MLPerf Training 6.1's GRPO reference logs (`:::MLLOG` lines as NeMo-RL's
nemo_rl/algorithms/mlperf_grpo_logging.py writes them; fixtures from mlcommons/training
aa344c7f llm_post_training/rcp_logs, see tests/fixtures/mlperf/README.md) become a ledger and a
report that `race validate --strict` accepts, priced as the accounting prices the same run by hand.

What global_valid_toks counts is NeMo-RL's own definition (nemo_rl/algorithms/utils.py /
models/megatron/common.py process_global_batch: sum(token_mask[:, 1:] * sample_mask), token_mask =
token_loss_mask, 1 on assistant tokens only): the policy's tokens of the sequences trained on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.accounting import Adapter, GRPOSettings, step_flops
from suite.accounting.specs import spec_for
from suite.cli import main
from suite.errors import RaceError
from suite.integrations.mlperf import import_mlperf, read_mllog
from suite.train.cell import load_cell
from suite.validate import validate_path

FIX = Path(__file__).parent / "fixtures" / "mlperf"
TRIMMED = FIX / "GBS256_seed_1-steps1-3.out"
FULL = FIX / "GBS1024_seed_1.out"
CELL = FIX / "run-qwen35-397b-grpo.yaml"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("mlperf")
    assert main(["import", "mlperf", str(FULL), "--cell", str(CELL), "--out", str(out)]) == 0
    return out, json.loads((out / "report.json").read_text())


def test_full_reference_log_imports_to_a_strictly_valid_report(imported):
    out, doc = imported
    assert main(["validate", "--strict", str(out / "report.json")]) == 0
    assert validate_path(out / "report.json") == []
    _, stats, _ = read_mllog(FULL)
    assert doc["totals"]["steps"] == len(stats) == 6
    assert doc["grpo"]["group_size"] == 16 and doc["grpo"]["prompts_per_step"] == 64   # the log's, not the cell's
    assert doc["adapter"]["type"] == "full" and doc["accounting"]["engine_profile"] == "nemo-rl-on-policy"
    # Discards: generated = 7 x 1024; trained = the logged global_valid_seqs.
    ro = doc["rollouts"]
    kept = sum(s["global_valid_seqs"] for s in stats.values())
    assert ro["generated"] == 6 * 1024 and ro["trained"] == kept and ro["discarded"] == 6 * 1024 - kept > 0
    assert ro["discarded_share"] == pytest.approx((6 * 1024 - kept) / (6 * 1024))
    # Multi-turn: 10,000 environment tokens per generated sequence, as described, priced as prefill.
    assert ro["multi_turn"] == {"environment_tokens": 6 * 1024 * 10000, "turns": 20.0, "max_turns": 30}
    assert ro["off_policy"] == {"max_lag": 1}
    # Policy tokens: the log's, for the kept sequences (the discarded priced at the same mean).
    toks = sum(s["global_valid_toks"] for s in stats.values())
    assert doc["totals"]["tokens"]["rollout_completion"] == pytest.approx(
        sum(s["global_valid_toks"] / s["global_valid_seqs"] * 1024 for s in stats.values()), abs=8)
    assert doc["totals"]["tokens"]["update"] == pytest.approx(toks + kept * (3000 + 10000), rel=1e-6)
    # Per-phase seconds from the log; the hardware count from valid_tokens_per_sec_per_gpu.
    secs = doc["totals"]["seconds"]
    assert secs["update"] == pytest.approx(sum(s["policy_training_time"] for s in stats.values()))
    assert secs["rollout"] == pytest.approx(sum(s["exposed_generation_time"] for s in stats.values()))
    assert doc["hardware"]["count"] == 256
    assert doc["hardware"]["wall_seconds"] == pytest.approx(sum(s["train_step_time"] for s in stats.values()))
    fields = {a["field"] for a in doc["provenance"]["assumptions"]}
    assert {"mean_prompt_tokens", "rollouts.environment_tokens", "rollouts.turns", "hardware.peak_flops"} <= fields
    assert doc["evaluations"][0]["metric"] == "pass@4" and doc["evaluations"][0]["value"] > 0.69


def test_total_agrees_with_the_run_priced_by_hand_within_one_percent(imported):
    """By hand: each step as plain single-turn GRPO with race's accounting (1024 completions of
    prompt P and completion c + E tokens), then the two corrections the standard states: the E
    environment tokens of each completion are prefilled, so the rollout has no LM-head position
    for them (2 * hidden * vocab FLOPs each), and the update trains the kept sequences only."""
    _, doc = imported
    _, stats, _ = read_mllog(FULL)
    pol = spec_for("Qwen3.5-397B-A17B")
    s = GRPOSettings(group_size=16, prompts_per_step=64, max_completion_tokens=65536, gradient_checkpointing=False)
    head = 2 * pol.hidden_size * pol.vocab_size
    rollout = update = 0
    for st in stats.values():
        c = st["global_valid_toks"] / st["global_valid_seqs"]
        naive = step_flops(pol, Adapter.from_rank(0), s, 3000, c + 10000, engine="nemo-rl-on-policy").flops
        rollout += naive["rollout"] - 1024 * 10000 * head
        update += naive["update"] * st["global_valid_seqs"] / 1024
    flops = doc["totals"]["flops"]
    assert flops["update"] == pytest.approx(update, rel=1e-6)   # exactly the kept share
    assert flops["rollout"] == pytest.approx(rollout, rel=0.01)  # decode -> prefill moves of the linear layers
    assert flops["total"] == pytest.approx(rollout + update, rel=0.01)
    # Update FLOPs dominate; rollout wall time is the exposed part only and still larger per FLOP.
    assert flops["update"] > 2 * flops["rollout"]


def test_import_prints_per_phase_seconds_and_utilization(tmp_path, capsys):
    assert main(["import", "mlperf", str(TRIMMED), "--cell", str(CELL), "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "utilization" in text and "rollout" in text and "256 x NVIDIA GB300" in text
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["totals"]["steps"] == 3
    # a log whose per-step stats were cut while its block_stop reaches past them is refused, naming both
    cut = tmp_path / "cut.out"
    cut.write_text(TRIMMED.read_text().replace('"samples_count": 4608, "step": 4}', '"samples_count": 4608, "step": 18}'))
    assert cut.read_text() != TRIMMED.read_text()
    with pytest.raises(RaceError, match="block_stop markers reach step 17, but its per-step stats stop at step 3"):
        import_mlperf(cut, load_cell(CELL, check_paths=False), tmp_path / "cut")
    assert validate_path(tmp_path / "report.json") == []


def test_description_without_environment_tokens_is_refused_naming_it(tmp_path):
    cell = load_cell(CELL, check_paths=False)
    bare = cell.with_changes(rollouts={k: v for k, v in cell.rollouts.items() if k != "environment_tokens"})
    with pytest.raises(RaceError, match="lacks rollouts.environment_tokens") as e:
        import_mlperf(TRIMMED, bare, tmp_path)
    assert "masked out of global_valid_toks" in e.value.hint


def test_log_without_valid_tokens_names_the_key(tmp_path):
    bad = tmp_path / "bad.out"
    bad.write_text(TRIMMED.read_text().replace('"global_valid_toks"', '"valid_toks"'))
    with pytest.raises(RaceError, match="has no 'global_valid_toks'"):
        import_mlperf(bad, load_cell(CELL, check_paths=False), tmp_path / "out")


def test_report_table_shows_time_beside_flops(imported):
    """race report --format: per-phase wall seconds, achieved FLOP/s and utilization beside the FLOP
    shares. On the reference run the rollout takes the wall time and the update the FLOPs."""
    from suite.site import tables

    out, doc = imported
    row = tables.table_rows([("mlperf", doc)])[0]
    secs, flops = doc["totals"]["seconds"], doc["totals"]["flops"]
    assert secs["rollout"] > secs["update"] and flops["update"] > flops["rollout"]
    peak = doc["hardware"]["peak_flops"] * doc["hardware"]["count"]
    assert row.phase_utilization["update"] == pytest.approx(flops["update"] / secs["update"] / peak)
    md = tables.render_table([row], "markdown")
    assert "utilization (rollout / update / reward)" in md and "wall seconds (rollout / update / reward)" in md
    assert f"{secs['rollout']:,.0f} / {secs['update']:,.0f} / —" in md
    rec = json.loads(tables.render_table([row], "json"))["rows"][0]
    assert rec["utilization"]["rollout"] == pytest.approx(flops["rollout"] / secs["rollout"] / peak)
