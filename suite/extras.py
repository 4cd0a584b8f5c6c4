"""Which optional extra brings a module that could not be imported.

`pip install race-suite` is the light core (accounting, reports, validation, RACE, the leaderboard);
training, evaluation and grids need the engines of the `train` extra. The extras and their
requirements are read from the installed distribution's metadata, so pyproject.toml stays the one
list, and a command that meets a missing engine names the extra to install instead of a traceback.
"""

from __future__ import annotations

import re
from functools import lru_cache

DIST = "race-suite"
"""The distribution this package is installed as."""
CONSTRAINTS = "-c constraints.txt"
"""What every install of the engines passes (the repository's file pins the CPU torch build)."""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@lru_cache(maxsize=1)
def _requirements() -> dict[str, str]:
    """Normalized requirement name -> the extra that requires it (`train` where several do, else the
    first one named)."""
    from importlib.metadata import distributions

    # Every copy found, merged: a checkout may hold a stale race_suite.egg-info ahead of the install.
    reqs = [r for d in distributions(name=DIST) for r in d.requires or ()]
    out: dict[str, str] = {}
    for req in reqs:
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
        name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        if extra and name:
            # a requirement of several extras (torch: train, compare) is named by the engines' extra
            if extra.group(1) == "train" or _normal(name.group(1)) not in out:
                out[_normal(name.group(1))] = extra.group(1)
    return out


def extra_for(module: str | None) -> str | None:
    """The extra whose requirements include the top-level module `module` (lm_eval -> lm-eval),
    or None when no extra brings it."""
    if not module:
        return None
    return _requirements().get(_normal(module.split(".")[0]))


def install_hint(extra: str) -> str:
    """How to install `extra`."""
    return (f"pip install 'race-suite[{extra}]' {CONSTRAINTS} (the constraints file of the suite's repository "
            "pins the CPU build of torch and the engine versions)")
