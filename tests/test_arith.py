"""The embedded arithmetic task generator: seeded, self-consistent, rule-checkable."""

import json

from suite.train import arith
from suite.paths import tasks


def test_same_seed_same_problems_other_seed_other_problems():
    a, b, c = arith.generate(50, 3), arith.generate(50, 3), arith.generate(50, 4)
    assert a == b
    assert [p.question for p in a] != [p.question for p in c]


def test_steps_chain_and_answer_is_last_result():
    for difficulty in arith.DIFFICULTIES:
        for p in arith.generate(200, 9, difficulty):
            d = arith.DIFFICULTIES[difficulty]
            assert d.steps[0] <= len(p.steps) <= d.steps[1]
            assert str(p.steps[0].left) in p.question.split(".")[0]
            for prev, step in zip(p.steps, p.steps[1:]):
                assert step.left == prev.result
            for s in p.steps:
                assert arith.apply(s.left, s.op, s.right) == s.result
                assert 0 <= s.result <= d.max_value
            assert p.answer == p.steps[-1].result


def test_solution_layout_one_step_per_chunk_then_boxed():
    p = arith.generate(1, 5, "hard")[0]
    chunks = p.solution.split("\n\n")
    assert chunks[-1] == f"\\boxed{{{p.answer}}}"
    assert [arith.parse_step(c) for c in chunks[:-1]] == list(p.steps)
    assert "\n" not in "".join(chunks)


def test_only_hard_and_train_multiply():
    ops = lambda d: {s.op for p in arith.generate(300, 1, d) for s in p.steps}
    assert ops("easy") == {"+", "-"}
    assert "*" in ops("hard") and "*" in ops("train")


def test_step_labels_mark_near_misses_and_carried_errors():
    p = arith.Problem("q", (arith.Step(5, "+", 3, 8), arith.Step(8, "-", 2, 6)), 6)
    good = arith.split_steps(p.solution)
    assert arith.step_labels(good, p.solution, "6") == [True, True, True]
    off_by_one = ["5 + 3 = 9", "9 - 2 = 7", "\\boxed{7}"]
    assert arith.step_labels(off_by_one, p.solution, "6") == [False, False, False]
    wrong_op = ["5 - 3 = 2", "8 - 2 = 6", "\\boxed{6}"]
    assert arith.step_labels(wrong_op, p.solution, "6") == [False, True, True]
    extra = [*good[:2], "6 + 0 = 6", "\\boxed{6}"]
    assert arith.step_labels(extra, p.solution, "6") == [True, True, False, False]


def test_valid_step_labels_find_the_first_error_and_accept_it_carried_on():
    # The PRM's labels: a step is valid when it applies the question's event to the value the
    # step before it stated — so only the step where an error enters is invalid.
    p = arith.Problem("q", (arith.Step(5, "+", 3, 8), arith.Step(8, "-", 2, 6)), 6)
    good = arith.split_steps(p.solution)
    assert arith.valid_step_labels(good, p.solution) == [True, True, True]
    carried = ["5 + 3 = 9", "9 - 2 = 7", "\\boxed{7}"]
    assert arith.expected_steps(carried, p.solution) == ["5 + 3 = 8", "9 - 2 = 7", "\\boxed{7}"]
    assert arith.valid_step_labels(carried, p.solution) == [False, True, True]
    # Jumping back to gold is not a valid step from a stated 9; nor is a wrong operand or operator.
    assert arith.valid_step_labels(["5 + 3 = 9", "8 - 2 = 6", "\\boxed{6}"], p.solution) == [False, False, True]
    assert arith.valid_step_labels(["5 + 4 = 9", "9 + 2 = 11", "\\boxed{11}"], p.solution) == [False, False, True]
    # A skipped event, an extra step, a wrong box, an unparsable step.
    assert arith.valid_step_labels(["5 + 3 = 8", "\\boxed{8}"], p.solution) == [True, False]
    assert arith.valid_step_labels([*good[:2], "6 + 0 = 6", "\\boxed{6}"], p.solution) == [True, True, False, False]
    assert arith.valid_step_labels([*good[:2], "\\boxed{7}"], p.solution) == [True, True, False]
    assert arith.valid_step_labels(["five and three", "8 - 2 = 6", "\\boxed{6}"], p.solution) == [False, True, True]


def test_shipped_splits_have_their_sizes_and_no_test_leak():
    data = tasks() / "arith" / "data"
    rows = {n: [json.loads(l) for l in (data / f"{n}.jsonl").read_text().splitlines()]
            for n in ("train", "arith-easy-250", "arith-hard-250")}
    assert len(rows["arith-easy-250"]) == len(rows["arith-hard-250"]) == 250
    assert len(rows["train"]) >= 1000
    train_q = {r["question"] for r in rows["train"]}
    for name in ("arith-easy-250", "arith-hard-250"):
        assert not train_q & {r["question"] for r in rows[name]}
    for r in rows["arith-hard-250"][:20]:
        assert r["solution"].endswith(f"\\boxed{{{r['answer']}}}")
