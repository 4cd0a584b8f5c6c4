"""The shipped embedded tokenizer and tiny policies, and the build's determinism."""

import json

import pytest

from suite.train import arith
from tools import embedded
from suite.train.datasets import load_split

POLICY_PARAMS = {"policy-s": (0.15e6, 0.3e6), "policy-m": (0.8e6, 1.3e6), "policy-l": (3e6, 5e6)}


@pytest.fixture(scope="module")
def tokenizer():
    return embedded.load_tokenizer()


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    import torch

    torch.set_num_threads(1)


def test_tokenizer_is_qwen2_and_round_trips_exactly(tokenizer):
    assert type(tokenizer).__name__ == "Qwen2Tokenizer"
    assert len(tokenizer) <= 512
    samples = [p.question + "\n" + p.solution for p in arith.generate(20, 1, "hard")]
    samples += ["  two  spaces,\ttab\n\n\nnewlines ", "unicode: é ß 你好 ∑", "x  = 3 *  4"]
    for text in samples:
        assert tokenizer.decode(tokenizer.encode(text)) == text
    # Digits are split one by one (Qwen2's pre-tokenizer), so arithmetic is learnable.
    assert tokenizer.convert_ids_to_tokens(tokenizer.encode("123")) == ["1", "2", "3"]


def test_special_tokens_and_chat_template(tokenizer):
    for tok in embedded.SPECIAL_TOKENS:
        assert len(tokenizer.encode(tok)) == 1
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    text = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize("name", list(POLICY_PARAMS))
def test_policy_shape_and_files(name):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = embedded.models_dir() / name
    model = AutoModelForCausalLM.from_pretrained(folder)
    cfg = model.config
    assert cfg.model_type == "qwen2" and not cfg.tie_word_embeddings
    assert cfg.hidden_size // cfg.num_attention_heads >= 32
    n = sum(p.numel() for p in model.parameters())
    lo, hi = POLICY_PARAMS[name]
    assert lo <= n <= hi
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()
    assert next(model.parameters()).dtype.is_floating_point and str(next(model.parameters()).dtype) == "torch.float32"
    from safetensors import safe_open

    with safe_open(folder / "model.safetensors", "pt") as f:
        assert {str(f.get_tensor(k).dtype) for k in f.keys()} == {"torch.float16"}
    assert all(p.stat().st_size < 10 * 2**20 for p in folder.iterdir())
    assert type(AutoTokenizer.from_pretrained(folder)).__name__ == "Qwen2Tokenizer"
    build = json.loads((folder / "build.json").read_text())
    assert build["parameters"] == n
    assert 0.25 <= build["greedy_accuracy_heldout100"] <= 0.55


def test_policy_s_greedy_accuracy_reproduces_build_record(tokenizer):
    # The shipped float16 weights give the accuracy the build measured (within rounding noise).
    model = embedded.load_policy("policy-s").eval()
    build = json.loads((embedded.models_dir() / "policy-s" / "build.json").read_text())
    acc = embedded.greedy_accuracy(model, tokenizer, arith.generate(100, embedded.HELDOUT_SEED, "train"))
    assert abs(acc - build["greedy_accuracy_heldout100"]) <= 0.06


def test_easy_split_is_easier_than_hard_for_policy_s(tokenizer):
    model = embedded.load_policy("policy-s").eval()

    def acc(split):
        rows = load_split(split, limit=60)
        outs = embedded.greedy_completions(model, tokenizer, [r["question"] for r in rows])
        from suite.answers import extract_boxed

        return sum(extract_boxed(o) == r["answer"] for o, r in zip(outs, rows)) / len(rows)

    assert acc("arith-easy-250") > acc("arith-hard-250")


def test_data_and_tokenizer_build_is_deterministic(tmp_path, monkeypatch):
    (tmp_path / "schemas").mkdir()
    monkeypatch.setenv("RACE_HOME", str(tmp_path))
    embedded.build(["data", "tokenizer"], threads=1)
    monkeypatch.delenv("RACE_HOME")
    real = embedded.task_dir()
    assert real != tmp_path / "tasks" / "arith"
    for rel in ["data/train.jsonl", "data/arith-easy-250.jsonl", "data/arith-hard-250.jsonl", "data/arith-easy-2000.jsonl",
                "models/tokenizer/tokenizer.json", "models/tokenizer/tokenizer_config.json"]:
        assert (tmp_path / "tasks" / "arith" / rel).read_bytes() == (real / rel).read_bytes(), rel
