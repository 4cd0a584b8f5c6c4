"""The mutation suite's reports of what real runs do (report 1.2) and their consistent forgeries:
staged estimates (each stage its own K, prompts per step, cap, mu and means), filtered and
multi-turn estimates, imported ledgers of filtered and multi-turn runs (kept counts and
environment tokens per step, as `race import` prices them) and the MLPerf reference logs
(tests/fixtures/mlperf); and forgeries that add the field sections to plain reports, which once
made the work equations step aside. Each forgery is repriced and rebuilt as a forger who knows
the suite would (the rollouts section, the stage rows and the totals follow the edit)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from suite.accounting import ENGINES, PHASES, add_work, phase_flops, tokens_from_work, work_from_means
from suite.record.build import Means, Provenance, build_estimate, build_report
from suite.record.runspec import RunSpec
from validate_strategies import (FACTORS, _objects, _rebuild, _records, _reprice_totals, _retotal, _spec_dict,
                                 write_ledger)

FIX = Path(__file__).parent / "fixtures" / "mlperf"
CREATED = "2026-12-02T00:00:00Z"


def _shape(rng, cap: int) -> tuple[float, float, float, float | None]:
    """(completion mean, environment tokens, turns, kept share) that fit `cap`: some runs
    multi-turn, some filtered, most both."""
    kind = rng.choice(("filtered", "multi-turn", "both", "both"))
    env = round(rng.uniform(1, cap / 3), 1) if kind != "filtered" else 0.0
    c = round(rng.uniform(2, cap - env), 1)
    turns = float(rng.randint(2, max(2, min(6, int(c))))) if env else 1.0
    if env and turns > c:
        turns = 1.0
    kept = rng.choice((0.5, 0.75, 0.8, 0.9)) if kind != "multi-turn" else None
    return c, env, turns, kept


def _rollouts_desc(env: float, turns: float) -> dict | None:
    return {"turns": turns, "reasons": ["zero_variance_group"]} if env else {"reasons": ["dynamic_sampling"]}


def field_pool(folder: Path, seed: int = 1, n_staged: int = 8, n_estimated: int = 6, n_imported: int = 8) -> list:
    """(method, report, folder or None) of staged estimates, filtered and multi-turn estimates
    and imports, and the MLPerf reference imports; every engine profile, policies with and
    without latent or linear attention (whose decode differs from their prefill)."""
    import random

    rng = random.Random(seed)
    profiles = sorted(ENGINES)
    out = []
    for i in range(n_staged):
        spec = _spec_dict(300 + i, rng, profiles[i % len(profiles)])
        cap = spec["grpo"]["max_completion_tokens"]
        c, env, turns, kept = _shape(rng, cap) if i % 3 else (0.0, 0.0, 1.0, None)
        spec["rollouts"] = _rollouts_desc(env, turns) if (env or kept is not None) else None
        rs = RunSpec.from_dict(spec)
        stages = []
        n_st = rng.randint(2, 3)
        for j in range(n_st):
            scap = max(16, cap * (j + 1) // n_st)
            g = replace(rs.grpo, max_completion_tokens=scap, group_size=rng.randint(2, 6),
                        prompts_per_step=rng.randint(1, 6), num_iterations=rng.choice((1, 1, 2)))
            e = min(env, scap / 3)
            sc = round(rng.uniform(max(2.0, turns), scap - e), 1)
            m = Means(round(rng.uniform(5, 400), 1), sc, environment_tokens=e, turns=turns if e else 1.0,
                      kept_share=kept)
            stages.append((f"s{j}", replace(rs, grpo=g, steps=rng.randint(1, 300)), m))
        rs = replace(rs, grpo=stages[-1][1].grpo)
        out.append(("estimated", build_estimate(rs, stages=stages, created=CREATED).doc, None))
    for i in range(n_estimated):
        spec = _spec_dict(400 + i, rng, profiles[i % len(profiles)])
        c, env, turns, kept = _shape(rng, spec["grpo"]["max_completion_tokens"])
        spec["steps"], spec["rollouts"] = rng.randint(1, 500), _rollouts_desc(env, turns)
        means = Means(round(rng.uniform(5, 400), 1), c, environment_tokens=env, turns=turns, kept_share=kept)
        out.append(("estimated", build_estimate(RunSpec.from_dict(spec), means, created=CREATED).doc, None))
    for i in range(n_imported):
        spec = _spec_dict(500 + i, rng, profiles[i % len(profiles)])
        if i % 4 == 0:      # latent and linear attention: their decode moves with the turns
            spec["policy"] = rng.choice(("DeepSeek-V3-Base", "Qwen3-Next-80B-A3B-Instruct"))
            spec["adapter"] = {"type": "full"}
        recs, last, env, turns = _imported_field_records(spec, rng)
        spec["rollouts"] = _rollouts_desc(env, turns)
        d = folder / f"field-imported-{i}"
        d.mkdir(parents=True)
        write_ledger(d / "ledger.jsonl", recs)
        doc = build_report(d / "ledger.jsonl", spec, created=CREATED, provenance=Provenance(
            "imported", recorder="race import", steps=last,
            source={"engine": "nemo-rl", "file": "metrics.jsonl", "fields": ["kept", "tokens"]})).doc
        out.append(("imported", doc, d))
    out += mlperf_imports(folder)
    return out


def _imported_field_records(spec: dict, rng) -> tuple[list, int, float, float]:
    """Records as `race import` writes a filtered multi-turn log: per entry, work_from_means of
    its mean lengths, its whole kept count and the described environment tokens, times the
    generations it covers."""
    policy, adapter, g, rm = _objects(spec)
    eng, att = spec["accounting"]["engine_profile"], spec["accounting"]["attention"]
    n = g.group_size * g.prompts_per_step
    c0, env, turns, kept0 = _shape(rng, g.max_completion_tokens)
    recs, step = [], 0
    for _ in range(rng.randint(1, 4)):
        gens = rng.randint(1, 3)
        step += gens * g.num_iterations
        p = rng.uniform(5, 300)
        c = rng.uniform(max(1.0, turns), g.max_completion_tokens - env)
        kept = None if kept0 is None else rng.randint(1, n)
        one = work_from_means(p, c, g, eng, p + c + env if rm else None, policy=policy, reward_model=rm,
                              kept=kept, environment_tokens=env, turns=turns if env else 1)
        work = add_work(*([one] * gens))
        recs.append({"step": step, "tokens": tokens_from_work(work), "work": dict(work),
                     "flops": phase_flops(work, policy, adapter, g, rm, engine=eng, attention=att)})
    return recs, step, env, turns if env else 1.0


def mlperf_imports(folder: Path) -> list:
    """The MLPerf Training 6.1 GRPO reference logs of the fixtures, imported (filtered,
    multi-turn, Qwen3.5-397B-A17B's linear attention)."""
    from suite.integrations.mlperf import import_mlperf
    from suite.train.cell import load_cell

    out = []
    for log in ("GBS256_seed_1-steps1-3.out", "GBS1024_seed_1.out"):
        d = folder / f"mlperf-{log.split('.')[0]}"
        res = import_mlperf(FIX / log, load_cell(FIX / "run-qwen35-397b-grpo.yaml", check_paths=False), d)
        out.append(("imported", res.doc, d))
    return out


# ---- what a forger rebuilds after an edit --------------------------------------------------------


def _stages_follow_totals(doc: dict) -> None:
    """Stage FLOPs redistributed so they sum to the totals again (ST-001, ST-002)."""
    st, t = doc["stages"], doc["totals"]["flops"]
    for ph in PHASES:
        old = [x["flops"][ph] for x in st]
        s = sum(old)
        new = [o * t[ph] // s for o in old] if s else [0] * len(old)
        new[-1] += t[ph] - sum(new)
        for x, v in zip(st, new):
            x["flops"][ph] = v
    for x in st:
        x["flops"]["total"] = sum(x["flops"][p] for p in PHASES)


def _reprice_estimate(doc: dict) -> None:
    doc["totals"]["tokens"] = tokens_from_work(doc["totals"]["work"])
    _reprice_totals(doc)
    if "stages" in doc:
        _stages_follow_totals(doc)


def _weighted_means(doc: dict) -> None:
    st = doc["stages"]
    steps = sum(x["steps"] for x in st)
    for k in ("prompt_tokens", "completion_tokens"):
        doc["provenance"]["means"][k] = sum(x["steps"] * x["means"][k] for x in st) / steps
    doc["totals"]["steps"] = doc["provenance"]["steps"] = steps


# ---- forgeries of staged estimates -----------------------------------------------------------------


def _stage(doc, rng):
    return rng.randrange(len(doc["stages"]))


def _stage_steps(doc, folder, rng):
    """A stage's steps changed (more steps claimed for the same FLOPs), the step totals following."""
    x = doc["stages"][_stage(doc, rng)]
    x["steps"] = x["steps"] * rng.choice((2, 3)) if x["steps"] < 2 or rng.random() < 0.7 else x["steps"] // 2
    _weighted_means(doc)
    _retotal(doc)


def _stage_mean(doc, folder, rng):
    """A stage's mean completion moved, the provenance means following, its FLOPs left."""
    x = doc["stages"][_stage(doc, rng)]
    m = x["means"]
    room = x["grpo"]["max_completion_tokens"] - m.get("environment_tokens", 0)
    m["completion_tokens"] = min(round(m["completion_tokens"] * rng.choice((0.5, 2.0, 1.1)), 1), room)
    if m["completion_tokens"] == room:
        m["completion_tokens"] = round(room / 2, 1)
    _weighted_means(doc)


def _stage_setting(doc, folder, rng):
    """A stage's K, prompts per step or mu changed (the last stage's in the grpo section too),
    the totals repriced and the stage FLOPs redistributed to sum to them."""
    i = _stage(doc, rng)
    x = doc["stages"][i]
    key = rng.choice(("group_size", "prompts_per_step", "num_iterations"))
    x["grpo"][key] += rng.choice((1, 2, 3))
    if i == len(doc["stages"]) - 1:
        doc["grpo"][key] = x["grpo"][key]
    _reprice_estimate(doc)


def _stage_kept(doc, folder, rng):
    m = doc["stages"][_stage(doc, rng)]["means"]
    m["kept_share"] = 1.0 if m["kept_share"] < 1 and rng.random() < 0.5 else round(m["kept_share"] / 2, 3)


def _stage_env(doc, folder, rng):
    x = doc["stages"][_stage(doc, rng)]
    m = x["means"]
    room = x["grpo"]["max_completion_tokens"] - m["completion_tokens"]
    m["environment_tokens"] = round(min(room, m["environment_tokens"] * rng.choice((0.5, 2.0))), 1)


def _stage_reward_tokens(doc, folder, rng):
    """A stage's reward-model tokens (what the PRM scored) moved, its FLOPs left."""
    m = doc["stages"][_stage(doc, rng)]["means"]
    m["reward_tokens"] = round(m["reward_tokens"] * rng.choice((0.5, 0.9, 2.0)), 1)


def _stage_update_scaled(doc, folder, rng):
    """The update work scaled in the totals, repriced, the stage FLOPs made to sum to it."""
    f = rng.choice(FACTORS)
    w = doc["totals"]["work"]
    for k in list(w):
        if k.startswith("update."):
            w[k] = int(w[k] * f)
    w["count.update"] = int(w["count.update"] * f)
    _reprice_estimate(doc)


def _stage_flops_shifted(doc, folder, rng):
    """Update FLOPs moved from one stage to another: every sum still holds."""
    a, b = rng.sample(range(len(doc["stages"])), 2)
    xa, xb = doc["stages"][a]["flops"], doc["stages"][b]["flops"]
    move = max(1, xa["update"] // rng.choice((2, 4, 10)))
    xa["update"] -= move
    xb["update"] += move
    xa["total"] -= move
    xb["total"] += move


# ---- forgeries of filtered and multi-turn estimates -------------------------------------------------


def _means(doc):
    return doc["provenance"]["means"]


def _kept_share_edited(doc, folder, rng):
    m = _means(doc)
    m["kept_share"] = 1.0 if rng.random() < 0.5 else round(m["kept_share"] / 2, 3)


def _discards_trained(doc, folder, rng):
    """The update charged for the discarded completions too (work and tokens), repriced."""
    ks = _means(doc)["kept_share"]
    w = doc["totals"]["work"]
    for k in list(w):
        if k.startswith("update.") and not k.endswith(".calls") or k == "count.update":
            w[k] = int(w[k] / ks)
    _reprice_estimate(doc)


def _environment_edited(doc, folder, rng):
    m = _means(doc)
    m["environment_tokens"] = round(m["environment_tokens"] * rng.choice((0.5, 2.0)), 1)


def _environment_dropped(doc, folder, rng):
    """The environment tokens taken out of the means and the rollout's positions, repriced (a
    single-turn run of the same policy tokens claimed)."""
    m, w = _means(doc), doc["totals"]["work"]
    e = w.pop("count.rollout_env")
    w["rollout.tokens"] -= e
    m.pop("environment_tokens")
    m.pop("turns", None)
    doc["rollouts"].pop("multi_turn", None)
    _reprice_estimate(doc)


def _turns_edited(doc, folder, rng):
    m = _means(doc)
    m["turns"] = m["turns"] + rng.choice((1, 2)) if m["turns"] + 2 <= m["completion_tokens"] else 1.0 + (m["turns"] == 1)
    doc["rollouts"]["multi_turn"]["turns"] = m["turns"]


# ---- forgeries of filtered and multi-turn imports --------------------------------------------------


def _per_record(edit):
    def forge(doc, folder, rng):
        recs = _records(folder)
        for r in recs:
            if r["work"].get("count.completions"):
                edit(r["work"], rng)
                r["tokens"] = tokens_from_work(r["work"])
        _rebuild(doc, folder, recs)
    return forge


def _drop_discards(w, rng):
    w.pop("count.discarded", None)


def _inflate_discards(w, rng):
    n, d = w["count.completions"], w.get("count.discarded", 0)
    w["count.discarded"] = min(n, d + max(1, (n - d) // 2))


def _train_discards(w, rng):
    n, d = w["count.completions"], w.get("count.discarded", 0)
    for k in list(w):
        if k.startswith("update.") and not k.endswith(".calls") or k == "count.update":
            w[k] = w[k] * n // max(n - d, 1)


def _drop_environment(w, rng):
    e = w.pop("count.rollout_env", 0)
    w["rollout.tokens"] -= e


def _environment_as_decode(w, rng):
    w["rollout.lm_head"] += w.get("count.rollout_env", 0)


def _import_turns(doc, folder, rng):
    mt = doc["rollouts"]["multi_turn"]
    n = doc["totals"]["work"]["count.completions"]
    room = doc["totals"]["work"]["count.rollout_completion"] / n
    mt["turns"] = mt["turns"] + 1 if mt["turns"] + 1 <= room else max(1.0, mt["turns"] - 1)


# ---- field sections added to plain reports ----------------------------------------------------------


def _scaled_update(recs, f):
    for r in recs:
        for k in list(r["work"]):
            if k.startswith("update."):
                r["work"][k] = int(r["work"][k] * f)


def _rollouts_added(doc, folder, rng):
    """A rollouts section added (it once made the work equations step aside), the update halved."""
    recs = _records(folder)
    _scaled_update(recs, rng.choice((0.35, 0.5, 0.9)))
    doc["schema_version"] = "1.2"
    n = doc["totals"]["work"]["count.completions"]
    doc["rollouts"] = {"generated": n, "trained": n, "discarded": 0, "discarded_share": 0.0,
                       "discarded_rollout_flops": 0}
    _rebuild(doc, folder, recs)


def _stages_added(doc, folder, rng):
    """One stage row matching the totals added, the update work scaled."""
    recs = _records(folder)
    _scaled_update(recs, rng.choice((0.35, 0.5, 0.9)))
    _rebuild(doc, folder, recs)
    t, g = doc["totals"], doc["grpo"]
    n = max(t["work"]["count.completions"], 1)
    doc["schema_version"] = "1.2"
    doc["stages"] = [{"name": "all", "steps": t["steps"],
                      "grpo": {k: g[k] for k in ("group_size", "prompts_per_step", "max_completion_tokens",
                                                 "num_iterations")},
                      "means": {"prompt_tokens": max(t["tokens"]["rollout_prompt"] / n, 0.1),
                                "completion_tokens": min(max(t["tokens"]["rollout_completion"] / n, 0.1),
                                                         g["max_completion_tokens"])},
                      "flops": dict(t["flops"]), "tokens": dict(t["tokens"])}]


def _discards_declared(doc, folder, rng):
    """A measured ledger turned into a filtered run: half of each batch declared discarded and
    the update scaled to the rest (a consistent account of a run the ledger cannot show)."""
    recs = _records(folder)
    for r in recs:
        w = r["work"]
        n = w.get("count.completions", 0)
        if n >= 2:
            d = n // 2
            w["count.discarded"] = d
            for k in list(w):
                if k.startswith("update.") and not k.endswith(".calls") or k == "count.update":
                    w[k] = w[k] * (n - d) // n
            r["tokens"] = tokens_from_work(w)
    doc["schema_version"] = "1.2"
    doc["rollouts"] = {"generated": 0, "trained": 0}
    _rebuild(doc, folder, recs)


def _staged(doc):
    return "stages" in doc


def _staged_with(key):
    return lambda doc: "stages" in doc and all(key in x["means"] for x in doc["stages"])


def _plain_with(key):
    return lambda doc: "stages" not in doc and key in doc["provenance"].get("means", {})


def _decodes(doc):
    return "rollout.decode_tokens" in doc["totals"]["work"] or "rollout.rows" in doc["totals"]["work"]


def _work_has(key):
    return lambda doc: doc["totals"]["work"].get(key, 0) > 0


def _plain(doc):
    return "rollouts" not in doc and "stages" not in doc


def _generates_twice(doc):
    w, g = doc["totals"]["work"], doc["grpo"]
    return w.get("count.completions", 0) >= 2 * g["group_size"] * g["prompts_per_step"]


FIELD_FORGERIES = {
    # name: (methods it applies to, applicable(doc), forge(doc, folder, rng))
    "stage-steps-edited": (("estimated",), _staged, _stage_steps),
    "stage-mean-edited": (("estimated",), _staged, _stage_mean),
    "stage-setting-edited": (("estimated",), _staged, _stage_setting),
    "stage-kept-share-edited": (("estimated",), _staged_with("kept_share"), _stage_kept),
    "stage-environment-edited": (("estimated",), _staged_with("environment_tokens"), _stage_env),
    "stage-reward-tokens-edited": (("estimated",), _staged_with("reward_tokens"), _stage_reward_tokens),
    "stage-update-work-scaled": (("estimated",), _staged, _stage_update_scaled),
    "stage-flops-shifted": (("estimated",), _staged, _stage_flops_shifted),
    "kept-share-edited": (("estimated",), _plain_with("kept_share"), _kept_share_edited),
    "discards-trained-estimate": (("estimated",), _plain_with("kept_share"), _discards_trained),
    "environment-edited": (("estimated",), _plain_with("environment_tokens"), _environment_edited),
    "environment-dropped-estimate": (("estimated",), _plain_with("environment_tokens"), _environment_dropped),
    "turns-edited-estimate": (("estimated",), lambda d: _plain_with("turns")(d) and _decodes(d), _turns_edited),
    "discards-dropped": (("imported",), _work_has("count.discarded"), _per_record(_drop_discards)),
    "discards-inflated": (("imported",), _work_has("count.discarded"), _per_record(_inflate_discards)),
    "discards-trained": (("imported",), _work_has("count.discarded"), _per_record(_train_discards)),
    "environment-dropped": (("imported",), _work_has("count.rollout_env"), _per_record(_drop_environment)),
    "environment-as-decode": (("imported",), _work_has("count.rollout_env"), _per_record(_environment_as_decode)),
    "turns-edited": (("imported",), lambda d: _work_has("count.rollout_env")(d) and _decodes(d), _import_turns),
    "rollouts-section-added": (("measured", "imported"), _plain, _rollouts_added),
    "stages-added": (("measured", "imported"), _plain, _stages_added),
    "discards-declared-measured": (("measured",), _generates_twice, _discards_declared),
}
