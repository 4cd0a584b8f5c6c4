"""docs/accounting.md's generated table is current: every analytic number in it is what the
accounting computes today (the measured columns are checked by tests/test_accounting.py)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("accounting_table", ROOT / "scripts" / "accounting_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_table_matches_the_accounting():
    gen = _generator()
    doc = (ROOT / "docs" / "accounting.md").read_text()
    block = doc.split(gen.BEGIN, 1)[1].split(gen.END, 1)[0]
    rows = gen.rows(measure=False)
    assert len(rows) == 6
    for r in rows:
        line = next(x for x in block.splitlines() if x.startswith(f"| {r['model']} | {r['rank']} |"))
        for key in ("ours_gc", "ours_nogc", "verl", "6nt"):
            assert f"{r[key]:.4e}" in line, (r["model"], r["rank"], key)
        # measured (GC on/off) was generated from the same step and equals trl-cpu/full
        assert f"{r['ours_full_gc']:.4e}" in line and f"{r['ours_full_nogc']:.4e}" in line
    assert "equal to it to the FLOP in every row: yes." in block


def test_generated_family_table_matches_the_accounting():
    from suite.accounting.specs import spec_for

    gen = _generator()
    doc = (ROOT / "docs" / "accounting.md").read_text()
    block = doc.split(gen.FAMILY_BEGIN, 1)[1].split(gen.END, 1)[0]
    rows = gen.family_rows(measure=False)
    assert {r["model"] for r in rows} == set(gen.FAMILY_MODELS)
    for r in rows:
        line = next(x for x in block.splitlines() if x.startswith(f"| {r['model']} | {r['type']} | {r['rank']} |"))
        for key in ("ours", "6nt", "6nt_active"):
            assert f"{r[key]:.4e}" in line, (r["model"], r["rank"], key)
        assert ("no formula" if r["verl"] is None else f"{r['verl']:.4e}") in line
        linear = "linear" in {spec_for(r["model"]).mixer_of(i) for i in range(spec_for(r["model"]).num_layers)}
        assert linear or f"{r['ours_full']:.4e}" in line  # the measured column, equal to trl-cpu/full
    per_token, active, total = gen.moe_sanity()
    assert f"{per_token:.4e} FLOPs per trained token = {per_token / active:.3f} x 6·N_active" in block
    assert "equal to the FLOP in every measured row: yes." in block
