"""One CLI grammar (issue 39, docs/cli.md): walk every subcommand and sub-subcommand of `race`
and hold each to the same spelling: what a command writes is `--out/-o`; a command that prints in
more than one form takes `--format` (with `--json` only as its alias); `--engine-profile` is the
accounting profile; old spellings live only as hidden aliases named in the new option's help.
A new command that breaks the grammar fails here."""

from __future__ import annotations

import argparse
import re

import pytest

from suite.cli.args import ROLE
from suite.cli.main import build_parser, main

# Old spellings still accepted for old scripts: (command, flag) -> the option it stands for.
DEPRECATED = {("validate", "--output"): "--out", ("report", "--output"): "--out", ("flops", "--engine"): "--engine-profile",
              ("plan", "--engine"): "--engine-profile"}

# Options that write something beside the command's --out, each named for what it is.
SIDE_OUTPUTS = {("compare", "--conformance"), ("findings", "--export"), ("submit", "--sarif"), ("export", "--write-data")}

# Help that says an option names a place the command writes to.
WRITES = re.compile(r"^(also )?(write|keep)s?\b|\bwhere .* go(es)?\b|\bfolder (for|to write)\b|^(output|run) folder",
                    re.I)


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) of every parser under `race`."""
    yield path, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _walk(sub, (*path, name))


PARSERS = [(" ".join(p), parser) for p, parser in _walk(build_parser()) if p]


def _role(a):
    return getattr(a, ROLE, None)


def test_the_walk_reaches_every_command():
    names = {p for p, _ in PARSERS}
    from suite.cli.main import COMMANDS

    assert set(COMMANDS) <= names and {"leaderboard build", "leaderboard comment"} <= names


@pytest.mark.parametrize("path,parser", PARSERS, ids=[p for p, _ in PARSERS])
def test_every_subcommand_speaks_one_grammar(path, parser):
    top = path.split()[0]
    for a in parser._actions:
        flags, role = set(a.option_strings), _role(a)
        if "-o" in flags or "--out" in flags:
            assert role == "out" and a.option_strings == ["--out", "-o"], f"race {path}: {a.option_strings}"
        if role == "out":
            assert a.help and a.help != argparse.SUPPRESS
        if "--format" in flags:
            assert role == "format" and a.option_strings == ["--format"] and len(a.choices) >= 2, path
        if "--json" in flags:  # only ever the alias of --format json
            assert role == "format-alias" and a.dest == "format" and a.const == "json", f"race {path}: --json"
            fmt = next(b for b in parser._actions if "--format" in b.option_strings)
            assert "json" in fmt.choices
        if "--engine-profile" in flags:
            assert role == "engine-profile" and a.dest == "engine_profile" and a.metavar == "PROFILE", path
        if role == "deprecated":
            (flag,) = a.option_strings
            new = DEPRECATED.get((top, flag))
            assert new, f"race {path}: {flag} is a deprecated spelling nobody declared"
            target = next(b for b in parser._actions if new in b.option_strings)
            assert a.dest == target.dest and a.help == argparse.SUPPRESS
            assert f"{flag} is the deprecated spelling" in target.help
            continue
        # the spellings the grammar retired, and any other name for a written file
        assert not flags & {"--output", "--json-out", "--engine", "--output-dir", "--outdir"}, f"race {path}: {flags}"
        if role == "side-output":
            assert (top, a.option_strings[0]) in SIDE_OUTPUTS, f"race {path}: undeclared side output {a.option_strings}"
        elif a.option_strings and a.nargs != 0 and role != "out" and a.help and WRITES.search(a.help):
            pytest.fail(f"race {path}: {a.option_strings[0]} names something it writes: use add_out "
                        f"(--out/-o) or add_side_output ({a.help[:60]!r})")


def test_old_spellings_give_the_same_bytes(tmp_path, capsys):
    """--json is --format json and --engine is --engine-profile: the same bytes out."""
    base = ["flops", "--model", "Qwen2.5-0.5B-Instruct", "--group-size", "2", "--prompts-per-step", "2"]
    outs = []
    for extra in (["--format", "json", "--engine-profile", "trl-vllm"], ["--json", "--engine", "trl-vllm"]):
        assert main([*base, *extra]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and '"engine_profile": "trl-vllm"' in outs[0]
    assert main([*base, "--format", "json"]) == 0 and '"engine_profile": "trl-vllm"' not in capsys.readouterr().out


def test_validate_writes_the_same_sarif_through_out_and_its_old_spelling(tmp_path):
    """`race validate --format sarif` (what docs/ci.md's workflow runs): --out, -o and the
    deprecated --output write the same bytes."""
    from pathlib import Path

    examples = Path(__file__).resolve().parents[1] / "schemas" / "examples" / "valid"
    for flag in ("--out", "-o", "--output"):
        assert main(["validate", str(examples), "--format", "sarif", flag, str(tmp_path / f"{flag}.sarif")]) == 0
    first = (tmp_path / "--out.sarif").read_bytes()
    assert b'"version": "2.1.0"' in first
    assert first == (tmp_path / "-o.sarif").read_bytes() == (tmp_path / "--output.sarif").read_bytes()


def test_report_format_names_the_form_for_each_mode(capsys):
    """race report's one --format: a report's forms (json default) when building or tabling, text
    (default) or json with --predict-hours; the wrong pairing is one line with the fix, exit 2."""
    from pathlib import Path

    example = str(Path(__file__).resolve().parents[1] / "schemas" / "examples" / "valid" /
                  "paper-qwen1.5b-lora64-sparse.json")
    assert main(["report", example, "--format", "text"]) == 2
    assert "--format text goes with --predict-hours" in capsys.readouterr().err
    assert main(["report", "--predict-hours", example, "--format", "markdown"]) == 2
    assert "--predict-hours prints text or json, not markdown" in capsys.readouterr().err
    assert main(["report", example, "--format", "markdown"]) == 0 and capsys.readouterr().out.startswith("| run |")
