"""Registries: name -> item, filled by decorators, refusing duplicate names.

One small generic class behind every registry of the suite (CLI commands, validation rules,
engine profiles, reward systems, executors, RACE fit models, report formats, importer key maps),
as lm-eval's and inspect_ai's registries are. A registry may be lazy: its `loader` (a function,
or the dotted name of a module to import) runs once, at the first lookup, to import the modules
whose decorators fill it, so heavy imports stay out of start-up.

A registry with an entry-point `group` is also open to other packages: at the first lookup it
loads every installed entry point of that group (`race.engines`, `race.rewards`, `race.rules`,
`race.importers`). An entry point names a module (or an object in it); importing it runs the
decorators that register its items, exactly as the suite's own modules register theirs:

    # pyproject.toml of a plugin
    [project.entry-points."race.engines"]
    acme = "acme_race.engines"          # a module whose @engine("acme") class registers itself

A plugin that fails to import, or registers a name that is taken, is a RaceError naming it, and
loading is all or nothing: what the failing stage registered is taken back and the registry stays
unloaded, so every later lookup raises the same error rather than answering from a partial registry.
Looking up a name nobody registered is a RaceError naming the known ones (an UnknownName, which
is also a KeyError, so `name in registry` and `registry.get(name)` behave as for any mapping).
"""

from __future__ import annotations

from typing import Callable, Iterator, Mapping, TypeVar

from .errors import RaceError

T = TypeVar("T")


class UnknownName(RaceError, KeyError):
    """A registry lookup of a name nobody registered: the message names it, the hint the known names."""

    def __init__(self, kind: str, name: object, known: list[str]):
        super().__init__(f"unknown {kind} {name!r}", f"known: {', '.join(known) or 'none'}")
        self.name = name


class Registry(Mapping[str, T]):
    """A read-only mapping of registered items; `add` and `register` are the only ways in."""

    def __init__(self, kind: str, loader: Callable[[], object] | str | None = None, *, group: str | None = None):
        self.kind = kind
        """What the items are, for messages ("engine profile", "rule id", ...)."""
        self.group = group
        """The entry-point group other packages register into (e.g. "race.engines"), or None."""
        self._items: dict[str, T] = {}
        self._loader = loader
        self._loaded = False
        self._own_loaded = False

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
        """Run the loader, then the group's plugins, all or nothing: a stage that fails takes back
        what it registered and leaves the registry unloaded, so every later lookup fails the same
        way instead of using a partial registry. The suite's own loader runs once (the modules it
        imports register on import, which Python does not repeat)."""
        if self._loaded:
            return
        self._loaded = True         # before loading: a plugin that looks an item up does not recurse
        try:
            if not self._own_loaded:
                self._stage(self._run_loader)
                self._own_loaded = True
            if self.group:
                self._stage(lambda: _load_plugins(self.group))
        except BaseException:
            self._loaded = False
            raise

    def _stage(self, run: Callable[[], object]) -> None:
        before = dict(self._items)
        try:
            run()
        except BaseException:
            self._items = before    # what the failed stage registered is taken back
            raise

    def _run_loader(self) -> None:
        if isinstance(self._loader, str):
            import importlib

            importlib.import_module(self._loader)
        elif self._loader is not None:
            self._loader()

    def __getitem__(self, name: str) -> T:
        self._load()
        try:
            return self._items[name]
        except (KeyError, TypeError):
            raise UnknownName(self.kind, name, sorted(self._items)) from None

    def __contains__(self, name: object) -> bool:
        self._load()
        try:
            return name in self._items
        except TypeError:       # an unhashable name is in no registry
            return False

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(self._items)

    def __len__(self) -> int:
        self._load()
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._items)})"


def _load_plugins(group: str) -> None:
    """Import every installed entry point of `group` (their decorators register their items)."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=group):
        try:
            ep.load()
        except Exception as e:  # a plugin's ImportError, a duplicate name, its own bug: one line naming it
            dist = getattr(ep, "dist", None)
            where = f" (package {dist.name} {dist.version})" if dist is not None else ""
            raise RaceError(f"plugin {ep.name} = {ep.value} of entry point group {group}{where} failed to load: "
                            f"{type(e).__name__}: {e}", "fix the plugin or uninstall it") from None


__all__ = ["Registry", "UnknownName"]
