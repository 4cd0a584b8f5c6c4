"""`race report LEDGER --spec SPEC`: build the compute-allocation report v1 from a ledger;
`race report --estimate SPEC`: build one from a paper's aggregate numbers; `race report
REPORT...`: the paper table of checked reports. Every report built is validated before it is
written: error findings refuse it (exit 1)."""

from __future__ import annotations

import sys
from typing import Callable

from .. import command
from ..args import add_format, add_out
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


@output_format("model-doc")
def _model_doc(report: dict) -> str:
    # The compute, time and energy section of the EU model documentation form (docs/cost.md).
    from ...analysis.filing import filing
    from ...record.report import Report
    from ...site.modeldoc import render

    return render(filing([Report(report)]))


@command("report", help="Build a compute-allocation report (v1 JSON) from a ledger and its run description, or "
                        "from a paper's aggregate numbers (--estimate); or, given report files, print the "
                        "compute-allocation table a paper should include.")
def configure(p):
    p.add_argument("ledger", nargs="*", metavar="LEDGER|REPORT",
                   help="with --spec: the run's ledger.jsonl (one record per optimizer step); without --spec: one "
                        "or more report JSON files, each checked by race validate, printed as one table")
    p.add_argument("--spec", metavar="SPEC", default=None,
                   help="the run description, YAML or JSON: a cell (tasks/cells/*.yaml, the file race run takes) or "
                        "an older run spec (grpo:, adapter: sections; docs/report.md); required to build a report "
                        "from a ledger")
    p.add_argument("--estimate", metavar="SPEC", default=None,
                   help="build a report from aggregate numbers instead of a ledger: a cell YAML with the setup "
                        "table's steps, mean_prompt_tokens and mean_completion_tokens (and optionally hardware), "
                        "priced by the same accounting and marked provenance estimated (docs/paper-report.md)")
    add_out(p, default=None, deprecated="--output",
            help="write the report to FILE atomically (default: standard output); the ledger path in the "
                 "report is relative to FILE's folder")
    p.add_argument("--evaluations", metavar="FILE", default=None,
                   help="JSON or JSONL file of evaluation rows {target, metric, value, n, ...} to include "
                        "(e.g. the rows race eval wrote)")
    p.add_argument("--created", metavar="DATETIME", default=None,
                   help="creation time to record (RFC 3339; default now), for reproducible reports")
    add_format(p, sorted({*FORMATS, "json", "text"}), default=None,
               help="output form. From a ledger or an estimate: json (default) is the report v1 document, markdown/latex "
                        "its table row. From report files: the table (total FLOPs and its split, p, tokens per phase, "
                        "model size, reward system, accounting convention, scores) as markdown, latex or json; "
                        "model-doc: the compute, time and energy section of the EU model documentation form, the "
                        "reports (a model's stages) added up to its cumulative compute (docs/cost.md). With "
                        "--predict-hours: text (default) or json")
    p.add_argument("--base-flops", type=float, default=None, metavar="F",
                   help="with --format model-doc: the base model's pretraining compute, where the suite's facts do "
                        "not know it (with --base-source)")
    p.add_argument("--base-source", default=None, metavar="TEXT", help="where --base-flops is stated (URL and place)")
    p.add_argument("--predict-hours", action="store_true",
                   help="with report files: predict each one's accelerator-hours from its FLOPs and hardware "
                        "(roofline floors over the efficiency fitted on runs that state time, docs/cost.md) and print "
                        "{stated, predicted, low, high}")
    p.add_argument("--leave-one-out", action="store_true",
                   help="with --predict-hours: fit without the report's own calibration record (a published run "
                        "predicted without its own hours)")
    return run


def _predict_hours(args) -> int:
    """race report --predict-hours [--leave-one-out] REPORT... [--format json]."""
    import json

    from ...analysis.cost import predict_report, read_calibration
    from ...record.report import read_report

    if not args.ledger or args.spec or args.estimate:
        raise RaceError("--predict-hours takes report files", "race report --predict-hours [--leave-one-out] REPORT --format json")
    fmt = args.format or "text"
    if fmt not in ("text", "json"):
        raise RaceError(f"--predict-hours prints text or json, not {fmt}", "drop --format, or give --format json")
    records = read_calibration()
    rows = [predict_report(read_report(x), records, leave_one_out=args.leave_one_out) for x in args.ledger]
    if fmt == "json":
        keep = ("run", "accelerator", "gpus", "stated", "predicted", "low", "high", "inside", "leave_one_out")
        out = [{k: r[k] for k in keep} for r in rows]
        print(json.dumps(out[0] if len(out) == 1 else out, indent=2))
        return 0
    for r in rows:
        stated = "not stated" if r["stated"] is None else f"stated {r['stated']:,.0f}"
        print(f"{r['run']}: {r['gpus']} x {r['accelerator']}, predicted {r['predicted']:,.0f} accelerator-hours "
              f"({r['low']:,.0f}-{r['high']:,.0f}), {stated}"
              + ("" if r["inside"] is None else f" ({'inside' if r['inside'] else 'outside'} the range)")
              + (" [leave-one-out]" if r["leave_one_out"] else ""))
    return 0


def _model_doc_files(args, out) -> int:
    """race report --format model-doc REPORT...: the stage reports of one model added up."""
    from ...analysis.filing import filing
    from ...atomic import write_text_atomic
    from ...record.report import read_report
    from ...site.modeldoc import render

    text = render(filing([read_report(x) for x in args.ledger], base_flops=args.base_flops, base_source=args.base_source))
    if out:
        write_text_atomic(out, text)
    else:
        sys.stdout.write(text)
    return 0


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


class ReportRefused(RaceError):
    """A report that would not pass `race validate`: nothing is written, exit 1."""

    exit_code = 1


def _validated(report: dict, base_dir, name: str) -> None:
    """Run the validator on a report about to be written (with its ledger, as race validate
    would): warnings go to stderr, error findings refuse it."""
    from ...validate import validate_report

    findings = validate_report(report, base_dir=base_dir, file=name)
    from ...textsafe import clean

    for f in findings:
        print(clean(f"race report: {f.severity}: {f.rule_id} at {f.path}: {f.message}\n  hint: {f.hint}"), file=sys.stderr)
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise ReportRefused(f"the report has {len(errors)} error finding(s) ({', '.join(f.rule_id for f in errors)}); "
                            "nothing was written",
                            "make the run description match the run (engine profile, attention, adapter, reward "
                            "model, steps), or check the ledger")


def _looks_like_ledger(path: str) -> bool:
    """A .jsonl file, or one whose first line is a ledger record: what a report table never takes."""
    from pathlib import Path

    from ...record.ledger import first_record

    return Path(path).suffix == ".jsonl" or first_record(path) is not None


def run(args) -> int:
    from pathlib import Path

    from ...atomic import write_text_atomic
    from ...record.build import Provenance, build_report
    from ...train.cell import load_cell, load_run_description

    if args.predict_hours:
        return _predict_hours(args)
    if args.leave_one_out:
        raise RaceError("--leave-one-out goes with --predict-hours", "race report --predict-hours --leave-one-out REPORT")
    fmt = args.format or "json"
    if fmt == "text":
        raise RaceError("--format text goes with --predict-hours",
                        f"a report prints as {', '.join(sorted(FORMATS))} (default json)")
    out = Path(args.out) if args.out else None
    if out is not None:
        from ...outputs import output_file

        output_file(out, inputs=[*args.ledger, args.spec, args.estimate, args.evaluations], what="--out")
    if args.spec and args.estimate:
        raise RaceError("--spec and --estimate build a report two different ways",
                        "give --spec SPEC with the run's ledger, or --estimate SPEC alone")
    if args.spec is None and args.estimate is None:   # report files in: the paper table out
        from ...site.tables import table_from_files

        if not args.ledger:
            raise RaceError("nothing to report", "race report LEDGER --spec SPEC, race report --estimate SPEC, or "
                                                 "race report REPORT... for the paper table")
        if fmt == "model-doc":
            return _model_doc_files(args, out)
        ledgers = [x for x in args.ledger if _looks_like_ledger(x)]
        if ledgers:
            raise RaceError(f"{ledgers[0]} is a ledger: a report is built from a ledger with its run description",
                            f"race report {ledgers[0]} --spec CELL.yaml -o report.json (the cell the run was made "
                            "from); without --spec race report prints the table of report JSON files")
        text = table_from_files(args.ledger, fmt)
        if out:
            write_text_atomic(out, text)
        else:
            sys.stdout.write(text)
        return 0
    evaluations = _read_evaluations(args.evaluations) if args.evaluations else None
    if args.created is not None:
        from rfc3339_validator import validate_rfc3339

        if not validate_rfc3339(args.created):
            raise RaceError(f"--created {args.created!r} is not an RFC 3339 date-time", "e.g. 2026-11-29T20:00:00Z")
    base = out.parent if out else Path.cwd()
    if args.estimate is not None:
        if args.ledger:
            raise RaceError("--estimate builds a report without a ledger", f"drop {args.ledger[0]}, or use --spec")
        cell = load_cell(args.estimate, check_paths=False)
        report = cell.estimate(created=args.created, evaluations=evaluations)
    else:
        if len(args.ledger) != 1:
            raise RaceError("--spec builds one report from one ledger", "pass a single LEDGER with --spec")
        # A report written outside its ledger's folder is refused by LEDGER-003 below.
        # LEDGER names a per-step ledger a run wrote (race import writes its own report).
        report = build_report(args.ledger[0], load_run_description(args.spec), report_dir=base, created=args.created,
                              evaluations=evaluations,
                              provenance=Provenance("measured", recorder="race report (a per-step ledger)"),
                              warn=lambda m: print(f"race report: warning: {m}", file=sys.stderr))
    _validated(report.doc, base, str(out) if out else "<report>")
    text = FORMATS[fmt](report.doc)
    if out:
        write_text_atomic(out, text)
        print(f"wrote {out} ({report.provenance_method}): {report.steps} steps, {report.total_flops:.4g} FLOPs "
              f"(rollout {report.shares['rollout']:.1%}, update p = {report.update_share:.1%}, "
              f"reward {report.reward_share:.1%})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
