"""Outside evidence: numbers a report carries that the forger did not compute -- the engine's own
MFU figure (verl's perf/mfu/actor, which the import turns into FLOPs in comparison.json) and the
mean lengths a published run's maintained description gives. Each is checked against the FLOPs
and means the report claims. The run's own seconds on its declared hardware give a utilization floor
(PHYS-012 here; its warning PLAUS-006 in plausibility)."""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from .registry import Issue, rule

MFU_TOLERANCE = 1.2
"""How far the engine's MFU-implied update FLOPs may lie from its own estimator over the imported
tokens (either way): verl's estimator runs over each sequence's real length (sum of L and L^2)
where the import has the step's mean, a few percent apart; a log whose lengths or token totals
were scaled while its MFU stayed is 1/f apart."""


def mfu_mismatch(estimator_flops, mfu_flops) -> str | None:
    """Why the engine's MFU-implied FLOPs disagree with its estimator over the imported tokens
    (None when they agree within MFU_TOLERANCE, or either is unknown)."""
    if not isinstance(estimator_flops, (int, float)) or not isinstance(mfu_flops, (int, float)) \
            or isinstance(estimator_flops, bool) or isinstance(mfu_flops, bool):
        return None
    if not (math.isfinite(estimator_flops) and math.isfinite(mfu_flops)) or estimator_flops <= 0 or mfu_flops <= 0:
        return None
    r = mfu_flops / estimator_flops
    if 1 / MFU_TOLERANCE <= r <= MFU_TOLERANCE:
        return None
    return (f"the engine's own MFU (perf/mfu/actor x peak x GPUs x update seconds) implies {mfu_flops:.4g} update "
            f"FLOPs, but its estimator over the logged tokens gives {estimator_flops:.4g} ({r:.3g}x; at most "
            f"{MFU_TOLERANCE:g}x either way): the log's lengths or token totals do not belong to the run that timed them")


@rule("PROV-004", title="the engine's own MFU disagrees with the imported tokens", requires=("provenance",))
def engine_mfu(ctx) -> Iterable[Issue]:
    """verl logs its own model FLOPs utilization (`perf/mfu/actor`: its estimator's FLOPs over
    the update's seconds, GPUs and device peak). `race import verl` turns it back into FLOPs
    (comparison.json `verl_mfu_update`) beside verl's estimator over the tokens the log's
    lengths give (`verl_estimator_update`), and refuses a log whose two figures lie more than
    MFU_TOLERANCE apart (suite.integrations.sanity). A log whose lengths and token totals were
    halved consistently keeps the MFU the run measured, and fails here. The rule reads the
    comparison.json beside an imported report (where there is one) and holds the same bound;
    the import's refusal is the check that matters (the log is the evidence; comparison.json is
    the importer's output, which a forger may rewrite with the rest)."""
    doc = ctx.doc
    if doc["provenance"].get("method") != "imported" or ctx.base_dir is None:
        return
    path = Path(ctx.base_dir) / "comparison.json"
    if not path.is_file():
        return
    from .. import jsonstrict

    try:
        cmp = jsonstrict.load(path, max_bytes=1 << 20)
    except (jsonstrict.JSONInputError, OSError):
        return
    if not isinstance(cmp, dict):
        return
    why = mfu_mismatch(cmp.get("verl_estimator_update"), cmp.get("verl_mfu_update"))
    if why:
        yield Issue("$.provenance", why + " (comparison.json)", "import the run's own, whole log (race import verl)")


# ---- the run's own seconds: the utilization floor -------------------------------------------

UTILIZATION_FLOOR_WARN = 1e-3
"""Implied utilization below which a claim is flagged (PLAUS-006): real GRPO runs sit above 0.1% of
peak (the MLPerf 6.1 reference, 256 GB300 running a 397B mixture of experts with asynchronous
generation: 0.45% over the whole run, about 1% in its update phase); FLOPs understated
(completions halved, passes dropped) with the run's real seconds kept fall towards it."""
UTILIZATION_FLOOR_ERROR = 1e-4
"""Implied utilization below which a claim is refused (PHYS-012): 10,000 times below peak, the
declared accelerators idle 99.99% of the time they were held -- FLOPs or hardware mis-scaled."""


def utilization_floor(doc: dict) -> list[tuple[str, float, str]]:
    """(JSON path, implied utilization, how) of each measure a report's hardware and seconds
    give: the whole run (total FLOPs over peak x accelerator-seconds held) and, where the ledger
    timed it, the update phase (its FLOPs over peak x count x its seconds: compute-bound
    training, the phase a utilization floor speaks for). Rollout decoding is memory-bound and
    its utilization has no useful floor."""
    from ..record.runspec import Hardware

    hw = Hardware(**doc["hardware"])
    t = doc["totals"]
    out = []
    if hw.peak_flops > 0 and hw.accelerator_seconds > 0:
        out.append(("$.hardware", hw.utilization(t["flops"]["total"]),
                    f"{t['flops']['total']:.4g} FLOPs over {hw.count} x {hw.accelerator} at {hw.peak_flops:.4g} FLOP/s "
                    f"for {hw.accelerator_seconds:,.6g} accelerator-seconds"))
    sec = (t.get("seconds") or {}).get("update")
    if isinstance(sec, (int, float)) and sec > 0 and hw.peak_flops > 0:
        f = t["flops"]["update"]
        out.append(("$.totals.seconds.update", f / (hw.peak_flops * hw.count * sec),
                    f"update {f:.4g} FLOPs in {sec:,.6g} s on {hw.count} x {hw.accelerator} at {hw.peak_flops:.4g} FLOP/s"))
    return out


@rule("PHYS-012", title="the claimed FLOPs leave the hardware idle 99.99% of the time", requires=("totals", "hardware"))
def utilization_floor_error(ctx) -> Iterable[Issue]:
    """The utilization floor, from outside evidence the report carries: the declared accelerators
    and the seconds the run took (the hardware section's wall seconds or hours, and the ledger's
    per-phase seconds). A ledger regenerated with fewer tokens or passes keeps the run's real
    seconds, so its implied utilization falls with the FLOPs it hides. Below
    UTILIZATION_FLOOR_ERROR (1e-4) of peak, for the whole run or its update phase, the claim is
    refused: no GRPO run leaves its accelerators 99.99% idle. Between that and
    UTILIZATION_FLOOR_WARN, PLAUS-006 warns. A ledger halved consistently from a run well above
    the floor stays above it: the floor bounds how much can hide, it does not find all of it
    (docs/validation.md, "What the validator cannot see")."""
    for path, util, how in utilization_floor(ctx.doc):
        if util < UTILIZATION_FLOOR_ERROR:
            yield Issue(path, f"implied utilization {util:.3g} ({util:.4%} of peak): {how}",
                        "the FLOPs are understated or the hardware and seconds mis-scaled; rebuild the ledger from "
                        "the run, and declare the accelerators and seconds it really used")


# ---- published runs: the maintained descriptions ---------------------------------------------

MEAN_FIELDS = ("mean_prompt_tokens", "mean_completion_tokens")


@lru_cache(maxsize=1)
def published_descriptions() -> dict[str, list[dict]]:
    """The maintained published-run descriptions (leaderboard/published/*.yaml) by their
    publication URL (one paper may describe several runs: SimpleRL-Zoo's 7B, 14B and 32B); empty
    where the suite ships without them."""
    from .. import paths, yamlstrict
    from ..errors import RaceError

    out: dict[str, list[dict]] = {}
    folder = paths.home() / "leaderboard" / "published"
    for f in sorted(folder.glob("*.yaml")) if folder.is_dir() else ():
        try:
            d = yamlstrict.load(f)
        except (RaceError, OSError, ValueError):
            continue
        url = (d.get("published") or {}).get("url") if isinstance(d, dict) and isinstance(d.get("published"), dict) \
            else None
        if isinstance(url, str):
            out.setdefault(url, []).append(d)
    return out


def described_run(doc: dict) -> dict | None:
    """The maintained description a report re-accounts: the one of its publication URL whose
    policy is the report's (normalised: suite.names), the run id breaking a tie; None when the
    suite describes no such run."""
    from .identity import catalog_name

    src = doc.get("sources") if isinstance(doc.get("sources"), dict) else {}
    url = (src.get("published") or {}).get("url") if isinstance(src.get("published"), dict) else None
    cands = published_descriptions().get(url, []) if isinstance(url, str) else []
    name = doc["policy"]["name"]
    mine = catalog_name(name) or name
    cands = [d for d in cands if (catalog_name(str(d.get("policy"))) or d.get("policy")) == mine]
    run_id = (doc.get("run") or {}).get("id")
    return next((d for d in cands if d.get("name") == run_id), cands[0] if cands else None)


def _described_means(d: dict) -> list[tuple[str, str, float, tuple[float, float] | None]]:
    """(report path, field, value, assumed range or None) of the means a description gives: its
    top-level means (an unstaged run) or each stage's."""
    assumed = d.get("assumed") if isinstance(d.get("assumed"), dict) else {}
    out = []

    def rng(field):
        a = assumed.get(field)
        return (float(a["low"]), float(a["high"])) if isinstance(a, dict) and "low" in a and "high" in a else None

    stages = d.get("stages") if isinstance(d.get("stages"), list) else None
    for f in MEAN_FIELDS:
        v = d.get(f)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not stages:
            out.append(("$.provenance.means." + f[len("mean_"):], f, float(v), rng(f)))
    for i, st in enumerate(stages or ()):
        for f in MEAN_FIELDS:
            v = st.get(f) if isinstance(st, dict) else None
            if v is None:
                v = d.get(f)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append((f"$.stages[{i}].means." + f[len("mean_"):], f, float(v), rng(f)))
    return out


def _report_mean(doc: dict, path: str):
    parts = path[2:].replace("]", "").replace("[", ".").split(".")
    x = doc
    for p in parts:
        if isinstance(x, list) and p.isdigit() and int(p) < len(x):
            x = x[int(p)]
        elif isinstance(x, dict) and p in x:
            x = x[p]
        else:
            return None
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


@rule("PUB-005", title="a published run's mean lengths differ from its maintained description",
      requires=("sources", "provenance", "policy"))
def published_means(ctx) -> Iterable[Issue]:
    """A report that re-accounts a published run (`sources.published.url`) whose run the suite
    maintains a description of (leaderboard/published/*.yaml, found by that URL and the report's
    policy: one paper may describe several runs) carries the mean
    lengths that description gives, stage by stage: the publication's number where it gives one,
    else the value the description assumes (within its range, which says how unsure it is, not
    that any value in it is this run's). A resubmission of a published run with its means halved
    and everything priced from them again claims half the compute the description implies; it
    is refused here. A better-sourced mean is a change to the maintained description (with its
    source), not a second report. Runs the suite does not describe are not checked (PUB-002/003
    hold their own sources and ranges)."""
    d = described_run(ctx.doc)
    if d is None:
        return
    url = d["published"]["url"]
    for path, field, value, rng in _described_means(d):
        have = _report_mean(ctx.doc, path)
        if have is None or math.isclose(have, value, rel_tol=1e-9, abs_tol=1e-9):
            continue
        name = d.get("name", url)
        how = f"assumes {value:g} (range [{rng[0]:g}, {rng[1]:g}])" if rng else f"gives {value:g} (sourced)"
        yield Issue(path, f"{field} {have:g}, but the suite's description of this published run ({name!r}) {how}",
                    "price the run with the described mean lengths (race report --estimate "
                    f"leaderboard/published/{name}.yaml), or change that description with a source")
