"""One generic registry behind every registry of the suite: duplicate names are refused, lazy
registries load their modules once; and the spec files' schemas are the contract their frozen
dataclasses follow."""

from __future__ import annotations

import dataclasses

import pytest

from suite.registry import Registry


def test_duplicate_names_are_refused():
    r: Registry[int] = Registry("thing")
    r.add("a", 1)

    @r.register("b")
    def b():
        return 2

    assert dict(r) == {"a": 1, "b": b}
    with pytest.raises(ValueError, match="duplicate thing 'a'"):
        r.add("a", 3)
    assert r["a"] == 1


def test_a_lazy_registry_loads_once_at_first_lookup():
    calls = []
    r: Registry[str] = Registry("thing", loader=lambda: (calls.append(1), r.add("x", "y")))
    assert calls == []
    assert "x" in r and r["x"] == "y" and list(r) == ["x"] and len(r) == 1
    assert calls == [1]


@pytest.mark.parametrize("where, name, existing", [
    ("suite.cli.main", "COMMANDS", "flops"),
    ("suite.validate.registry", "RULES", "ARITH-001"),
    ("suite.accounting.engines", "ENGINES", "trl"),
    ("suite.train.rewards", "REWARD_SYSTEMS", "sparse"),
    ("suite.pipeline.executors", "EXECUTORS", "local"),
    ("suite.analysis.fits", "MODELS", "linear"),
    ("suite.cli.commands.report", "FORMATS", "json"),
    ("suite.analysis.findings", "CLAIMS", "a"),
])
def test_every_registry_is_one_and_refuses_a_second_entry(where, name, existing):
    import importlib

    reg = getattr(importlib.import_module(where), name)
    assert isinstance(reg, Registry) and existing in reg
    with pytest.raises(ValueError, match="duplicate"):
        reg.add(existing, reg[existing])


def test_spec_dataclasses_follow_their_schemas():
    """Every field a cell file, a grid file or a run spec may have is a field of its frozen
    dataclass, and the other way round (apart from where the loaded file came from); a study's
    analysis settings are the findings' Settings."""
    from suite.analysis.grid import Grid
    from suite.record import schemas
    from suite.record.runspec import RunSpec
    from suite.train.cell import CellSpec

    def props(name):
        return set(schemas.load(name)["properties"])

    assert props(schemas.CELL) == {f.name for f in dataclasses.fields(CellSpec)} - {"source"}
    grid_fields = {f.name for f in dataclasses.fields(Grid)} - {"base", "source", "evaluation"}
    assert props(schemas.GRID) == grid_fields | {"eval"}
    spec_fields = {f.name for f in dataclasses.fields(RunSpec)} - {"engine_profile", "attention"}
    assert props(schemas.RUN_SPEC) == spec_fields | {"accounting"}
    from suite.analysis.findings import Settings

    analysis = set(schemas.load(schemas.STUDY)["properties"]["analysis"]["properties"])
    assert analysis == {f.name for f in dataclasses.fields(Settings)} - {"pilot", "validation"}  # those: `race:`


def test_a_lazy_registry_may_name_the_module_that_fills_it():
    import sys

    r: Registry[int] = Registry("thing", loader="suite.digest")
    sys.modules.pop("suite.digest", None)
    assert len(r) == 0 and "suite.digest" in sys.modules


def test_a_plugin_that_fails_to_load_leaves_no_partial_registry(tmp_path, monkeypatch):
    """All or nothing (issue 39): a real entry point (a dist-info folder on sys.path, read by
    importlib.metadata) whose module registers one item and then fails. The lookup is a RaceError
    naming it, the item it registered is taken back, the suite's own items stay, and the registry
    is not marked loaded: the next lookup fails the same way instead of answering from a partial
    registry."""
    import sys

    from suite.errors import RaceError

    group = "race.test-all-or-nothing"
    dist = tmp_path / "halfway_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: halfway-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{group}]\nhalfway = halfway_plugin\n")
    (tmp_path / "halfway_plugin.py").write_text(
        "from test_registry_target import R\nR.add('from-plugin', 2)\nraise ImportError('its dependency is missing')\n")
    target = type(sys)("test_registry_target")
    target.R = Registry("thing", loader=lambda: target.R.add("own", 1), group=group)
    monkeypatch.setitem(sys.modules, "test_registry_target", target)
    monkeypatch.syspath_prepend(str(tmp_path))
    for _ in range(2):
        with pytest.raises(RaceError, match="plugin halfway = halfway_plugin .* failed to load: ImportError"):
            target.R["own"]
        assert dict(target.R._items) == {"own": 1} and not target.R._loaded
