"""Every TRL 1.16 schedule, priced as TRL runs it: RaceLedger's per-step ledger over a whole
`trainer.train()` equals torch's FlopCounterMode over the same run, exactly (ratio 1.000000),
in the settings a TRL user has -- rule reward, a reward model, both, mu 2, beta > 0, gradient
accumulation, full fine-tuning, plain and chat prompts, no checkpointing -- and in
steps_per_generation schedules, where TRL generates one batch for steps_per_generation x mu
micro-steps and trains one shuffled slice of it per micro-step (grpo_trainer._prepare_inputs).

Cheap by construction: a 2-layer, 32-wide policy and a 12-word vocabulary, 2 optimizer steps
per run (3 where a cycle needs them), one shared tokenizer, policy and reward model."""

from __future__ import annotations

import json
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from suite.record.ledger import read_ledger  # noqa: E402

WORDS = ["<pad>", "<eos>"] + [f"w{i}" for i in range(10)]  # a tiny vocabulary: EOS is likely, lengths vary
CHAT = ("{% for m in messages %}{{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}w9{% endif %}")


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    out = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="w0")
    out.chat_template = CHAT
    return out


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """The shared set-up: tokenizer, a tiny Qwen2 policy (saved once: TRL loads it, and its
    reference model for full fine-tuning with beta, from the folder) and a tiny Llama
    sequence-classification reward model, all with eager attention (FlopCounterMode counts
    CPU SDPA as 0)."""
    from transformers import LlamaConfig, LlamaForSequenceClassification, Qwen2Config, Qwen2ForCausalLM

    torch.set_num_threads(1)
    tok = _tokenizer()
    torch.manual_seed(0)
    pcfg = Qwen2Config(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64, num_attention_heads=4,
                       num_key_value_heads=2, num_hidden_layers=2, tie_word_embeddings=True, pad_token_id=0,
                       eos_token_id=1, bos_token_id=2)
    folder = tmp_path_factory.mktemp("policy") / "tiny-policy"
    Qwen2ForCausalLM(pcfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    rcfg = LlamaConfig(vocab_size=len(WORDS), hidden_size=32, intermediate_size=48, num_attention_heads=2,
                       num_key_value_heads=1, num_hidden_layers=1, num_labels=1, pad_token_id=0,
                       tie_word_embeddings=False)
    rm = LlamaForSequenceClassification._from_config(rcfg, attn_implementation="eager").eval()
    return tok, str(folder), rm


@pytest.fixture(scope="module")
def gpt2_rm():
    """A tiny GPT-2 sequence classifier: a family with no analytic recipe, priced by tracing its
    modeling code (suite.accounting.traced)."""
    from transformers import GPT2Config, GPT2ForSequenceClassification

    cfg = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=len(WORDS), num_labels=1, pad_token_id=0,
                     bos_token_id=2, eos_token_id=1)
    return GPT2ForSequenceClassification._from_config(cfg, attn_implementation="eager").eval()


def _rule(completions, **kw):
    """A rule reward: words in the completion (0 FLOPs)."""
    return [float(len((c if isinstance(c, str) else c[-1]["content"]).split())) for c in completions]


def _run(tmp_path, parts, *, reward="rule", mu=1, beta=0.0, ga=1, spg=None, batch=4, full=False, gc=True,
         chat=False, steps=2, pad=None, ledger_kw=None):
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from suite.accounting.reference import flop_counter
    from suite.train.trl_callback import RaceLedger

    tok, policy, rm = parts
    if not isinstance(reward, str):       # a reward model of the test's own
        rm, reward = reward, "model"
    torch.manual_seed(0)
    texts = [" ".join(f"w{(i * j) % 10}" for j in range(2 + i % 5)) for i in range(32)]
    rows = [{"prompt": [{"role": "user", "content": t}]} for t in texts] if chat else [{"prompt": t} for t in texts]
    funcs = {"rule": [_rule], "model": [rm], "both": [_rule, rm]}[reward]
    procs = [tok if f is rm else None for f in funcs] if reward != "rule" else None
    sched = {"steps_per_generation": spg} if spg else {}
    if pad:
        sched["pad_to_multiple_of"] = pad
    args = GRPOConfig(output_dir=str(tmp_path / "trainer"), per_device_train_batch_size=batch, num_generations=2,
                      max_completion_length=8, num_iterations=mu, beta=beta, gradient_accumulation_steps=ga,
                      max_steps=steps, use_cpu=True, bf16=False, report_to=[], save_strategy="no",
                      logging_steps=1, learning_rate=1e-3, seed=7, gradient_checkpointing=gc, disable_tqdm=True,
                      model_init_kwargs={"attn_implementation": "eager", "dtype": torch.float32}, **sched)
    peft = None if full else LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0)
    trainer = GRPOTrainer(model=policy, reward_funcs=funcs, reward_processing_classes=procs, args=args,
                          train_dataset=Dataset.from_list(rows), processing_class=tok, peft_config=peft)
    ledger = RaceLedger(tmp_path / "run", **{"attention": "full", "save_adapter": False, **(ledger_kw or {})}).attach(trainer)
    counter = flop_counter()
    with counter:
        trainer.train()
    return trainer, ledger, counter.get_total_flops()


SETTINGS = {  # the eleven settings, then the steps_per_generation schedules
    "rule": {}, "reward-model": {"reward": "model"}, "both": {"reward": "both"}, "mu2": {"mu": 2},
    "beta": {"beta": 0.1}, "ga2 (= spg2-ga2, TRL's default)": {"ga": 2, "batch": 2}, "mu2-ga2": {"mu": 2, "ga": 2, "batch": 2},
    "full-beta": {"full": True, "beta": 0.1}, "chat": {"chat": True}, "rm-mu2": {"reward": "model", "mu": 2},
    "no-gc": {"gc": False},
    "spg2": {"spg": 2}, "spg4": {"spg": 4, "batch": 2},
    "spg4-ga2": {"spg": 4, "ga": 2, "batch": 2}, "spg2-mu2": {"spg": 2, "mu": 2, "steps": 3},
    "spg4-ga2-mu2-rm-beta": {"spg": 4, "ga": 2, "mu": 2, "batch": 2, "reward": "model", "beta": 0.1},
    "spg1-ga2": {"spg": 1, "ga": 2, "batch": 2},
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_ledger_equals_flop_counter_over_the_whole_run(tmp_path, parts, name):
    kw = SETTINGS[name]
    trainer, ledger, measured = _run(tmp_path, parts, **kw)
    recs = read_ledger(ledger.ledger_path).records
    total = sum(sum(r["flops"].values()) for r in recs)
    assert len(recs) == trainer.state.global_step == kw.get("steps", 2)
    assert total == measured, f"{name}: ledger/counted = {total / measured:.6f} ({total:,} vs {measured:,})"
    # The ledger's tokens are TRL's own count of every generation.
    assert sum(r["tokens"]["rollout_prompt"] + r["tokens"]["rollout_completion"]
               for r in recs) == trainer.state.num_input_tokens_seen
    # TRL's schedule, step by step: generation batches (of batch x spg rows) on micro-steps
    # 0, spg x mu, ...; an optimizer step is GA micro-steps.
    s = ledger.settings
    spg, ga, every = s.steps_per_generation, s.gradient_accumulation_steps, s.steps_per_generation * s.num_iterations
    gens = [sum(1 for x in range(j * ga, (j + 1) * ga) if x % every == 0) for j in range(len(recs))]
    rows = kw.get("batch", 4) * spg
    assert [r["work"]["count.completions"] for r in recs] == [g * rows for g in gens]
    assert s.group_size * s.prompts_per_step == rows
    # Each row is trained mu times: update tokens = rollout tokens x mu over complete cycles.
    micro = kw.get("steps", 2) * s.gradient_accumulation_steps
    if micro % (spg * s.num_iterations) == 0:
        assert sum(r["tokens"]["update"] for r in recs) == s.num_iterations * trainer.state.num_input_tokens_seen
    if kw.get("reward") in ("model", "both"):
        assert all(r["flops"]["reward"] > 0 for r in recs if r["flops"]["rollout"] > 0)


@pytest.fixture(scope="module")
def rm_runs(tmp_path_factory, parts, gpt2_rm):
    """A run with each sequence-classification reward model a TRL user has: GPT-2 (no analytic
    recipe: the traced path; steps_per_generation 2, two steps) and Llama (a recipe; one step);
    the adapter saved, each reward model saved as a folder with the tokenizer (race eval loads it)."""
    out = {}
    for name, rm, kw in (("gpt2", gpt2_rm, {"spg": 2, "steps": 2}), ("llama", parts[2], {"steps": 1})):
        tmp = tmp_path_factory.mktemp(f"rm-{name}")
        trainer, ledger, measured = _run(tmp, parts, reward=rm, ledger_kw={"save_adapter": True}, **kw)
        rm.save_pretrained(tmp / f"{name}-orm")
        parts[0].save_pretrained(tmp / f"{name}-orm")
        out[name] = ledger, measured, tmp / f"{name}-orm"
    return out


@pytest.mark.parametrize("name, path", [("gpt2", "traced"), ("llama", "recipe")])
def test_sequence_classifier_reward_models_go_into_validated_reports(rm_runs, name, path):
    """Any AutoModelForSequenceClassification: GPT-2 has no analytic recipe, RaceLedger prices it
    through the traced path (its costs fitted at attach, before the first step), exactly; either
    reward model goes into write_report()'s report (GPT-2's as its config: report 1.3), which is
    read back typed and validates clean, the validator tracing the GPT-2 config again."""
    from suite.cli import main
    from suite.record.report import read_report

    ledger, measured, _ = rm_runs[name]
    assert ledger.reward_model.priced_by == path
    recs = read_ledger(ledger.ledger_path).records
    assert recs[0]["flops"]["reward"] > 0
    assert sum(sum(r["flops"].values()) for r in recs) == measured
    report = read_report(ledger.write_report())
    assert report.priced_by == {"policy": "recipe", "reward": path} and report.reward_kind == "orm"
    assert report.doc["schema_version"] == ("1.3" if path == "traced" else "1.2")
    rspec = report.model_spec("reward")
    assert rspec == ledger.reward_model and report.doc["reward"]["model"]["params_total"] == rspec.params_total
    assert main(["validate", "--strict", str(report.path)]) == 0


@pytest.mark.slow  # trains (policy-s, two steps), then lm-eval on 2 problems per reward model: 6-26 s here
def test_the_docs_reward_model_example_goes_through_race_eval(tmp_path, monkeypatch, capsys):
    """docs/trl-integration.md's worked example, as written: a GPT-2 reward model folder, its
    TracedSpec passed as RaceLedger(reward_model=...), the report validated; then the run scored
    by `race eval --native-reward-model` with that GPT-2 folder and with a Llama classifier
    folder (reward system orm, priced by its own spec), the report valid after each."""
    import re

    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    from suite.cli import main
    from suite.paths import home
    from suite.record.report import read_report

    text = (home() / "docs" / "trl-integration.md").read_text()
    code = next(c for c in re.findall(r"```python\n(.*?)```", text, re.S) if "reward_model=spec" in c)
    monkeypatch.chdir(tmp_path)
    torch.set_num_threads(1)
    exec(compile(code, "docs/trl-integration.md", "exec"), {})
    out = capsys.readouterr().out
    assert "my-orm {'policy': 'recipe', 'reward': 'traced'} 1.3" in out
    run = tmp_path / "runs" / "with-orm"
    assert main(["validate", "--strict", str(run / "report.json")]) == 0
    tok = AutoTokenizer.from_pretrained(tmp_path / "runs" / "my-orm")
    llama = tmp_path / "runs" / "llama-orm"
    LlamaForSequenceClassification(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                               num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                               num_labels=1, pad_token_id=tok.pad_token_id)).save_pretrained(llama)
    tok.save_pretrained(llama)
    for folder, path in ((tmp_path / "runs" / "my-orm", "traced"), (llama, "recipe")):
        assert main(["eval", str(run), "--native-reward-model", str(folder), "--limit", "2",
                     "--targets", "arith-easy-250", "--batch-size", "8"]) == 0, capsys.readouterr().err
        report = read_report(run / "report.json")
        native = next(r for r in report.doc["evaluations"] if r["metric"] == "native_reward")
        assert native["judge"]["name"] == folder.name and native["compute"]["flops"] > 0
        assert native["judge"]["spec"].get("priced_by", "recipe") == path
        assert report.doc["schema_version"] == "1.3"        # the training reward model is traced
        assert main(["validate", "--strict", str(report.path)]) == 0


def test_a_policy_of_a_family_with_no_recipe_trains_under_the_ledger_exactly(tmp_path, parts):
    """A GPT-2 policy (the traced path: no recipe) under TRL, LoRA on all-linear (peft adapts its
    Conv1D layers): the ledger equals FlopCounterMode over the run, and write_report() carries the
    policy as its config (report 1.3), which validates."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from suite.cli import main
    from suite.record.report import read_report

    folder = tmp_path / "gpt2-policy"
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=len(WORDS), n_positions=64, pad_token_id=0,
                               eos_token_id=1, bos_token_id=2)).save_pretrained(folder)
    parts[0].save_pretrained(folder)
    trainer, ledger, measured = _run(tmp_path, (parts[0], str(folder), parts[2]), steps=1)
    assert ledger.policy.priced_by == "traced" and ledger.total_flops == measured
    report = read_report(ledger.write_report())
    assert report.priced_by["policy"] == "traced" and report.doc["schema_version"] == "1.3"
    assert report.doc["adapter"]["trainable_params"] == sum(
        p.numel() for p in trainer.model.parameters() if p.requires_grad)
    assert main(["validate", "--strict", str(report.path)]) == 0


def test_a_reward_model_spec_override_goes_into_the_report(tmp_path, parts):
    """RaceLedger(reward_model=spec): the override prices the reward model and is what
    write_report() names; the report validates."""
    from dataclasses import replace

    from suite.cli import main
    from suite.train.trlsetup import reward_model_spec_of

    spec = replace(reward_model_spec_of(parts[2]), name="my-orm")
    trainer, ledger, measured = _run(tmp_path, parts, reward="model", steps=1, ledger_kw={"reward_model": spec})
    assert ledger.reward_model is spec and ledger.total_flops == measured
    report = json.loads(ledger.write_report().read_text())
    assert report["reward"]["model"]["name"] == "my-orm" and report["reward"]["kind"] == "orm"
    assert main(["validate", "--strict", str(ledger.out_dir / "report.json")]) == 0


def test_steps_per_generation_charges_each_step_its_slice_and_the_report_states_it(tmp_path, parts):
    """The issue's case: steps_per_generation=2, GA 1, batch 8 -- the reuse step trains the other
    half of the batch, not the whole batch again; the report records the schedule."""
    from suite.cli import main

    trainer, ledger, measured = _run(tmp_path, parts, spg=2, batch=4, steps=2)
    recs = read_ledger(ledger.ledger_path).records
    gen, reuse = recs
    assert gen["flops"]["rollout"] > 0 and reuse["flops"]["rollout"] == 0
    seen = gen["tokens"]["rollout_prompt"] + gen["tokens"]["rollout_completion"]
    assert gen["tokens"]["update"] + reuse["tokens"]["update"] == seen      # each row once, not twice
    assert reuse["work"]["update.train.tokens"] == gen["work"]["update.train.tokens"]   # equal padded slices
    report = json.loads(ledger.write_report().read_text())
    assert report["grpo"]["steps_per_generation"] == 2 and report["grpo"]["gradient_accumulation_steps"] == 1
    assert report["grpo"]["prompts_per_step"] == 4          # 8 completions per generation batch / K=2
    assert report["run"]["seed"] == 7
    assert main(["validate", "--strict", str(ledger.out_dir / "report.json")]) == 0

    # The ledger the issue found: every optimizer step charged a training pass over the whole
    # generation batch (each slice's pass doubled), FLOPs repriced to match: the arithmetic and
    # physics agree with themselves; SCHED-001 (and the work equations) refuse it.
    from suite.accounting import phase_flops
    from suite.validate import validate_path

    lines = []
    for rec in recs:
        work = dict(rec["work"])
        for k in [k for k in work if k.startswith("update.train.")] + ["count.update"]:
            work[k] *= 2
        rec.update(work=work, tokens={**rec["tokens"], "update": work["count.update"]},
                   flops=phase_flops(work, ledger.policy, ledger.adapter, ledger.settings, None, ledger.engine,
                                     ledger.attention))
        lines.append(json.dumps(rec))
    ledger.ledger_path.write_text("\n".join(lines) + "\n")
    findings = validate_path(str(ledger.write_report()))
    ids = {f.rule_id for f in findings}      # the work equations (issue 29) see the doubled passes too
    assert "SCHED-001" in ids and ids <= {"SCHED-001", "WORK-004", "WORK-005"}, findings
    (sched,) = [f for f in findings if f.rule_id == "SCHED-001"]
    assert "exceed mu x rollout tokens" in sched.message and "steps_per_generation 2" in sched.message


def test_pad_to_multiple_of_is_priced_and_the_report_carries_it(tmp_path, parts):
    """TRL rounds every padded width up to pad_to_multiple_of (its default on Trainium: 128);
    the ledger prices the rounded widths exactly, and the report records the setting (1.4), which
    the validator's settings read back (before, the schema had no place for it)."""
    from suite.cli import main

    trainer, ledger, measured = _run(tmp_path, parts, pad=8)
    recs = read_ledger(ledger.ledger_path).records
    assert sum(sum(r["flops"].values()) for r in recs) == measured
    assert all(r["work"]["update.train.tokens"] % 8 == 0 for r in recs)
    report = json.loads(ledger.write_report().read_text())
    assert report["grpo"]["pad_to_multiple_of"] == 8 and report["schema_version"] == "1.4"
    assert main(["validate", "--strict", str(ledger.out_dir / "report.json")]) == 0
    from suite.validate import validate_path

    (ledger.out_dir / "report.json").write_text(json.dumps({**report, "schema_version": "1.3"}))
    (schema,) = [f for f in validate_path(str(ledger.out_dir / "report.json")) if f.rule_id.startswith("SCHEMA")]
    assert "pad_to_multiple_of needs schema_version 1.4" in schema.message     # a 1.3 reader could not hold it


def _bare_trainer(tmp_path, parts, **kw):
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    tok, policy, _ = parts
    args = GRPOConfig(output_dir=str(tmp_path / "trainer"), per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=8, max_steps=2, use_cpu=True, bf16=False, report_to=[],
                      save_strategy="no", disable_tqdm=True, model_init_kwargs={"attn_implementation": "eager"}, **kw)
    return GRPOTrainer(model=policy, reward_funcs=[_rule], args=args, processing_class=tok,
                       train_dataset=Dataset.from_list([{"prompt": f"w{i} w1"} for i in range(8)]),
                       peft_config=LoraConfig(r=2, lora_alpha=4, target_modules="all-linear"))


def test_a_forgotten_attach_and_a_contradicting_engine_fail_before_the_first_step(tmp_path, parts):
    from suite.errors import RaceError
    from suite.train.trl_callback import RaceLedger

    trainer = _bare_trainer(tmp_path, parts)
    trainer.add_callback(RaceLedger(tmp_path / "forgot"))            # no attach()
    with pytest.raises(RaceError, match="without attach") as e:
        trainer.train()
    assert "attach(trainer)" in e.value.hint and trainer.state.global_step == 0
    trainer = _bare_trainer(tmp_path, parts)
    RaceLedger(tmp_path / "vllm", engine="trl-vllm").attach(trainer)  # the trainer does not use vLLM
    with pytest.raises(RaceError, match="contradicts the trainer: args.use_vllm=False"):
        trainer.train()
    assert trainer.state.global_step == 0 and not (tmp_path / "vllm" / "ledger.jsonl").exists()


def test_the_budget_stop_says_so(tmp_path, parts, caplog):
    from transformers import TrainerCallback

    from suite.train.trl_callback import RaceLedger

    trainer = _bare_trainer(tmp_path, parts)
    ledger = RaceLedger(tmp_path / "run", budget_flops=1e30, max_prompt_tokens=4, save_adapter=False).attach(trainer)

    class OneAndAHalfSteps(TrainerCallback):   # runs after the ledger's on_train_begin computed the bound
        def on_train_begin(self, *a, **k):
            ledger.budget = int(1.5 * ledger.next_step_bound)

    trainer.add_callback(OneAndAHalfSteps())
    with caplog.at_level("WARNING", logger="suite.train.trl_callback"):
        trainer.train()
    assert ledger.stopped_by_budget and trainer.state.global_step == 1
    assert "race: budget stop after step 1" in caplog.text


def test_race_flops_and_estimates_take_the_schedule(tmp_path, capsys):
    """`race flops --steps-per-generation S --gradient-accumulation-steps G` prices TRL's
    old-policy forward where the schedule makes TRL run it (G % (S x mu) != 0) and says how many
    optimizer steps a generation batch serves; `race report --estimate` records the schedule."""
    from suite.cli import main

    def flops(*extra):
        assert main(["flops", "--model", "Qwen2.5-1.5B-Instruct", "--engine-profile", "trl", "--json", *extra]) == 0
        return json.loads(capsys.readouterr().out)

    aligned = flops("--steps-per-generation", "4", "--gradient-accumulation-steps", "4")
    sliced = flops("--steps-per-generation", "4", "--gradient-accumulation-steps", "2")
    assert sliced["grpo"]["steps_per_generation"] == 4 and sliced["optimizer_steps_per_generation"] == 2
    assert aligned["optimizer_steps_per_generation"] == 1
    work = sliced["per_step"]["work"]
    assert work["update.old.tokens"] == work["update.train.tokens"] > 0 == aligned["per_step"]["work"]["update.old.tokens"]
    assert sliced["per_step"]["flops"]["rollout"] == aligned["per_step"]["flops"]["rollout"]
    assert sliced["per_step"]["flops"]["update"] > aligned["per_step"]["flops"]["update"]

    cell = tmp_path / "paper.yaml"
    cell.write_text("name: spg-estimate\npolicy: Qwen2.5-1.5B-Instruct\nreward: {system: sparse, kind: rule}\n"
                    "lora_rank: 64\ngroup_size: 2\nprompts_per_step: 64\nmax_completion_tokens: 2048\n"
                    "num_iterations: 1\nengine: {name: trl, version: 1.16.0, profile: trl, steps_per_generation: 4, "
                    "gradient_accumulation_steps: 2}\nsteps: 10\nmean_prompt_tokens: 212\n"
                    "mean_completion_tokens: 655\n")
    out = tmp_path / "report.json"
    assert main(["report", "--estimate", str(cell), "-o", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["grpo"]["steps_per_generation"] == 4 and report["grpo"]["gradient_accumulation_steps"] == 2
    assert report["totals"]["work"]["update.old.tokens"] > 0
    assert main(["validate", "--strict", str(out)]) == 0


@pytest.mark.slow  # policy-s under FlopCounterMode: ~10-20 s on 2 shared cores
def test_the_docs_check_snippet_is_exact(tmp_path, monkeypatch, capsys):
    """docs/trl-integration.md "Check it on your own run", as written (policy-s, steps_per_generation 2)."""
    import re

    from suite.paths import home

    text = (home() / "docs" / "trl-integration.md").read_text()
    code = next(c for c in re.findall(r"```python\n(.*?)```", text, re.S) if "custom_mapping" in c)
    assert "custom_mapping={torch.ops.aten.addmm_: addmm_}" in code
    monkeypatch.chdir(tmp_path)
    torch.set_num_threads(1)
    scope: dict = {}
    exec(compile(code, "docs/trl-integration.md", "exec"), scope)
    assert "ledger / counted = 1.000000" in capsys.readouterr().out
    assert scope["ledger"].total_flops == scope["counter"].get_total_flops()
