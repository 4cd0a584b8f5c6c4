"""Cell specs: YAML in, a checked frozen CellSpec out; every mistake names its field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from suite.train.cell import CellSpec, cell_from_dict, dump_cell, load_cell
from suite.errors import RaceError
from suite.paths import tasks

TRAIN = tasks() / "arith" / "data" / "train.jsonl"
TOKENIZER = tasks() / "arith" / "models" / "tokenizer"


def _cell(tmp_path: Path, **fields) -> Path:
    d = {"policy": str(TOKENIZER), "dataset": str(TRAIN), "reward": "sparse", "budget_flops": "3e12"}
    d.update(fields)
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(d), encoding="utf-8")
    return p


def test_loads_with_defaults_and_aliases(tmp_path):
    c = load_cell(_cell(tmp_path, K=4, mu=2, lr=1e-4, label="a100"))
    assert isinstance(c, CellSpec) and c.name == "c"
    assert c.budget_flops == 3 * 10**12 and isinstance(c.budget_flops, int)
    assert (c.group_size, c.num_iterations, c.learning_rate, c.label) == (4, 2, 1e-4, "a100")
    assert Path(c.policy).is_absolute() and Path(c.dataset) == TRAIN.resolve()
    s = c.settings()
    assert (s.group_size, s.prompts_per_step, s.num_iterations, s.max_completion_tokens) == (4, 8, 2, 48)
    assert c.adapter().kind == "lora" and c.adapter().rank == 16 and c.adapter().alpha == 32


def _aliases() -> dict[str, str]:
    from suite.record import schemas

    return schemas.load(schemas.CELL)["x-aliases"]


def test_one_name_per_field_aliases_only_in_what_people_write(tmp_path):
    """Every field has one name in the schemas: the GRPO knobs' short names (K, mu, lr) name no
    property of any schema (report, ledger record, race.json, findings, cell, grid, study, run
    spec; `budget` and `rank` are a report's section and its adapter's field); the suite's own
    cells, grids and studies use the canonical names; a cell written with aliases is written back
    (a run's cell.yaml) under the canonical ones."""
    import dataclasses
    import json

    from suite.paths import schemas as schema_dir

    aliases = _aliases()
    assert set(aliases.values()) <= {f.name for f in dataclasses.fields(CellSpec)}

    def properties(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("properties", "patternProperties") and isinstance(v, dict):
                    yield from v
                yield from properties(v)
        elif isinstance(node, list):
            for v in node:
                yield from properties(v)

    short = {a for a in aliases if a.lower() in ("k", "mu", "lr")}
    assert short == {"K", "k", "mu", "lr"}
    for f in sorted(schema_dir().glob("*.schema.json")):
        assert not set(properties(json.loads(f.read_text()))) & short, f.name
    for f in sorted(f for d in ("cells", "grids", "studies") for f in (tasks() / d).glob("*.yaml")):
        d = yaml.safe_load(f.read_text()) or {}
        knobs = [d, d.get("cell") or {}, *(d.get("allocations") or {}).values()]
        assert not [k for k in knobs for k in k if k in aliases], f
    written = tmp_path / "written.yaml"
    with pytest.raises(RaceError, match="budget and budget_flops name the same field \\(budget_flops\\)"):
        load_cell(_cell(tmp_path, budget="4e12"))                       # _cell gives budget_flops too
    dump_cell(load_cell(_cell(tmp_path, K=4, mu=2, lr=1e-4)), written)
    back = yaml.safe_load(written.read_text())
    assert (back["group_size"], back["num_iterations"], back["learning_rate"], back["budget_flops"]) == \
        (4, 2, 1e-4, 3 * 10**12) and not set(back) & set(aliases)


def test_rank_zero_is_full_fine_tuning(tmp_path):
    c = load_cell(_cell(tmp_path, lora_rank=0))
    assert c.adapter().kind == "full"


def test_relative_paths_resolve_against_the_cell_file(tmp_path):
    (tmp_path / "data.jsonl").write_text('{"question": "1 + 1?", "answer": "2"}\n')
    c = load_cell(_cell(tmp_path, dataset="data.jsonl"))
    assert c.dataset == str((tmp_path / "data.jsonl").resolve())


def test_round_trip_through_dump(tmp_path):
    c = load_cell(_cell(tmp_path, reward={"system": "prm", "aggregate": "last"}, K=4, engine={"micro_batch": 8}))
    out = dump_cell(c, tmp_path / "out" / "cell.yaml")
    again = load_cell(out)
    assert again.to_dict() == c.to_dict()  # the name travels inside the file
    assert again.reward.options == {"aggregate": "last"}


def test_unknown_reward_system_lists_the_known_ones(tmp_path):
    with pytest.raises(RaceError) as e:
        load_cell(_cell(tmp_path, reward="vibes"))
    assert "vibes" in e.value.message
    for known in ("sparse", "structured", "dense", "proxy_prm", "prm"):
        assert known in e.value.hint


def test_missing_model_path_is_named(tmp_path):
    with pytest.raises(RaceError) as e:
        load_cell(_cell(tmp_path, policy="models/no-such-policy"))
    assert "no-such-policy" in e.value.message and "policy" in e.value.message


def test_unknown_field_suggests_the_right_one(tmp_path):
    with pytest.raises(RaceError) as e:
        load_cell(_cell(tmp_path, prompts_per_stp=4))
    assert "prompts_per_stp" in e.value.message and "prompts_per_step" in e.value.hint


@pytest.mark.parametrize("field,value,needle", [
    ("budget_flops", "lots", "budget_flops"), ("K", 1, "group_size"), ("lora_rank", -1, "lora_rank"),
    ("attention", "sparse", "attention"), ("lora_targets", ["q_proj", "mlp"], "mlp"),
    ("engine", {"micro_batch": 3}, "micro_batch"), ("engine", {"warp_drive": True}, "warp_drive"),
])
def test_bad_values_name_the_field(tmp_path, field, value, needle):
    with pytest.raises(RaceError, match=needle):
        load_cell(_cell(tmp_path, **{field: value}))


def test_missing_required_field_and_file(tmp_path):
    with pytest.raises(RaceError, match="'reward'"):
        cell_from_dict({"policy": str(TOKENIZER), "dataset": str(TRAIN)})
    # A description of a run needs no budget or data; training does, and says which.
    described = cell_from_dict({"policy": str(TOKENIZER), "reward": "sparse"})
    with pytest.raises(RaceError, match="needs `dataset`"):
        described.needs_to_train()
    with pytest.raises(RaceError, match="needs `budget_flops`"):
        described.with_changes(dataset=str(TRAIN)).needs_to_train()
    with pytest.raises(RaceError, match="does not exist"):
        load_cell(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("policy: [unclosed\n")
    with pytest.raises(RaceError, match="not valid YAML"):
        load_cell(bad)


def test_micro_batch_sets_accumulation(tmp_path):
    c = load_cell(_cell(tmp_path, K=4, prompts_per_step=4, engine={"micro_batch": 4}))
    assert (c.generation_batch, c.micro_batch, c.gradient_accumulation_steps) == (16, 4, 4)
    assert c.settings().gradient_accumulation_steps == 4


def test_reference_cells_load():
    cells = sorted((tasks() / "cells").glob("*.yaml"))
    assert len(cells) >= 4
    loaded = [load_cell(p) for p in cells]
    systems = {c.reward.system for c in loaded}
    assert "sparse" in systems and "prm" in systems
    assert all(Path(c.policy).is_dir() for c in loaded)
