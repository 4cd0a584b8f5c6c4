"""Layer 10, cli: the `race` command line. `main` parses and dispatches; each subcommand is a
module of `suite.cli.commands` that registers itself with `@command`."""

from .main import command, main

__all__ = ["command", "main"]
