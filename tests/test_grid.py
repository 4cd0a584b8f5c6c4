"""race grid: expansion, planning into IsoFLOP bands, refusal naming the cells that cannot land,
and resumability with the real runner and evaluator on a tiny grid."""

from __future__ import annotations

import json
import os
import re

import pytest


from suite.analysis import grid
from suite.pipeline import gridrun
from suite.cli import main
from suite.errors import RaceError
from suite.paths import tasks

TRAIN = str(tasks() / "arith" / "data" / "train.jsonl")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two random tiny policies (sizes differ) and a random PRM: plumbing, not learning."""
    import torch

    from eval_models import make_prm
    from tiny_policy import make_policy

    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("models")
    return {"small": make_policy(d / "small", hidden=64, seed=0),
            "large": make_policy(d / "large", hidden=96, heads=3, intermediate=192, seed=1),
            "prm": make_prm(d / "prm")}


def _grid(m, **over) -> dict:
    d = {"name": "t",
         "cell": {"dataset": TRAIN, "prompts_per_step": 2, "group_size": 2, "max_completion_tokens": 12},
         "models": {"s": str(m["small"]), "l": str(m["large"])},
         "budgets": [4e9, 8e9], "band": 0.5,
         "allocations": {"lo": {"mu": 1, "lora_rank": 4}, "hi": {"K": 4, "mu": 2, "lora_rank": 8}},
         "rewards": {"sparse": "sparse", "prm": {"system": "prm", "model_path": str(m["prm"])}},
         "seeds": [0, 1], "eval": {"limit": 2, "judge": str(m["prm"])}}
    d.update(over)
    return d


@pytest.fixture(scope="module")
def stats(models):
    return {(str(models[m].resolve()), TRAIN): grid.prompt_stats(str(models[m]), TRAIN) for m in ("small", "large")}


def test_expansion_is_the_full_product_with_shared_labels(models):
    g = grid.grid_from_dict(_grid(models))
    cells = grid.expand(g)
    assert len(cells) == 2 * 2 * 2 * 2 * 2
    assert len({c.id for c in cells}) == len(cells)
    c = next(c for c in cells if c.id == "l-8e9-prm-hi-s1")
    assert (c.model, c.budget, c.reward, c.allocation, c.seed) == ("l", 8_000_000_000, "prm", "hi", 1)
    assert (c.spec.group_size, c.spec.num_iterations, c.spec.lora_rank, c.spec.seed) == (4, 2, 8, 1)
    assert c.spec.budget_flops == 8_000_000_000 and c.spec.label == "hi"
    assert c.spec.reward.system == "prm" and c.spec.policy == str(models["large"].resolve())
    assert c.band == (4_000_000_000, 8_000_000_000)
    # every seed of one allocation carries the same run label (frontier/RACE average them)
    assert {x.spec.label for x in cells if x.allocation == "lo"} == {"lo"}
    assert grid.budget_tag(250_000_000_000) == "2.5e11"


def test_planning_puts_every_cell_into_its_band(models, stats):
    cells = grid.expand(grid.grid_from_dict(_grid(models)))
    planned = grid.plan(cells, stats)
    for pc in planned:
        low, high = pc.cell.band
        assert pc.step_bound <= high - low          # the stop rule cannot leave the band
        assert pc.min_steps >= 1 and pc.steps >= pc.min_steps
    by = {pc.cell.id: pc for pc in planned}
    # equal budget: the larger model buys fewer steps
    assert by["l-4e9-sparse-lo-s0"].steps < by["s-4e9-sparse-lo-s0"].steps
    # twice the budget buys about twice the steps
    assert by["s-8e9-sparse-lo-s0"].steps >= 2 * by["s-4e9-sparse-lo-s0"].steps - 1
    # rule rewards cost no FLOPs, the PRM does; mu=2 raises the update share
    assert by["s-4e9-sparse-lo-s0"].reward_share == 0 and by["s-4e9-prm-lo-s0"].reward_share > 0.01
    assert by["s-4e9-sparse-hi-s0"].update_share > by["s-4e9-sparse-lo-s0"].update_share
    # mu optimizer steps per generation batch
    hi = by["s-4e9-sparse-hi-s0"]
    assert hi.steps == hi.cell.budget * 2 // sum(hi.step_flops.values())


def test_cells_that_cannot_reach_the_band_are_named(models, stats):
    one = dict(seeds=[0], rewards={"sparse": "sparse"}, allocations={"lo": {"mu": 1, "lora_rank": 4}}, band=0.5)
    bounds = {pc.cell.model: pc.step_bound for pc in grid.plan(grid.expand(grid.grid_from_dict(
        _grid(models, budgets=[1e12], **one))), stats)}
    assert bounds["s"] < bounds["l"]
    # a band just wide enough for one step of the small model, not of the large one
    budget = bounds["s"] + bounds["l"]
    cells = grid.expand(grid.grid_from_dict(_grid(models, budgets=[budget], **one)))
    with pytest.raises(RaceError) as e:
        grid.plan(cells, stats)
    msg, tag = e.value.message, grid.budget_tag(budget)
    assert f"l-{tag}-sparse-lo-s0" in msg and f"s-{tag}-sparse-lo-s0" not in msg
    assert "1 of 2 cells" in msg and "band" in e.value.hint


def test_raise_budgets_lifts_a_budget_to_the_first_every_cell_reaches(models, stats):
    one = dict(seeds=[0], rewards={"sparse": "sparse"}, allocations={"lo": {"mu": 1, "lora_rank": 4}}, band=0.5)
    [pc] = grid.plan(grid.expand(grid.grid_from_dict(_grid(models, budgets=[1e12], **one,
                                                           models={"l": str(models["large"])}))), stats)
    need = pc.step_bound / 0.5                     # the smallest budget whose band holds one step
    short = int(need * 0.9)
    d = _grid(models, budgets=[short], models={"l": str(models["large"])}, **one)
    with pytest.raises(RaceError):                 # by default the planner refuses
        grid.plan(grid.expand(grid.grid_from_dict(d)), stats)
    g = grid.grid_from_dict({**d, "raise_budgets": 1.2})
    fitted, notes = grid.fit(g, grid.expand(g), stats)
    [b] = fitted.budgets
    assert need <= b <= need * 1.01 and len(notes) == 1
    assert f"budget {grid.budget_tag(short)} raised to {grid.budget_tag(b)}" in notes[0]
    assert "l-" in notes[0] and "raise_budgets allows 1.2x" in notes[0]
    [pc] = grid.plan(grid.expand(fitted), stats)   # now it plans, under the raised budget's name
    assert pc.cell.budget == b and pc.cell.id.startswith(f"l-{grid.budget_tag(b)}-")
    # more than the grid allows: left alone, and the plan refuses with the factor to allow
    g = grid.grid_from_dict({**d, "budgets": [int(need * 0.5)], "raise_budgets": 1.2})
    fitted, notes = grid.fit(g, grid.expand(g), stats)
    assert fitted == g and not notes
    with pytest.raises(RaceError) as e:
        grid.plan(grid.expand(fitted), stats)
    assert float(re.search(r"raise_budgets: ([0-9.]+)", e.value.hint).group(1)) >= 2


def test_refusal_through_the_cli_is_one_line(models, tmp_path, capsys):
    import yaml

    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(_grid(models, budgets=[1e8]), sort_keys=False))
    assert main(["grid", str(f), "--plan"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"race grid: error: grid {f}: 16 of 16 cells cannot be sure to reach their IsoFLOP band")
    assert "raise_budgets:" in err
    assert "s-1e8-sparse-lo-s0" in err and "Traceback" not in err


@pytest.mark.parametrize("change, words", [
    ({"bands": 0.2}, "unknown key 'bands'"),
    ({"band": 1.5}, "band must be a fraction"),
    ({"raise_budgets": 0.5}, "raise_budgets must be a factor"),
    ({"allocations": {"a": {"max_steps": 3}}}, "may not set 'max_steps'"),
    ({"cell": {"seed": 3}}, "may not set 'seed'"),
    ({"budgets": ["lots"]}, "budget must be a positive whole number"),
    ({"seeds": [0, 0]}, "distinct"),
    ({"allocations": {"a b": {}}}, "folder name"),
    ({"eval": {"targets": ["nope"]}}, "unknown target"),
])
def test_bad_grid_files_name_the_problem(models, change, words):
    with pytest.raises(RaceError) as e:
        g = grid.grid_from_dict(_grid(models, **change))
        grid.expand(g)
    assert words in str(e.value)


def test_an_allocation_may_say_K_over_the_cells_group_size_but_not_both(models):
    g = grid.grid_from_dict(_grid(models))            # cell: group_size 2; allocation hi: K 4
    assert g.allocations["hi"] == {"group_size": 4, "num_iterations": 2, "lora_rank": 8}
    assert {c.allocation: c.spec.group_size for c in grid.expand(g)} == {"lo": 2, "hi": 4}
    with pytest.raises(RaceError, match="allocation hi: K and group_size name the same field"):
        grid.grid_from_dict(_grid(models, allocations={"hi": {"K": 4, "group_size": 8}}))


def test_unknown_cell_field_is_refused_at_expansion(models):
    g = grid.grid_from_dict(_grid(models, allocations={"a": {"mue": 2}}))
    with pytest.raises(RaceError, match="unknown field 'mue'"):
        grid.expand(g)


def test_shipped_grids_load(models):
    for f in sorted((tasks() / "grids").glob("*.yaml")):
        g = grid.load(f)
        assert len(g.allocations) >= 3 and g.models and g.rewards


def test_finished_cells_are_not_rerun(models, stats, tmp_path):
    """Real runner + evaluator on one tiny cell; a second run skips it; a cell whose training
    finished but whose evaluation did not is only evaluated (its ledger is untouched)."""
    g = grid.grid_from_dict(_grid(models, models={"s": str(models["small"])}, budgets=[6e8], band=0.9, seeds=[0],
                                  rewards={"sparse": "sparse"}, allocations={"lo": {"mu": 1, "lora_rank": 4}}))
    planned = grid.plan(grid.expand(g), stats)
    out = tmp_path / "grid"
    first = gridrun.run(planned, out, g.evaluation, threads=1, progress=False, grid=g)
    assert first.ran == ("s-6e8-sparse-lo-s0",) and not first.failed, first.failed
    assert 0 < first.job_seconds["s-6e8-sparse-lo-s0"] < first.wall_seconds and first.threads == 1
    folder = out / "cells" / "s-6e8-sparse-lo-s0"
    report = json.loads((folder / "report.json").read_text())
    assert report["budget"]["band"] == {"low": 60_000_000, "high": 600_000_000}
    assert 60_000_000 <= report["totals"]["flops"]["total"] <= 600_000_000
    assert {(e["target"], e["metric"]) for e in report["evaluations"]} >= {
        ("arith-easy-250:first-2", "pass@1"), ("arith-hard-250:first-2", "process_judge")}
    assert json.loads((out / "grid.json").read_text())["cells"][0]["id"] == "s-6e8-sparse-lo-s0"
    ledger_mtime = os.stat(folder / "ledger.jsonl").st_mtime_ns

    second = gridrun.run(planned, out, g.evaluation, threads=1, progress=False, grid=g)
    assert second.skipped == ("s-6e8-sparse-lo-s0",) and second.ran == ()

    # evaluation lost (e.g. killed during eval): only the evaluation runs again
    report["evaluations"] = []
    (folder / "report.json").write_text(json.dumps(report))
    assert not gridrun.evaluated(folder / "report.json", g.evaluation)
    gridrun.run_and_evaluate(planned[0].cell.spec, str(folder), planned[0].cell.band, g.evaluation, threads=1, log=False)
    assert gridrun.evaluated(folder / "report.json", g.evaluation)
    assert os.stat(folder / "ledger.jsonl").st_mtime_ns == ledger_mtime


def test_plan_flag_prints_the_plan_and_runs_nothing(models, tmp_path, capsys):
    import yaml

    f = tmp_path / "ok.yaml"
    f.write_text(yaml.safe_dump(_grid(models, seeds=[0]), sort_keys=False))
    assert main(["grid", str(f), "--plan", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "16 cells (2 models x 2 budgets x 2 rewards x 2 allocations x 1 seeds)" in out
    assert "s-4e9-prm-hi-s0" in out and "l-8e9-sparse-lo-s0" in out
    assert not (tmp_path / "o").exists()
