"""benchmarks/gpu/phase_check.py: everything but the GPU, on a tiny model on the CPU.

The script's ledger FLOPs (suite.accounting) must equal torch's FlopCounterMode count of the
same HF generate, TRL fused-head LoRA update and PRM-shaped forward; without CUDA it must say
so and exit 2 rather than fall back silently.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "phase_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("phase_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cpu_tiny_run_matches_flopcounter_per_phase(tmp_path, capsys):
    out = tmp_path / "phase.json"
    rc = _load().main(["--device", "cpu", "--tiny", "--prompts", "2", "--k", "2", "--prompt-len", "8",
                       "--completion-len", "6", "--rank", "4", "--peak-tflops", "1", "--json", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["engine_profile"] == "trl-cpu" and set(doc["phases"]) == {"rollout", "update", "reward"}
    for phase, r in doc["phases"].items():
        assert r["flopcounter_flops"] > 0, phase
        assert r["ledger_flops_full"] == r["flopcounter_flops"], phase  # exact: same passes, same convention
        assert r["mfu"] == pytest.approx(r["achieved_flops_per_s"] / 1e12)
    assert doc["phases"]["rollout"]["tokens"] == 4 * 6 and doc["phases"]["update"]["tokens"] == 4 * 14
    out_text = capsys.readouterr().out
    assert "ledger(full)/FlopCounter" in out_text
    # The energy line: here no NVIDIA driver, so one line saying so and why (issue 40), no joules.
    assert [x for x in out_text.splitlines() if x.startswith("energy")] == \
        [f"energy: not measured: {doc['energy']['reason']}"]
    assert doc["energy"]["measured"] is False and all(r["joules"] is None for r in doc["phases"].values())


def test_without_cuda_it_exits_with_a_message(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the no-GPU message cannot be exercised")
    assert _load().main([]) == 2
    assert "no CUDA device" in capsys.readouterr().err
