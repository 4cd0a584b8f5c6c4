"""The five reward systems as TRL reward functions: registry, scores, cost fields, threads."""

import threading

import pytest

from suite.train import rewards
from suite.errors import RaceError
from suite.answers import extract_boxed
from suite.train.rewards import get_reward_system

Q = "Mia has 5 apples. Mia gets 3 more. Mia loses 2. How many apples does Mia have now?"
GOLD = "5 + 3 = 8\n\n8 - 2 = 6\n\n\\boxed{6}"
WRONG_STEP = "5 + 3 = 9\n\n9 - 2 = 7\n\n\\boxed{7}"
LUCKY = "5 - 3 = 2\n\n8 - 2 = 6\n\n\\boxed{6}"  # first step wrong, the rest right
NO_FORMAT = "the answer is 6"


def call(system, completions, **cols):
    n = len(completions)
    return system([Q] * n, completions, answer=["6"] * n, **{k: [v] * n for k, v in cols.items()})


def test_extract_boxed_last_and_nested():
    assert extract_boxed("a \\boxed{1} b \\boxed{\\frac{1}{2}} c") == "\\frac{1}{2}"
    assert extract_boxed("\\boxed{ 42 }") == "42"
    assert extract_boxed("no box") is None
    assert extract_boxed("\\boxed{3} then \\boxed{unclosed") == "3"


def test_registry_has_six_systems_and_unknown_lists_them():
    assert set(rewards.REWARD_SYSTEMS) == {"sparse", "structured", "dense", "proxy_prm", "prm", "orm"}
    with pytest.raises(RaceError) as e:
        get_reward_system("judge")
    assert "'judge'" in e.value.message
    for name in rewards.REWARD_SYSTEMS:
        assert name in e.value.hint


def test_sparse_uses_symbolic_equivalence():
    sparse = get_reward_system("sparse")
    assert call(sparse, [GOLD, WRONG_STEP, NO_FORMAT, "\\boxed{6.0}", "\\boxed{12/2}"]) == [1, 0, 0, 1, 1]
    assert sparse([Q], ["\\boxed{\\frac{1}{2}}"], answer=["0.5"]) == [1.0]
    assert (sparse.kind, sparse.model_path, sparse.last_scored_lengths, sparse.__name__) == ("rule", None, [], "sparse")
    assert sparse.last_seconds > 0


def test_structured_partial_credit_follows_its_weights():
    w = rewards.STRUCTURED_WEIGHTS
    scores = call(get_reward_system("structured"), [GOLD, WRONG_STEP, "\\boxed{6}", NO_FORMAT, "\\boxed{6} and \\boxed{6}"])
    assert scores == pytest.approx([1.0, w["boxed_last"] + w["steps"], w["boxed_last"] + w["answer"], 0.0, w["answer"]])


def test_dense_share_of_correct_steps_with_and_without_gold_solution():
    dense = get_reward_system("dense")
    assert call(dense, [GOLD, WRONG_STEP, LUCKY, NO_FORMAT], solution=GOLD) == pytest.approx([1, 0, 2 / 3, 0])
    # Padding with extra right-looking steps does not pay: denominator covers them.
    assert call(dense, ["5 + 3 = 8\n\n8 - 2 = 6\n\n6 + 0 = 6\n\n\\boxed{6}"], solution=GOLD) == [0.5]
    # No solution column: arithmetic self-consistency and the boxed answer.
    assert call(dense, [GOLD, WRONG_STEP, "5 + 3 = 8\n\n8 - 2 = 5\n\n\\boxed{6}"]) == pytest.approx([1, 1 / 3, 2 / 3])


def test_conversational_completions_are_scored_like_text():
    sparse = get_reward_system("sparse")
    conv = [[{"role": "assistant", "content": GOLD}], [{"role": "assistant", "content": WRONG_STEP}]]
    assert call(sparse, conv) == [1.0, 0.0]


def test_missing_answer_column_is_a_race_error():
    with pytest.raises(RaceError, match="'answer' column"):
        get_reward_system("sparse")([Q], [GOLD])


def test_math_verify_works_off_the_main_thread():
    sparse, results, errors = get_reward_system("sparse"), [], []

    def work():
        try:
            results.append(sparse([Q] * 3, ["\\boxed{6}", "\\boxed{\\frac{12}{2}}", "\\boxed{7}"], answer=["6"] * 3))
        except Exception as e:  # pragma: no cover - the failure this test exists for
            errors.append(e)

    t = threading.Thread(target=work)
    t.start()
    t.join(60)
    assert not errors and results == [[1.0, 1.0, 0.0]]


def test_question_from_prompt_forms():
    assert rewards.question_text([{"role": "system", "content": "s"}, {"role": "user", "content": Q}]) == Q
    assert rewards.question_text(f"<|im_start|>user\n{Q}<|im_end|>\n<|im_start|>assistant\n") == Q


def test_prm_system_missing_path_names_it(tmp_path):
    with pytest.raises(RaceError) as e:
        get_reward_system("prm", model_path=tmp_path / "no-such-prm")
    assert "no-such-prm" in e.value.message
