"""A random-init tiny Qwen2 policy with the shipped arithmetic tokenizer, built in a test's tmp
folder: exact FLOP and crash tests need real TRL steps, not a trained model."""

from __future__ import annotations

import shutil
from pathlib import Path

from suite.paths import tasks

TOKENIZER = tasks() / "arith" / "models" / "tokenizer"
TRAIN = tasks() / "arith" / "data" / "train.jsonl"


def make_policy(folder: Path, hidden: int = 64, layers: int = 2, heads: int = 2, kv_heads: int = 1,
                intermediate: int = 128, seed: int = 0,
                eos_logit: float = 4.0) -> Path:
    """Save a random Qwen2ForCausalLM (head_dim 32, untied) and the tokenizer into `folder`."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for f in TOKENIZER.iterdir():
        shutil.copy(f, folder / f.name)
    tok = AutoTokenizer.from_pretrained(folder)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, intermediate_size=intermediate, max_position_embeddings=256,
                      tie_word_embeddings=False, bos_token_id=None,
                      eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"), pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    with torch.no_grad():  # make EOS likely (~8% a token) so completion lengths differ: padding matters
        h = model.model(torch.randint(0, len(tok), (4, 32))).last_hidden_state.reshape(-1, hidden)
        mu = h.mean(0)
        model.lm_head.weight[cfg.eos_token_id] = mu * (eos_logit / mu.dot(mu))
    model.save_pretrained(folder)
    return folder


def write_cell(path: Path, policy: Path, **fields) -> Path:
    """A cell YAML over the shipped training data; `fields` override the small defaults."""
    import yaml

    d = {"policy": str(policy), "dataset": str(TRAIN), "reward": "sparse", "budget_flops": 1e12,
         "K": 2, "prompts_per_step": 2, "max_completion_tokens": 12, "lora_rank": 4,
         "engine": {"torch_threads": 1}}
    d.update(fields)
    path.write_text(yaml.safe_dump(d), encoding="utf-8")
    return path
