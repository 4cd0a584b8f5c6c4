# Over 500 lines: the build recipes of every embedded model, in dependency order, rerun together.
"""Deterministic build of the embedded task: data splits, tokenizer, tiny policies, tiny PRMs.
A tool of the checkout (tools/ is never installed); `race embedded build` runs it.

    race embedded build                 # everything, in dependency order
    race embedded build --only policy-m # one piece (needs the tokenizer built)

Pieces: data, tokenizer, policy-s, policy-m, policy-l, prm-proxy, prm. Everything is seeded;
results are shipped under tasks/arith/ so nothing trains at install time. Each model folder is
self-contained (config.json, float16 safetensors, tokenizer files, build.json with what the
build measured).
"""

from __future__ import annotations

import bisect
import itertools
import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from suite.train import arith
from suite import jsonstrict
from suite.atomic import atomic_path, write_text_atomic
from suite.train.prm import STEP_TOKEN, SYSTEM_PROMPT

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", STEP_TOKEN)
#: Qwen2's chat template without its default system prompt (tiny models, short prompts).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
#: Qwen2's pre-tokenizer split (copied from transformers' Qwen2Tokenizer): digits one by one.
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
VOCAB_SIZE = 384

#: Split name -> (difficulty, size, seed). The train split stands in for Polaris-53K, the two
#: 250-problem test splits for GSM8K (easy) and MATH-500 (hard); arith-easy-2000 is a fresh
#: held-out set large enough to resolve a 0.03 difference (docs/findings.md, the decisive study).
SPLITS = {
    "train": ("train", 5000, 1),
    "arith-easy-250": ("easy", 250, 2),
    "arith-hard-250": ("hard", 250, 3),
    "arith-easy-2000": ("easy", 2000, 5),
}
SFT_SEED, HELDOUT_SEED = 100, 4  # SFT stream and checkpoint-selection problems


def task_dir() -> Path:
    """tasks/arith in the checkout."""
    from suite.paths import tasks

    return tasks() / "arith"


def models_dir() -> Path:
    """tasks/arith/models: one folder per embedded model, plus tokenizer/."""
    return task_dir() / "models"


def log(msg: str) -> None:
    print(f"[embedded {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------- data


def build_data() -> None:
    """Write tasks/arith/data/<split>.jsonl; a test split excludes every question of train, of the
    splits before it and its own repeats (the 250-problem splits had none of the last two)."""
    data = task_dir() / "data"
    seen: set[str] = set()
    for name, (difficulty, n, seed) in SPLITS.items():
        rows, rng_seed = [], seed
        while len(rows) < n:  # top up with a derived seed when duplicates were dropped
            for p in arith.generate(n, rng_seed, difficulty):
                if len(rows) < n and (name == "train" or p.question not in seen):
                    rows.append(p.row())
                    if name != "train":
                        seen.add(p.question)
            rng_seed += 1000
        if name == "train":
            seen |= {r["question"] for r in rows}
        write_text_atomic(data / f"{name}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        log(f"data/{name}.jsonl: {len(rows)} problems")


# ---------------------------------------------------------------- tokenizer


def _corpus() -> list[str]:
    # Role names appear once per turn: weight them so they become single tokens.
    texts = [SYSTEM_PROMPT] * 200 + ["user\n", "assistant\n", "system\n"] * 1000
    for difficulty in ("train", "hard"):
        for p in arith.generate(3000, 7, difficulty):
            texts += [p.question, p.solution]
    return texts


def build_tokenizer() -> None:
    """Byte-level BPE with Qwen2's pre-tokenizer, saved so AutoTokenizer gives Qwen2Tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(), trainer)
    out = models_dir() / "tokenizer"
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "model_max_length": 512,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "bos_token": None,
        "add_prefix_space": False,
        "chat_template": CHAT_TEMPLATE,
        "extra_special_tokens": [STEP_TOKEN],
    }
    write_text_atomic(out / "tokenizer_config.json", json.dumps(config, indent=2) + "\n")
    log(f"tokenizer: {tok.get_vocab_size()} tokens")


def load_tokenizer(folder: Path | None = None):
    """The embedded tokenizer through AutoTokenizer (a Qwen2Tokenizer)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder or models_dir() / "tokenizer")


def _copy_tokenizer(dst: Path) -> None:
    src = models_dir() / "tokenizer"
    for name in ("tokenizer.json", "tokenizer_config.json"):
        write_text_atomic(dst / name, (src / name).read_text())


# ---------------------------------------------------------------- policies


@dataclass(frozen=True)
class PolicySpec:
    """Shape and warm-start recipe of one tiny policy."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    seed: int
    lr: float = 2e-3
    batch: int = 64
    max_steps: int = 1500
    eval_every: int = 25
    target: tuple[float, float] = (0.30, 0.50)  #: greedy accuracy band of the shipped checkpoint
    eval_below_loss: float = 0.7  #: skip the (slow) greedy evaluation while the batch loss is above this


POLICIES: dict[str, PolicySpec] = {
    "policy-s": PolicySpec(hidden=64, layers=3, heads=2, kv_heads=1, intermediate=192, seed=11, lr=3e-3, batch=32),
    "policy-m": PolicySpec(hidden=128, layers=4, heads=4, kv_heads=2, intermediate=512, seed=12),
    "policy-l": PolicySpec(hidden=256, layers=4, heads=8, kv_heads=4, intermediate=1024, seed=13, lr=1e-3, batch=32),
}


def qwen2_config(spec: PolicySpec, tokenizer, **extra):
    """A Qwen2Config for a tiny model: untied embeddings, head_dim = hidden/heads (>= 32)."""
    from transformers import Qwen2Config

    assert spec.hidden // spec.heads >= 32, "vLLM's CPU backend needs head_dim >= 32"
    return Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=spec.hidden, num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads, num_key_value_heads=spec.kv_heads,
        intermediate_size=spec.intermediate, max_position_embeddings=512, tie_word_embeddings=False,
        rope_theta=10000.0, rms_norm_eps=1e-6, use_sliding_window=False,
        bos_token_id=None, eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id, dtype="float32", **extra,
    )


def prompt_text(tokenizer, question: str) -> str:
    """The policy prompt: the question as a user turn, then the assistant header."""
    return tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                         add_generation_prompt=True)


def _sft_batch(tokenizer, problems, device="cpu"):
    """Right-padded (input_ids, attention_mask, labels) with loss only on the completion."""
    import torch

    rows = []
    for p in problems:
        prompt = tokenizer.encode(prompt_text(tokenizer, p.question))
        completion = tokenizer.encode(p.solution + "<|im_end|>")
        rows.append((prompt + completion, [-100] * len(prompt) + completion))
    n = max(len(r[0]) for r in rows)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([r[0] + [pad] * (n - len(r[0])) for r in rows])
    labels = torch.tensor([r[1] + [-100] * (n - len(r[1])) for r in rows])
    mask = torch.tensor([[1] * len(r[0]) + [0] * (n - len(r[0])) for r in rows])
    return ids, mask, labels


def _sft_step(model, tokenizer, stream: random.Random, batch: int, opt, sched):
    """One full-parameter SFT step on `batch` fresh training problems; returns the loss."""
    import torch

    ids, mask, labels = _sft_batch(tokenizer, [arith.make_problem(stream, arith.DIFFICULTIES["train"])
                                               for _ in range(batch)])
    loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step(), sched.step(), opt.zero_grad()
    return loss


def greedy_completions(model, tokenizer, questions: list[str], max_new_tokens: int = 64, batch: int = 128) -> list[str]:
    """Greedy completions (left-padded batches through generate)."""
    import torch

    tokenizer.padding_side = "left"
    out = []
    for i in range(0, len(questions), batch):
        enc = tokenizer([prompt_text(tokenizer, q) for q in questions[i:i + batch]], return_tensors="pt", padding=True)
        with torch.inference_mode():
            gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                 eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        out += tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    tokenizer.padding_side = "right"
    return out


def accuracy(completions: list[str], answers: list) -> float:
    """Share of completions whose final answer is correct (suite.answers.is_correct: the rule
    the rewards and pass@1 apply)."""
    from suite.answers import is_correct

    return sum(is_correct(c, str(a)) for c, a in zip(completions, answers)) / len(answers)


def greedy_accuracy(model, tokenizer, problems) -> float:
    """Share of problems whose greedy completion's final answer is correct."""
    outs = greedy_completions(model, tokenizer, [p.question for p in problems])
    return accuracy(outs, [p.answer for p in problems])


def _save_model(model, folder: Path, build: dict) -> None:
    """float16 safetensors + config (dtype float32 so it loads for CPU training) + tokenizer."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    with atomic_path(folder / "model.safetensors") as tmp:
        save_file(state, tmp, metadata={"format": "pt"})
    model.config.dtype = "float32"
    write_text_atomic(folder / "config.json", model.config.to_json_string())
    _copy_tokenizer(folder)
    write_text_atomic(folder / "build.json", json.dumps(build, indent=2) + "\n")


def build_policy(name: str) -> None:
    """Warm-start a tiny policy by full SFT; ship the checkpoint whose greedy accuracy on 100
    held-out problems is in the target band (the first one inside it)."""
    import torch
    from transformers import GenerationConfig, Qwen2ForCausalLM

    spec = POLICIES[name]
    torch.manual_seed(spec.seed)
    tokenizer = load_tokenizer()
    config = qwen2_config(spec, tokenizer, architectures=["Qwen2ForCausalLM"])
    model = Qwen2ForCausalLM(config)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"{name}: {n_params} parameters")
    heldout = arith.generate(100, HELDOUT_SEED, "train")
    stream = random.Random(SFT_SEED + spec.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    history, chosen, prev = [], None, None
    t0 = time.time()
    for step in range(1, spec.max_steps + 1):
        model.train()
        loss = _sft_step(model, tokenizer, stream, spec.batch, opt, sched)
        if step % 50 == 0:
            log(f"{name} step {step} loss {loss.item():.3f} ({time.time() - t0:.0f}s)")
        if step % spec.eval_every or loss.item() > spec.eval_below_loss:
            continue
        model.eval()
        acc = greedy_accuracy(model, tokenizer, heldout)
        history.append({"step": step, "loss": round(loss.item(), 4), "greedy_accuracy": acc})
        log(f"{name} step {step} loss {loss.item():.3f} acc {acc:.2f} ({time.time() - t0:.0f}s)")
        lo, hi = spec.target
        if lo <= acc <= hi:
            chosen = (step, acc, model)
            break
        if acc > hi:  # jumped over the band: ship whichever neighbour is closer to its middle
            mid = (lo + hi) / 2
            chosen = prev if prev and abs(prev[1] - mid) < abs(acc - mid) else (step, acc, model)
            break
        prev = (step, acc, {k: v.clone() for k, v in model.state_dict().items()})
    if chosen is None:
        raise SystemExit(f"{name}: never reached the target accuracy band in {spec.max_steps} steps")
    step, acc, weights = chosen
    if isinstance(weights, dict):
        model.load_state_dict(weights)
    model.generation_config = GenerationConfig(eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id,
                                               do_sample=True, temperature=1.0)
    folder = models_dir() / name
    model.generation_config.save_pretrained(folder)
    _save_model(model, folder, {
        "name": name, "parameters": n_params, "spec": asdict(spec), "chosen_step": step,
        "greedy_accuracy_heldout100": acc, "heldout": f"arith.generate(100, {HELDOUT_SEED}, 'train')",
        "sft_seconds": round(time.time() - t0, 1), "history": history,
        "torch_threads": torch.get_num_threads(),
    })
    log(f"{name}: shipped step {step} (greedy accuracy {acc:.2f})")


def load_policy(name: str):
    """An embedded policy (float32) by name, e.g. "policy-m"."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(models_dir() / name)


# ---------------------------------------------------------------- process reward models


@dataclass(frozen=True)
class Polish:
    """A short second schedule over a trained PRM: lower rates, more result checks, and a pool of
    T=1 completions of the policies GRPO trains on its reward — the judge errs most on their
    near-miss results, and a judge that passes them is a reward the policy drifts toward."""

    steps: int
    lr: float  #: backbone learning rate (warm-up, then cosine decay to 0 at `steps`)
    head_lr: float  #: learning rate of the fresh parts
    result_share: float  #: share of each batch drawn from "results"
    pool_from: tuple[str, ...] = ("policy-s", "policy-m")  #: policies whose samples fill the pool


@dataclass(frozen=True)
class PRMSpec:
    """A tiny PRM: backbone initialised from a warm-started policy (as Qwen2.5-Math-PRM starts
    from Qwen2.5-Math-Instruct), trained on rule-labelled steps until its held-out step
    accuracy reaches `target` (checked every `eval_every` steps) or `max_steps`."""

    init_from: str  #: embedded policy whose backbone seeds the PRM
    seed: int
    max_steps: int = 3000
    batch: int = 64
    lr: float = 2e-3  #: backbone learning rate (warm-up, then cosine decay to 0 at max_steps)
    head_lr: float = 3e-3  #: learning rate of the fresh parts, score head and extra layers (higher:
    #: they start from nothing)
    policy_pool: int = 2048  #: completions of the init policy (T=1), labelled by rule
    policy_share: float = 0.25  #: share of each batch drawn from that pool
    eval_every: int = 100
    target: float = 0.97
    max_minutes: float = 14.0  #: wall-clock safety guard only; builds stop on max_steps (recorded when hit)
    backbone_sft_steps: int = 300  #: further SFT of the init policy first: a PRM can only judge
    #: steps it could compute itself
    curriculum: tuple[tuple[str, int], ...] = ()  #: (examples, steps) phases before the mixture,
    #: examples one of EXAMPLES: the arithmetic check is learned alone first (in the mixture it was not)
    result_share: float = 0.0  #: share of each mixture batch drawn from "results" (keeps the check)
    token_loss: float = 0.0  #: weight of the dense loss at every token of a step (label: the step
    #: so far is a prefix of what it should read), beside the loss at the step tokens
    extra_layers: int = 0  #: fresh decoder layers on top of the backbone
    polish: Polish | None = None  #: a second, shorter schedule after the main one


PRMS: dict[str, PRMSpec] = {
    # Low rates (higher ones erase the backbone's arithmetic before the head can use it) and the
    # check learned alone first: one-digit results, then mostly two-digit ones (tasks/arith/README.md).
    "prm": PRMSpec(init_from="policy-m", seed=21, lr=1e-4, head_lr=1e-3, batch=32, max_steps=2500,
                   policy_pool=1024, max_minutes=90.0, curriculum=(("one-digit", 300), ("results", 1200)),
                   result_share=0.3, token_loss=1.0, extra_layers=2,
                   polish=Polish(steps=600, lr=5e-5, head_lr=5e-4, result_share=0.5)),
    "prm-proxy": PRMSpec(init_from="policy-s", seed=22, lr=1e-3, head_lr=3e-3, batch=32, max_steps=500,
                         policy_pool=1024, max_minutes=12.0),
}


def corrupt(rng: random.Random, p: arith.Problem) -> list[str]:
    """A wrong solution of `p` with near-miss errors: an off-by-a-little result, the wrong
    operator, a wrong (copied) operand or left side; later steps carry the error on, or
    sometimes recover; sometimes steps are dropped or added."""
    steps = list(p.steps)
    i = rng.randrange(len(steps))
    s = steps[i]
    kind = rng.choice(("result", "op", "operand", "left", "skip", "extra"))
    if kind == "skip" and len(steps) > 1:
        del steps[i]
        bad = None
    elif kind == "extra":
        x = rng.randint(1, 9)
        steps.insert(i + 1, arith.Step(s.result, "+", x, s.result + x))
        bad = steps[i + 1]
        i += 1
    else:
        if kind == "result":
            bad = arith.Step(s.left, s.op, s.right, max(0, s.result + rng.choice((1, -1, 2, -2, 10, -10, 3))))
        elif kind == "op":
            op = rng.choice([o for o in arith.OPS if o != s.op])
            res = arith.apply(s.left, op, s.right) if rng.random() < 0.6 else s.result
            bad = arith.Step(s.left, op, s.right, res)
        elif kind == "operand":
            numbers = [q.right for q in p.steps] + [p.steps[0].left, s.right + 1, max(1, s.right - 1)]
            right = rng.choice([n for n in numbers if n != s.right] or [s.right + 1])
            bad = arith.Step(s.left, s.op, right, arith.apply(s.left, s.op, right))
        else:
            numbers = [q.right for q in p.steps] + [s.left + 1, max(0, s.left - 1), p.steps[0].left]
            left = rng.choice([n for n in numbers if n != s.left] or [s.left + 1])
            bad = arith.Step(left, s.op, s.right, arith.apply(left, s.op, s.right))
        if bad == s:  # e.g. result clipped at 0: make it plainly wrong instead
            bad = arith.Step(s.left, s.op, s.right, s.result + 1)
        steps[i] = bad
    # Later steps: carry the wrong value on (consistent arithmetic) or recover.
    if bad is not None and rng.random() < 0.8:
        value = bad.result
        for j in range(i + 1, len(steps)):
            t = steps[j]
            steps[j] = arith.Step(value, t.op, t.right, arith.apply(value, t.op, t.right))
            value = steps[j].result
    answer = steps[-1].result if steps else p.answer
    if rng.random() < 0.1:
        answer = p.answer if rng.random() < 0.5 else answer + 1
    return [str(t) for t in steps] + [f"\\boxed{{{answer}}}"]


#: One-digit problems: the first arithmetic a PRM learns to check.
ONE_DIGIT = arith.Difficulty(steps=(1, 2), start=(1, 9), operand=(1, 9), max_value=9)


def corrupt_results(rng: random.Random, p: arith.Problem) -> list[str]:
    """`p`'s gold steps with each result, independently with chance 1/2, off by a little (not
    carried on), then the gold \\boxed{} answer: a pure "a op b = c" check."""
    steps = [str(arith.Step(s.left, s.op, s.right, max(0, s.result + rng.choice((1, -1, 2, -2, 3, 9, 10, -10, 11)))))
             if rng.random() < 0.5 else str(s) for s in p.steps]
    return [*steps, f"\\boxed{{{p.answer}}}"]


def _mixture(rng: random.Random) -> tuple[arith.Problem, list[str]]:
    p = arith.make_problem(rng, arith.DIFFICULTIES["hard" if rng.random() < 0.3 else "train"])
    return p, arith.split_steps(p.solution) if rng.random() < 0.35 else corrupt(rng, p)


def _results(rng: random.Random, one_digit_share: float = 0.2) -> tuple[arith.Problem, list[str]]:
    d = ONE_DIGIT if rng.random() < one_digit_share else arith.DIFFICULTIES["hard" if rng.random() < 0.3 else "train"]
    p = arith.make_problem(rng, d)
    return p, corrupt_results(rng, p)


#: Kinds of synthetic PRM examples: gold and near-miss solutions, result checks alone (mostly
#: two-digit), one-digit result checks.
EXAMPLES = {"mixture": _mixture, "results": _results, "one-digit": lambda rng: _results(rng, 1.0)}


def prm_examples(n_synthetic: int, seed: int, policy=None, tokenizer=None, n_policy: int = 0, kind: str = "mixture"):
    """(question, steps, expected) triples — expected: what each step should read
    (suite.train.arith.expected_steps; a step is correct when it reads so) — for `n_synthetic`
    examples of `kind`, plus completions sampled from `policy` at temperature 1."""
    import torch

    rng = random.Random(seed)
    out = []
    for _ in range(n_synthetic):
        p, steps = EXAMPLES[kind](rng)
        out.append((p.question, steps, arith.expected_steps(steps, p.solution)))
    if policy is not None and n_policy:
        torch.manual_seed(seed)
        problems = [arith.make_problem(rng, arith.DIFFICULTIES["train"]) for _ in range(n_policy)]
        tokenizer.padding_side = "left"
        for k in range(0, n_policy, 256):
            chunk = problems[k:k + 256]
            enc = tokenizer([prompt_text(tokenizer, q.question) for q in chunk], return_tensors="pt", padding=True)
            with torch.inference_mode():
                gen = policy.generate(**enc, max_new_tokens=64, do_sample=True, temperature=1.0, top_k=0,
                                      eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
            texts = tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            for q, t in zip(chunk, texts):
                steps = arith.split_steps(t)
                if steps:
                    out.append((q.question, steps, arith.expected_steps(steps, q.solution)))
        tokenizer.padding_side = "right"
    rng.shuffle(out)
    return out


def _prm_batch(tokenizer, examples):
    """(input_ids, attention_mask, step_labels, token_labels): step labels at the step tokens
    (the step reads as expected); token labels at every token inside a step (what the step
    says so far is a prefix of what it should read — dense supervision of where it goes wrong)."""
    import torch
    from suite.train.prm import build_input

    texts = [build_input(tokenizer, q, s) for q, s, _ in examples]
    enc = tokenizer(texts, return_tensors="pt", padding=True, return_offsets_mapping=True)
    step_id = tokenizer.convert_tokens_to_ids(STEP_TOKEN)
    ids = enc["input_ids"]
    step_labels = torch.full_like(ids, -100)
    token_labels = torch.full_like(ids, -100)
    for row, ((_, steps, expected), text) in enumerate(zip(examples, texts)):
        pos = (ids[row] == step_id).nonzero().flatten()
        assert len(pos) == len(steps), "one step token per step"
        step_labels[row, pos] = torch.tensor([int(arith.reads_as_expected(s, e)) for s, e in zip(steps, expected)])
        start = text.rindex(STEP_TOKEN.join(steps) + STEP_TOKEN)  # the assistant turn
        spans = []
        for step in steps:
            spans.append((start, start + len(step)))
            start += len(step) + len(STEP_TOKEN)
        offsets = enc["offset_mapping"][row].tolist()
        j = 0
        for (a, b), e in zip(spans, expected):
            while j < len(offsets) and offsets[j][0] < a:
                j += 1
            while j < len(offsets) and offsets[j][1] <= b and offsets[j][1] > offsets[j][0]:
                token_labels[row, j] = int(e is not None and e.startswith(text[a:offsets[j][1]]))
                j += 1
    return ids, enc["attention_mask"], step_labels, token_labels


def prm_step_accuracy(prm_model, tokenizer, examples, batch: int = 128) -> dict:
    """Step accuracy (threshold 0.5) on labelled examples, with the majority-class baseline."""
    import torch

    right = total = positives = 0
    tokenizer.padding_side = "right"
    prm_model.eval()
    for k in range(0, len(examples), batch):
        ids, mask, labels, _ = _prm_batch(tokenizer, examples[k:k + batch])
        with torch.inference_mode():
            pred = prm_model(ids, mask).argmax(-1)
        sel = labels != -100
        right += (pred[sel] == labels[sel]).sum().item()
        total += sel.sum().item()
        positives += labels[sel].sum().item()
    return {"step_accuracy": right / total, "steps": total,
            "majority_baseline": max(positives, total - positives) / total}


def continue_sft(model, tokenizer, spec: PolicySpec, steps: int, seed: int) -> float:
    """More SFT of a policy (cosine-decayed lr) to make a competent PRM backbone; returns its
    greedy accuracy on the held-out problems."""
    import math

    import torch

    stream = random.Random(SFT_SEED + seed)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / max(1, steps))))
    model.train()
    for step in range(1, steps + 1):
        loss = _sft_step(model, tokenizer, stream, spec.batch, opt, sched)
        if step % 50 == 0:
            log(f"backbone SFT step {step} loss {loss.item():.3f}")
    model.eval()
    return greedy_accuracy(model, tokenizer, arith.generate(100, HELDOUT_SEED, "train"))


def _heldout_sets(spec: PRMSpec, tokenizer, backbone, pool_policies: dict) -> dict:
    """Held-out step sets a PRM build reports: the synthetic mixture, T=1 samples of the init
    policy it starts from and of each shipped policy in the polish pool, result checks alone."""
    sets = {"synthetic": prm_examples(400, spec.seed + 1000),
            "policy_samples": prm_examples(0, spec.seed + 2000, backbone, tokenizer, 200)}
    for k, (name, policy) in enumerate(pool_policies.items(), start=1):
        sets[f"samples_{name}"] = prm_examples(0, spec.seed + 2000 + 100 * k, policy, tokenizer, 200)
    sets["results"] = prm_examples(200, spec.seed + 3000, kind="results")
    return sets


def _train_prm(model, tokenizer, spec: PRMSpec, *, name: str, steps: int, lr: float, head_lr: float,
               curriculum, result_share: float, pool: list, heldout: dict, rng: random.Random, t0: float):
    """One schedule of PRM training (warm-up, cosine decay to 0 at `steps`): curriculum phases,
    then batches of the mixture, `result_share` result checks and `spec.policy_share` pool
    samples. Returns its record: steps run, why it stopped, evaluation history."""
    import math

    import torch

    # Fresh parts learn at head_lr: the score head, the extra layers and the final norm over them.
    first_fresh = model.config.num_hidden_layers - spec.extra_layers
    backbone, fresh = [], list(model.score.parameters())
    for n, p in model.model.named_parameters():
        layer = int(n.split(".")[1]) if n.startswith("layers.") else -1
        (fresh if spec.extra_layers and (layer >= first_fresh or n.startswith("norm.")) else backbone).append(p)
    opt = torch.optim.AdamW([{"params": backbone, "lr": lr}, {"params": fresh, "lr": head_lr}], weight_decay=0.0)
    warm = 30
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (
        1 + math.cos(math.pi * min(1.0, max(0, s - warm) / max(1, steps - warm)))))
    loss_fn = torch.nn.CrossEntropyLoss()
    n_pool = round(spec.batch * spec.policy_share)
    n_results = round(spec.batch * result_share)
    phase_ends = list(itertools.accumulate(n for _, n in curriculum))
    history, t_train = [], time.time()  # the wall-clock guard covers training only
    for step in range(1, steps + 1):
        model.train()
        phase = bisect.bisect_left(phase_ends, step)
        if phase < len(curriculum):
            batch = prm_examples(spec.batch, rng.randrange(2**31), kind=curriculum[phase][0])
        else:
            batch = (prm_examples(spec.batch - n_pool - n_results, rng.randrange(2**31))
                     + prm_examples(n_results, rng.randrange(2**31), kind="results") + rng.sample(pool, n_pool))
        ids, mask, labels, token_labels = _prm_batch(tokenizer, batch)
        logits = model(ids, mask).flatten(0, 1)
        loss = loss_fn(logits, labels.flatten())
        if spec.token_loss:
            loss = loss + spec.token_loss * loss_fn(logits, token_labels.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(), sched.step(), opt.zero_grad()
        if step % spec.eval_every:
            continue
        acc = {k: prm_step_accuracy(model, tokenizer, v)["step_accuracy"] for k, v in heldout.items()}
        history.append({"step": step, "loss": round(loss.item(), 4), **acc})
        log(f"{name} step {step} loss {loss.item():.4f} acc " + " ".join(f"{k} {v:.3f}" for k, v in acc.items())
            + f" ({time.time() - t0:.0f}s)")
        if min(acc["synthetic"], acc["policy_samples"]) >= spec.target:
            return {"steps": step, "stopped_by": "target", "history": history}
        if time.time() - t_train > spec.max_minutes * 60:
            return {"steps": step, "stopped_by": "max_minutes", "history": history}
    return {"steps": steps, "stopped_by": "max_steps", "history": history}


def build_prm(name: str, resume: bool = False) -> None:
    """Train a tiny PRM on rule-labelled steps and ship it with its held-out step accuracy:
    the main schedule, then its polish stage if the spec has one. `resume` continues the shipped
    PRM instead: its polish stage (another main schedule when the spec has none), keeping the
    earlier record in build.json."""
    import torch
    from transformers import AutoModelForCausalLM

    from suite.train.prm import PRM, model_class

    spec = PRMS[name]
    torch.manual_seed(spec.seed + resume)
    tokenizer = load_tokenizer()
    tokenizer.padding_side = "right"
    policy = AutoModelForCausalLM.from_pretrained(models_dir() / spec.init_from).float().eval()
    # The shipped policies GRPO trains (the init policy's own copy gets more SFT below).
    pool_policies = {n: AutoModelForCausalLM.from_pretrained(models_dir() / n).float().eval()
                     for n in (spec.polish.pool_from if spec.polish else ())}
    t0 = time.time()
    previous = None
    if resume:
        previous = jsonstrict.read(models_dir() / name / "build.json", hint="rebuild it without --resume")
        model = PRM.load(models_dir() / name, device="cpu", dtype=torch.float32).model
        backbone_acc = previous["backbone_greedy_accuracy_heldout100"]
    else:
        config = policy.config
        config.architectures = ["Qwen2ForProcessRewardModel"]
        config.num_labels = 2
        backbone_acc = continue_sft(policy, tokenizer, POLICIES[spec.init_from], spec.backbone_sft_steps, spec.seed)
        log(f"{name}: backbone {spec.init_from} + {spec.backbone_sft_steps} SFT steps: greedy accuracy "
            f"{backbone_acc:.2f} ({time.time() - t0:.0f}s)")
        policy.eval()
        if spec.extra_layers:
            config.num_hidden_layers += spec.extra_layers
            config.layer_types = ["full_attention"] * config.num_hidden_layers
        model = model_class()(config)
        missing = model.model.load_state_dict(policy.model.state_dict(), strict=False).missing_keys
        assert all(k.startswith("layers.") and int(k.split(".")[1]) >= config.num_hidden_layers - spec.extra_layers
                   for k in missing), missing
    heldout = _heldout_sets(spec, tokenizer, policy, pool_policies)
    if resume and spec.polish:  # the main schedule's record stands; the polish stage runs again
        record = {k: previous[k] for k in ("steps", "stopped_by", "history")}
    else:
        pool = prm_examples(0, spec.seed, policy, tokenizer, spec.policy_pool)
        log(f"{name}: {len(pool)} policy samples ({time.time() - t0:.0f}s)")
        record = _train_prm(
            model, tokenizer, spec, name=name, steps=spec.max_steps, lr=spec.lr, head_lr=spec.head_lr,
            curriculum=spec.curriculum, result_share=spec.result_share, pool=pool, heldout=heldout,
            rng=random.Random(spec.seed + resume), t0=t0)
    if spec.polish:
        p = spec.polish
        pool = [ex for k, n in enumerate(p.pool_from)
                for ex in prm_examples(0, spec.seed + 5000 + k, pool_policies[n], tokenizer, spec.policy_pool)]
        record["polish"] = _train_prm(
            model, tokenizer, spec, name=f"{name} polish", steps=p.steps, lr=p.lr, head_lr=p.head_lr,
            curriculum=(), result_share=p.result_share, pool=pool, heldout=heldout,
            rng=random.Random(spec.seed + 4000), t0=t0)
    final = {f"heldout_{k}": prm_step_accuracy(model, tokenizer, v) for k, v in heldout.items()}
    log(f"{name}: held-out step accuracy {final}")
    _save_model(model, models_dir() / name, {
        "name": name, "parameters": sum(p.numel() for p in model.parameters()), "spec": asdict(spec),
        **record, "backbone_greedy_accuracy_heldout100": backbone_acc, **final,
        "heldout": f"prm_examples(400, {spec.seed + 1000}), 200 T=1 samples each of {spec.init_from} "
                   f"({'shipped' if resume else 'the SFT backbone'}) and the shipped "
                   f"{', '.join(pool_policies) or '-'} (seeds {spec.seed + 2000} + 100 k), "
                   f"prm_examples(200, {spec.seed + 3000}, kind='results')",
        "train_seconds": round(time.time() - t0, 1),
        "torch_threads": torch.get_num_threads(), "resumed_from": previous,
    })
    log(f"{name}: shipped")


# ---------------------------------------------------------------- command line

# Dependency order: PRMs start from the policies' backbones.
PIECES = {"data": build_data, "tokenizer": build_tokenizer,
          **{name: (lambda n=name: build_policy(n)) for name in POLICIES},
          **{name: (lambda n=name: build_prm(n)) for name in ("prm-proxy", "prm")}}


def build(only: list[str] | None = None, threads: int = 2, resume: bool = False) -> None:
    """Build the named pieces (all, in dependency order, when `only` is empty); `resume`
    continues training shipped PRMs instead of starting them afresh."""
    import torch

    torch.set_num_threads(threads)
    for name in only or list(PIECES):
        if name not in PIECES:
            raise SystemExit(f"unknown piece {name!r}; pieces: {', '.join(PIECES)}")
        build_prm(name, resume=True) if resume and name in PRMS else PIECES[name]()

