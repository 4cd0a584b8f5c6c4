"""ST and RO rules: what real runs do (report 1.2). A staged run's totals are the sum of its
stages (`stages`); discarded rollouts are rollout compute, never update compute, and multi-turn
environment tokens are counted once, as prefill (`rollouts`); the update consumes each token as
often as grpo.num_iterations says, whatever the batch words."""

from __future__ import annotations

from typing import Iterable

from ..accounting import PHASES
from ..numbers import json_count
from .registry import Issue, rule

_STAGE_HINT = "rebuild the staged estimate (race report --estimate SPEC with `stages:`), or fix the stage rows"
_RO_HINT = "rebuild the report from its ledger or setup table (race import / race report): rollouts is derived"


@rule("ST-001", title="a staged report's stages do not sum to its totals", requires=("stages", "totals"))
def stages_sum(ctx) -> Iterable[Issue]:
    """A staged run's totals are the sum of its stages: `totals.flops` (each phase) and
    `totals.steps` must equal the sums of `stages[].flops` and `stages[].steps`. A stage left out
    (or counted twice) shows here."""
    st, t = ctx.doc["stages"], ctx.doc["totals"]
    for ph in PHASES:
        s = sum(x["flops"][ph] for x in st)
        if s != t["flops"][ph]:
            yield Issue(f"$.totals.flops.{ph}", f"{ph} FLOPs {t['flops'][ph]:,} but the stages sum to {s:,}",
                        _STAGE_HINT)
    s = sum(x["steps"] for x in st)
    if s != t["steps"]:
        yield Issue("$.totals.steps", f"{t['steps']:,} steps but the stages sum to {s:,}", _STAGE_HINT)


@rule("ST-002", title="a stage's FLOPs do not add up", requires=("stages",))
def stage_rows(ctx) -> Iterable[Issue]:
    """Each stage's `flops.total` must be its rollout + update + reward, and its mean completion
    (policy and environment tokens) must fit its own cap `grpo.max_completion_tokens`."""
    for i, x in enumerate(ctx.doc["stages"]):
        f = x["flops"]
        if sum(f[p] for p in PHASES) != f["total"]:
            yield Issue(f"$.stages[{i}].flops.total", f"stage {x['name']}: total {f['total']:,} != rollout + update "
                        f"+ reward {sum(f[p] for p in PHASES):,}", _STAGE_HINT)
        m = x["means"]
        c = m["completion_tokens"] + m.get("environment_tokens", 0)
        if c > x["grpo"]["max_completion_tokens"]:
            yield Issue(f"$.stages[{i}].means.completion_tokens", f"stage {x['name']}: mean completion {c:g} tokens "
                        f"exceeds its cap {x['grpo']['max_completion_tokens']:,}",
                        "each stage's means must fit that stage's max_completion_tokens")


@rule("ST-003", title="a staged report's grpo section is not its last stage's", requires=("stages", "grpo"))
def last_stage(ctx) -> Iterable[Issue]:
    """The report's `grpo` section describes the last stage (the policy the run ended with):
    K, prompts per step, cap and mu must be the last stage's."""
    last, g = ctx.doc["stages"][-1]["grpo"], ctx.doc["grpo"]
    for k, v in last.items():
        if g.get(k) != v:
            yield Issue(f"$.grpo.{k}", f"grpo.{k} = {g.get(k)!r} but the last stage has {v!r}", _STAGE_HINT)


@rule("ST-004", title="a stage is not its own setup priced", requires=("stages", "totals", "grpo", "accounting",
                                                                         "policy", "adapter", "reward", "provenance"))
def stage_priced(ctx) -> Iterable[Issue]:
    """Each stage is its own estimate: its work is `steps` x work_from_means(its means, the
    report's settings with the stage's K, prompts per step, cap and mu), exactly as `race report
    --estimate` priced it (kept share, environment tokens, turns and reward tokens from the
    stage's means; turns default to `rollouts.multi_turn.turns`), its `tokens` are that work's
    and its `flops` that work priced per phase; `totals.work` is the sum of the stages' work,
    key by key, and the provenance means the step-weighted means of the stages'. With ST-001
    and PHYS-001, a staged report's FLOPs follow from its stage rows alone: editing a stage's
    steps, means, K, cap or mu -- or its FLOPs and the totals with them -- without pricing the
    stage again is refused. Exact."""
    from dataclasses import replace

    from ..accounting import add_work, tokens_from_work
    from .equations import priced_means
    from .physics import _inputs, _priced

    doc = ctx.doc
    try:
        args = _inputs(doc)     # (policy, adapter, settings, reward model, profile, attention)
    except Exception:       # noqa: BLE001 -- SCHEMA and PHYS-006 name an unreadable setting or spec
        return
    ro = doc.get("rollouts") if ctx.section_ok("rollouts") else {}
    mt = ro.get("multi_turn") or {}
    works = []
    for i, x in enumerate(doc["stages"]):
        g = x["grpo"]
        settings = replace(args[2], **{k: json_count(g[k]) for k in ("group_size", "prompts_per_step",
                                                                   "max_completion_tokens", "num_iterations")})
        m = dict(x["means"])
        if m.get("environment_tokens") and "turns" not in m:
            m["turns"] = mt.get("turns", 1)
        one = priced_means(doc, m, settings, where=f"$.stages[{i}].means")
        if not isinstance(one, dict):
            if one is not None:
                yield one
            return
        work = {k: v * json_count(x["steps"]) for k, v in one.items()}     # 120.0 steps are 120
        works.append(work)
        name = x["name"]
        if "tokens" in x and tokens_from_work(work) != x["tokens"]:
            yield Issue(f"$.stages[{i}].tokens", f"stage {name}: tokens {x['tokens']} but {x['steps']:,} steps of its "
                        f"means give {tokens_from_work(work)}", _STAGE_HINT)
        flops = _priced(work, (*args[:2], settings, *args[3:]))
        bad = [ph for ph in PHASES if int(flops[ph]) != x["flops"][ph]]
        if bad:
            ph = bad[0]
            yield Issue(f"$.stages[{i}].flops.{ph}", f"stage {name}: {ph} FLOPs {x['flops'][ph]:,} but {x['steps']:,} "
                        f"steps of its setup (K {g['group_size']}, prompts {g['prompts_per_step']}, cap "
                        f"{g['max_completion_tokens']:,}, mu {g['num_iterations']}, mean completion "
                        f"{m['completion_tokens']:g}) cost {int(flops[ph]):,}", _STAGE_HINT)
    want, work = add_work(*works), doc["totals"]["work"]
    bad = [k for k in sorted(set(want) | set(work)) if want.get(k, 0) != work.get(k, 0)]
    if bad:
        k, more = bad[0], f" (and {len(bad) - 1} more statistics)" if len(bad) > 1 else ""
        yield Issue(f'$.totals.work["{k}"]', f"work {k} is {work.get(k, 0):,} but the stages' work sums to "
                    f"{want.get(k, 0):,}{more}", _STAGE_HINT)
    means = doc["provenance"].get("means")
    steps = sum(x["steps"] for x in doc["stages"])
    for key in ("prompt_tokens", "completion_tokens"):
        avg = sum(x["steps"] * x["means"][key] for x in doc["stages"]) / steps
        if isinstance(means, dict) and abs(means.get(key, 0) - avg) > 1e-9 * max(avg, 1):
            yield Issue(f"$.provenance.means.{key}", f"mean {key} {means.get(key)!r} but the stages' step-weighted "
                        f"mean is {avg:g}", _STAGE_HINT)


@rule("ST-005", title="stages in a report that is not an estimate", requires=("stages", "provenance"))
def stages_estimated(ctx) -> Iterable[Issue]:
    """Stages are priced from their means: a staged report is an estimate (`provenance.method`
    estimated). A measured or imported run's ledger carries every step with its own settings
    and lengths, and the work equations (WORK-001..006) hold its totals to one set of settings;
    stage rows beside it would be a second, unchecked account of the same run."""
    method = ctx.doc["provenance"]["method"]
    if method != "estimated":
        yield Issue("$.stages", f"a {method or 'measured'} report with stages: a staged report is an estimate, each "
                    "stage priced from its means", "rebuild it with race report --estimate (stages:), or drop the "
                    "stages of a ledger-backed report")


@rule("RO-001", title="rollouts do not match the work they summarise", requires=("rollouts", "totals"))
def rollouts_match_work(ctx) -> Iterable[Issue]:
    """`rollouts.generated` must be `totals.work["count.completions"]`, `rollouts.discarded` its
    `count.discarded` (0 when absent) and equal generated - trained, `discarded_share`
    discarded / generated, and `multi_turn.environment_tokens` the work's `count.rollout_env`."""
    ro, w = ctx.doc["rollouts"], ctx.doc["totals"]["work"]
    gen, disc = w.get("count.completions", 0), w.get("count.discarded", 0)
    if ro["generated"] != gen:
        yield Issue("$.rollouts.generated", f"{ro['generated']:,} generated but the work has {gen:,} completions",
                    _RO_HINT)
    if ro["trained"] > ro["generated"]:
        yield Issue("$.rollouts.trained", f"{ro['trained']:,} completions trained on, more than the "
                    f"{ro['generated']:,} generated", "a run trains on at most what it generated")
    d = ro.get("discarded", ro["generated"] - ro["trained"])
    if d != disc or d != ro["generated"] - ro["trained"]:
        yield Issue("$.rollouts.discarded", f"{d:,} discarded, but generated - trained = "
                    f"{ro['generated'] - ro['trained']:,} and the work's count.discarded = {disc:,}", _RO_HINT)
    share = ro.get("discarded_share")
    if share is not None and gen and abs(share - disc / gen) > 1e-9:
        yield Issue("$.rollouts.discarded_share", f"discarded_share {share:g} != {disc:,} / {gen:,}", _RO_HINT)
    env = w.get("count.rollout_env", 0)
    mt = ro.get("multi_turn")
    if (mt["environment_tokens"] if mt else 0) != env:
        yield Issue("$.rollouts.multi_turn", f"{mt['environment_tokens'] if mt else 0:,} environment tokens stated, "
                    f"the work has {env:,}", _RO_HINT)


@rule("RO-002", title="the update trains more tokens than the kept rollouts hold",
      requires=("rollouts", "totals", "grpo", "accounting", "provenance"))
def update_within_kept(ctx) -> Iterable[Issue]:
    """Discarded rollouts are never trained on: `totals.tokens.update` may not exceed
    num_iterations x (trained / generated) x (prompt tokens of every completion + policy tokens +
    environment tokens), where an engine profile that prefills one prompt per group (prefix
    caching) counted each prompt once in `tokens.rollout_prompt` (times K then) -- for a staged
    run, the sum of that over its stages, each with its own mu, K and kept share (an estimate's
    declared kept share stands for trained / generated, which rounds the discards of each batch
    to whole completions); 1% tolerance, as
    the physics rules allow (the kept count of fractional means is rounded per step). A report that
    discards 20% of its rollouts but charges the update for all of them fails here. An estimate
    keeps the same share of every batch; an imported ledger keeps a different count each step, of
    rows of different lengths, so the totals bound nothing finer than mu x every row (SCHED-001)
    and WORK-004 ties its update to each record's kept rows instead."""
    from .schedule_rules import _profile, _segments

    ro, t = ctx.doc["rollouts"], ctx.doc["totals"]
    prof = _profile(ctx.doc)
    if not ro["generated"] or prof is None or ctx.doc["provenance"]["method"] != "estimated" or \
            ("stages" in ctx.doc and not ctx.section_ok("stages")):
        return
    segs = _segments(ctx.doc, prof)
    share = ro["trained"] / ro["generated"]
    bound = sum(mu * (share if kept is None else kept) * rows for _, _, mu, _, rows, *_, kept, _ in segs)
    if t["tokens"]["update"] > bound * 1.01:     # 1%, as PHYS: kept counts of fractional means are rounded per step
        mus = sorted({s[2] for s in segs})
        yield Issue("$.totals.tokens.update", f"update tokens {t['tokens']['update']:,} exceed what the "
                    f"{ro['trained']:,} kept of {ro['generated']:,} rollouts hold ({bound:,.0f} at mu = "
                    f"{'/'.join(map(str, mus))})",
                    "charge the update for the kept rollouts only; discarded ones are rollout compute")


@rule("RO-003", title="discarded rollouts' FLOPs exceed the rollout's", requires=("rollouts", "totals"))
def discarded_flops(ctx) -> Iterable[Issue]:
    """`rollouts.discarded_rollout_flops` (the generation spent on what was thrown away) is part of
    `totals.flops.rollout`: at most all of it, and 0 when nothing was discarded."""
    ro, f = ctx.doc["rollouts"], ctx.doc["totals"]["flops"]
    x = ro.get("discarded_rollout_flops")
    if x is None:
        return
    if x > f["rollout"] or (x and not ro.get("discarded", ro["generated"] - ro["trained"])):
        yield Issue("$.rollouts.discarded_rollout_flops", f"{x:,} FLOPs on discarded rollouts, with rollout "
                    f"FLOPs {f['rollout']:,} and {ro.get('discarded', 0):,} completions discarded", _RO_HINT)


@rule("RO-004", title="updates per generation batch contradict num_iterations", requires=("rollouts", "grpo"))
def updates_kind(ctx) -> Iterable[Issue]:
    """`rollouts.updates.passes_per_token` must be grpo.num_iterations: verl's
    ppo_mini_batch_size splits one generation batch into several optimizer steps that each see a
    disjoint slice (kind mini_batch: every token trained once per ppo_epochs), TRL's mu trains
    every token mu times (kind epochs, with at least mu optimizer steps per generation). Counting
    mini-batch steps as epochs multiplies the update FLOPs by the number of mini-batches."""
    up, mu = ctx.doc["rollouts"].get("updates"), ctx.doc["grpo"]["num_iterations"]
    if not up:
        return
    if up["passes_per_token"] != mu:
        yield Issue("$.rollouts.updates.passes_per_token", f"{up['passes_per_token']} passes per token but "
                    f"grpo.num_iterations = {mu}", "mini-batch optimizer steps do not retrain a token; set "
                    "num_iterations to the epochs (verl ppo_epochs, TRL num_iterations)")
    if up["kind"] == "epochs" and up["optimizer_steps_per_generation"] < mu:
        yield Issue("$.rollouts.updates.optimizer_steps_per_generation", f"{up['optimizer_steps_per_generation']} "
                    f"optimizer steps per generation cannot train every token mu = {mu} times",
                    "epochs take at least one optimizer step each")


@rule("RO-005", title="off-policy lag is inconsistent", requires=("rollouts",))
def off_policy(ctx) -> Iterable[Issue]:
    """`rollouts.off_policy.mean_lag` cannot exceed `max_lag` (staleness in optimizer steps of the
    rollouts trained on)."""
    op = ctx.doc["rollouts"].get("off_policy")
    if op and op.get("mean_lag") is not None and op["mean_lag"] > op["max_lag"]:
        yield Issue("$.rollouts.off_policy.mean_lag", f"mean lag {op['mean_lag']:g} exceeds max lag {op['max_lag']}",
                    "the mean staleness is at most the largest")
