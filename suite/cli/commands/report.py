"""`race report LEDGER --spec SPEC`: build the compute-allocation report v1 from a ledger."""

from __future__ import annotations

import sys
from typing import Callable

from .. import command
from ...errors import RaceError
from ...registry import Registry

# Output renderers: name -> render(report dict) -> text. JSON is the report itself; other
# presentations (markdown, latex) register here from the reporters without touching this file.
FORMATS: Registry[Callable[[dict], str]] = Registry("report format")


def output_format(name: str):
    """Register a renderer for `race report --format NAME`."""
    return FORMATS.register(name)


@output_format("json")
def _json(report: dict) -> str:
    import json

    return json.dumps(report, indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def _table(fmt: str):
    # The paper table (suite.site.tables) of the one report just built.
    def render(report: dict) -> str:
        from ...site.render import row_from_report
        from ...site.tables import render_table

        return render_table([row_from_report(report, id=report["run"]["id"])], fmt)

    return render


output_format("markdown")(_table("markdown"))
output_format("latex")(_table("latex"))


@command("report", help="Build a compute-allocation report (v1 JSON) from a ledger and its run spec; or, given "
                        "report files, print the compute-allocation table a paper should include.")
def configure(p):
    p.add_argument("ledger", nargs="+", metavar="LEDGER|REPORT",
                   help="with --spec: the run's ledger.jsonl (one record per optimizer step); without --spec: one "
                        "or more report JSON files, each checked by race validate, printed as one table")
    p.add_argument("--spec", metavar="SPEC", default=None,
                   help="run spec, YAML or JSON: policy, adapter, grpo, reward, engine, accounting, budget, label, "
                        "seed (docs/report.md); required to build a report from a ledger")
    p.add_argument("--output", "-o", metavar="FILE", default=None,
                   help="write the report to FILE atomically (default: standard output); the ledger path in the "
                        "report is relative to FILE's folder")
    p.add_argument("--evaluations", metavar="FILE", default=None,
                   help="JSON or JSONL file of evaluation rows {target, metric, value, n, ...} to include "
                        "(e.g. what race evaluate wrote)")
    p.add_argument("--created", metavar="DATETIME", default=None,
                   help="creation time to record (RFC 3339; default now), for reproducible reports")
    p.add_argument("--format", choices=sorted(FORMATS) or ["json"], default="json",
                   help="output format. From a ledger: json is the report v1 document, markdown/latex its table row. "
                        "From report files: the table (total FLOPs and its split, p, tokens per phase, model size, "
                        "reward system, accounting convention, scores) as markdown, latex or json")
    return run


def _read_evaluations(path: str) -> list[dict]:
    from pathlib import Path

    from ... import jsonstrict

    p = Path(path)
    try:
        if p.suffix == ".jsonl":
            rows = [jsonstrict.loads(line) for line in p.read_bytes().splitlines() if line.strip()]
        else:
            rows = jsonstrict.load(p)
    except OSError as e:
        raise RaceError(f"cannot read evaluations {p}: {e.strerror or e}") from None
    except jsonstrict.JSONInputError as e:
        raise RaceError(f"evaluations {p}: {e.message}", e.hint) from None
    if isinstance(rows, dict):
        rows = rows.get("evaluations", [rows])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise RaceError(f"evaluations {p} must hold objects {{target, metric, value, n}}")
    return rows


def run(args) -> int:
    from pathlib import Path

    from ...atomic import write_text_atomic
    from ...record.report import build_report
    from ...record.runspec import load_run_spec

    out = Path(args.output) if args.output else None
    if args.spec is None:           # report files in: the paper table out (suite.site.render)
        from ...site.tables import table_from_files

        text = table_from_files(args.ledger, args.format)
        if out:
            write_text_atomic(out, text)
        else:
            sys.stdout.write(text)
        return 0
    if len(args.ledger) != 1:
        raise RaceError("--spec builds one report from one ledger", "pass a single LEDGER with --spec")
    args.ledger = args.ledger[0]
    spec = load_run_spec(args.spec)
    evaluations = _read_evaluations(args.evaluations) if args.evaluations else None
    if args.created is not None:
        from rfc3339_validator import validate_rfc3339

        if not validate_rfc3339(args.created):
            raise RaceError(f"--created {args.created!r} is not an RFC 3339 date-time", "e.g. 2026-11-29T20:00:00Z")
    report = build_report(args.ledger, spec, report_dir=out.parent if out else Path.cwd(), created=args.created,
                          evaluations=evaluations, warn=lambda m: print(f"race report: warning: {m}", file=sys.stderr))
    if report["ledger"]["path"].startswith("../"):
        print(f"race report: warning: the report lies outside the ledger's folder ({report['ledger']['path']}); "
              "race validate refuses ledger paths that leave the report's folder: write the report beside the ledger",
              file=sys.stderr)
    text = FORMATS[args.format](report)
    if out:
        write_text_atomic(out, text)
        t = report["totals"]
        print(f"wrote {out}: {t['steps']} steps, {t['flops']['total']:.4g} FLOPs "
              f"(rollout {t['shares']['rollout']:.1%}, update p = {t['update_share']:.1%}, "
              f"reward {t['shares']['reward']:.1%})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
