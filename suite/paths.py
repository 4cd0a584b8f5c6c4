"""Where the suite's data folders live (schemas/, tasks/, reporters/).

In a checkout they are the top-level folders, the source of truth, read in place (an editable
install too). A wheel carries copies as package data in suite/_data/ (hatch_build.py puts them
there), found with importlib.resources. RACE_HOME, when set, overrides both: a folder holding
the three. A missing folder is one RaceError naming it: `race` checks them all at start-up
(check_data), the Python API where it first reads one.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import RaceError

DATA = ("schemas", "tasks", "reporters")
"""The data folders every command may read; hatch_build.DATA ships the same three."""


def _checkout() -> Path | None:
    """The checkout this package runs from (its pyproject.toml beside the data), or None."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() and (root / "schemas").is_dir() else None


def _packaged() -> Path | None:
    """suite/_data of an installed wheel, or None. It must be a real folder: transformers and
    lm-eval read the embedded models and task files by path."""
    from importlib.resources import files

    data = files(__package__) / "_data"
    return data if isinstance(data, Path) and data.is_dir() else None


def home() -> Path:
    """The data home: RACE_HOME, else the checkout, else the data installed with the package. Its
    schemas/ marks it (a build of the embedded task may fill tasks/ later); RaceError if none.

    Returns the folder holding schemas/, tasks/ and reporters/.
    """
    env = os.environ.get("RACE_HOME")
    root = Path(env).expanduser() if env else (_checkout() or _packaged())
    if root is not None and (root / "schemas").is_dir():
        return root
    raise _missing(env, root, ["schemas/"])


def data_home() -> Path:
    """Where the suite's data lives wherever it is installed (the embedded tiny models and tasks
    under tasks/, the schemas, the reporters): RACE_HOME, else the checkout, else the installed
    package's data. RaceError if none holds schemas/.

    Returns the folder holding schemas/, tasks/ and reporters/.
    """
    return home()


def check_data() -> Path:
    """home(), with every data folder present: what `race` checks at start-up, so a broken install
    is one error naming the missing folders instead of a failure per file later."""
    root = home()
    missing = [f"{d}/" for d in DATA if not (root / d).is_dir()]
    if missing:
        raise _missing(os.environ.get("RACE_HOME"), root, missing)
    return root


def _missing(env: str | None, root: Path | None, missing: list[str]) -> RaceError:
    if env:
        return RaceError(f"RACE_HOME={env} has no {', '.join(missing)}",
                         "point RACE_HOME at a checkout of the suite (it holds schemas/, tasks/ and reporters/), "
                         "or unset it to use the data installed with the package")
    where = root or Path(__file__).resolve().parent / "_data"
    return RaceError(f"the suite's data folders are missing: no {', '.join(missing)} in {where}",
                     "reinstall the package (pip install --force-reinstall race-suite), or set RACE_HOME to a "
                     "checkout of the suite")


def tasks() -> Path:
    return home() / "tasks"


def schemas() -> Path:
    return home() / "schemas"


def reporters() -> Path:
    return home() / "reporters"


def shipped(path: str | os.PathLike) -> Path:
    """`path` as given when it exists; else a relative path like tasks/cells/s-sparse.yaml read
    from the data home, so the README's paths work from any folder with the package installed."""
    p = Path(path)
    if p.exists() or p.is_absolute() or not p.parts or p.parts[0] not in DATA:
        return p
    try:
        candidate = home() / p
    except RaceError:
        return p
    return candidate if candidate.exists() else p


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
                        "clone the repository, `pip install -e '.[train,test]'` in it, and run the command there "
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
