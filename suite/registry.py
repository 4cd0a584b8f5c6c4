"""Registries: name -> item, filled by decorators, refusing duplicate names.

One small generic class behind every registry of the suite (CLI commands, validation rules,
engine profiles, reward systems, executors, RACE fit models, report formats), as lm-eval's and
inspect_ai's registries are. A registry may be lazy: its `loader` (a function, or the
dotted name of a module to import) runs once, at the first lookup, to import the modules whose
decorators fill it, so heavy imports stay out of start-up.
"""

from __future__ import annotations

from typing import Callable, Iterator, Mapping, TypeVar

T = TypeVar("T")


class Registry(Mapping[str, T]):
    """A read-only mapping of registered items; `add` and `register` are the only ways in."""

    def __init__(self, kind: str, loader: Callable[[], object] | str | None = None):
        self.kind = kind
        """What the items are, for messages ("engine profile", "rule id", ...)."""
        self._items: dict[str, T] = {}
        self._loader = loader

    def add(self, name: str, item: T) -> T:
        """Register `item` under `name`; a name registered twice is a bug (ValueError)."""
        if name in self._items:
            raise ValueError(f"duplicate {self.kind} {name!r}")
        self._items[name] = item
        return item

    def register(self, name: str, make: Callable[[object], T] | None = None):
        """Decorator: register the decorated object (or `make(obj)`) under `name`; returns the
        object unchanged."""

        def decorate(obj):
            self.add(name, obj if make is None else make(obj))
            return obj

        return decorate

    def _load(self) -> None:
        if self._loader is not None:
            load, self._loader = self._loader, None
            if isinstance(load, str):
                import importlib

                importlib.import_module(load)
            else:
                load()

    def __getitem__(self, name: str) -> T:
        self._load()
        return self._items[name]

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(self._items)

    def __len__(self) -> int:
        self._load()
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._items)})"


__all__ = ["Registry"]
