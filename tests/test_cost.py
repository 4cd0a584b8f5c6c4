"""Time and money before a run (issue 40, part 1): the hardware table with its sources, the
roofline floors, the efficiency fitted on the runs that state their time, `race plan` /
`race flops --hardware`, and the leave-one-out over the published runs that docs/cost.md shows
(regenerated here byte for byte by tools/cost.py)."""

from __future__ import annotations

import json

import pytest

from suite.accounting.hardware import accelerator, match, table
from suite.accounting.specs import spec_for
from suite.accounting.roofline import kv_bytes_per_pair, phase_floors, replica_gpus
from suite.cli import main
from suite.errors import RaceError


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_hardware_table_has_every_number_sourced_and_names_resolve():
    names = {a.name for a in table()}
    assert {"A100-SXM-40GB", "A100-SXM-80GB", "H100-SXM", "H100-PCIe", "H200", "B200", "GB300", "MI300X", "A40",
            "L40S"} <= names
    for a in table():
        assert set(a.sources) == {"peak_bf16_flops", "memory_bandwidth", "memory_bytes", "tdp_watts"}, a.name
        assert all(s["url"].startswith("https://") and len(s["document"]) > 10 for s in a.sources.values()), a.name
    # The datasheet figures the rest of the suite already used (verl's 989, the published runs' peaks).
    assert accelerator("H100-SXM").peak_flops == 989e12 and accelerator("h100 sxm").name == "H100-SXM"
    assert match("NVIDIA A100 80GB").bandwidth == 2.039e12 and match("NVIDIA GB300").tdp_watts == 1400
    with pytest.raises(RaceError, match="known: A100-SXM-40GB"):
        accelerator("TPU-v9")


def test_every_published_run_with_hours_names_an_accelerator_of_the_table():
    from tools.cost import published_reports

    for r in published_reports():
        if r.hardware is not None:
            acc = match(r.hardware.accelerator)
            assert acc is not None, r.hardware.accelerator
            assert r.hardware.peak_flops <= acc.peak_flops * 1.001, r.run_id   # ROOF-001 holds for them


def test_roofline_floors_are_the_stated_arithmetic():
    spec = spec_for("Qwen2.5-7B")            # 28 layers, 4 KV heads of 128: K and V in bf16
    assert kv_bytes_per_pair(spec) == 28 * 2 * 4 * 128 * 2
    h100 = accelerator("H100-SXM")
    assert replica_gpus(spec, h100, 16) == 1                     # 15 GB of weights in half of 80 GB
    assert replica_gpus(spec_for("Qwen2.5-32B"), h100, 16) == 2
    f = phase_floors({"rollout": 1e18, "update": 4e18, "reward": 0}, decode_iterations=1e5, kv_pairs=1e12,
                     spec=spec, acc=h100, gpus=16)
    assert f["update"].seconds == pytest.approx(4e18 / (16 * 989e12)) and f["update"].bound == "compute"
    mem = 1e5 * 2 * spec.params_total / 3.35e12 + 1e12 * kv_bytes_per_pair(spec) / (16 * 3.35e12)
    assert f["rollout"].memory_seconds == pytest.approx(mem) and f["rollout"].seconds == max(mem, 1e18 / (16 * 989e12))


def test_calibration_and_the_leave_one_out_page_are_regenerated_byte_for_byte():
    from tools import cost

    assert cost.build(check=True) == []        # tasks/cost/calibration.json and docs/cost.md's table
    published = cost.published_reports()
    rows = cost.loo_rows(published, cost.records())
    stated = [r for r in published if (r.doc.get("hardware") or {}).get("accelerator_hours")]
    assert len(rows) == len(stated) >= 11          # every published run that states its hours is predicted
    inside = sum(r["inside"] for r in rows)
    # the bar: at least 9 of 11 stated hours inside the predicted range (80%)
    assert inside >= 0.8 * len(rows), [(r["run"], r["stated"], r["low"], r["high"]) for r in rows if not r["inside"]]
    page = cost.PAGE.read_text()
    from suite.analysis.cost import median

    med = median([abs(r["error"]) for r in rows])
    assert f"**{inside} of {len(rows)}**" in page and f"**{med:.0%}**" in page


def test_predict_hours_leave_one_out_prints_stated_predicted_low_high(capsys):
    from tools import cost

    rep = next(r for r in cost.published_reports() if r.run_id == "simplerl-zoo-qwen2.5-7b")
    code, out, _ = run(capsys, "report", "--predict-hours", "--leave-one-out", str(rep.path), "--format", "json")
    assert code == 0
    d = json.loads(out)
    assert set(d) >= {"stated", "predicted", "low", "high"} and d["stated"] == 240.0
    assert d["low"] <= d["predicted"] <= d["high"]
    row = next(r for r in cost.loo_rows(cost.published_reports(), cost.records()) if r["run"] == rep.run_id)
    assert d["predicted"] == pytest.approx(row["predicted"]) and d["inside"] == row["inside"]
    # Without leave-one-out the run's own record is in the fit: a different prediction.
    code, out, _ = run(capsys, "report", "--predict-hours", str(rep.path), "--format", "json")
    assert json.loads(out)["predicted"] != pytest.approx(d["predicted"])


def test_plan_prints_hours_and_cost_per_phase_with_a_range(capsys):
    args = ["plan", "--budget", "1e20", "--model", "Qwen2.5-7B", "--lora-rank", "0", "--group-size", "8",
            "--prompts-per-step", "256", "--prompt-tokens", "300", "--completion-tokens", "2000",
            "--max-completion-tokens", "4096", "--hardware", "H100-SXM", "--gpus", "16", "--price-per-gpu-hour", "2.5"]
    code, out, _ = run(capsys, *args)
    assert code == 0
    assert "Qwen2.5-7B on 16 x H100-SXM" in out and "cost at 2.5 per accelerator-hour" in out
    for ph in ("rollout", "update", "reward"):
        assert any(line.startswith(ph) and "-" in line for line in out.splitlines()[-8:]), ph
    code, out, _ = run(capsys, *args, "--format", "json")
    c = json.loads(out)["rows"][0]["cost"]
    hours = c["accelerator_hours"]
    assert hours["low"] < hours["seconds"] < hours["high"]
    assert c["price"]["cost"]["seconds"] == pytest.approx(2.5 * hours["seconds"])
    assert sum(p["seconds"] for p in c["phases"].values()) * 16 / 3600 == pytest.approx(hours["seconds"])
    assert c["phases"]["rollout"]["bound"] == "memory" and c["phases"]["update"]["bound"] == "compute"
    from tools import cost

    dense = [r for r in cost.records() if r.regime == "dense"]
    assert c["fit"]["regime"] == "dense" and c["fit"]["n"] == len(dense) >= 11
    # Twice the accelerators: the compute-bound update halves; the memory-bound decode does not (each
    # replica still reads its weights once per decode iteration): the roofline, not a constant rate.
    code, out, _ = run(capsys, *[a if a != "16" else "32" for a in args], "--format", "json")
    c2 = json.loads(out)["rows"][0]["cost"]["phases"]
    assert c2["update"]["seconds"] == pytest.approx(c["phases"]["update"]["seconds"] / 2)
    assert c2["rollout"]["seconds"] > 0.75 * c["phases"]["rollout"]["seconds"]


def test_flops_takes_the_same_flags_and_bad_ones_are_one_line(capsys):
    base = ["flops", "--model", "Qwen3-30B-A3B", "--steps", "100", "--group-size", "8", "--prompts-per-step", "64"]
    code, out, _ = run(capsys, *base, "--hardware", "H200", "--gpus", "8")
    assert code == 0 and "Qwen3-30B-A3B on 8 x H200" in out and "all models" in out   # MoE: too few MoE runs
    code, _, err = run(capsys, *base, "--gpus", "8")
    assert code == 2 and "--gpus and --price-per-gpu-hour need --hardware" in err and "Traceback" not in err
    code, _, err = run(capsys, *base, "--hardware", "TPU-v9", "--gpus", "8")
    assert code == 2 and "unknown accelerator 'TPU-v9'" in err
    code, _, err = run(capsys, *base, "--hardware", "H200")
    assert code == 2 and "--hardware needs --gpus N" in err


def test_the_plan_example_of_docs_cost_runs(capsys):
    import shlex

    from tools.cost import PAGE

    text = PAGE.read_text()
    block = text[text.index("$ race plan"):]
    block = block[:block.index("```")].replace("\\\n", " ")
    argv = shlex.split(block)[2:]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "on 16 x H100-SXM" in out and "cost at 2.5 per accelerator-hour" in out
