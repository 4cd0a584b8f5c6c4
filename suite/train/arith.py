"""The embedded arithmetic task: seeded multi-step word problems with step-by-step solutions.

A problem starts from a count and applies 2..4 events (gain, loss, optionally doubling or
tripling). The solution is one step per line, e.g. "5 + 3 = 8", steps separated by a blank
line ("\\n\\n"), then "\\boxed{n}" — the step layout Qwen2.5-Math-PRM scores, and one a rule can
check step by step (suite.train.rewards' dense system, the PRM's training labels).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from ..answers import is_correct

#: Separator between solution steps (what a PRM splits on).
STEP_SEP = "\n\n"

NAMES = ("Mia", "Tom", "Ana", "Ben", "Lily", "Sam")
OBJECTS = ("apples", "coins", "books", "cards", "shells", "stickers")
#: Operators in step lines; "*" is the optional multiplication.
OPS = ("+", "-", "*")

_GAIN = ("{p} gets {x} more.", "{p} finds {x} more.", "{p} buys {x} more.")
_LOSS = ("{p} gives away {x}.", "{p} loses {x}.", "{p} sells {x}.")
_TIMES = {2: "The number of {o} doubles.", 3: "The number of {o} triples."}


@dataclass(frozen=True)
class Difficulty:
    """How a split's problems are drawn."""

    steps: tuple[int, int]  #: inclusive range of the number of events (solution steps)
    start: tuple[int, int] = (2, 20)  #: inclusive range of the starting count
    operand: tuple[int, int] = (1, 12)  #: inclusive range of gain/loss operands
    p_times: float = 0.0  #: chance an event is doubling/tripling (0: only + and -)
    max_value: int = 99  #: running values never exceed this (keeps numbers at two digits)


#: Named difficulties of the embedded splits.
DIFFICULTIES: dict[str, Difficulty] = {
    "train": Difficulty(steps=(2, 3), p_times=0.1),
    "easy": Difficulty(steps=(2, 2)),
    "hard": Difficulty(steps=(3, 4), operand=(1, 15), p_times=0.25),
}


@dataclass(frozen=True)
class Step:
    """One solution step: `left op right = result`."""

    left: int
    op: str
    right: int
    result: int

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right} = {self.result}"


@dataclass(frozen=True)
class Problem:
    """A generated problem with its gold steps and answer."""

    question: str
    steps: tuple[Step, ...]
    answer: int

    @property
    def solution(self) -> str:
        """Gold solution text: steps separated by STEP_SEP, then \\boxed{answer}."""
        return format_solution([str(s) for s in self.steps], self.answer)

    def row(self) -> dict:
        """The JSON Lines row of a split (question, solution, answer as a string)."""
        return {"question": self.question, "solution": self.solution, "answer": str(self.answer)}


def apply(left: int, op: str, right: int) -> int:
    """The value of `left op right` for op in OPS."""
    return left + right if op == "+" else left - right if op == "-" else left * right


def format_solution(steps: list[str], answer) -> str:
    """Join step lines and the boxed answer the way the task's solutions are written."""
    return STEP_SEP.join([*steps, f"\\boxed{{{answer}}}"])


def make_problem(rng: random.Random, d: Difficulty) -> Problem:
    """Draw one problem with `rng` under difficulty `d`."""
    person, obj = rng.choice(NAMES), rng.choice(OBJECTS)
    value = rng.randint(*d.start)
    sentences = [f"{person} has {value} {obj}."]
    steps: list[Step] = []
    for _ in range(rng.randint(*d.steps)):
        if d.p_times and rng.random() < d.p_times and value * 2 <= d.max_value:
            x = 3 if value * 3 <= d.max_value and rng.random() < 0.5 else 2
            op, text = "*", _TIMES[x].format(o=obj)
        else:
            x = rng.randint(*d.operand)
            # Gain unless that would overflow; lose only what is there.
            gain = value + x <= d.max_value and (value < x or rng.random() < 0.5)
            if not gain and x > value:
                x = rng.randint(1, max(1, value))
            op = "+" if gain else "-"
            text = rng.choice(_GAIN if gain else _LOSS).format(p=person, x=x)
        result = apply(value, op, x)
        steps.append(Step(value, op, x, result))
        sentences.append(text)
        value = result
    sentences.append(f"How many {obj} does {person} have now?")
    return Problem(" ".join(sentences), tuple(steps), value)


def generate(n: int, seed: int, difficulty: str | Difficulty = "train") -> list[Problem]:
    """`n` problems drawn from `seed` (the same seed always gives the same list)."""
    d = DIFFICULTIES[difficulty] if isinstance(difficulty, str) else difficulty
    rng = random.Random(seed)
    return [make_problem(rng, d) for _ in range(n)]


_STEP_RE = re.compile(r"^\s*(-?\d+)\s*([+\-*x×])\s*(-?\d+)\s*=\s*(-?\d+)\s*$")


def parse_step(line: str) -> Step | None:
    """A step line "a op b = c" as a Step, or None when it is not one."""
    m = _STEP_RE.match(line)
    if not m:
        return None
    op = "*" if m.group(2) in "x×" else m.group(2)
    return Step(int(m.group(1)), op, int(m.group(3)), int(m.group(4)))


def split_steps(solution: str) -> list[str]:
    """A completion's steps: non-empty chunks between STEP_SEP (the PRM's step convention)."""
    return [s.strip() for s in solution.strip().split(STEP_SEP) if s.strip()]


def gold_steps(problem_solution: str) -> list[str]:
    """The step lines of a gold solution, without the final \\boxed{} line."""
    return [s for s in split_steps(problem_solution) if not s.startswith("\\boxed")]


def step_labels(steps: list[str], gold_solution: str, answer: str) -> list[bool]:
    """Rule labels for `steps` against a gold solution: step i is correct when it states the
    same computation and result as gold step i; the final \\boxed{} step when its answer is
    correct (suite.answers.is_correct). Steps past the gold solution's length, and steps that carry an earlier error
    forward, are wrong (labels after the first error follow from gold-matching)."""
    gold = [parse_step(s) for s in gold_steps(gold_solution)]
    labels = []
    for i, text in enumerate(steps):
        if text.startswith("\\boxed"):
            labels.append(i == len(gold) and is_correct(text, answer))
            continue
        step = parse_step(text)
        labels.append(step is not None and i < len(gold) and step == gold[i])
    return labels


def expected_steps(steps: list[str], gold_solution: str) -> list[str | None]:
    """What each of `steps` should read given the steps before it: gold step i's event applied
    to the value the previous step stated (so an error carried forward is consistent), then
    \\boxed{} of the last value; None past that. A PRM checks a step against this."""
    gold = [parse_step(s) for s in gold_steps(gold_solution)]
    expected: list[str | None] = []
    value = gold[0].left
    for i, text in enumerate(steps):
        if i < len(gold):
            g = gold[i]
            expected.append(str(Step(value, g.op, g.right, apply(value, g.op, g.right))))
        else:
            expected.append(f"\\boxed{{{value}}}" if i == len(gold) else None)
        step = parse_step(text)
        if step is not None:
            value = step.result
        elif i < len(gold):
            value = apply(value, gold[i].op, gold[i].right)
    return expected


def valid_step_labels(steps: list[str], gold_solution: str) -> list[bool]:
    """Local rule labels: step i is valid when it reads exactly as expected_steps says — the
    question's i-th event applied correctly to the previous step's value. Unlike step_labels,
    a step that carries an earlier error forward correctly is valid: the first wrong step is
    where the error is, and a min over step rewards still scores the solution by it."""
    return [reads_as_expected(text, e) for text, e in zip(steps, expected_steps(steps, gold_solution))]


def reads_as_expected(step: str, expected: str | None) -> bool:
    """A step's validity given what expected_steps says it should read (None: no step belongs there)."""
    return expected is not None and step == expected
