"""`race report --format model-doc`: the compute, time and energy section of the EU model
documentation form (training compute to 2 significant figures with the counting method in
words, training time in wall-clock and hardware days, energy or "not available" with the
reason), from suite.analysis.filing. Each figure names the report field it was read from.
Presentation only: the figures are the filing's."""

from __future__ import annotations


def render(f) -> str:
    """The section as Markdown."""
    from ..analysis.filing import METHOD, two_sig

    def src(fig) -> str:
        return " [" + ", ".join(f"`{x}`" for x in fig.fields) + "]"

    lines = [f"## Training compute, time and energy: {f.model}", "",
             f"Post-trained from **{f.base}**. Figures from the suite's report(s) ({', '.join(f.provenance)}); "
             "thresholds are indicative, not legal advice.", "", "### Training compute", "",
             f"- Post-training compute: **{two_sig(f.post_training.value)} FLOP**{src(f.post_training)}"]
    lines += [f"  - {ph}: {two_sig(fig.value)} FLOP{src(fig)}" for ph, fig in f.phases.items()]
    lines += [f"  - stage {name}: {two_sig(fig.value)} FLOP{src(fig)}" for name, fig in f.stages]
    if f.flops_range is not None:
        lines.append(f"  - range over the estimate's assumptions: {f.flops_range.note} FLOP{src(f.flops_range)}")
    if f.pretraining.value is None:
        lines.append(f"- Base model pretraining compute: unknown ({f.pretraining.note}){src(f.pretraining)}")
    else:
        how = {"published": "as its developer published it", "6ND": "6 x N x D", "declared": "declared"}.get(
            f.pretraining_method, f.pretraining_method)
        lines.append(f"- Base model pretraining compute: {two_sig(f.pretraining.value)} FLOP ({how}; sources: "
                     f"{', '.join(f.pretraining_sources) or '-'}){src(f.pretraining)}")
        lines.append(f"- Cumulative training compute (base + post-training): **{two_sig(f.cumulative.value)} FLOP**"
                     f"{src(f.cumulative)}")
        lines.append(f"- Post-training as a share of the base model's pretraining: **{f.share.value:.2%}** "
                     f"({f.share.value:.2g}){src(f.share)}")
    lines += ["", f"Counting method: {METHOD}", "", "### Thresholds (indicative)", "",
              "| threshold | compared with | value | crossed |", "|---|---|---|---|"]
    for t in f.thresholds:
        by = ""
        if t["crossed"] and t.get("by_post_training") is False:
            by = " (by the base model's own pretraining, not by the post-training)"
        lines.append(f"| {t['name']}: {two_sig(t['threshold'])} ({t['reference']}) | {t['compared']} | "
                     f"{two_sig(t['value'])} | {'**yes**' if t['crossed'] else 'no'}{by} |")
    lines += ["", "### Training time", ""]
    if f.accelerator_hours.value is None:
        lines.append("- Not available: the report(s) state no hardware and hours [`hardware`]")
    else:
        lines += [f"- Hardware: {f.accelerators} [`hardware.count`, `hardware.accelerator`]",
                  f"- Hardware days: {f.accelerator_hours.value / 24:,.0f} ({f.accelerator_hours.value:,.0f} "
                  f"accelerator-hours){src(f.accelerator_hours)}",
                  f"- Wall-clock days: {f.wall_days.value:.2g} (accelerator-hours / accelerators / 24; a run whose "
                  f"stages held different counts is approximated by the stated count){src(f.wall_days)}"]
    lines += ["", "### Energy", ""]
    if f.energy.value is None:
        lines.append(f"- Not available: {f.energy_reason}{src(f.energy)}")
    else:
        lines.append(f"- Energy: {f.energy.value / 3.6e9:.2g} MWh ({f.energy.value:.2g} J){src(f.energy)}")
    return "\n".join(lines) + "\n"


__all__ = ["render"]
