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
