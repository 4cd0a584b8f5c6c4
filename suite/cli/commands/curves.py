"""`race curves RUNS...`: compute-performance curves per allocation, fitted to the scores along the
runs (ScaleRL's saturating form), with bootstrap intervals; refuses curves too short or too flat."""

from __future__ import annotations

from suite.cli import command
from suite.cli.args import add_out
from suite.errors import RaceError


@command("curves", help="fit ScaleRL's saturating curve R(C) = R0 + (A - R0) / (1 + (C_mid/C)^B) per allocation "
                        "to the scores along the runs (race eval --curve), seeds pooled, with bootstrap intervals "
                        "of A, B, C_mid; which allocation has the highest asymptote and the best efficiency; "
                        "extrapolation to --budget; curves too short or too flat to fit are refused by name")
def configure(p):
    p.epilog = ("RUNS are run folders or folders holding them (a grid or study output, an exported study). The "
                "curves of one allocation pool its seeds; every point is scored on the problems all points share. "
                "Writes OUT/curves.json (schemas/curves-v1.schema.json) and curves.png/.svg. docs/findings.md "
                "explains the fit and the refusals.")
    p.add_argument("runs", nargs="+", metavar="RUNS", help="run folders, or folders of them")
    p.add_argument("--budget", type=float, metavar="FLOPS", help="extrapolate every fitted curve to this training "
                                                                  "budget, with its interval")
    add_out(p, metavar="OUT", help="where curves.json and the figure go (default: the first RUNS folder)")
    p.add_argument("--metric", nargs="+", default=None, metavar="METRIC",
                   help="metrics to fit (default: pass@1 process_judge; native_reward is each reward's own scale)")
    p.add_argument("--replicates", type=int, default=1000, metavar="N", help="bootstrap replicates (default 1000)")
    p.add_argument("--seed", type=int, default=2607, metavar="N", help="seed of the resampling plan (default 2607)")
    p.add_argument("--surface", action="store_true",
                   help="also fit one surface per condition over update and rollout FLOPs, R(C_u, C_r) = R_inf - "
                        "A/C_u^alpha - B/C_r^beta (Huber loss, L-BFGS-B with restarts, bootstrap intervals; every "
                        "budget given pooled), and score it as a predictor of the held-out budget beside RACE, the "
                        "global baseline and the per-allocation curves (hit rate and regret with intervals); "
                        "pilot and validation budgets from RUNS' study.json, else the smallest and largest")
    p.add_argument("--no-plots", action="store_true", help="skip the figure")
    return run


def run(args) -> int:
    from pathlib import Path

    from suite.analysis import curves
    from suite.analysis.evidence import load_runs
    from suite.evaluate.harness import METRICS
    from suite.site import curves as page

    if args.replicates < 1:
        raise RaceError(f"--replicates must be positive, got {args.replicates}")
    if args.seed < 0:
        raise RaceError(f"--seed must be non-negative, got {args.seed}")
    if args.budget is not None and not args.budget > 0:
        raise RaceError(f"--budget must be a positive number of FLOPs, got {args.budget:g}")
    metrics = tuple(args.metric or curves.METRICS)
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise RaceError(f"unknown metric {unknown[0]!r}", f"choose from {', '.join(METRICS)}")
    runs, seen = [], set()
    for folder in args.runs:
        for r in load_runs(folder):
            key = (Path(folder).resolve() / r.path).resolve()
            if key not in seen:
                seen.add(key)
                runs.append(r)
    doc = curves.curves_of(runs, budget=args.budget, replicates=args.replicates, seed=args.seed, metrics=metrics,
                           source={"folders": [str(f) for f in args.runs]})
    if args.surface:
        from suite.analysis import findings, surface
        from suite.analysis.study import findings_settings, read_study_json

        holdout = None
        if len({r.budget for r in runs}) > 1:     # the held-out table, on the findings' settings and replicates
            an = findings.analyse(runs, findings_settings(read_study_json(args.runs[0])))
            holdout = findings.with_holdout(an, surface=True).holdout
        doc["surface"] = surface.document(runs, replicates=min(args.replicates, 500), seed=args.seed, metrics=metrics,
                                          holdout=holdout)
        curves.check(doc)
    fitted = sum(a["status"] == "fitted" for c in doc["conditions"] for a in c["allocations"])
    refused = curves.refusals(doc)
    if not fitted:
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise RaceError(f"no curve could be fitted: {refused[0]}{more}",
                        "a curve needs points after step 0 that rise or fall beyond noise: train longer, snapshot "
                        "more often, or score more problems per point (--curve-limit)")
    print(page.table(doc))
    paths = page.write(doc, Path(args.out or args.runs[0]), plots=not args.no_plots)
    print(f"{fitted} curve(s) fitted, {len(refused)} refused; wrote " + ", ".join(str(p) for p in paths))
    return 0
