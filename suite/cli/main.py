"""The `race` command line. Each subcommand lives in suite/cli/commands/<name>.py and registers
itself with @command; this module only discovers them and turns RaceError into one line."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import Callable

from .. import __version__
from ..errors import RaceError
from ..registry import Registry


def _discover() -> None:
    from . import commands

    for mod in pkgutil.iter_modules(commands.__path__):
        importlib.import_module(f"{commands.__name__}.{mod.name}")


COMMANDS: Registry[tuple[str, Callable[[argparse.ArgumentParser], Callable]]] = Registry("command", loader=_discover)
"""name -> (help, configure(parser) -> run(args) -> exit code); filled by importing suite.cli.commands."""


def command(name: str, help: str):
    """Register a subcommand. The decorated function configures its parser and returns the
    function that runs it: keeps heavy imports (torch) out of `race --help`."""
    return COMMANDS.register(name, lambda configure: (help, configure))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand; with `only`, the others get their name and help but no
    arguments (configuring all seventeen costs ~10 ms, most of a `race flops` call)."""
    parser = argparse.ArgumentParser(
        prog="race",
        description="RACE suite: per-phase compute accounting, reports and benchmarks for GRPO post-training.",
    )
    parser.add_argument("--version", action="version", version=f"race {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in sorted(COMMANDS):
        help_, configure = COMMANDS[name]
        p = sub.add_parser(name, help=help_, description=help_)
        if only in (None, name):
            p.set_defaults(_run=configure(p))
    return parser


def _dispatch(args) -> int:
    """Run the command, once the data folders are found (a broken install is one error here, not
    one per file later); an engine that is not installed names the extra that brings it."""
    from ..paths import check_data

    check_data()
    try:
        return int(args._run(args) or 0)
    except ModuleNotFoundError as e:
        from ..extras import extra_for, install_hint

        extra = extra_for(e.name)
        if extra is None:
            raise
        raise RaceError(f"this command needs the '{extra}' extra: {e.name} is not installed", install_hint(extra)) from None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    first = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(first if first in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return _dispatch(args)
    except RaceError as e:
        print(f"race {args.command}: error: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"  hint: {e.hint}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("race: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0

