"""Where the suite's data folders live (tasks/, schemas/, reporters/).

They sit beside the package in a checkout; RACE_HOME points elsewhere if needed.
"""

import os
from pathlib import Path

from .errors import RaceError


def home() -> Path:
    root = Path(os.environ.get("RACE_HOME") or Path(__file__).resolve().parents[1])
    if not (root / "schemas").is_dir():
        raise RaceError(f"suite data folders not found under {root}",
                        "install from a checkout (pip install -e .) or set RACE_HOME to it")
    return root


def tasks() -> Path:
    return home() / "tasks"


def schemas() -> Path:
    return home() / "schemas"


def reporters() -> Path:
    return home() / "reporters"


def checkout_module(relpath: str, needs: str):
    """A module of the checkout that is not part of the installed package (tools/embedded.py,
    benchmarks/gate.py), loaded from its file. RaceError saying what it needs when there is no
    checkout (or the file is missing)."""
    import importlib.util
    import sys

    roots = [Path(__file__).resolve().parents[1]]    # the checkout an editable install runs from
    try:
        roots.append(home())
    except RaceError:
        pass
    path = next((r / relpath for r in roots if (r / relpath).is_file()), None)
    if path is None:
        raise RaceError(f"{relpath} is not here: {needs} needs a checkout of the suite",
                        "clone the repository, `pip install -e '.[test]'` in it, and run the command there "
                        "(or set RACE_HOME to the checkout)")
    name = "_race_" + relpath.removesuffix(".py").replace("/", "_")
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod      # dataclasses look their module up while the file runs
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]
