"""Rules that keep a report from passing for one of the suite's own cells: `provenance.reference_cell`
puts a row among the reference cells of the leaderboard, so it is held to what those cells are,
by content -- the tiny models shipped in tasks/arith/models, measured on CPU with a ledger, and
for a cell of tasks/cells the settings that file gives."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Iterable

from ..record.runspec import OWN_CPU_PROFILE
from .registry import Issue, rule

CELL_FIELDS = {"group_size": ("grpo", "group_size"), "prompts_per_step": ("grpo", "prompts_per_step"),
               "max_completion_tokens": ("grpo", "max_completion_tokens"), "num_iterations": ("grpo", "num_iterations"),
               "beta": ("grpo", "beta"), "lora_rank": ("adapter", "rank")}
"""A cell file's settings and where the report states each."""


@lru_cache(maxsize=1)
def shipped_models() -> dict[str, dict]:
    """The suite's tiny models (tasks/arith/models/*/config.json): folder name -> spec as a report
    states it (ModelSpec.to_dict(), its name left out)."""
    from ..accounting.specs import spec_for
    from ..errors import RaceError
    from ..paths import home

    out = {}
    for cfg in sorted((home() / "tasks" / "arith" / "models").glob("*/config.json")):
        try:
            spec = spec_for(str(cfg)).to_dict()
        except RaceError:
            continue
        spec.pop("name", None)
        out[cfg.parent.name] = spec
    return out


@lru_cache(maxsize=1)
def shipped_cells() -> dict[str, dict]:
    """The suite's cell files (tasks/cells/*.yaml) by label and by file stem: their settings."""
    from .. import yamlstrict
    from ..paths import home

    out = {}
    for path in sorted((home() / "tasks" / "cells").glob("*.yaml")):
        try:
            d = yamlstrict.load(path)
        except Exception:           # a damaged shipped file checks nothing; tests/test_shipped.py holds them
            continue
        if isinstance(d, dict):
            out[path.stem] = d
            if isinstance(d.get("label"), str):
                out[d["label"]] = d
    return out


def _spec(block) -> dict | None:
    spec = block.get("spec") if isinstance(block, dict) else None
    return {k: v for k, v in spec.items() if k != "name"} if isinstance(spec, dict) else None


def _shipped_name(block) -> str | None:
    """The shipped model whose spec a model block carries, if any."""
    spec = _spec(block)
    return next((n for n, s in shipped_models().items() if s == spec), None) if spec is not None else None


@rule("REF-001", title="a reference cell that is not one of the suite's cells",
      requires=("policy", "reward", "accounting", "provenance", "grpo", "adapter"))
def reference_cell(ctx) -> Iterable[Issue]:
    """`provenance.reference_cell` marks one of the suite's own cells: tiny policies trained on
    CPU to test the suite, listed apart on the leaderboard. Any report could write the field, so
    the claim is held to content: the policy (and a reward model, if any) must be one of the
    models shipped in tasks/arith/models, spec for spec; the run measured with a ledger under
    the `trl-cpu` profile; a name of a tasks/cells file must match that file's K, prompts per step,
    completion cap, mu, beta and LoRA rank; any other name must start with the policy's shipped
    name (a cell of the suite's grids and studies, `policy-m-sparse-mu1-r8`). Leave the field out
    of reports of your own runs: the suite sets it."""
    doc = ctx.doc
    name = doc["provenance"].get("reference_cell")
    if name is None:
        return
    hint = "leave provenance.reference_cell out: only the suite's own cells (race run tasks/cells/...) set it"
    policy = _shipped_name(doc["policy"])
    if policy is None:
        yield Issue("$.provenance.reference_cell", f"claims the suite's reference cell {name!r} but its policy "
                    f"{doc['policy'].get('name')!r} is not one of the models shipped in tasks/arith/models", hint)
        return
    model = doc["reward"].get("model")
    if model is not None and _shipped_name(model) is None:
        yield Issue("$.reward.model", f"claims the suite's reference cell {name!r} but its reward model is not one of "
                    "the models shipped in tasks/arith/models", hint)
    if doc["provenance"].get("method") != "measured" or not isinstance(doc.get("ledger"), dict):
        yield Issue("$.provenance.method", f"claims the suite's reference cell {name!r} but is not measured with a "
                    "ledger: the suite's cells are trained and recorded step by step", hint)
    if doc["accounting"].get("engine_profile") != OWN_CPU_PROFILE:
        yield Issue("$.accounting.engine_profile", f"claims the suite's reference cell {name!r} but is counted under "
                    f"{doc['accounting'].get('engine_profile')!r}, not {OWN_CPU_PROFILE} (the suite's cells train on "
                    "CPU)", hint)
    cell = shipped_cells().get(name)
    if cell is None:
        if not name.startswith(policy):
            yield Issue("$.provenance.reference_cell", f"{name!r} names no cell of tasks/cells and is no grid cell of "
                        f"the shipped policy {policy!r} (those names start with it)", hint)
        return
    if Path(str(cell.get("policy", ""))).name != policy:
        yield Issue("$.policy", f"the reference cell {name!r} trains {Path(str(cell.get('policy'))).name!r}, "
                    f"not {policy!r}", hint)
    for key, (section, field) in CELL_FIELDS.items():
        if key in cell and doc[section].get(field) != cell[key] and \
                not (key == "lora_rank" and cell[key] == 0 and doc[section].get(field) is None):
            yield Issue(f"$.{section}.{field}", f"the reference cell {name!r} sets {key} = {cell[key]!r}; the report "
                        f"states {doc[section].get(field)!r}", hint)
