"""Schedule rules: the update tokens a report claims must fit the rollouts it generated and
the schedule it states (each generated row is trained num_iterations times, whatever the
slicing: TRL's steps_per_generation, gradient accumulation, verl's mini-batches)."""

from __future__ import annotations

from typing import Iterable

from .registry import Issue, rule


def _rollout_rows_tokens(doc: dict) -> int | None:
    """Prompt + completion tokens of every generated row: the rollout's prompt count is per
    completion, or per group of K where the engine profile shares a prompt's prefill."""
    try:
        from ..accounting import ENGINES
    except ImportError:  # a validator without the accounting stack: nothing to say
        return None
    name = doc["accounting"]["engine_profile"]
    if name not in ENGINES:
        return None  # PHYS-001 names an unknown profile
    prof = ENGINES[name]
    t = doc["totals"]["tokens"]
    k = 1 if prof.prefill_per_completion else int(doc["grpo"]["group_size"])
    return k * t["rollout_prompt"] + t["rollout_completion"]


@rule("SCHED-001", title="update tokens exceed rollout tokens x mu", requires=("totals", "grpo", "accounting"))
def update_vs_rollout(ctx) -> Iterable[Issue]:
    """Every generated row (prompt + completion) is trained `grpo.num_iterations` (mu) times,
    once per pass, however the engine slices the batch: TRL's steps_per_generation trains one
    slice of the generation batch per micro-step, so the optimizer steps of one generation add
    up to mu passes over it, not mu passes per step. `totals.tokens.update` can therefore never
    exceed mu x (the rollout's prompt + completion tokens, a shared prefill counted once per
    completion); a run stopped mid-cycle trains less. An estimate (every step priced from
    means) must equal it. Imported and estimated work prices means, rounded once per
    generation batch: within ceil((mu (K + 1) + 2) x batches / 2) + 1 tokens. Staged runs and
    runs that discard rollouts (the `stages` and `rollouts` sections) are the ST and RO rules'.
    A ledger that charges a full-batch pass on every optimizer step
    breaks this bound."""
    doc = ctx.doc
    if "stages" in doc or "rollouts" in doc:
        return  # per-stage settings and discarded rows: the ST and RO rules hold those to their sections
    rows = _rollout_rows_tokens(doc)
    if rows is None:
        return
    g = doc["grpo"]
    mu = int(g["num_iterations"])
    update = doc["totals"]["tokens"]["update"]
    want = mu * rows
    sched = "".join(f", {k} {g[k]}" for k in ("steps_per_generation", "gradient_accumulation_steps") if k in g)
    hint = ("charge each optimizer step the slice of the generation batch it trained (TRL: "
            "generation_batch_size / steps_per_generation rows per micro-step); rebuild the ledger with "
            "suite.train.trl_callback.RaceLedger")
    slack = 0
    prov = doc.get("provenance") if isinstance(doc.get("provenance"), dict) else {}
    if prov.get("method") in ("imported", "estimated"):
        # means, rounded once per generation batch: the tolerance of WORK-004's update equation
        k, n = g["group_size"], doc["totals"]["work"].get("count.completions")
        if isinstance(n, int) and k * g["prompts_per_step"]:
            batches = max(n // (k * g["prompts_per_step"]), 1)
            slack = -(-(mu * (k + 1) + 2) * batches // 2) + 1
    if update > want + slack:
        yield Issue("$.totals.tokens.update",
                    f"update tokens {update:,} exceed mu x rollout tokens = {mu} x {rows:,} = {want:,} (mu {mu}{sched}): "
                    f"rows are charged {update / rows:.3g} training passes, at most {mu} run", hint)
    elif update < want - slack and prov.get("method") == "estimated":
        yield Issue("$.totals.tokens.update",
                    f"update tokens {update:,} but an estimate trains every row mu = {mu} times: {want:,}",
                    "rebuild the estimate (race report --estimate)")
