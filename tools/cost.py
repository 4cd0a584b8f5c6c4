"""The cost calibration, rebuilt: the roofline efficiency of every run that states its time
(the published runs' reports in leaderboard/submissions, the MLPerf reference log in
tests/fixtures/mlperf imported as `race import mlperf` imports it) into tasks/cost/calibration.json,
and the leave-one-out table of docs/cost.md (each published run's hours predicted without its own
record). A tool of the checkout (tools/ is never installed); tests/test_cost.py reruns it and
compares byte for byte.

    .venv/bin/python tools/cost.py          # rebuild the calibration and the table
    .venv/bin/python tools/cost.py --check  # exit 1 when a committed file differs
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SUBMISSIONS = ROOT / "leaderboard" / "submissions"
MLPERF = ROOT / "tests" / "fixtures" / "mlperf"
CALIBRATION = ROOT / "tasks" / "cost" / "calibration.json"
PAGE = ROOT / "docs" / "cost.md"
BEGIN, END = "<!-- loo:begin -->", "<!-- loo:end -->"
CAL_BEGIN, CAL_END = "<!-- calibration:begin -->", "<!-- calibration:end -->"


def published_reports() -> list:
    """The published runs' reports (estimates with `sources`), by run id."""
    from suite.record.report import read_report

    reps = [read_report(p) for p in sorted(SUBMISSIONS.glob("*.json"))]
    return sorted((r for r in reps if isinstance(r.doc.get("sources"), dict)), key=lambda r: r.run_id)


def mlperf_report():
    """The MLPerf Training 6.1 GRPO reference log (GBS1024, seed 1) imported into a temporary folder."""
    from suite.integrations.mlperf import import_mlperf
    from suite.record.report import read_report
    from suite.train.cell import load_cell

    with tempfile.TemporaryDirectory() as tmp:
        import_mlperf(MLPERF / "GBS1024_seed_1.out", load_cell(MLPERF / "run-qwen35-397b-grpo.yaml", check_paths=False),
                      Path(tmp) / "mlperf")
        rep = read_report(Path(tmp) / "mlperf" / "report.json")
        rep.doc["run"]["id"] = "mlperf-qwen35-397b-grpo-gbs1024-seed1"
        return rep


def records(published=None) -> list:
    from suite.analysis.cost import records_of_report

    out = []
    for r in published if published is not None else published_reports():
        out += records_of_report(r, "published")
    out += records_of_report(mlperf_report(), "mlperf")
    return out


def calibration_text(recs) -> str:
    from suite.analysis.cost import calibration_doc

    return json.dumps(calibration_doc(recs), indent=1) + "\n"


def table(rows: list[dict]) -> str:
    """The leave-one-out table (Markdown) and its summary line."""
    from suite.analysis.cost import median

    lines = ["| run | accelerators | stated accelerator-hours | predicted (range) | inside | error |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['run']} | {r['gpus']} x {r['accelerator']} | {r['stated']:,.0f} | {r['predicted']:,.0f} "
                     f"({r['low']:,.0f}–{r['high']:,.0f}) | {'yes' if r['inside'] else '**no**'} | {r['error']:+.0%} |")
    inside = sum(r["inside"] for r in rows)
    med = median([abs(r["error"]) for r in rows])
    lines += ["", f"Stated hours inside the predicted range: **{inside} of {len(rows)}**; median absolute error of the "
                  f"central prediction: **{med:.0%}**."]
    return "\n".join(lines)


def loo_rows(published, recs) -> list[dict]:
    from suite.analysis.cost import leave_one_out

    return leave_one_out(published, recs)


def calibration_table(recs) -> str:
    """The records and the fits they give (Markdown)."""
    from suite.analysis.cost import fit

    lines = ["| source | run | accelerators | phase | floor hours (rollout + compute) | wall hours (stated or logged) | floor / wall |",
             "|---|---|---|---|---|---|---|"]
    for r in sorted(recs, key=lambda r: (r.source, r.run, r.phase)):
        lines.append(f"| {r.source} | {r.run} | {r.gpus} x {r.accelerator} | {r.phase} | "
                     f"{r.rollout_floor / 3600:,.2f} + {r.compute_floor / 3600:,.2f} | {r.seconds / 3600:,.2f} | "
                     f"{r.efficiency:.3f} |")
    lines.append("")
    for regime in ("dense", "moe"):
        e = fit(recs, regime=regime)
        lines.append(f"- {regime} plans: rollout efficiency {e.rollout:.3f}, update and reward {e.compute:.3f} "
                     f"(fitted on {e.n} records, {e.regime}); residual sd of log seconds {e.sd:.2f}, so the 80% "
                     f"range is x / {e.factor:.2f} .. x {e.factor:.2f}")
    return "\n".join(lines)


def _block(text: str, begin: str, end: str, body: str) -> str:
    i, j = text.index(begin) + len(begin), text.index(end)
    return text[:i] + "\n\n" + body + "\n\n" + text[j:]


def page_text(current: str, rows: list[dict], recs=None) -> str:
    text = _block(current, BEGIN, END, table(rows))
    if recs is not None and CAL_BEGIN in text:
        text = _block(text, CAL_BEGIN, CAL_END, calibration_table(recs))
    return text


def build(check: bool = False) -> list[str]:
    """Rebuild (or, with `check`, compare) the calibration file and the page's table; returns
    the files that differ."""
    from suite.atomic import write_text_atomic

    pub = published_reports()
    recs = records(pub)
    want = {CALIBRATION: calibration_text(recs),
            PAGE: page_text(PAGE.read_text(encoding="utf-8"), loo_rows(pub, recs), recs)}
    stale = [str(p.relative_to(ROOT)) for p, text in want.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    if not check:
        for p, text in want.items():
            p.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(p, text)
    return stale


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a committed file differs from a rebuild")
    args = ap.parse_args(argv)
    stale = build(check=args.check)
    if args.check and stale:
        print("stale: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
