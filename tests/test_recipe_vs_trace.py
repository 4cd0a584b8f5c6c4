"""Every recipe family against a trace of its own Hugging Face code (issue 39): the analytic recipe
(`suite.accounting.costs`) and the traced path (`suite.accounting.traced`, FlopCounterMode on the
meta device, fitted per layer) price the same config to the same FLOPs -- the rollout (HF generate
through the LoRA, `trl`), a full and a LoRA update (TRL's micro-batch with checkpointing,
`trl-cpu`) and a plain full update (`generic`) -- at lengths that cross a 64-token chunk and every
sliding window (prompts 70 and 6, completions 9 and 3). Where they disagreed the trace was wrong
twice and the recipe never: a first layer whose input needs no gradient (tests/test_held_out_shapes.py)
and a decode step fitted past a 4-key window (Gemma 2).

One difference is a convention, not a disagreement: a profile that does not train through peft
(`generic`: `peft_training` false) prices an MoE expert LoRA per routed token, while a trace always
measures peft's code, which folds the expert LoRA into the expert weights once per call; the LoRA
update is compared under the profile that trains through peft.

The quick lane traces Gemma 2 (the window bug) and Qwen3.5 (chunks); the others run in the slow lane."""

from __future__ import annotations

import pytest

from suite.accounting import Adapter, GRPOSettings, phase_flops, work_from_lengths
from suite.accounting.modelspec import FAMILIES, spec_from_config

pytest.importorskip("torch")
from test_families import HELD_OUT, OWN, config  # noqa: E402

PROMPTS, COMPLETIONS = [70, 6], [9, 3]
FAST = ("gemma2", "qwen3_5_text")
PASSES = (("trl", "lora", True, "rollout"), ("trl-cpu", "full", True, "update"), ("trl-cpu", "lora", True, "update"),
          ("generic", "full", False, "update"))


def _priced(spec, engine: str, kind: str, gc: bool, phase: str) -> int:
    adapter = Adapter(kind="full") if kind == "full" else Adapter.from_rank(8, targets=("all-linear",))
    s = GRPOSettings(group_size=1, prompts_per_step=len(PROMPTS), gradient_checkpointing=gc,
                     max_completion_tokens=max(COMPLETIONS))
    work = work_from_lengths(PROMPTS, COMPLETIONS, s, engine, iterations=1, policy=spec)
    return phase_flops(work, spec, adapter, s, engine=engine, attention="full")[phase]


# CI's slow lane: the hybrid linear-attention, MLA and sliding-window recipes; RACE_LONG=1 every family.
CI = ("qwen3_next", "qwen3_5_moe_text", "deepseek_v3", "gemma3_text")


@pytest.mark.parametrize("model_type", [pytest.param(m, marks=() if m in FAST else pytest.mark.slow if m in CI
                                                     else (pytest.mark.slow, pytest.mark.long))
                                        for m in sorted(FAMILIES)])
def test_recipe_equals_a_trace_of_its_own_code(model_type):
    from suite.accounting.traced import PATH_TRACED, traced_spec

    cfg = config(model_type, HELD_OUT.get(model_type, OWN.get(model_type, {})))
    recipe = spec_from_config(cfg, model_type)
    traced = traced_spec({**recipe.to_hf_config(), **cfg}, model_type)
    assert traced.priced_by == PATH_TRACED and traced.params_total == recipe.params_total
    got = {p: (_priced(recipe, *p), _priced(traced, *p)) for p in PASSES}
    assert {p: r for p, (r, t) in got.items() if r != t} == {}, got
