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
    assert abs(total / measured - 1) < 0.02, (total, measured)
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


def test_attach_needs_a_callable_reward(tmp_path, policy):
    from suite.train.trl_callback import RaceLedger

    class Trainer:  # the part of GRPOTrainer attach() touches
        reward_funcs = [torch.nn.Linear(2, 1)]

    with pytest.raises(RaceError, match="Python reward function"):
        RaceLedger(tmp_path).attach(Trainer())


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
    assert abs(total / counter.get_total_flops() - 1) < 0.02
    report = json.loads(ledger.write_report().read_text())
    assert report["reward"]["kind"] == "prm" and report["totals"]["flops"]["reward"] > 0
