"""Whether a completion's final answer is correct: the one rule the training rewards, pass@1
and the embedded models' accuracy all apply, so a reward and an evaluation never disagree about
the same completion.

The final answer is the content of the last ``\\boxed{...}`` (nested braces kept). It is correct
when it is the gold answer written the same way (spaces aside) or mathematically equivalent to
it by math-verify, both parsed as LaTeX math, gold first: "1,000" equals "1000", "\\frac{1}{2}"
equals "0.5". A completion without a boxed answer, or one math-verify cannot parse, is wrong.
"""

from __future__ import annotations

import threading


def extract_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} in `text` (nested braces kept), or None."""
    start = text.rfind("\\boxed{")
    while start != -1:
        i, depth = start + len("\\boxed{"), 1
        j = i
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        if depth == 0:
            return text[i:j - 1].strip()
        start = text.rfind("\\boxed{", 0, start)  # unclosed: try an earlier one
    return None


def _timeout(seconds: int) -> int | None:
    # math-verify's timeouts use signal.alarm, which only works on the main thread.
    return seconds if threading.current_thread() is threading.main_thread() else None


def answers_match(predicted: str | None, gold) -> bool:
    """Whether a final answer equals the gold answer: the same text (spaces aside), or
    symbolically equal by math-verify. Safe on any thread."""
    if not predicted:
        return False
    if predicted.replace(" ", "") == str(gold).replace(" ", ""):
        return True
    from math_verify import parse, verify

    try:
        g = parse(f"${gold}$", parsing_timeout=_timeout(5))
        p = parse(f"${predicted}$", parsing_timeout=_timeout(5))
        return bool(g and p and verify(g, p, timeout_seconds=_timeout(5)))
    except Exception:  # math-verify raises on pathological input: that answer is wrong
        return False


def is_correct(completion: str, gold) -> bool:
    """The verdict on one completion: its last \\boxed{} answer matches the gold answer.

    Args: `completion`, the generated text; `gold`, the gold final answer. Returns True when correct.
    """
    return answers_match(extract_boxed(completion), gold)


__all__ = ["extract_boxed", "answers_match", "is_correct"]
