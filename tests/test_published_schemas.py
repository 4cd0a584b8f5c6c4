"""The schemas are published artefacts: `race schema` prints or writes them exactly as shipped,
each keeps a stable `$id` (its major version inside) and declares a version, and docs/report.md's
field table is generated from the report schema, so the page cannot drift from the contract."""

from __future__ import annotations

import json

import pytest

from suite.cli import main
from suite.paths import home, schemas
from suite.record import published
from suite.record import schemas as record_schemas
from suite.record.docs import FIELDS_BEGIN, FIELDS_END, field_rows, fields_markdown

STABLE_IDS = {
    "report": "https://race-suite.org/schemas/report/v1.json",
    "ledger": "https://race-suite.org/schemas/ledger-record/v1.json",
    "race": "https://race-suite.org/schemas/race/v1.json",
}
"""Published $ids. Changing one breaks every document and tool that names it: a new major
version gets a new $id (and a new file); it never replaces one."""


def test_ids_are_stable_and_versions_declared():
    assert {n: published.schema_id(n) for n in published.PUBLISHED} == STABLE_IDS
    for name in published.PUBLISHED:
        major = published.version(name).split(".")[0]
        assert published.schema_id(name).endswith(f"/v{major}.json"), name
        assert published.PUBLISHED[name].endswith(f"-v{major}.schema.json"), name
    assert record_schemas.REPORT_VERSION in record_schemas.SUPPORTED_VERSIONS
    assert published.version("report") == max(record_schemas.SUPPORTED_VERSIONS,
                                               key=lambda v: tuple(map(int, v.split("."))))
    assert published.version("race") == record_schemas.RACE_VERSION


def test_race_schema_lists_prints_and_writes(tmp_path, capsys):
    assert main(["schema"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] for line in listing] == [[n, published.version(n), STABLE_IDS[n]] for n in STABLE_IDS]
    for name, file in published.PUBLISHED.items():
        assert main(["schema", name]) == 0
        printed = capsys.readouterr().out
        assert printed == (schemas() / file).read_text(encoding="utf-8")
        assert json.loads(printed)["$id"] == STABLE_IDS[name]
    out = tmp_path / "deep" / "report.schema.json"
    assert main(["schema", "report", "--out", str(out)]) == 0
    assert out.read_bytes() == (schemas() / published.PUBLISHED["report"]).read_bytes()
    assert "wrote" in capsys.readouterr().err
    assert main(["schema", "--out", str(tmp_path / "x.json")]) == 2
    assert "--out needs a schema name" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["schema", "cell"])        # not published: argparse names the choices


def test_report_field_table_is_generated_from_the_schema():
    text = (home() / "docs" / "report.md").read_text(encoding="utf-8")
    block = text.split(FIELDS_BEGIN, 1)[1].split(FIELDS_END, 1)[0]
    assert block.strip() == fields_markdown().strip(), "run: .venv/bin/python -m suite.record.docs"
    schema = record_schemas.load(record_schemas.REPORT)
    rows = {path: (kind, required) for path, kind, required, _ in field_rows(schema)}
    for key in schema["properties"]:               # every section of the report, new ones too
        assert f"| `{key}` |" in block
        assert rows[key][1] == (key in schema["required"])
    # nested fields, list items and a shared definition spelled out once
    assert rows["totals.flops.update"] == ("integer", True)
    assert rows["evaluations[].n"][1] is True
    assert rows["accounting.attention"][0] == '`"causal"` / `"full"`'
    assert "Fields as `policy`" in dict((p, d) for p, _, _, d in field_rows(schema))["reward.model"]
