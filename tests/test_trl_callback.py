"""The public TRL integration: the ledger is exact against torch's FlopCounterMode on real
GRPOTrainer steps (LoRA and full fine-tuning, beta 0 and > 0, mu 1 and 2), agrees with TRL's
own token count, stops before the budget, and refuses what it cannot observe."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from suite.train.cell import load_cell  # noqa: E402
from suite.errors import RaceError  # noqa: E402
from suite.record.ledger import read_ledger  # noqa: E402
from tiny_policy import make_policy, write_cell  # noqa: E402


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return make_policy(tmp_path_factory.mktemp("policy") / "tiny")


def _addmm_inplace(self_shape, a_shape, b_shape, out_shape=None, **kw):
    # FlopCounterMode registers aten.addmm but not the in-place aten.addmm_, which TRL's fused
    # LM head uses for its backward GEMMs: count it the same way (2*m*k*n).
    m, k = a_shape
    return 2 * m * k * b_shape[1]


def _trainer(tmp_path, policy, steps, **fields):
    from suite.train.run import build_trainer

    torch.set_num_threads(1)
    cell = load_cell(write_cell(tmp_path / "cell.yaml", policy, attention="full", **fields))
    out = tmp_path / "run"
    out.mkdir()
    return build_trainer(cell, out, max_steps=steps, progress=False)


@pytest.mark.parametrize("lora_rank,beta,mu", [(4, 0.0, 1), (4, 0.1, 2), (0, 0.1, 1), (0, 0.0, 2)],
                         ids=["lora-b0-mu1", "lora-b0.1-mu2", "full-b0.1-mu1", "full-b0-mu2"])
def test_ledger_matches_flop_counter(tmp_path, policy, lora_rank, beta, mu):
    from torch.utils.flop_counter import FlopCounterMode

    steps = 2 * mu
    trainer, ledger, _ = _trainer(tmp_path, policy, steps, lora_rank=lora_rank, beta=beta, mu=mu)
    counter = FlopCounterMode(display=False, custom_mapping={torch.ops.aten.addmm_: _addmm_inplace})
    with counter:
        trainer.train()
    measured = counter.get_total_flops()
    recs = read_ledger(ledger.ledger_path).records
    assert [r["step"] for r in recs] == list(range(1, steps + 1))
    total = sum(sum(r["flops"].values()) for r in recs)
    assert total == measured, (total, measured, total / measured)   # exact, as the README and docs state
    # mu = 2: TRL generates on steps 1, 3, ... and reuses the batch on 2, 4, ...
    gen_steps = [r["step"] for r in recs if r["flops"]["rollout"] > 0]
    assert gen_steps == list(range(1, steps + 1, mu))
    assert all(r["flops"]["reward"] == 0 for r in recs)  # sparse is a rule reward
    # The ledger's tokens are TRL's: it adds prompt + completion tokens of every generation.
    seen = sum(r["tokens"]["rollout_prompt"] + r["tokens"]["rollout_completion"] for r in recs)
    assert seen == trainer.state.num_input_tokens_seen


def test_budget_stop_never_overspends(tmp_path, policy):
    trainer, ledger, prep = _trainer(tmp_path, policy, 50)
    # A budget of about three steps: the run must stop on its own, below the budget.
    ledger.budget = int(3.5 * prep["first_step_bound"])
    trainer.train()
    recs = read_ledger(ledger.ledger_path).records
    total = sum(sum(r["flops"].values()) for r in recs)
    assert ledger.stopped_by_budget
    assert 3 <= len(recs) < 50
    assert total <= ledger.budget
    assert total + ledger.next_step_bound > ledger.budget  # it stopped because the next step might not fit


def test_attach_refuses_a_trainer_whose_generations_it_cannot_see(tmp_path, policy):
    from suite.train.trl_callback import RaceLedger

    class Trainer:  # the part of GRPOTrainer attach() touches, without TRL's reward step
        reward_funcs = [torch.nn.Linear(2, 1)]

    with pytest.raises(RaceError, match="cannot observe this trainer's generations") as e:
        RaceLedger(tmp_path).attach(Trainer())
    assert "Python reward function" in e.value.hint


def test_docs_example_runs(tmp_path, monkeypatch):
    """docs/trl-integration.md's example, as written, on the embedded policy-s."""
    import re

    from suite.paths import home

    text = (home() / "docs" / "trl-integration.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    torch.set_num_threads(1)
    scope: dict = {}
    exec(compile(code, "docs/trl-integration.md", "exec"), scope)
    ledger = scope["ledger"]
    recs = read_ledger(tmp_path / "runs" / "example" / "ledger.jsonl").records
    assert ledger.steps == len(recs) == 4
    # The adapter is saved where race eval looks for it.
    assert (tmp_path / "runs" / "example" / "adapter" / "adapter_config.json").is_file()
    from suite.cli import main

    assert main(["validate", str(tmp_path / "runs" / "example" / "report.json")]) == 0


class _ModelReward:
    """A model reward as suite.train.rewards defines them (kind, model_path, last_scored_lengths):
    it runs a real forward of its model over each prompt + completion, one sequence at a time."""

    kind = "model"
    __name__ = "tiny_model_reward"

    def __init__(self, path):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model_path = str(path)
        self.model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
        self.tok = AutoTokenizer.from_pretrained(path)
        self.last_scored_lengths = []

    def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        lengths, out = [], []
        for p, c in zip(prompts, completions):
            text = p[-1]["content"] + (c if isinstance(c, str) else c[-1]["content"])
            ids = self.tok(text, return_tensors="pt")["input_ids"]
            with torch.no_grad():
                out.append(float(self.model(ids).logits[0, -1, 0]))
            lengths.append(ids.shape[1])
        self.last_scored_lengths = lengths
        return out


def test_model_reward_is_charged_by_its_own_forward(tmp_path, policy):
    from torch.utils.flop_counter import FlopCounterMode

    from suite.train.cell import load_cell
    from suite.train.run import build_trainer

    torch.set_num_threads(1)
    rm_dir = make_policy(tmp_path / "reward-model", hidden=64, layers=1, seed=3)
    cell = load_cell(write_cell(tmp_path / "cell.yaml", policy, attention="full"))
    out = tmp_path / "run"
    out.mkdir()
    trainer, _, _ = build_trainer(cell, out, max_steps=2, progress=False)
    trainer.callback_handler.callbacks = [c for c in trainer.callback_handler.callbacks
                                          if type(c).__name__ != "RaceLedger"]
    trainer.reward_funcs[0] = _ModelReward(rm_dir)
    from suite.train.trl_callback import RaceLedger

    ledger = RaceLedger(tmp_path / "ledger", attention="full").attach(trainer)
    assert ledger.reward_model is not None and ledger.reward_model.num_layers == 1
    counter = FlopCounterMode(display=False, custom_mapping={torch.ops.aten.addmm_: _addmm_inplace})
    with counter:
        trainer.train()
    recs = read_ledger(ledger.ledger_path).records
    assert all(r["flops"]["reward"] > 0 for r in recs)
    total = sum(sum(r["flops"].values()) for r in recs)
    assert total == counter.get_total_flops(), (total, counter.get_total_flops())
    report = json.loads(ledger.write_report().read_text())
    assert report["reward"]["kind"] == "prm" and report["totals"]["flops"]["reward"] > 0


# ---- reward models TRL runs itself (reward_funcs=[model]) ---------------------------------------


def _reward_model(folder, seed=1):
    """A tiny Qwen2 sequence classifier (num_labels 1) with the shipped tokenizer, saved to `folder`."""
    import shutil

    from tiny_policy import TOKENIZER
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForSequenceClassification

    folder.mkdir(parents=True)
    for f in TOKENIZER.iterdir():
        shutil.copy(f, folder / f.name)
    tok = AutoTokenizer.from_pretrained(folder)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, intermediate_size=128, num_labels=1, pad_token_id=tok.pad_token_id,
                      tie_word_embeddings=False)
    torch.manual_seed(seed)
    Qwen2ForSequenceClassification(cfg).save_pretrained(folder)
    return folder, tok


def _grpo(tmp_path, policy, reward_funcs, reward_processing_classes=None, steps=2):
    from datasets import Dataset
    from peft import LoraConfig
    from tiny_policy import TRAIN
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(1)
    rows = [json.loads(line) for line in open(TRAIN)][:16]
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": r["question"]}]} for r in rows])
    args = GRPOConfig(output_dir=str(tmp_path / "trainer"), use_cpu=True, bf16=False, num_generations=2,
                      per_device_train_batch_size=4, max_completion_length=12, max_steps=steps, logging_steps=1,
                      report_to=[], save_strategy="no", disable_tqdm=True)
    return GRPOTrainer(model=str(policy), reward_funcs=reward_funcs, reward_processing_classes=reward_processing_classes,
                       args=args, train_dataset=data, peft_config=LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))


def test_a_reward_model_alone_is_charged_its_forward_over_the_tokens_it_scored(tmp_path, policy):
    """TRL's ordinary way: reward_funcs=[model] with reward_processing_classes. The ledger's reward
    FLOPs equal FlopCounterMode over the batches the model really ran (eager attention, the full
    convention), are within 10% of 2·N·T plus attention, and the report names the model."""
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import Qwen2ForSequenceClassification

    from suite.cli import main
    from suite.train.trl_callback import RaceLedger

    rm_dir, tok = _reward_model(tmp_path / "tiny-orm")
    rm = Qwen2ForSequenceClassification.from_pretrained(rm_dir, attn_implementation="eager")
    trainer = _grpo(tmp_path, policy, [rm], [tok])
    ledger = RaceLedger(tmp_path / "run", attention="full").attach(trainer)
    seen = []               # what the reward model ran over, seen by a hook of the test's own
    rm.register_forward_hook(lambda m, a, kw, o: seen.append((kw["input_ids"].clone(),
                                                              kw["attention_mask"].clone())), with_kwargs=True)
    trainer.train()
    batches = list(seen)            # (the re-run below calls the hook again)
    recs = read_ledger(ledger.ledger_path).records
    charged = sum(r["flops"]["reward"] for r in recs)
    assert len(batches) == len(recs) == 2 and charged > 0
    counted = FlopCounterMode(display=False)
    with counted, torch.no_grad():
        for ids, mask in batches:
            rm(input_ids=ids, attention_mask=mask)
    assert charged == counted.get_total_flops()
    # 2·N·T + attention, from the model's own parameters and the batch shapes (T: every position it ran).
    n = sum(p.numel() for name, p in rm.named_parameters() if "embed_tokens" not in name)
    cfg = rm.config
    head = cfg.hidden_size // cfg.num_attention_heads
    rough = sum(2 * n * ids.numel() + 4 * cfg.num_hidden_layers * cfg.num_attention_heads * head * ids.shape[0]
                * ids.shape[1] ** 2 for ids, _ in batches)
    assert abs(charged / rough - 1) < 0.10, (charged, rough)
    # Real tokens scored (padding excluded) are the reward token count.
    assert sum(r["tokens"]["reward"] for r in recs) == sum(int(m.sum()) for _, m in batches)
    report = json.loads(ledger.write_report().read_text())
    assert report["reward"]["kind"] == "orm" and report["reward"]["model"]["name"] == "tiny-orm"
    assert report["totals"]["flops"]["reward"] == charged
    assert report["provenance"] == {"method": "measured", "recorder": "race RaceLedger (TRL callback)", "steps": 2}
    assert main(["validate", "--strict", str(ledger.out_dir / "report.json")]) == 0


def test_a_reward_model_named_by_id_is_charged_too(tmp_path, policy):
    """reward_funcs=["<model id or folder>"]: TRL loads the classifier itself; still charged."""
    from suite.train.trl_callback import RaceLedger

    rm_dir, _ = _reward_model(tmp_path / "orm-by-id")
    trainer = _grpo(tmp_path, policy, [str(rm_dir)], steps=1)
    ledger = RaceLedger(tmp_path / "run").attach(trainer)
    trainer.train()
    recs = read_ledger(ledger.ledger_path).records
    assert recs and all(r["flops"]["reward"] > 0 for r in recs)
    report = json.loads(ledger.write_report().read_text())
    assert report["reward"]["model"]["name"] == "orm-by-id" and report["reward"]["kind"] == "orm"


def test_a_reward_model_that_cannot_be_priced_is_refused_by_name(tmp_path, policy):
    """A module with no transformers config cannot be priced: refused at attach, by name. A
    GPT-2 classifier (no analytic recipe) is priced through the traced path instead."""
    from transformers import GPT2Config, GPT2ForSequenceClassification

    from suite.train.trl_callback import RaceLedger

    def trainer_of(model, name):
        class Trainer:  # the part of GRPOTrainer attach() touches
            reward_funcs = [model]
            reward_func_names = [name]
            callbacks: list = []

            def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
                return []

            def add_callback(self, cb):
                self.callbacks.append(cb)

        return Trainer()

    with pytest.raises(RaceError, match="cannot price reward model 'judge-linear'") as e:
        RaceLedger(tmp_path).attach(trainer_of(torch.nn.Linear(4, 1), "judge-linear"))
    assert "no transformers config" in e.value.message and "reward_model=spec_for(" in e.value.hint
    gpt2 = GPT2ForSequenceClassification(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, num_labels=1))
    ledger = RaceLedger(tmp_path / "gpt2").attach(trainer_of(gpt2, "judge-gpt2"))
    assert ledger.reward_model.priced_by == "traced" and ledger.reward_model.model_type == "gpt2"
