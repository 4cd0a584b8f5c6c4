# Over 500 lines: the reference cells and the gate that judges their figures share the figures' names.
"""Reference cells as regression benchmarks: what each cell records, and the gate that compares
a run of the suite with the baseline stored for this machine kind.

A benchmark run is pytest-benchmark's JSON (`--benchmark-json`); the stored baseline
benchmarks/baselines/<machine-kind>.json is the same JSON. Each benchmark's `extra_info` holds
the cell's figures (FLOPs and tokens per phase, steps, final training reward, a probe
evaluation, achieved FLOP/s and utilization per phase), the same-run calibration, the library
versions and the cell's settings. The gate judges each figure by its class (TOLERANCES):

- exact: FLOPs and token counts per phase and the steps taken must equal the baseline. Same
  seeds, same threads, same library versions -> same tokens sampled -> same counts.
- absolute tolerance: the final training reward, the probe's pass@1, process judge and native
  reward (float noise across BLAS builds; a real drift moves them further).
- time: the cell's median seconds divided by the reference seconds measured around it (a fixed
  amount of matmul work timed just before and just after the cell, suite.accounting.utilization
  .probe) may be at most `slower_pct` percent above the baseline's quotient. Absolute seconds are
  recorded, not judged: they move with the machine and its load, the quotient far less.
  Speed-ups never fail.

When a figure moved and the library versions (or the cell's settings) differ from the
baseline's, the moved row names them.

    from benchmarks import gate as bench
    now = bench.load_run_json("bench.json")
    base = bench.load_baseline(bench.baseline_path("python-2core-cpu"), "python-2core-cpu")
    result = bench.compare(base, now)
    print(bench.format_table(result)); result.failed
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from suite.accounting.utilization import Ceiling, achieved, machine_kind, utilization  # noqa: F401 (machine_kind: the gate's API)
from suite import jsonstrict
from suite.errors import RaceError

#: Libraries whose versions every benchmark records (a change names itself next to moved figures).
LIBRARIES = ("torch", "transformers", "trl", "peft", "lm-eval")
#: The evaluation target of the probe and the torch threads every reference cell runs with.
PROBE_TARGET = "arith-easy-250"
BENCH_THREADS = 1
#: Default of the time check: fail when the median, in reference units, is more than this many percent slower.
DEFAULT_SLOWER_PCT = 100
#: The reference workload every cell's time is divided by: this many FLOPs of fp32 matmuls at
#: BENCH_THREADS threads, at the ceiling rate measured just before and just after the cell.
REFERENCE_FLOPS = 1e10


# ------------------------------------------------------------------------------ the cells


@dataclass(frozen=True)
class BenchCell:
    """A reference cell as a benchmark: a cell file of tasks/cells, shortened to a few steps."""

    name: str
    """Benchmark id (pytest parameter id and the baseline's key)."""
    cell: str
    """Cell file stem under tasks/cells (e.g. "s-sparse")."""
    steps: int = 3
    """Optimizer steps (the cell's max_steps; the cell's own budget stays in force)."""
    changes: Mapping[str, Any] = field(default_factory=dict)
    """CellSpec field overrides, e.g. {"lora_rank": 0} for full fine-tuning."""
    engine: Mapping[str, Any] = field(default_factory=dict)
    """Engine option overrides merged into the cell's `engine:`."""
    probe: int = 32
    """Problems of the probe (the first N of PROBE_TARGET, scored greedily)."""
    fast: bool = False
    """Part of the fast lane (`race bench --fast`, tests/test_bench_gate.py)."""

    def spec(self):
        """The CellSpec this benchmark trains (cell file + overrides + step cap)."""
        from suite.train.cell import load_cell
        from suite.paths import tasks

        cell = load_cell(tasks() / "cells" / f"{self.cell}.yaml")
        return cell.with_changes(**dict(self.changes), max_steps=self.steps,
                                 engine={**dict(cell.engine), **dict(self.engine), "torch_threads": BENCH_THREADS})

    def with_engine(self, **options) -> "BenchCell":
        """A copy with more engine overrides (how tests change the engine's passes)."""
        return replace(self, engine={**dict(self.engine), **options})


#: The reference suite: each tiny policy; a rule reward and the PRM; LoRA and full fine-tuning.
REFERENCE_CELLS: dict[str, BenchCell] = {
    c.name: c
    for c in (
        BenchCell("s-sparse", "s-sparse", steps=2, fast=True),
        BenchCell("s-prm", "s-prm"),
        BenchCell("s-sparse-full", "s-sparse", changes={"lora_rank": 0, "learning_rate": 1e-4}),
        BenchCell("m-sparse", "m-sparse"),
        BenchCell("m-prm", "m-prm"),
        BenchCell("l-sparse", "l-sparse", steps=2),
    )
}


def selected(fast: bool) -> list[BenchCell]:
    """The cells of the full suite, or of the fast lane."""
    return [c for c in REFERENCE_CELLS.values() if c.fast or not fast]


# ------------------------------------------------------------------------------ measuring


def versions() -> dict[str, str]:
    """Installed versions of LIBRARIES ("absent" when one is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for lib in LIBRARIES:
        try:
            out[lib] = version(lib)
        except PackageNotFoundError:
            out[lib] = "absent"
    return out


def train(bc: BenchCell, out: str | os.PathLike):
    """Train the cell into `out` (the timed unit of a benchmark). Threads fixed, CPU, seeded."""
    from suite.train.run import run_cell

    return run_cell(bc.spec(), out, progress=False, threads=BENCH_THREADS)


def settings_of(bc: BenchCell) -> dict:
    """The cell's settings as recorded beside its figures: the cell as it runs (paths relative
    to the checkout, so two checkouts of one commit agree), the probe, and digests of the model
    weights (the embedded models are rebuilt by a script: a rebuilt model names itself)."""
    from suite.paths import home

    cell = bc.spec()
    d = cell.to_dict()
    root = str(home().resolve())

    def rel(path):
        return os.path.relpath(path, root) if isinstance(path, str) and path.startswith(root) else path

    for k in ("policy", "tokenizer", "dataset"):
        d[k] = rel(d.get(k))
    if "model_path" in d["reward"]:
        d["reward"]["model_path"] = rel(d["reward"]["model_path"])
    d["probe"] = {"target": PROBE_TARGET, "limit": bc.probe}
    d["weights"] = {"policy": weights_digest(cell.policy)}
    reward_model = cell.reward.options.get("model_path") or _default_reward_model(cell.reward.system)
    if reward_model:
        d["weights"]["reward_model"] = weights_digest(reward_model)
    from suite.evaluate.harness import default_judge

    d["weights"]["judge"] = weights_digest(default_judge())  # the probe's process judge
    return d


def _default_reward_model(system: str) -> str | None:
    from suite.train.rewards import get_reward_system

    return getattr(get_reward_system(system), "model_path", None)


def weights_digest(folder: str | os.PathLike) -> str:
    """sha256 (first 16 hex digits) of a model folder's *.safetensors files, in name order."""
    from suite.digest import files_sha256

    files = sorted(Path(folder).glob("*.safetensors"))
    return files_sha256(files)[:16] if files else "none"


def figures(bc: BenchCell, out: str | os.PathLike, probe: bool = True, ceiling: float | None = None) -> dict:
    """The benchmark's extra_info from a finished run folder: FLOPs and tokens per phase
    (report.json totals), steps, the last step's training reward (the cell's own reward
    system), step seconds and achieved FLOP/s per phase (and utilization of `ceiling` FLOP/s
    when given), the probe evaluation (unless probe=False), versions and settings."""
    import time

    from suite.record.ledger import read_ledger
    from suite.record.report import read_report

    out = Path(out)
    report = read_report(out / "report.json")
    records = read_ledger(out / "ledger.jsonl").records
    rewards = [r["metrics"]["reward"] for r in records if (r.get("metrics") or {}).get("reward") is not None]
    seconds = {k: float(v) for k, v in (report.doc["totals"].get("seconds") or {}).items()}
    rates = achieved(report.flops, seconds)
    info: dict[str, Any] = {
        "cell": bc.name,
        "flops": {k: int(v) for k, v in report.flops.items()},
        "tokens": {k: int(v) for k, v in report.tokens.items()},
        "steps": len(records),
        "final_reward": rewards[-1] if rewards else None,
        "seconds": seconds,
        "rate": {k: v for k, v in rates.items() if v is not None},
    }
    if ceiling:
        info["utilization"] = {k: v for k, v in utilization(rates, ceiling).items() if v is not None}
    if probe:
        from suite.evaluate.runs import evaluate_run

        t0 = time.perf_counter()
        rows = evaluate_run(out, targets=(PROBE_TARGET,), limit=bc.probe)
        info["probe"] = {r["metric"]: r["value"] for r in rows}
        info["probe_seconds"] = round(time.perf_counter() - t0, 3)
    info["versions"] = versions()
    info["settings"] = settings_of(bc)
    return info


def calibration(before: Ceiling, after: Ceiling) -> dict:
    """The same-run calibration of one cell: the matmul ceiling measured just before and just
    after it (their mean is the ceiling the cell's utilization and time are judged by)."""
    rate = (before.flops_per_second + after.flops_per_second) / 2
    return {"flops_per_second": rate, "reference_seconds": REFERENCE_FLOPS / rate,
            "before": before.flops_per_second, "after": after.flops_per_second, "threads": before.threads,
            "load": before.load}


def time_figures(median: float, cal: Mapping[str, float]) -> dict:
    """The timed run in seconds and in reference units (what the time check judges)."""
    return {"seconds": median, "ratio": median / cal["reference_seconds"]}


# ------------------------------------------------------------------------------ tolerances


@dataclass(frozen=True)
class Tolerance:
    """How a figure is judged: exact equality, or |now - baseline| <= abs."""

    abs: float = 0.0
    """Allowed absolute difference (0: exact)."""
    why: str = ""
    """One line for the docs."""


EXACT = Tolerance(0.0, "same seeds, threads and library versions sample the same tokens")
#: Figure (flattened extra_info key, or prefix ending in '.') -> tolerance. Figures not listed
#: here are recorded but not judged.
TOLERANCES: dict[str, Tolerance] = {
    "flops.": EXACT,
    "tokens.": EXACT,
    "steps": EXACT,
    "final_reward": Tolerance(0.05, "mean reward of the last step's 64 completions, in [0, 1]"),
    "probe.pass@1": Tolerance(0.0625, "2 of 32 probe problems (greedy decoding)"),
    "probe.process_judge": Tolerance(0.05, "mean of per-completion minimum step rewards, in [0, 1]"),
    "probe.native_reward": Tolerance(0.05, "the cell's reward system on the probe, in [0, 1]"),
}


def tolerance_of(figure: str) -> Tolerance | None:
    """The tolerance that judges `figure`, or None when it is recorded only."""
    if figure in TOLERANCES:
        return TOLERANCES[figure]
    for key, tol in TOLERANCES.items():
        if key.endswith(".") and figure.startswith(key):
            return tol
    return None


def flatten(info: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested extra_info as {"flops.update": ..., "probe.pass@1": ...} (numbers only)."""
    out: dict[str, Any] = {}
    for k, v in info.items():
        if k in ("versions", "settings", "cell"):
            continue
        if isinstance(v, Mapping):
            out.update(flatten(v, f"{prefix}{k}."))
        elif v is None or isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f"{prefix}{k}"] = v
    return out


# ------------------------------------------------------------------------------ files


def baselines_dir() -> Path:
    """benchmarks/baselines in the checkout."""
    from suite.paths import home

    return home() / "benchmarks" / "baselines"


def baseline_path(kind: str) -> Path:
    """The stored baseline of a machine kind."""
    if not kind or "/" in kind or kind.startswith("."):
        raise RaceError(f"bad machine kind {kind!r}", "a name like python-2core-cpu")
    return baselines_dir() / f"{kind}.json"


def update_command(kind: str, path: str | os.PathLike | None = None) -> str:
    """The command that (re)creates the baseline of `kind` (at `path` when it is not the default)."""
    custom = path is not None and Path(path).resolve() != baseline_path(kind).resolve()
    return f"race bench --update-baseline --machine {kind}" + (f" --baseline {path}" if custom else "")


def _benchmarks_of(doc: Any) -> dict[str, dict]:
    """{cell name: benchmark} of a pytest-benchmark JSON document; ValueError says what is wrong."""
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ValueError("no `benchmarks` list (not pytest-benchmark JSON)")
    out = {}
    for i, b in enumerate(doc["benchmarks"]):
        info = b.get("extra_info") if isinstance(b, dict) else None
        stats = b.get("stats") if isinstance(b, dict) else None
        if not isinstance(info, dict) or not isinstance(info.get("cell"), str):
            raise ValueError(f"benchmarks[{i}] has no extra_info.cell (not a reference-cell benchmark)")
        if not isinstance(stats, dict) or not isinstance(stats.get("median"), (int, float)):
            raise ValueError(f"benchmarks[{i}] ({info['cell']}) has no stats.median")
        out[info["cell"]] = b
    return out


def load_baseline(path: str | os.PathLike, kind: str | None = None) -> dict:
    """The stored baseline document. Missing or corrupt -> RaceError with the command that
    creates it."""
    path = Path(path)
    kind = kind or path.stem
    if not path.is_file():
        raise RaceError(f"no baseline for machine kind {kind}: {path} does not exist",
                        f"create it with: {update_command(kind, path)}")
    try:        # strict: a duplicate key is refused (suite.jsonstrict), not guessed at
        doc = jsonstrict.load(path)
        _benchmarks_of(doc)
    except (OSError, ValueError) as e:
        why = getattr(e, "message", None) or str(e)
        raise RaceError(f"baseline {path} is corrupt: {why}",
                        f"recreate it with: {update_command(kind, path)}") from None
    return doc


def load_run_json(path: str | os.PathLike) -> dict:
    """A pytest-benchmark JSON written by the reference suite (--benchmark-json)."""
    path = Path(path)
    try:
        doc = jsonstrict.load(path)
        _benchmarks_of(doc)
    except (OSError, ValueError) as e:
        why = getattr(e, "message", None) or getattr(e, "strerror", None) or str(e)
        raise RaceError(f"benchmark results {path} are unreadable: {why}",
                        "write them with: pytest benchmarks/test_reference_cells.py --benchmark-json=FILE") from None
    return doc


def merged(baseline: dict | None, now: dict) -> dict:
    """`now` with the baseline's benchmarks of cells that did not run kept (a --fast refresh
    replaces only the fast cells)."""
    ran = _benchmarks_of(now)
    kept = [b for name, b in (_benchmarks_of(baseline).items() if baseline else ()) if name not in ran]
    return {**now, "benchmarks": kept + list(now["benchmarks"])}


def write_baseline(path: str | os.PathLike, doc: dict) -> Path:
    """Write a baseline atomically (temp file in the same folder, then os.replace)."""
    from suite.atomic import write_json_atomic

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    doc = {**doc, "benchmarks": sorted(doc["benchmarks"], key=lambda b: b["extra_info"]["cell"])}
    return write_json_atomic(path, doc, indent=2)


# ------------------------------------------------------------------------------ the gate


@dataclass(frozen=True)
class Row:
    """One line of the comparison table."""

    cell: str
    figure: str
    baseline: Any
    now: Any
    ok: bool
    """False when this row fails the gate."""
    rule: str
    """How it was judged: "exact", "±0.05", "median +100%", "missing", ..."""
    note: str = ""
    """Which library versions or cell settings differ from the baseline's (moved rows)."""

    @property
    def change(self) -> str:
        """Readable change, e.g. "+12,345 (+3.1%)"."""
        a, b = self.baseline, self.now
        if not _num(a) or not _num(b):
            return ""
        d = b - a
        pct = ""
        if a:
            r = 100 * d / a
            pct = f" ({r:+.1f}%)" if abs(r) >= 0.1 or r == 0 else f" ({r:+.2g}%)"  # tiny moves stay visible
        if isinstance(a, int) and isinstance(b, int):
            return f"{d:+,}{pct}"
        return f"{d:+.4g}{pct}"


@dataclass(frozen=True)
class Comparison:
    """The gate's verdict over all cells that ran."""

    rows: tuple[Row, ...]
    """Rows of moved figures (and every time row), in cell order."""
    compared: tuple[str, ...]
    """Cells found in both the run and the baseline."""

    @property
    def failed(self) -> bool:
        """True when any row fails."""
        return any(not r.ok for r in self.rows)

    @property
    def failures(self) -> tuple[Row, ...]:
        """The failing rows."""
        return tuple(r for r in self.rows if not r.ok)


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _diff(a: Mapping, b: Mapping, what: str) -> list[str]:
    """"what key old->new" for keys that differ between two flat mappings."""
    fa, fb = _flat_any(a), _flat_any(b)
    return [f"{what} {k} {fa.get(k, '(unset)')} -> {fb.get(k, '(unset)')}" for k in sorted(set(fa) | set(fb))
            if fa.get(k) != fb.get(k)]


def _flat_any(d: Any, prefix: str = "") -> dict:
    if not isinstance(d, Mapping):
        return {prefix.rstrip("."): d} if prefix else {}
    out = {}
    for k, v in d.items():
        out.update(_flat_any(v, f"{prefix}{k}.") if isinstance(v, Mapping) else {f"{prefix}{k}": v})
    return out


def judge(figure: str, base: Any, now: Any) -> tuple[bool, str] | None:
    """(ok, rule) of one figure, or None when the figure is recorded but not judged."""
    tol = tolerance_of(figure)
    if tol is None:
        return None
    if not tol.abs:
        return base == now, "exact"
    if base is None or now is None:
        return base == now, f"±{tol.abs:g}"
    return abs(now - base) <= tol.abs + 1e-12, f"±{tol.abs:g}"


#: The figures the CI lane judges (no probe evaluation, no timing): exact counts and the reward.
CI_FIGURES = ("flops.", "tokens.", "steps", "final_reward")


def compare(baseline: dict, now: dict, *, slower_pct: int | None = DEFAULT_SLOWER_PCT,
            only: tuple[str, ...] | None = None) -> Comparison:
    """Judge every cell of `now` against `baseline` (both pytest-benchmark JSON). Cells of the
    baseline that did not run are not judged (the fast lane runs a subset); a cell that ran but
    is missing from the baseline fails. slower_pct=None skips the time check; `only` limits the
    judged figures to these names or prefixes (ending in '.')."""
    base_b, now_b = _benchmarks_of(baseline), _benchmarks_of(now)
    rows: list[Row] = []
    compared = []
    for cell, nb in now_b.items():
        bb = base_b.get(cell)
        if bb is None:
            rows.append(Row(cell, "(cell)", None, "ran", False, "missing", "not in the baseline"))
            continue
        compared.append(cell)
        bi, ni = bb["extra_info"], nb["extra_info"]
        context = _diff(bi.get("versions") or {}, ni.get("versions") or {}, "version") + \
            _diff(bi.get("settings") or {}, ni.get("settings") or {}, "setting")
        note = "; ".join(context)
        bf, nf = flatten(bi), flatten(ni)
        for fig in sorted(set(bf) | set(nf), key=_figure_order):
            if only is not None and not any(fig == o or o.endswith(".") and fig.startswith(o) for o in only):
                continue
            b, n = bf.get(fig), nf.get(fig)
            verdict = judge(fig, b, n)
            if verdict is None or b == n:
                continue
            ok, rule = verdict
            rows.append(Row(cell, fig, b, n, ok, rule, "" if ok else note))
        if slower_pct is not None:
            rows.append(_time_row(cell, bi, ni, slower_pct))
    return Comparison(tuple(rows), tuple(compared))


def _time_row(cell: str, base: Mapping, now: Mapping, slower_pct: int) -> Row:
    """The time check of one cell: its seconds in reference units against the baseline's."""
    b, n = (base.get("time") or {}).get("ratio"), (now.get("time") or {}).get("ratio")
    rule = f"+{int(slower_pct)}% in reference units"
    if not _num(b) or not _num(n):
        which = "the baseline" if not _num(b) else "this run"
        return Row(cell, "time (reference units)", b, n, False, rule,
                   f"{which} has no same-run calibration: refresh the baseline with race bench --update-baseline")
    ok = n / b * 100 - 100 <= slower_pct
    return Row(cell, "time (reference units)", b, n, ok, rule, "" if ok else "slower than the threshold")


def _figure_order(fig: str) -> tuple:
    head = fig.split(".")[0]
    order = ["flops", "tokens", "steps", "final_reward", "probe"]
    return (order.index(head) if head in order else len(order), fig)


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:.4g}"


def format_table(result: Comparison) -> str:
    """The table of what moved: cell | figure | baseline | now | change | verdict, then the
    notes (version or setting changes) under the failing rows."""
    head = ("cell", "figure", "baseline", "now", "change", "verdict")
    lines = [(r.cell, r.figure, _fmt(r.baseline), _fmt(r.now), r.change,
              ("ok" if r.ok else "FAIL") + f" ({r.rule})") for r in result.rows]
    if not lines:
        return f"nothing moved ({len(result.compared)} cells compared)"
    widths = [max(len(x[i]) for x in [head, *lines]) for i in range(len(head))]

    def fmt(cols):
        return "  ".join(c.ljust(w) if i < 2 or i == 5 else c.rjust(w) for i, (c, w) in enumerate(zip(cols, widths)))

    out = [fmt(head), fmt(tuple("-" * w for w in widths))]
    noted = set()
    for r, cols in zip(result.rows, lines):
        out.append(fmt(cols).rstrip())
        if r.note and (r.cell, r.note) not in noted:  # once per cell, under its first moved figure
            noted.add((r.cell, r.note))
            out.append(f"    ^ {r.note}")
    n_fail = len(result.failures)
    out.append(f"{'FAILED' if n_fail else 'passed'}: {n_fail} failing of {len(result.rows)} rows; "
               f"{len(result.compared)} cells compared")
    return "\n".join(out)


def format_rates(doc: dict) -> str:
    """What each cell of a run achieved: GFLOP/s per phase and, against the same-run ceiling,
    utilization; the timed run in seconds and in reference units."""
    head = ("cell", "rollout GFLOP/s", "update GFLOP/s", "reward GFLOP/s", "util rollout", "util update",
            "ceiling GFLOP/s", "time s", "time (ref units)")
    lines = []
    for name, b in sorted(_benchmarks_of(doc).items()):
        i = b["extra_info"]
        rate, util = i.get("rate") or {}, i.get("utilization") or {}
        cal, t = i.get("calibration") or {}, i.get("time") or {}

        def g(v):
            return "-" if v is None else f"{v / 1e9:.2f}"

        def p(v):
            return "-" if v is None else f"{v:.0%}"

        lines.append((name, g(rate.get("rollout")), g(rate.get("update")), g(rate.get("reward")),
                      p(util.get("rollout")), p(util.get("update")), g(cal.get("flops_per_second")),
                      "-" if t.get("seconds") is None else f"{t['seconds']:.2f}",
                      "-" if t.get("ratio") is None else f"{t['ratio']:.1f}"))
    widths = [max(len(x[k]) for x in [head, *lines]) for k in range(len(head))]

    def fmt(cols):
        return "  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(cols, widths)))

    return "\n".join([fmt(head), fmt(tuple("-" * w for w in widths)), *map(fmt, lines)])
