"""RACE suite: where RL post-training compute goes.

Data flows one way: model config -> accounting; cell spec -> run -> ledger -> report;
reports -> validate / grid / frontier / diagnose -> reporters.
"""

__version__ = "0.1.0"

from . import _compat

_compat.install()  # old flat import paths (suite.modelspec, suite.report, ...) keep working
