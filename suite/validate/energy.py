"""ENERGY and ROOF rules: what a report's energy and hours may claim, against the suite's hardware
table (suite/accounting/catalog/hardware.yaml), never against numbers the report supplies itself.

- ENERGY: joules per phase (report 1.5, `cost.energy`) cannot exceed what the accelerators can
  draw in that phase's seconds (maximum board power x seconds x accelerators), must come from
  accelerators the table knows, in the count the run held, and must be what its ledger's steps
  add up to.
- ROOF: a declared peak cannot exceed the datasheet's, and FLOPs over seconds cannot beat the
  roofline: a phase's rate above the accelerators' peak, or rollouts decoded faster than their
  weights can be read from memory.
"""

from __future__ import annotations

from typing import Iterable

from .registry import Issue, rule

PHASES = ("rollout", "update", "reward")
PEAK_FACTOR = {"bf16": 1.0, "fp16": 1.0, "tf32": 1.0, "fp8": 2.0}
"""The dense peak of a dtype as a multiple of the table's bf16 peak (fp8: twice, on every
accelerator of the table that has it)."""


def _energy(doc) -> dict | None:
    cost = doc.get("cost") if isinstance(doc, dict) else None
    e = cost.get("energy") if isinstance(cost, dict) else None
    return e if isinstance(e, dict) and e.get("measured") else None


def _table_entry(doc):
    """(hardware table entry or None, the name looked up): of hardware.accelerator (what the run
    held), else of cost.hardware.name."""
    from ..accounting.hardware import match

    hw = doc.get("hardware") if isinstance(doc.get("hardware"), dict) else {}
    name = hw.get("accelerator") or ((doc.get("cost") or {}).get("hardware") or {}).get("name")
    return match(name), name


@rule("ENERGY-002", title="energy from accelerators the suite cannot bound", requires=("cost",))
def energy_hardware(ctx) -> Iterable[Issue]:
    """Measured energy is checked against the accelerators' maximum board power, read from the
    suite's hardware table: the report must name them (a `hardware` section, or `cost.hardware`)
    as an accelerator the table knows, `cost.hardware` must agree with `hardware.accelerator`, and
    the devices whose counters were read cannot outnumber the accelerators the run held. Otherwise
    no power bound holds and any number of joules would pass."""
    from ..accounting.hardware import match, table

    doc = ctx.doc
    e = _energy(doc)
    ch = (doc.get("cost") or {}).get("hardware")
    hw = doc.get("hardware") if ctx.section_ok("hardware") else None
    acc = match(hw["accelerator"]) if hw else None
    if isinstance(ch, dict) and hw and match(ch["name"]) is not None and acc is not match(ch["name"]):
        yield Issue("$.cost.hardware.name", f"cost.hardware names {ch['name']} but hardware.accelerator is "
                    f"{hw['accelerator']!r}" + (f" ({acc.name})" if acc else " (not in the table)"),
                    "name the accelerator the run held in both places")
        return
    if e is None:
        return
    known = ", ".join(a.name for a in table())
    if hw is None:
        yield Issue("$.cost.energy", "measured energy without a hardware section: the accelerators and their count "
                    "are unknown, so no power bound can be checked",
                    "add hardware: {accelerator, count, peak_flops, wall_seconds}")
    elif acc is None:
        yield Issue("$.hardware.accelerator", f"accelerator {hw['accelerator']!r} is not in the hardware table: its "
                    "maximum board power is unknown", f"name one of {known} (or its alias), or add it to "
                    "suite/accounting/catalog/hardware.yaml with its datasheet")
    elif e.get("devices", 0) > hw["count"]:
        yield Issue("$.cost.energy.devices", f"energy read from {e['devices']} devices but the run held "
                    f"{hw['count']} accelerators", "devices counts the accelerators whose counters were read")


NODE_FACTOR = 2.0
"""Energy measured at the wall for whole nodes (scope nodes: an MLPerf power log) is held to
twice the accelerators' board power: CPUs, memory, network, fans and conversion losses of an
accelerator server stay well below its accelerators' own draw."""


@rule("ENERGY-001", title="energy above what the accelerators can draw", requires=("cost", "totals"))
def energy_above_power(ctx) -> Iterable[Issue]:
    """A phase's measured joules cannot exceed the accelerators' maximum board power (the hardware
    table's TDP, not the report's) x the phase's seconds (totals.seconds) x the accelerators the
    run held; energy not split by phase (`total_joules`) is held to its window, and per-phase
    energy of a report without seconds per phase to the whole run's time (hardware.wall_seconds
    or accelerator_hours). Joules in a phase with no seconds at all are refused: energy needs the
    time it was drawn in. Whole nodes measured at the wall (`scope: nodes`) get twice the
    accelerators' power."""
    doc = ctx.doc
    e = _energy(doc)
    acc, _ = _table_entry(doc)
    if e is None or acc is None or not ctx.section_ok("hardware"):
        return
    hw = doc["hardware"]
    n = hw["count"]
    watts = acc.tdp_watts * (NODE_FACTOR if e.get("scope") == "nodes" else 1.0)
    what = f"{n} x {acc.name} at {watts:g} W" + (" (whole nodes: twice the boards' power)" if e.get("scope") == "nodes" else "")
    if "joules" not in e:
        cap = watts * e["window_seconds"] * n
        if e["total_joules"] > cap * (1 + 1e-9) + 1e-6:
            yield Issue("$.cost.energy.total_joules", f"{e['total_joules']:.6g} J measured over {e['window_seconds']:.6g} s, "
                        f"but {what} can draw at most {cap:.6g} J", "check the units (joules) and the window")
        return
    seconds = doc["totals"].get("seconds") or {}
    joules = e["joules"]
    if seconds:
        for ph in PHASES:
            j, s = joules.get(ph, 0), seconds.get(ph)
            cap = watts * (s or 0.0) * n
            if j > cap * (1 + 1e-9) + 1e-6:
                yield Issue(f"$.cost.energy.joules.{ph}",
                            f"{ph}: {j:.6g} J measured, but {what} for {s or 0:.6g} s can draw at most {cap:.6g} J",
                            "energy per phase comes from the counters read at the phase's own boundaries; check "
                            "the units (joules, not millijoules), the phase and totals.seconds")
        return
    wall = hw.get("wall_seconds") or (hw.get("accelerator_hours") or 0) * 3600.0 / n
    cap = watts * wall * n
    total = sum(joules.values())
    if total > cap * (1 + 1e-9) + 1e-6:
        yield Issue("$.cost.energy.joules", f"{total:.6g} J measured over the run, but {what} for {wall:.6g} s can "
                    f"draw at most {cap:.6g} J", "check the units (joules) and the hardware's time")


@rule("ENERGY-003", title="cost.hardware figures differ from the hardware table", requires=("cost",))
def hardware_figures(ctx) -> Iterable[Issue]:
    """`cost.hardware` names an entry of the hardware table and carries its figures for readers;
    each figure given must be the table's (a report cannot raise its own power or peak)."""
    from ..accounting.hardware import match

    ch = (ctx.doc.get("cost") or {}).get("hardware")
    if not isinstance(ch, dict):
        return
    acc = match(ch["name"])
    if acc is None:
        yield Issue("$.cost.hardware.name", f"{ch['name']!r} is not in the hardware table",
                    "name an entry of suite/accounting/catalog/hardware.yaml (race flops --hardware lists them)")
        return
    for key, want in (("peak_flops", acc.peak_flops), ("memory_bandwidth", acc.bandwidth), ("tdp_watts", acc.tdp_watts)):
        if key in ch and abs(ch[key] - want) > 1e-9 * want:
            yield Issue(f"$.cost.hardware.{key}", f"{key} {ch[key]:g} is not the table's {want:g} for {acc.name}",
                        f"copy the table's figure, or drop {key}")


@rule("ENERGY-004", title="energy is not what the ledger's steps add up to", requires=("cost", "ledger"))
def energy_matches_ledger(ctx) -> Iterable[Issue]:
    """A report whose energy was read per step (nvml, zeus) holds the sums of its ledger's readings
    (metrics energy/rollout_J, energy/update_J, energy/reward_J; steps left out after a counter
    reset carry energy/skipped): a report cannot claim energy its steps did not record."""
    from ..record.energy import sums
    from ..record.ledger import LedgerReader

    e = _energy(ctx.doc)
    if e is None or e.get("method") not in ("nvml", "zeus") or ctx.ledger is None or ctx.ledger.error is not None:
        return
    joules, steps, skipped = sums(LedgerReader(ctx.ledger_path))
    for ph in PHASES:
        if abs(e["joules"][ph] - joules[ph]) > 1e-3 + 1e-6 * joules[ph]:
            yield Issue(f"$.cost.energy.joules.{ph}", f"{ph}: {e['joules'][ph]:.6g} J in the report, "
                        f"{joules[ph]:.6g} J in the ledger's {steps} measured steps",
                        "rebuild the report from its ledger (race report LEDGER --spec CELL)")
    for key, want in (("steps", steps), ("skipped", skipped)):
        if key in e and e[key] != want:
            yield Issue(f"$.cost.energy.{key}", f"{key} = {e[key]} but the ledger has {want}",
                        "rebuild the report from its ledger")


@rule("ROOF-001", title="declared peak above the datasheet's", requires=("hardware",))
def peak_above_datasheet(ctx) -> Iterable[Issue]:
    """`hardware.peak_flops` is the denominator of every implied utilization: a peak above the
    accelerator's datasheet (the hardware table's dense bf16 figure; twice it for fp8) would hide
    hours no accelerator could deliver. Accelerators the table does not know, and other dtypes,
    are not checked."""
    from ..accounting.hardware import match

    hw = ctx.doc["hardware"]
    acc = match(hw["accelerator"])
    factor = PEAK_FACTOR.get(str(hw.get("dtype") or "bf16").lower())
    if acc is None or factor is None:
        return
    top = acc.peak_flops * factor
    if hw["peak_flops"] > top * 1.001:
        yield Issue("$.hardware.peak_flops", f"peak {hw['peak_flops']:.4g} FLOP/s is above the datasheet's "
                    f"{top:.4g} for {acc.name} in {hw.get('dtype') or 'bf16'} (dense, without sparsity)",
                    "give the dense peak of the dtype the run computed in (the hardware table: "
                    "suite/accounting/catalog/hardware.yaml)")


@rule("ROOF-002", title="hours and FLOPs beyond the roofline", requires=("hardware", "totals", "policy"))
def beyond_roofline(ctx) -> Iterable[Issue]:
    """Per phase, FLOPs over the phase's seconds (totals.seconds) cannot exceed the accelerators'
    datasheet peak (the hardware table's, x the count), and the rollouts cannot take less than
    their decode floor: each decode iteration (steps x mean completion tokens, all of a step's
    completions decoded together) reads at least one byte per active parameter, spread over every
    accelerator's memory bandwidth at once. A report without seconds per phase is held to its
    wall time. A forger who shortens the hours, or inflates the FLOPs, meets one of these bounds."""
    from ..accounting.hardware import match
    from ..accounting.roofline import decode_floor_seconds

    doc = ctx.doc
    hw = doc["hardware"]
    acc = match(hw["accelerator"])
    if acc is None:
        return
    n = hw["count"]
    factor = PEAK_FACTOR.get(str(hw.get("dtype") or "bf16").lower(), 2.0)
    peak = acc.peak_flops * factor * n
    t = doc["totals"]
    seconds = t.get("seconds") or {}
    for ph in PHASES:
        f, s = t["flops"].get(ph, 0), seconds.get(ph)
        if f and s and f / s > peak * 1.001:
            yield Issue(f"$.totals.seconds.{ph}", f"{ph}: {f:.4g} FLOPs in {s:.6g} s is {f / s:.4g} FLOP/s, above "
                        f"{n} x {acc.name}'s peak {peak:.4g}", "check the FLOP counts, the seconds and the hardware")
    read = ctx.models.get("$.policy")
    spec = getattr(read, "spec", None)
    comps = (t.get("work") or {}).get("count.completions")
    if spec is None or not comps or not hasattr(spec, "params_active"):
        return
    stages = doc.get("stages") if isinstance(doc.get("stages"), list) else None
    if stages:
        iters = sum(st["tokens"]["rollout_completion"] / (st["grpo"]["group_size"] * st["grpo"]["prompts_per_step"])
                    for st in stages)
    else:
        iters = t["steps"] * t["tokens"]["rollout_completion"] / comps
    floor = decode_floor_seconds(iters, spec, acc, n)
    have = seconds.get("rollout") if seconds else (hw.get("wall_seconds") or (hw.get("accelerator_hours") or 0) * 3600 / n)
    where = "$.totals.seconds.rollout" if seconds else "$.hardware"
    if have is not None and floor > have * 1.001:
        yield Issue(where, f"rollouts of {iters:.4g} decode iterations need at least {floor:.4g} s on {n} x {acc.name} "
                    f"(1 byte per active parameter each, at {acc.bandwidth:.3g} B/s per accelerator); the report "
                    f"gives {have:.4g} s", "check the steps, the completion tokens and the seconds (or hours)")


__all__: list[str] = []
