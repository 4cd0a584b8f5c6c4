"""What the time-and-money flags of `race plan` and `race flops` (--hardware, --gpus,
--price-per-gpu-hour; built by suite/cli/args.add_cost) add to each command's output: every
phase's roofline floor, predicted wall hours with their range, and the cost (suite.analysis.cost)."""

from __future__ import annotations

from ..errors import RaceError


def cost_fields(policy, d: dict, steps: int, args) -> dict:
    """{"cost": prediction} for `steps` steps of the step `d` (race flops' JSON of one step), or
    {} without --hardware."""
    if not getattr(args, "hardware", None):
        if getattr(args, "gpus", None) or getattr(args, "price_per_gpu_hour", None) is not None:
            raise RaceError("--gpus and --price-per-gpu-hour need --hardware NAME", "e.g. --hardware H100-SXM --gpus 16")
        return {}
    if not args.gpus or args.gpus < 1:
        raise RaceError("--hardware needs --gpus N (N >= 1)", "the accelerators the run holds, e.g. --gpus 16")
    price = args.price_per_gpu_hour
    if price is not None and not price >= 0:
        raise RaceError(f"--price-per-gpu-hour must be >= 0, got {price:g}")
    from ..accounting.hardware import accelerator
    from ..analysis.cost import Shape, predict, read_calibration

    acc = accelerator(args.hardware)
    ps = d["per_step"]
    work = ps["work"]
    shape = Shape({ph: ps["flops"][ph] * steps for ph in ("rollout", "update", "reward")},
                  steps * float(d["means"]["completion_tokens"]),
                  float(work.get("rollout.decode_pairs") or work.get("rollout.attn_causal", 0)) * steps, policy)
    if not steps:
        return {"cost": None}
    return {"cost": predict(shape, acc, args.gpus, read_calibration()).to_dict(price)}


def cost_lines(name: str, cost: dict | None) -> list[str]:
    """The human lines of one prediction."""
    if not cost:
        return [f"{name}: no whole step, nothing to time"]
    f, price = cost["fit"], cost.get("price")
    head = f"{'phase':<9}{'floor h':>9}{'bound':>9}{'eff.':>7}{'hours':>9}{'range':>17}"
    if price:
        head += f"{'cost':>12}{'range':>21}"
    lines = [f"{name} on {cost['gpus']} x {cost['accelerator']}: wall hours per phase (roofline floor / fitted "
             f"efficiency; range: {f['level']:.0%} prediction interval over {f['n']} runs that state time, "
             f"{f['regime']} models)", head, "-" * len(head)]
    for ph, p in cost["phases"].items():
        line = (f"{ph:<9}{p['floor_seconds'] / 3600:>9.2f}{p['bound']:>9}{p['efficiency']:>7.2f}{p['seconds'] / 3600:>9.2f}"
                f"{p['low'] / 3600:>8.2f}-{p['high'] / 3600:<8.2f}")
        if price:
            b = price["by_phase"][ph]
            line += f"{b['seconds']:>12,.0f}{b['low']:>10,.0f}-{b['high']:<10,.0f}"
        lines.append(line)
    w, a = cost["wall_hours"], cost["accelerator_hours"]
    lines.append(f"{'total':<9}{'':>25}{w['seconds']:>9.2f}{w['low']:>8.2f}-{w['high']:<8.2f}"
                 + (f"{price['cost']['seconds']:>12,.0f}{price['cost']['low']:>10,.0f}-{price['cost']['high']:<10,.0f}"
                    if price else ""))
    lines.append(f"= {a['seconds']:,.0f} accelerator-hours ({a['low']:,.0f}-{a['high']:,.0f})"
                 + (f"; cost at {price['per_accelerator_hour']:g} per accelerator-hour (your price)" if price else ""))
    return lines


__all__ = ["cost_fields", "cost_lines"]
