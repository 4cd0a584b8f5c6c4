"""One module per `race` subcommand; each registers itself with suite.cli.command."""
