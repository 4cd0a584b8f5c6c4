"""race quickstart end to end on a reduced grid (one tiny random policy, the PRM reward, three
allocations): real runs, real lm-eval, frontiers, a race.json valid under race-v1, a site."""

from __future__ import annotations

import json

import pytest


from suite.cli import main
from suite.paths import schemas, tasks


@pytest.fixture(scope="module")
def reduced(tmp_path_factory):
    import torch
    import yaml

    from eval_models import make_prm
    from tiny_policy import make_policy

    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("qs")
    policy, prm = make_policy(d / "tiny-policy"), make_prm(d / "tiny-prm")
    g = {"name": "reduced",
         "cell": {"dataset": str(tasks() / "arith" / "data" / "train.jsonl"), "prompts_per_step": 2,
                  "group_size": 2, "max_completion_tokens": 12},
         "models": {"tiny": str(policy)}, "budgets": [1e9], "band": 0.6,
         "allocations": {"mu1": {"mu": 1, "lora_rank": 4}, "mu2": {"mu": 2, "lora_rank": 4},
                         "mu3": {"mu": 3, "lora_rank": 8}},
         "rewards": {"prm": {"system": "prm", "model_path": str(prm)}},
         "seeds": [0], "eval": {"limit": 2, "judge": str(prm)}}
    f = d / "reduced.yaml"
    f.write_text(yaml.safe_dump(g, sort_keys=False))
    return f, d / "out"


def test_reduced_quickstart_end_to_end(reduced, capsys, tmp_path, monkeypatch):
    import jsonschema

    from suite.accounting.utilization import Ceiling, machine_kind, save_ceiling
    from suite.pipeline.executors import auto_workers

    monkeypatch.setenv("RACE_CALIBRATION", str(tmp_path / "calibration.json"))
    save_ceiling(Ceiling(50e9, 1, machine_kind(), 512, "2026-12-01T00:00:00Z", 0.5))
    grid_file, out = reduced
    assert main(["quickstart", "--grid", str(grid_file), "--out", str(out), "--no-progress", "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    assert "3 cells: 3 run now, 0 already evaluated" in printed
    # throughput: achieved GFLOP/s per phase of every cell, utilization of the stored ceiling, the wall
    for cid in ("tiny-1e9-prm-mu1-s0", "tiny-1e9-prm-mu2-s0", "tiny-1e9-prm-mu3-s0"):
        totals = json.loads((out / "cells" / cid / "report.json").read_text())["totals"]
        row = [line for line in printed.splitlines() if line.startswith(cid)][-1].split()
        rate = totals["flops"]["update"] / totals["seconds"]["update"]
        assert f"{rate / 1e9:.2f}" in row and f"{rate / 50e9:.0%}" in row
    assert "over the fp32 matmul ceiling, 50.0 GFLOP/s" in printed and "x the cells' step seconds" in printed
    workers = auto_workers(1, 3)                      # --workers defaults to auto: one per core here
    assert "grid wall " in printed and f" s ({workers} worker{'s' * (workers > 1)}) = " in printed

    doc = json.loads((out / "race.json").read_text())
    schema = json.loads((schemas() / "race-v1.schema.json").read_text())
    jsonschema.validate(doc, schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    labels = {p["label"] for c in doc["conditions"] for p in c["points"]}
    assert labels == {"mu1", "mu2", "mu3"}
    assert "diagnostic, not an optimizer" in (out / "race.md").read_text()

    index = (out / "site" / "index.html").read_text()
    assert index.startswith("<!doctype html>") or "<html" in index
    assert len(list((out / "submissions").glob("*.json"))) == 3   # every cell on the leaderboard
    assert (out / "frontier" / "frontier.md").is_file() and (out / "frontier" / "score_vs_update_share.svg").is_file()

    # the summary table: one row per cell with p, reward share, steps and both metrics
    for cid in ("tiny-1e9-prm-mu1-s0", "tiny-1e9-prm-mu2-s0", "tiny-1e9-prm-mu3-s0"):
        report = json.loads((out / "cells" / cid / "report.json").read_text())
        row = next(line for line in printed.splitlines() if line.startswith(cid))
        assert f"{report['totals']['update_share']:.3f}" in row
        assert f"{report['totals']['shares']['reward']:.3f}" in row and report["totals"]["shares"]["reward"] > 0
    assert "pass@1 easy" in printed and "judge hard" in printed
    assert "pass@1 prefers" in printed and "process judge prefers" in printed
    assert str(out / "race.json") in printed and str(out / "site" / "index.html") in printed

    # a second run resumes: every cell is skipped, the outputs are rebuilt
    before = (out / "cells" / "tiny-1e9-prm-mu1-s0" / "ledger.jsonl").stat().st_mtime_ns
    assert main(["quickstart", "--grid", str(grid_file), "--out", str(out), "--no-progress", "--no-plots"]) == 0
    assert (out / "cells" / "tiny-1e9-prm-mu1-s0" / "ledger.jsonl").stat().st_mtime_ns == before
    assert "3 cells: 0 run now, 3 already evaluated" in capsys.readouterr().out


def test_missing_grid_file_is_one_line(tmp_path, capsys):
    assert main(["quickstart", "--grid", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "grid file" in err and "does not exist" in err and "Traceback" not in err


def test_shipped_quickstart_grid_meets_the_brief():
    """The shipped grid: at least two model sizes, three allocations, a rule reward and the PRM."""
    from suite.analysis import grid

    g = grid.load(tasks() / "grids" / "quickstart.yaml")
    assert len(g.models) >= 2 and len(g.allocations) >= 3
    systems = {r["system"] for r in g.rewards.values()}
    assert "sparse" in systems and "prm" in systems
    assert set(g.evaluation.targets) == {"arith-easy-250", "arith-hard-250"}
