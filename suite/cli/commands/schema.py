"""`race schema [report|ledger|race] [--out FILE]`: the JSON Schemas the standard publishes."""

from __future__ import annotations

import sys

from suite.cli import command
from suite.cli.args import add_out
from suite.errors import RaceError


@command("schema", help="Print or write a JSON Schema the standard publishes (the report, one ledger record, "
                        "race.json), as shipped, with its stable $id; without a name, list them with their "
                        "versions.")
def configure(p):
    from suite.record.published import PUBLISHED

    p.add_argument("name", nargs="?", choices=list(PUBLISHED), metavar="NAME",
                   help=f"one of {', '.join(PUBLISHED)} (default: list them)")
    add_out(p, metavar="FILE", default=None,
            help="write the schema to FILE (atomically) instead of standard output")
    return run


def run(args) -> int:
    from suite.record import published

    if args.name is None:
        if args.out:
            raise RaceError("--out needs a schema name", "race schema report --out report.schema.json")
        for name, file in published.PUBLISHED.items():
            print(f"{name:<7} {published.version(name):<5} {published.schema_id(name)}  (schemas/{file})")
        return 0
    text = published.schema_text(args.name)
    if args.out:
        from suite.outputs import output_file

        output_file(args.out, what="--out")
        from suite.atomic import write_text_atomic

        write_text_atomic(args.out, text)
        print(f"wrote {args.out}: {args.name} schema {published.version(args.name)} "
              f"({published.schema_id(args.name)})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
