"""`race flops` and `race plan`: the stable flags, JSON that agrees with the library, one-line
errors with exit code 2 and never a traceback."""

import json
import subprocess
import sys

import pytest

from suite.accounting import Adapter, GRPOSettings, step_flops
from suite.cli import main
from suite.accounting.specs import spec_for


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_flops_json_agrees_with_step_flops(capsys):
    code, out, _ = run(capsys, "flops", "--model", "Qwen2.5-1.5B-Instruct", "--lora-rank", "64", "--group-size", "2",
                       "--prompts-per-step", "8", "--prompt-tokens", "300", "--completion-tokens", "700.5",
                       "--num-iterations", "2", "--beta", "0.04", "--steps", "10", "--engine-profile", "trl",
                       "--attention", "causal", "--format", "json")
    assert code == 0
    d = json.loads(out)
    s = step_flops(spec_for("Qwen2.5-1.5B-Instruct"), Adapter.from_rank(64),
                   GRPOSettings(2, 8, num_iterations=2, beta=0.04), 300, 700.5, engine="trl")
    assert d["per_step"]["flops"] == {**s.flops, "total": s.total}
    assert d["total"]["flops"]["update"] == 10 * s.flops["update"]
    assert d["total"]["tokens"]["update"] == 10 * s.tokens["update"]
    assert d["update_share"] == pytest.approx(s.update_share)
    assert sum(d["shares"].values()) == pytest.approx(1.0)
    assert d["adapter"]["trainable_params"] == Adapter.from_rank(64).trainable_params(spec_for("Qwen2.5-1.5B-Instruct"))
    assert d["per_step"]["work"]["update.old.tokens"] > 0 and d["per_step"]["work"]["update.ref.tokens"] > 0


def test_flops_flags_move_the_numbers_the_right_way(capsys):
    def total(*extra):
        code, out, _ = run(capsys, "flops", "--model", "Qwen2.5-0.5B-Instruct", "--json", *extra)
        assert code == 0
        return json.loads(out)["per_step"]["flops"]

    base = total()
    assert total("--no-gradient-checkpointing")["update"] < base["update"]
    assert total("--lora-rank", "0")["update"] > base["update"]
    assert total("--lora-targets", "q_proj,v_proj")["update"] < base["update"]
    assert total("--attention", "full")["rollout"] > base["rollout"]
    assert total("--engine-profile", "generic")["update"] < base["update"]
    assert total("--reward-model", "Qwen2.5-Math-PRM-7B")["reward"] > 0 == base["reward"]
    assert total("--num-iterations", "2")["update"] > 2 * base["update"]  # plus the old-policy forward


def test_flops_from_a_config_path_and_the_table(tmp_path, capsys):
    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
           "num_hidden_layers": 2, "vocab_size": 100}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, out, _ = run(capsys, "flops", "--config", str(tmp_path), "--passes", "--steps", "3")
    assert code == 0
    assert "rollout" in out and "update share p" in out and "checkpoint recompute" in out and "FLOPs x3" in out


def test_plan_divides_the_budget(capsys):
    code, out, _ = run(capsys, "plan", "--budget", "1e18", "--format", "json")
    assert code == 0
    from suite.accounting.specs import catalog_names, spec_for

    assert [r["model"] for r in json.loads(out)["rows"]] == [n for n in catalog_names("recipe") if spec_for(n).has_lm_head]
    qwen25 = ["Qwen2.5-0.5B-Instruct", "Qwen2.5-1.5B-Instruct", "Qwen2.5-3B-Instruct", "Qwen2.5-7B-Instruct"]
    code, out, _ = run(capsys, "plan", "--budget", "1e18", "--json", "--models", ",".join(qwen25))
    rows = json.loads(out)["rows"]
    assert [r["model"] for r in rows] == qwen25
    for r in rows:
        assert r["steps"] == int(1e18 // r["flops_per_step"])
        assert r["flops_used"] <= 1e18 < r["flops_used"] + r["flops_per_step"]
        assert r["rollouts"] == r["steps"] * 2 * 16
    assert rows[0]["steps"] > rows[-1]["steps"]  # a smaller policy buys more steps
    code, out, _ = run(capsys, "plan", "--budget", "1e15", "--models", "Qwen2.5-7B-Instruct")
    assert code == 0 and "less than one step" in out


@pytest.mark.parametrize("argv,needle", [
    (["flops", "--model", "Qwen2.5-7B-Instruct", "--prompt-tokens", "-5"], "prompt_tokens = -5 is below 1"),
    (["flops", "--model", "Qwen2.5-7B-Instruct", "--completion-tokens", "1e12"], "absurd"),
    (["flops", "--model", "Qwen2.5-7B-Instruct", "--completion-tokens", "nan"], "not a finite number"),
    (["flops", "--model", "Qwen2.5-7B-Instuct"], "closest catalog names: Qwen2.5-7B-Instruct"),
    (["flops", "--model", "Qwen2.5-7B-Instruct", "--engine-profile", "megatron"], "unknown engine profile"),
    (["flops", "--model", "Qwen2.5-7B-Instruct", "--attention", "sparse"], "invalid choice"),
    (["flops", "--model", "Qwen2.5-7B-Instruct", "--lora-targets", "lm_head"], "unknown LoRA target"),
    (["flops", "--model", "Qwen2.5-7B-Instruct", "--group-size", "0"], "group_size must be a positive integer"),
    (["flops", "--model", "Qwen2.5-7B-Instruct", "--beta", "-1"], "beta"),
    (["flops", "--model", "Qwen2.5-7B-Instruct", "--steps", "0"], "--steps"),
    (["flops"], "one of the arguments"),
    (["plan", "--budget", "0"], "--budget must be positive"),
    (["plan", "--budget", "1e18", "--models", "nope"], "unknown model"),
])
def test_usage_errors_exit_2_with_one_line(capsys, argv, needle):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own usage errors
        code = e.code
    _, err = capsys.readouterr()
    assert code == 2
    assert needle in err
    assert "Traceback" not in err


def test_help_is_complete():
    out = subprocess.run([sys.executable, "-c", "import sys; from suite.cli import main; sys.exit(main())",
                          "flops", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for flag in ("--model", "--config", "--lora-rank", "--lora-targets", "--group-size", "--prompts-per-step",
                 "--prompt-tokens", "--completion-tokens", "--num-iterations", "--beta", "--gradient-checkpointing",
                 "--no-gradient-checkpointing", "--reward-model", "--steps", "--engine-profile", "--attention", "--format", "--json"):
        assert flag in out.stdout
