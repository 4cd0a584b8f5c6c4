"""Process reward models with the interface of Qwen2.5-Math-PRM-7B.

A Qwen2 backbone (no LM head) and a score head Linear(h, h) -> ReLU -> Linear(h, 2), with the
real model's state-dict names (`model.*`, `score.0.*`, `score.2.*`). The assistant turn holds
the steps, each followed by the step token; a step's reward is softmax(logits)[1] at its step
token. The same class loads the tiny PRM shipped in tasks/arith/models/prm and the real
Qwen2.5-Math-PRM-7B folder on a GPU machine (config from config.json, weights from its
safetensors shards).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import jsonstrict
from ..errors import RaceError

#: The step token of Qwen2.5-Math-PRM (the tiny PRM uses the same one).
STEP_TOKEN = "<extra_0>"
#: System prompt Qwen2.5-Math-PRM's model card uses when scoring.
SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True)
class PRMScore:
    """Scores of one (question, steps) pair."""

    step_rewards: list[float]  #: P(step correct) at each step token, one per step
    tokens: int  #: tokens the PRM ran its forward pass over (to charge its FLOPs)


def build_input(tokenizer, question: str, steps: list[str]) -> str:
    """The text a PRM scores: chat template with the system prompt, the question as the user
    turn and the steps joined by the step token (one after every step) as the assistant turn."""
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": question},
        {"role": "assistant", "content": STEP_TOKEN.join(steps) + STEP_TOKEN},
    ]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)


def _head(hidden: int, bias: bool):
    import torch.nn as nn

    return nn.Sequential(nn.Linear(hidden, hidden, bias=bias), nn.ReLU(), nn.Linear(hidden, 2, bias=bias))


def _make_class():
    import torch
    import torch.nn as nn
    from transformers import Qwen2Model

    class ProcessRewardModel(nn.Module):
        """Qwen2 backbone + 2-class score head (state-dict names as in Qwen2.5-Math-PRM-7B)."""

        def __init__(self, config, head_bias: bool = True):
            super().__init__()
            self.config = config
            self.model = Qwen2Model(config)
            self.score = _head(config.hidden_size, head_bias)

        def forward(self, input_ids, attention_mask=None):
            """Logits (batch, seq, 2) at every position."""
            h = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return self.score(h)

        def step_probs(self, input_ids, attention_mask, step_id: int) -> list[list[float]]:
            """P(class 1) at each step token, per row."""
            probs = torch.softmax(self(input_ids, attention_mask).float(), dim=-1)[..., 1]
            mask = (input_ids == step_id) & attention_mask.bool()
            return [probs[i][mask[i]].tolist() for i in range(input_ids.shape[0])]

    return ProcessRewardModel


_CLASS = None


def model_class():
    """The ProcessRewardModel class (built lazily so importing this module stays torch-free)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _make_class()
    return _CLASS


def _state_dict(folder: Path) -> dict:
    from safetensors.torch import load_file

    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(jsonstrict.read(index)["weight_map"].values()))
    else:
        shards = ["model.safetensors"]
    state = {}
    for shard in shards:
        if not (folder / shard).is_file():
            raise RaceError(f"PRM weights {folder / shard} not found", "point --prm-path at a complete model folder")
        state.update(load_file(folder / shard))
    return state


class PRM:
    """A loaded PRM with its tokenizer: scores (question, steps) pairs."""

    def __init__(self, model, tokenizer, path: Path):
        self.model = model
        self.tokenizer = tokenizer
        self.path = path
        self.step_id = tokenizer.convert_tokens_to_ids(STEP_TOKEN)

    @classmethod
    def load(cls, path: str | Path, device: str | None = None, dtype=None) -> "PRM":
        """Load a PRM folder (config.json, safetensors, tokenizer). dtype defaults to float32
        on CPU and bfloat16 on GPU."""
        import torch
        from transformers import AutoTokenizer, Qwen2Config

        folder = Path(path)
        if not (folder / "config.json").is_file():
            raise RaceError(f"PRM model path {folder} has no config.json",
                            "pass a folder like tasks/arith/models/prm or Qwen2.5-Math-PRM-7B's")
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = dtype or (torch.bfloat16 if device.startswith("cuda") else torch.float32)
        config = Qwen2Config.from_pretrained(folder)
        state = _state_dict(folder)
        state = {k: v for k, v in state.items() if not k.startswith("lm_head")}
        with torch.device("meta"):
            model = model_class()(config, head_bias="score.0.bias" in state)
        model.load_state_dict(state, strict=True, assign=True)
        # Rotary inverse frequencies are buffers not stored in the checkpoint: recompute them.
        model.model.rotary_emb = type(model.model.rotary_emb)(config)
        model = model.to(device=device, dtype=dtype).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)
        if tokenizer.convert_tokens_to_ids(STEP_TOKEN) in (None, tokenizer.unk_token_id):
            raise RaceError(f"tokenizer in {folder} has no step token {STEP_TOKEN}", "is this a Qwen2.5-Math-PRM folder?")
        return cls(model, tokenizer, folder)

    @property
    def n_params(self) -> int:
        """Parameters in the backbone and score head."""
        return sum(p.numel() for p in self.model.parameters())

    def score(self, questions: list[str], steps: list[list[str]], batch_size: int = 32) -> list[PRMScore]:
        """Per-step rewards for each (question, steps) pair, and the tokens scored."""
        import torch

        texts = [build_input(self.tokenizer, q, s) for q, s in zip(questions, steps)]
        out: list[PRMScore] = []
        device = next(self.model.parameters()).device
        self.tokenizer.padding_side = "right"
        for i in range(0, len(texts), batch_size):
            enc = self.tokenizer(texts[i:i + batch_size], return_tensors="pt", padding=True)
            ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)
            with torch.inference_mode():
                probs = self.model.step_probs(ids, mask, self.step_id)
            out += [PRMScore(p, int(n)) for p, n in zip(probs, mask.sum(dim=1).tolist())]
        return out
