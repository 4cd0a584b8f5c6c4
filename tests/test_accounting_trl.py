"""The 'trl-cpu' engine profile against a real TRL 1.16 GRPOTrainer run: FlopCounterMode over
trainer.train() (generation, old-policy and reference forwards, training passes, optimizer)
equals work_from_lengths + phase_flops from the lengths TRL handed to the reward function."""

import os
import tempfile

import pytest

from suite.accounting import PROJECTIONS, Adapter, GRPOSettings, phase_flops, work_from_lengths
from suite.accounting.modelspec import spec_from_config

torch = pytest.importorskip("torch")
torch.set_num_threads(1)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

WORDS = ["<pad>", "<eos>"] + [f"w{i}" for i in range(10)]  # a tiny vocabulary: EOS is likely, lengths vary


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="w0")


def _run(adapter: Adapter, k: int, b: int, mu: int, beta: float, gc: bool, max_c: int):
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from suite.accounting.reference import build_model, flop_counter

    tok = _tokenizer()
    spec = spec_from_config(dict(model_type="qwen2", hidden_size=32, intermediate_size=64, num_attention_heads=4,
                                 num_key_value_heads=2, num_hidden_layers=2, vocab_size=len(WORDS),
                                 tie_word_embeddings=True), "tiny")
    model = build_model(spec, "cpu")
    seen = []

    def reward(completions, completion_ids, prompts, **kw):
        seen.append(([len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts],
                     [len(c) for c in completion_ids]))
        return [float(len(c)) for c in completion_ids]

    ds = Dataset.from_dict({"prompt": [" ".join(f"w{(i * j) % 10}" for j in range(3 + i % 5)) for i in range(16)]})
    args = GRPOConfig(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=k * b, num_generations=k,
                      max_completion_length=max_c, num_iterations=mu, beta=beta, max_steps=mu, use_cpu=True, bf16=False,
                      report_to=[], save_strategy="no", logging_steps=1, learning_rate=1e-3, seed=0,
                      gradient_checkpointing=gc, disable_tqdm=True)
    peft_config = None if adapter.kind == "full" else LoraConfig(
        r=adapter.rank, lora_alpha=adapter.alpha, target_modules=list(adapter.targets), lora_dropout=0.0)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=ds, processing_class=tok,
                          peft_config=peft_config)
    fc = flop_counter()
    with fc:
        trainer.train()
    assert len(seen) == 1, "one generation batch serves the mu optimizer steps"
    settings = GRPOSettings(group_size=k, prompts_per_step=b, num_iterations=mu, beta=beta, max_completion_tokens=max_c,
                            gradient_checkpointing=gc)
    prompts, completions = seen[0]
    return fc.get_total_flops(), spec, settings, prompts, completions


@pytest.mark.parametrize("adapter,k,b,mu,beta,gc", [
    (Adapter(kind="lora", rank=4, alpha=8.0, targets=PROJECTIONS), 2, 4, 2, 0.1, True),
    (Adapter(kind="full"), 4, 2, 1, 0.0, False),
], ids=["lora-mu2-beta-gc", "full-ft"])
def test_grpo_trainer_flops_equal_the_trl_cpu_profile(adapter, k, b, mu, beta, gc):
    measured, spec, settings, prompts, completions = _run(adapter, k, b, mu, beta, gc, max_c=12)
    assert len(set(completions)) > 1, "lengths should vary so that padding is exercised"
    work = work_from_lengths(prompts, completions, settings, "trl-cpu")
    full = sum(phase_flops(work, spec, adapter, settings, engine="trl-cpu", attention="full").values())
    assert measured == full
    causal = sum(phase_flops(work, spec, adapter, settings, engine="trl-cpu", attention="causal").values())
    assert causal < full
    # the per-step split a ledger writes adds up to the same count
    steps = [work_from_lengths(prompts, completions, settings, "trl-cpu", iterations=1, generation=i == 0)
             for i in range(mu)]
    assert sum(sum(phase_flops(w, spec, adapter, settings, engine="trl-cpu", attention="full").values())
               for w in steps) == measured
