"""Every task file the project ships proves it can run: each grid plans without refusal, each cell
loads, buys the steps its own comment promises and exports to verl. Pure planning, no training:
a rebuilt model that makes a shipped step costlier fails here, naming the file, instead of in a
user's first command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import gate as bench
from suite.analysis import grid
from suite.train.cell import load_cell
from suite.cli import main
from suite.paths import tasks

GRIDS = sorted((tasks() / "grids").glob("*.yaml"))
CELLS = sorted((tasks() / "cells").glob("*.yaml"))
PROMISE = re.compile(r"^#.*buys at least (\d+) optimizer steps", re.M)


def test_the_shipped_folders_are_not_empty():
    assert GRIDS and CELLS


@pytest.mark.parametrize("path", GRIDS, ids=lambda p: p.name)
def test_every_shipped_grid_plans(path):
    g = grid.load(path)
    gp = grid.plan_grid(g)          # RaceError (naming the file and the cells) when a cell cannot land
    assert len(gp.cells) == len(grid.expand(g))
    for pc in gp.cells:
        assert pc.min_steps >= 1, f"{path}: {pc.cell.id} buys no guaranteed step"
        low, high = pc.cell.band
        assert pc.step_bound <= high - low
    for b, new in zip(g.budgets, gp.grid.budgets):
        assert b <= new <= b * g.raise_budgets, f"{path}: budget {b:g} planned as {new:g}"


def test_quickstart_absorbs_a_costlier_step_by_raising_and_saying_so():
    """The shipped quickstart declares 4e10, whose band cannot hold its costliest cell's step:
    the planner raises the budget (within raise_budgets) until it does, and the plan says so,
    naming that cell."""
    g = grid.load(tasks() / "grids" / "quickstart.yaml")
    gp = grid.plan_grid(g)
    ((declared,), (planned,)) = g.budgets, gp.grid.budgets
    costliest = max(gp.cells, key=lambda pc: pc.step_bound)
    assert costliest.step_bound > g.band * declared            # why it must be raised
    assert declared < planned <= declared * g.raise_budgets
    assert all(pc.cell.budget == planned for pc in gp.cells)
    (note,) = gp.notes
    named = costliest.cell.id.replace(grid.budget_tag(planned), grid.budget_tag(declared))  # as declared
    assert f"raised to {grid.budget_tag(planned)}" in note and f"one step of {named} " in note


def _plan_cell(path: Path) -> grid.PlannedCell:
    s = load_cell(path)
    c = grid.GridCell(s.name, s.label, s.budget_flops, (0, s.budget_flops), s.reward.system, s.label, s.seed, s)
    [pc] = grid.plan([c], grid.prompt_stats_of([c]))
    return pc


@pytest.mark.parametrize("path", CELLS, ids=lambda p: p.name)
def test_every_shipped_cell_buys_the_steps_it_promises(path):
    promised = PROMISE.search(path.read_text(encoding="utf-8"))
    assert promised, f"{path}: say in a comment how many optimizer steps the budget buys at least"
    pc = _plan_cell(path)
    assert pc.min_steps >= int(promised.group(1)), \
        f"{path}: the budget guarantees {pc.min_steps} steps, the comment promises {promised.group(1)}"
    # the regression benchmarks cap these cells at a few steps; the budget must not end them first
    for bc in bench.REFERENCE_CELLS.values():
        if bc.cell == path.stem:
            assert pc.min_steps >= bc.steps, f"{path}: bench cell {bc.name} needs {bc.steps} steps"


@pytest.mark.parametrize("path", CELLS, ids=lambda p: p.name)
def test_every_shipped_cell_exports_to_verl(path, capsys):
    # --check composes the overrides against verl's packaged config (installed by setup.sh --test)
    assert main(["export", "verl", str(path), "--check"]) == 0
    out = capsys.readouterr().out
    assert "python3 -m verl.trainer.main_ppo" in out
    assert f"actor_rollout_ref.rollout.n={load_cell(path).group_size}" in out
