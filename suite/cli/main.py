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


OUT_FOLDERS = frozenset({"curves", "diagnose", "eval", "findings", "frontier", "grid", "import", "quickstart", "run",
                         "study"})
"""Commands whose --out names a folder they write files into (leaderboard build, which replaces
its --out whole, checks it more strictly itself; schema's --out is a file)."""


INPUTS = {
    "bench": ("baseline", "compare"), "compare": ("config", "model"), "curves": ("runs",), "diagnose": ("directory",),
    "eval": ("run_dir", "base", "judge", "model", "native_reward_model", "data_dir"), "export": ("cell",),
    "findings": ("directory",), "flops": ("config", "model", "reward_model"), "frontier": ("directory",),
    "grid": ("grid",), "import": ("log", "cell", "key_map"), "leaderboard": ("submissions", "findings"),
    "plan": ("reward_model",), "quickstart": ("grid",), "report": ("ledger", "spec", "estimate", "evaluations"),
    "run": ("cell", "resume"), "study": ("study", "calibrate"), "submit": ("report",), "validate": ("paths",),
}
"""The arguments of each command that name files or folders it reads (never blocked on: a FIFO,
device or socket among them is refused before the command runs; tests/test_limits.py names a
FIFO at each)."""


def _dispatch(args) -> int:
    """Run the command, once the data folders are found (a broken install is one error here, not
    one per file later) and its named inputs are files or folders; an engine that is not
    installed names the extra that brings it."""
    from ..inputs import named
    from ..paths import check_data

    check_data()
    for dest in INPUTS.get(args.command, ()):
        v = getattr(args, dest, None)
        named(v if isinstance(v, list) else [v], "input")
    out = getattr(args, "out", None)
    if args.command in OUT_FOLDERS and out is not None:     # never into /, a system folder or home
        from ..outputs import output_dir

        output_dir(out, what="--out")
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
        return _report(args.command, e)
    except KeyboardInterrupt:
        print("race: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:          # no traceback, ever: one line naming the problem (RACE_DEBUG=1 re-raises)
        import os

        if os.environ.get("RACE_DEBUG"):
            raise
        return _report(args.command, as_race_error(e))


def as_race_error(e: BaseException) -> RaceError:
    """What the CLI prints for an exception that is not a RaceError: an OSError names its path
    and the fix (read-only, full disk, name too long), MemoryError and RecursionError say the
    input is too large or too deep, anything else is an internal error to report."""
    from ..outputs import os_error

    if isinstance(e, OSError):
        return os_error(e)
    if isinstance(e, MemoryError):
        return RaceError("out of memory: an input declares sizes far beyond any real run",
                         "check the counts in the input (layers, widths, K, prompts per step, steps)")
    if isinstance(e, RecursionError):
        return RaceError("an input is nested too deeply to read", "real inputs nest a few levels: flatten it")
    if isinstance(e, UnicodeDecodeError):
        return RaceError(f"an input is not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})",
                         "save the file as UTF-8")
    if isinstance(e, OverflowError) or (isinstance(e, ValueError) and ("digits" in str(e) or "Out of range" in str(e))):
        return RaceError(f"a number in the input is out of range ({_clip(str(e).split(';')[0])})",
                         "counts and FLOPs of real runs are far below 10^30")
    return RaceError(f"internal error: {type(e).__name__}: {_clip(str(e))}",
                     "please report it with the command line; RACE_DEBUG=1 shows the traceback")


def _clip(text: str, n: int = 200) -> str:
    from ..textsafe import clean

    text = clean(text)
    return text if len(text) <= n else text[:n] + "..."


def _report(command: str, e: RaceError) -> int:
    from ..textsafe import clean

    print(f"race {command}: error: {clean(e.message)}", file=sys.stderr)
    if e.hint:
        print(f"  hint: {clean(e.hint)}", file=sys.stderr)
    return e.exit_code

