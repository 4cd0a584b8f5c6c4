"""Schedule rules: the update tokens a report claims must fit the rollouts it generated and
the schedule it states (each generated row is trained num_iterations times, whatever the
slicing: TRL's steps_per_generation, gradient accumulation, verl's mini-batches)."""

from __future__ import annotations

from typing import Iterable

from ..numbers import json_count
from .registry import Issue, rule


def _profile(doc: dict):
    try:
        from ..accounting import ENGINES
    except ImportError:  # a validator without the accounting stack: nothing to say
        return None
    return ENGINES.get(doc["accounting"]["engine_profile"])   # None: PHYS-001 names an unknown profile


def _share(x) -> float | None:
    """A declared kept share, when it is one (SCHEMA reports anything else)."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1 else None


def _segments(doc: dict, prof) -> list[tuple]:
    """(path, K, mu, prompts per step, prompt + completion + environment tokens of every
    generated row, update tokens, completions, kept share, environment tokens?) of the report,
    or of each stage of a staged one: the rollout's prompt count is per completion, or per group
    of K where the engine profile shares a prompt's prefill. The kept share is the declared one:
    None where a report declares none (its rollouts' trained / generated stands), 1 for a stage
    that declares none (it discards nothing, whatever the other stages do)."""
    g, t = doc["grpo"], doc["totals"]
    if "stages" not in doc:
        w = t["work"]
        prov = doc.get("provenance") if isinstance(doc.get("provenance"), dict) else {}
        means = prov.get("means") if isinstance(prov.get("means"), dict) else {}
        k = 1 if prof.prefill_per_completion else int(g["group_size"])
        rows = k * t["tokens"]["rollout_prompt"] + t["tokens"]["rollout_completion"] + w.get("count.rollout_env", 0)
        return [("$.totals.tokens.update", int(g["group_size"]), int(g["num_iterations"]), g["prompts_per_step"], rows,
                 t["tokens"]["update"], w.get("count.completions"), _share(means.get("kept_share")),
                 bool(w.get("count.rollout_env")))]
    out = []
    for i, x in enumerate(doc["stages"]):
        if "tokens" not in x:
            continue        # ST-004 prices the stage's work without them
        sg, tok, m, steps = x["grpo"], x["tokens"], x["means"], json_count(x["steps"])
        K, n = json_count(sg["group_size"]), json_count(sg["group_size"]) * json_count(sg["prompts_per_step"])
        k = 1 if prof.prefill_per_completion else K
        env = steps * int(round(n * m.get("environment_tokens", 0)))
        out.append((f"$.stages[{i}].tokens.update", K, json_count(sg["num_iterations"]), json_count(sg["prompts_per_step"]),
                    k * tok["rollout_prompt"] + tok["rollout_completion"] + env, tok["update"], steps * n,
                    m.get("kept_share", 1.0), bool(env)))
    return out


@rule("SCHED-001", title="update tokens exceed rollout tokens x mu", requires=("totals", "grpo", "accounting"))
def update_vs_rollout(ctx) -> Iterable[Issue]:
    """Every generated row (prompt, completion and a multi-turn rollout's environment tokens)
    is trained `grpo.num_iterations` (mu) times, once per pass, however the engine slices the
    batch: TRL's steps_per_generation trains one slice of the generation batch per micro-step,
    so the optimizer steps of one generation add up to mu passes over it, not mu passes per
    step. `totals.tokens.update` can therefore never exceed mu x (the rollout's prompt +
    completion + environment tokens, a shared prefill counted once per completion); a run
    stopped mid-cycle, or one that discards completions, trains less. An estimate (every step
    priced from means) must equal mu x its kept share x those tokens; a staged one, stage by
    stage (each stage's own K and mu, its tokens and means). Imported and estimated work prices
    means, rounded once per generation batch: within ceil((mu (k + 1 + e) + 2) x batches / 2) + 1
    tokens, k = K where the profile shares a prompt's prefill (else 1), e = 1 with environment
    tokens (else 0). A ledger that charges a full-batch pass on
    every optimizer step breaks this bound."""
    doc = ctx.doc
    prof = _profile(doc)
    if prof is None or ("stages" in doc and not ctx.section_ok("stages")):
        return      # SCHEMA reports malformed stages
    g = doc["grpo"]
    sched = "".join(f", {k} {g[k]}" for k in ("steps_per_generation", "gradient_accumulation_steps") if k in g)
    hint = ("charge each optimizer step the slice of the generation batch it trained (TRL: "
            "generation_batch_size / steps_per_generation rows per micro-step); rebuild the ledger with "
            "suite.train.trl_callback.RaceLedger")
    prov = doc.get("provenance") if isinstance(doc.get("provenance"), dict) else {}
    means = prov.get("method") in ("imported", "estimated")
    for path, k, mu, b, rows, update, n, kept, env in _segments(doc, prof):
        want = mu * rows
        slack = 0
        if means and isinstance(n, int) and k * b:
            # means, rounded once per generation batch: the tolerance of WORK-004's update equation
            batches = max(n // (k * b), 1)
            ke = 1 if prof.prefill_per_completion else k       # how often the rows count a prompt
            slack = -(-(mu * (ke + 1 + env) + 2) * batches // 2) + 1
        if update > want + slack:
            yield Issue(path, f"update tokens {update:,} exceed mu x rollout tokens = {mu} x {rows:,} = {want:,} "
                        f"(mu {mu}{sched}): rows are charged {update / rows if rows else float('inf'):.3g} training passes, at most "
                        f"{mu} run", hint)
            continue
        trained = want if kept is None else want * kept     # a kept share of 0 trains nothing
        if prov.get("method") == "estimated" and abs(update - trained) > slack:
            share = "" if kept is None else f" of the kept share {kept:g}"
            yield Issue(path, f"update tokens {update:,} but an estimate trains every row{share} mu = {mu} times: "
                        f"{round(trained):,}", "rebuild the estimate (race report --estimate)")
