"""One correctness rule: a completion gets the same verdict from the training rewards, from
pass@1 (the lm-eval task's process_results) and from the embedded models' accuracy, because all
of them ask suite.answers.is_correct. The forms below are where separate code paths used to
disagree: fractions against decimals, \\dfrac, x=3, percent, radicals, tuples, thousands
separators, units, text, and no answer at all."""

from __future__ import annotations

import importlib.util

import pytest

from suite.answers import answers_match, extract_boxed, is_correct
from suite.paths import tasks
from suite.train.rewards import STRUCTURED_WEIGHTS, dense_labels, get_reward_system
from tools import embedded

Q = "Mia has 5 apples. Mia gets 3 more. Mia loses 2. How many apples does Mia have now?"

CASES = [  # (completion, gold, correct?)
    ("5 + 3 = 8\n\n8 - 2 = 6\n\n\\boxed{6}", "6", True),
    ("\\boxed{\\frac{1}{2}}", "0.5", True),
    ("\\boxed{0.5}", "\\frac{1}{2}", True),
    ("\\boxed{\\dfrac{2}{4}}", "\\frac{1}{2}", True),
    ("\\boxed{1,000}", "1000", True),
    ("\\boxed{x=3}", "3", True),
    ("\\boxed{3}", "x=3", True),
    ("\\boxed{50\\%}", "50", True),
    ("\\boxed{\\sqrt{8}}", "2\\sqrt{2}", True),
    ("\\boxed{(3,\\frac{\\pi}{2})}", "\\left( 3, \\frac{\\pi}{2} \\right)", True),
    ("\\boxed{12/2}", "6", True),
    ("\\boxed{6.0}", "6", True),
    ("\\boxed{\\text{(C)}}", "\\text{(C)}", True),   # the same text, which math-verify cannot parse
    ("first \\boxed{5}, corrected: \\boxed{7}", "7", True),
    ("\\boxed{7}", "6", False),
    ("\\boxed{\\frac{1}{3}}", "0.5", False),
    ("\\boxed{2,5}", "2.5", False),
    ("\\boxed{\\pi}", "3.14159", False),
    ("Mia has 6 apples now.", "6", False),
    ("\\boxed{6", "6", False),
    ("\\boxed{}", "6", False),
    ("", "6", False),
]


def _lm_eval_hooks():
    spec = importlib.util.spec_from_file_location("race_lm_eval_utils", tasks() / "lm_eval" / "utils.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("completion, gold, correct", CASES)
def test_one_verdict_everywhere(completion, gold, correct):
    assert is_correct(completion, gold) is correct
    assert answers_match(extract_boxed(completion), gold) is correct
    # training reward: the sparse system scores exactly the verdict, the structured one its answer part
    assert get_reward_system("sparse")([Q], [completion], answer=[gold]) == [float(correct)]
    format_part = get_reward_system("structured")([Q], [completion], answer=[gold])[0] - STRUCTURED_WEIGHTS["answer"] * correct
    assert round(format_part, 6) in (0.0, 0.2, 0.3)       # what is left is the format credit only
    # pass@1: the lm-eval task's process_results
    assert _lm_eval_hooks().process_results({"answer": gold}, [completion]) == {"pass@1": float(correct)}
    # the embedded models' accuracy (checkpoint selection of race embedded build)
    assert embedded.accuracy([completion], [gold]) == float(correct)


def test_final_step_label_is_the_same_verdict():
    """The dense reward labels a final \\boxed{} step with the same rule, with or without a
    gold solution."""
    gold = "5 + 3 = 8\n\n8 - 2 = 6\n\n\\boxed{6}"
    for last, correct in (("\\boxed{6}", True), ("\\boxed{6.0}", True), ("\\boxed{12/2}", True), ("\\boxed{7}", False)):
        text = f"5 + 3 = 8\n\n8 - 2 = 6\n\n{last}"
        assert dense_labels(text, "6", gold)[-1] is correct
        assert dense_labels(text, "6", None)[-1] is correct
