"""Old import paths, kept for the code and documents that still use them.

Before the suite's modules were grouped into layer packages they were flat: `suite.modelspec`
is now `suite.accounting.modelspec`, `suite.grid` is split between planning and running, and so
on (ALIASES). Importing an old name gives a module that hands out the new modules' names, so no
file stays at an old path; new code imports the new paths (docs/architecture.md has the map)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types

ALIASES: dict[str, tuple[str, ...]] = {
    "suite.modelspec": ("suite.accounting.modelspec",),
    "suite.ledger": ("suite.record.ledger",),
    "suite.report": ("suite.record.report", "suite.record.runspec"),
    "suite.grid": ("suite.analysis.grid", "suite.pipeline.gridrun"),
    "suite.trl_callback": ("suite.train.trl_callback",),
}
"""Old module name -> the modules that now hold its names, searched in this order."""


def _alias(name: str) -> types.ModuleType:
    targets = ALIASES[name]
    mod = types.ModuleType(name, f"Old path of {', '.join(targets)} (suite._compat).")

    def __getattr__(attr: str):
        if attr == "__all__":
            return [n for t in targets for n in getattr(importlib.import_module(t), "__all__", ())]
        for t in targets:
            m = importlib.import_module(t)
            if hasattr(m, attr):
                return getattr(m, attr)
        raise AttributeError(f"module {name!r} (now {', '.join(targets)}) has no attribute {attr!r}")

    def __dir__():
        return sorted({n for t in targets for n in dir(importlib.import_module(t))})

    mod.__getattr__ = __getattr__
    mod.__dir__ = __dir__
    return mod


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old names of ALIASES and loads them as forwarding modules."""

    def find_spec(self, fullname, path=None, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname in ALIASES else None

    def create_module(self, spec):
        return _alias(spec.name)

    def exec_module(self, module):
        pass


def install() -> None:
    """Let `import suite.<old name>` find its forwarding module (idempotent)."""
    if not any(isinstance(f, _OldPaths) for f in sys.meta_path):
        sys.meta_path.append(_OldPaths())
