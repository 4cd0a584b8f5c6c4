"""The tiny PRMs: Qwen2.5-Math-PRM interface, step accuracy, token counts, sharded loading."""

import json

import pytest

from tools import embedded
from suite.errors import RaceError
from suite.train.prm import PRM, STEP_TOKEN, build_input
from suite.train.rewards import get_reward_system

Q = "Mia has 5 apples. Mia gets 3 more. Mia loses 2. How many apples does Mia have now?"
GOLD = ["5 + 3 = 8", "8 - 2 = 6", "\\boxed{6}"]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def prm():
    return PRM.load(embedded.models_dir() / "prm", device="cpu")


def test_state_dict_names_match_qwen25_math_prm(prm):
    keys = set(prm.model.state_dict())
    assert {"score.0.weight", "score.0.bias", "score.2.weight", "score.2.bias", "model.embed_tokens.weight"} <= keys
    assert all(k.startswith(("model.", "score.")) for k in keys)
    assert prm.model.score[2].out_features == 2 and not any(k.startswith("lm_head") for k in keys)
    config = json.loads((prm.path / "config.json").read_text())
    assert config["model_type"] == "qwen2" and config["architectures"] == ["Qwen2ForProcessRewardModel"]


def test_one_reward_per_step_and_tokens_counted(prm):
    (s,) = prm.score([Q], [GOLD])
    assert len(s.step_rewards) == 3 and all(0 <= r <= 1 for r in s.step_rewards)
    text = build_input(prm.tokenizer, Q, GOLD)
    assert text.count(STEP_TOKEN) == 3
    assert s.tokens == len(prm.tokenizer.encode(text))


@pytest.mark.parametrize("name", ["prm", "prm-proxy"])
def test_step_accuracy_reproduces_the_build_record(name):
    # The shipped float16 PRM scores the build's held-out synthetic steps as the build measured.
    loaded = PRM.load(embedded.models_dir() / name, device="cpu")
    build = json.loads((embedded.models_dir() / name / "build.json").read_text())
    seed = build["spec"]["seed"] + 1000
    got = embedded.prm_step_accuracy(loaded.model, loaded.tokenizer, embedded.prm_examples(400, seed))
    assert got["steps"] == build["heldout_synthetic"]["steps"]
    assert got["step_accuracy"] == pytest.approx(build["heldout_synthetic"]["step_accuracy"], abs=0.02)


def test_proxy_is_cheaper_than_prm(prm):
    proxy = PRM.load(embedded.models_dir() / "prm-proxy", device="cpu")
    assert proxy.n_params < prm.n_params / 2


def test_sharded_checkpoint_loads_to_the_same_scores(prm, tmp_path):
    # Qwen2.5-Math-PRM-7B ships sharded safetensors with an index; the loader must read those.
    from safetensors.torch import load_file, save_file

    src = embedded.models_dir() / "prm"
    state = load_file(src / "model.safetensors")
    keys = sorted(state)
    halves = {"model-00001-of-00002.safetensors": keys[: len(keys) // 2],
              "model-00002-of-00002.safetensors": keys[len(keys) // 2:]}
    for shard, ks in halves.items():
        save_file({k: state[k] for k in ks}, tmp_path / shard)
    index = {"weight_map": {k: shard for shard, ks in halves.items() for k in ks}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (tmp_path / f).write_bytes((src / f).read_bytes())
    sharded = PRM.load(tmp_path, device="cpu")
    assert sharded.score([Q], [GOLD])[0].step_rewards == pytest.approx(prm.score([Q], [GOLD])[0].step_rewards, abs=1e-6)


def test_missing_folder_and_missing_weights_are_named(tmp_path):
    with pytest.raises(RaceError, match="no config.json"):
        PRM.load(tmp_path / "nothing")
    (tmp_path / "config.json").write_text((embedded.models_dir() / "prm" / "config.json").read_text())
    with pytest.raises(RaceError, match="model.safetensors"):
        PRM.load(tmp_path)


@pytest.mark.parametrize("name", ["prm", "proxy_prm"])
def test_prm_reward_systems_charge_scored_tokens(name):
    system = get_reward_system(name, device="cpu")
    assert system.kind == "model" and system.model_path.endswith(("prm", "prm-proxy"))
    completions = ["\n\n".join(GOLD), "5 + 3 = 9\n\n9 - 2 = 7\n\n\\boxed{7}", ""]
    rewards = system([Q] * 3, completions, answer=["6"] * 3, question=[Q] * 3)
    assert all(0.0 <= r <= 1.0 for r in rewards) and rewards[2] == 0.0
    lengths = system.last_scored_lengths
    assert lengths[2] == 0 and lengths[0] == len(system.prm.tokenizer.encode(build_input(system.prm.tokenizer, Q, GOLD)))
    assert system.last_seconds > 0
    # The question can also come from the chat prompt when no question column exists.
    prompt = [{"role": "user", "content": Q}]
    assert system([prompt], [completions[0]], answer=["6"]) == pytest.approx(rewards[:1])


def test_prm_reward_ranks_gold_above_a_wrong_step():
    # The reward GRPO sees: a gold solution scores clearly above the same solution with one
    # wrong step (carried on), and the wrong step itself gets a low step reward.
    system = get_reward_system("prm", device="cpu")
    wrong = ["5 + 3 = 9", "9 - 2 = 7", "\\boxed{7}"]
    gold, bad = system([Q] * 2, ["\n\n".join(GOLD), "\n\n".join(wrong)], answer=["6"] * 2, question=[Q] * 2)
    assert gold > 0.8 and bad < 0.3 and gold - bad > 0.5, (gold, bad)
    steps = system.prm.score([Q, Q], [GOLD, wrong])
    assert steps[0].step_rewards[0] > 0.5 > steps[1].step_rewards[0]


def test_training_labels_mark_the_wrong_step_and_the_token_where_it_goes_wrong():
    from suite.train import arith

    problem = arith.Problem("Tom has 17 cards. Tom gets 8 more. Tom loses 2. How many cards does Tom have now?",
                            (arith.Step(17, "+", 8, 25), arith.Step(25, "-", 2, 23)), 23)
    steps = ["17 + 8 = 26", "26 - 2 = 24", "\\boxed{24}"]
    tokenizer = embedded.load_tokenizer()
    ids, _, step_labels, token_labels = embedded._prm_batch(
        tokenizer, [(problem.question, steps, arith.expected_steps(steps, problem.solution))])
    assert step_labels[0][step_labels[0] != -100].tolist() == [0, 1, 1]
    at = token_labels[0] != -100
    tokens = tokenizer.convert_ids_to_tokens(ids[0][at].tolist())
    assert "".join(tokens).replace("Ġ", " ") == "".join(steps)
    labels = token_labels[0][at].tolist()
    first = len(tokenizer.tokenize(steps[0]))
    assert labels[:first] == [1] * (first - 1) + [0]  # "17 + 8 = 2" is on track, the "6" is not
    assert all(labels[first:])  # the carried steps read as they should from 26


def test_embedded_info_shows_each_model_and_the_prms_held_out_accuracy(capsys):
    from suite.cli import main

    assert main(["embedded"]) == 0
    out = capsys.readouterr().out
    for name in ("policy-s", "policy-m", "policy-l", "prm", "prm-proxy"):
        build = json.loads((embedded.models_dir() / name / "build.json").read_text())
        row = next(line for line in out.splitlines() if line.split()[0] == name)
        assert f"{build['parameters']:,}" in row
        if name.startswith("prm"):
            assert f"{build['heldout_results']['step_accuracy']:.3f} (result checks)" in row
    prm_build = json.loads((embedded.models_dir() / "prm" / "build.json").read_text())
    policy_s = prm_build["heldout_samples_policy-s"]["step_accuracy"]
    assert f"{policy_s:.3f} (policy-s samples)" in next(line for line in out.splitlines() if line.startswith("prm "))


def test_prm_build_runs_main_then_polish_and_resume_polishes_the_shipped_prm(tmp_path, monkeypatch):
    # The build's flow on a miniature spec (two steps a stage over policy-s): both stages recorded,
    # held-out samples of every pool policy; --resume keeps the main record and polishes again.
    import shutil

    models = tmp_path / "tasks" / "arith" / "models"
    for name in ("tokenizer", "policy-s", "policy-m"):
        shutil.copytree(embedded.models_dir() / name, models / name)
    (tmp_path / "schemas").mkdir()
    monkeypatch.setenv("RACE_HOME", str(tmp_path))
    assert embedded.models_dir() == models
    monkeypatch.setitem(embedded.PRMS, "tiny", embedded.PRMSpec(
        init_from="policy-s", seed=3, max_steps=2, batch=8, eval_every=1, policy_pool=8, backbone_sft_steps=1,
        curriculum=(("one-digit", 1),), result_share=0.25, token_loss=1.0, extra_layers=1,
        polish=embedded.Polish(steps=2, lr=1e-5, head_lr=1e-4, result_share=0.5)))
    embedded.build_prm("tiny")
    build = json.loads((models / "tiny" / "build.json").read_text())
    assert build["steps"] == 2 and build["polish"]["steps"] == 2
    assert [h["step"] for h in build["history"]] == [1, 2] == [h["step"] for h in build["polish"]["history"]]
    assert {"synthetic", "policy_samples", "samples_policy-m", "results"} <= set(build["polish"]["history"][0])
    assert 0 <= build["heldout_samples_policy-m"]["step_accuracy"] <= 1
    config = json.loads((models / "tiny" / "config.json").read_text())
    assert config["num_hidden_layers"] == json.loads((models / "policy-s" / "config.json").read_text())[
        "num_hidden_layers"] + 1
    weights = (models / "tiny" / "model.safetensors").read_bytes()

    embedded.build_prm("tiny", resume=True)
    resumed = json.loads((models / "tiny" / "build.json").read_text())
    assert resumed["resumed_from"]["polish"] == build["polish"]
    assert resumed["history"] == build["history"] and resumed["steps"] == 2
    assert len(resumed["polish"]["history"]) == 2
    assert (models / "tiny" / "model.safetensors").read_bytes() != weights
    assert PRM.load(models / "tiny", device="cpu").score([Q], [GOLD])[0].step_rewards


def test_race_embedded_build_resume_names_what_it_needs(capsys):
    from suite.cli import main

    assert main(["embedded", "build", "--resume"]) != 0
    assert "--only prm" in capsys.readouterr().err
    assert main(["embedded", "build", "--only", "nope"]) != 0
    assert "unknown piece 'nope'" in capsys.readouterr().err
