"""Evaluation cost: one adapter on one 250-problem embedded target with all three metrics
(pass@1, process judge, native reward), as a ratio to generating the same 250 greedy completions
with plain transformers + peft in the same run (benchmarks/ratio.py).

The adapter is a rank-16 LoRA on all seven projections of the embedded policy-m, initialised
as peft does (B = 0): it runs every LoRA branch, and the completions are the shipped policy's
own (so generation lengths are realistic, not the max-length babble of random weights).
Model loading is inside the timed call: this is what `race eval RUN_DIR --targets
arith-easy-250 --threads 1` costs.
"""

from __future__ import annotations

import pytest

from benchmarks.ratio import Limit, check, interleaved

#: Measured 2026-12-01 (2 cores, load 2-2.8, CPU time): 1.9x (7.3 s against 3.9 s) and 2.5x (8.1 s against 3.2 s).
EVAL = Limit(5.0, "lm-eval's generation of the same completions (the reference generates them with plain "
                  "transformers + peft, batches of 64, 128 new tokens), then the judge PRM and the native "
                  "reward over all 250 and the logs written, lm-eval's first-call imports included: 1.9-2.5x")


def plain_generation(base, folder, batch_size: int = 64, max_new_tokens: int = 128) -> int:
    """The reference: load base + adapter, one greedy completion per problem of arith-easy-250."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from suite.evaluate.targets import target_dataset

    tok = AutoTokenizer.from_pretrained(base)
    tok.padding_side = "left"
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), folder).eval()
    docs = list(target_dataset("arith-easy-250", {})["test"])
    texts = [tok.apply_chat_template([{"role": "user", "content": d["question"]}], tokenize=False,
                                     add_generation_prompt=True) for d in docs]
    n = 0
    with torch.no_grad():
        for i in range(0, len(texts), batch_size):
            enc = tok(texts[i:i + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id)
            n += out.shape[0]
    return n


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from suite.evaluate.runs import _embedded_model

    torch.manual_seed(0)
    base = _embedded_model("policy-m")
    model = AutoModelForCausalLM.from_pretrained(base)
    folder = tmp_path_factory.mktemp("bench") / "adapter"
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=targets)).save_pretrained(folder)
    return base, folder


def test_one_adapter_one_embedded_target_all_metrics(benchmark, adapter):
    import torch

    from suite.evaluate import harness as ev

    # One thread: these models are tiny, and two threads on a 2-core machine shared with any
    # other process make torch's matmuls spin and run 10x slower (measured).
    torch.set_num_threads(1)
    base, folder = adapter
    config = ev.EvalConfig(model=str(base), adapter=str(folder), targets=("arith-easy-250",),
                           native_reward="sparse", batch_size=64, out_dir=str(folder.parent / "eval"))

    timing = interleaved(benchmark, lambda: ev.evaluate(config), lambda: plain_generation(base, folder), rounds=1)
    rows = timing.result
    assert {r["metric"] for r in rows} == set(ev.METRICS) and all(r["n"] == 250 for r in rows)
    check(benchmark, timing, EVAL, **{r["metric"]: r["value"] for r in rows})
