"""lm-eval hooks for the RACE targets. lm-eval loads this file by path (`!function utils.x` in
the YAMLs beside it); it is never installed as a module. All logic lives in the suite so
it is importable and tested on its own; this file only names it for the YAMLs."""

from suite.answers import is_correct
from suite.evaluate import targets


def load_arith_easy(**metadata):
    """arith-easy-250: tasks/arith/data/arith-easy-250.jsonl (embedded)."""
    return targets.target_dataset("arith-easy-250", metadata)


def load_arith_hard(**metadata):
    """arith-hard-250: tasks/arith/data/arith-hard-250.jsonl (embedded)."""
    return targets.target_dataset("arith-hard-250", metadata)


def load_arith_easy_2000(**metadata):
    """arith-easy-2000: tasks/arith/data/arith-easy-2000.jsonl (embedded, 2000 fresh problems)."""
    return targets.target_dataset("arith-easy-2000", metadata)


def load_gsm8k_250(**metadata):
    """gsm8k-250: the 250 documented GSM8K test rows (ids/gsm8k-250.txt)."""
    return targets.target_dataset("gsm8k-250", metadata)


def load_math500_250(**metadata):
    """math500-250: the 250 documented MATH-500 rows (ids/math500-250.txt)."""
    return targets.target_dataset("math500-250", metadata)


def doc_to_text(doc):
    """The user turn: the problem text (the chat template and system prompt come from lm-eval)."""
    return doc["question"]


def doc_to_target(doc):
    """The gold final answer."""
    return doc["answer"]


def process_results(doc, results):
    """pass@1 of the one greedy completion: suite.answers.is_correct, the rule the rewards apply."""
    return {"pass@1": float(is_correct(results[0], doc["answer"]))}
