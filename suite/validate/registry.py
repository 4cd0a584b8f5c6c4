"""Findings and the rule registry: every rule is a function with a stable ID, a one-line title,
a severity and a docstring that explains it (`race validate --list-rules`, docs/validation.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Literal, NamedTuple

from ..registry import Registry

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    """One problem found in one file."""

    rule_id: str  # stable rule ID, e.g. "ARITH-001"
    severity: Severity  # "error" or "warning" (after --strict every finding is an error)
    file: str  # the file it is in ("-" for standard input)
    path: str  # JSON path inside the document ("$.totals.flops.total"), or "line N" in a ledger
    message: str  # what is wrong, with the numbers
    hint: str  # how to fix it

    def to_dict(self) -> dict:
        """Stable machine form (keys in this order)."""
        return {"rule_id": self.rule_id, "severity": self.severity, "file": self.file,
                "path": self.path, "message": self.message, "hint": self.hint}


class Issue(NamedTuple):
    """What a rule function yields; the runner adds rule ID, severity and file."""

    path: str
    message: str
    hint: str = ""


@dataclass(frozen=True)
class Rule:
    """A registered check. `scope` says what it looks at: "input" (reading a file; emitted by
    the loader), "report" (a parsed report), "ledger" (a ledger's streamed summary).
    `requires` names the report sections that must be schema-valid before it runs."""

    id: str
    title: str
    severity: Severity
    scope: str
    requires: tuple[str, ...]
    fn: Callable[..., Iterable[Issue]]

    @property
    def family(self) -> str:
        """The ID prefix: INPUT, SCHEMA, ARITH, LEDGER, WORK, PROV, PHYS, CURVE, PLAUS."""
        return self.id.split("-", 1)[0]

    @property
    def doc(self) -> str:
        """The rule's docstring, dedented."""
        import inspect

        return inspect.cleandoc(self.fn.__doc__ or "")


RULES: Registry[Rule] = Registry("rule id", loader="suite.validate.runner", group="race.rules")
"""Every rule by ID; suite.validate.runner imports the rule modules that fill it, when first looked at,
and other packages add theirs through the `race.rules` entry points."""

# Run (and list) order: the schema decides which sections later rules may read.
FAMILY_ORDER = ("INPUT", "SCHEMA", "ARITH", "LEDGER", "WORK", "PROV", "PHYS", "SCHED", "CURVE", "ST", "RO", "PUB",
                "PLAUS", "INTERNAL")


def ordered(scope: str | None = None) -> list[Rule]:
    """Registered rules in run order (by family, then ID), optionally of one scope."""
    rank = {f: i for i, f in enumerate(FAMILY_ORDER)}
    rules = sorted(RULES.values(), key=lambda r: (rank.get(r.family, len(rank)), r.id))
    return [r for r in rules if scope is None or r.scope == scope]


def rule(rule_id: str, *, title: str, severity: Severity = "error", scope: str = "report",
         requires: Iterable[str] = ()):
    """Register a rule function under a stable ID. The function takes the scope's context and
    yields Issue(path, message, hint) for each problem.

    Args: `rule_id` (FAMILY-NNN, stable), `title` (one line), `severity` (error or warning),
    `scope` (report or ledger), `requires` (report sections that must be schema-valid first).
    Returns the decorator, which returns the function unchanged.
    """

    return RULES.register(rule_id, lambda fn: Rule(rule_id, title, severity, scope, tuple(requires), fn))
