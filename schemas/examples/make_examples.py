"""Regenerate the example reports and ledgers under schemas/examples/ (deterministic).

    .venv/bin/python schemas/examples/make_examples.py

valid/: two reports transcribed from the source paper's published setup (Wilhelm & Kao 2026):
Qwen2.5-1.5B-Instruct with a LoRA (rank 64 on every projection), GRPO with K = 2 completions
per prompt and up to 2,048 completion tokens, TRL engine profile, (a) the sparse rule reward
and (b) Qwen2.5-Math-PRM-7B feedback. Per-step token lengths are drawn with a fixed seed and
priced by suite.accounting (work_from_lengths + phase_flops), exactly as a run's ledger
callback would. Evaluation values are illustrative, not the paper's results. Beside them: the
same setup as an author with only its setup table would report it (`race report --estimate`:
provenance estimated, no ledger, with the hardware cross-check), the sparse report as
version 1.0 wrote it (no provenance), which stays valid, and the sparse report scored along
the run (1.2 `curve`).

invalid/: each document breaks one invariant; `<name>.expect` lists exactly the rule IDs it
triggers, the invariant's own and its consequences (one per line); tests/test_validate_examples.py
runs them all.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import random
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from suite.accounting import Adapter, GRPOSettings, phase_flops, tokens_from_work, work_from_lengths  # noqa: E402
from suite.record.ledger import LedgerWriter  # noqa: E402
from suite.accounting.specs import spec_for  # noqa: E402
from suite.accounting.pretraining import share_of_pretraining  # noqa: E402
from suite.atomic import write_json_atomic  # noqa: E402
from suite.record.build import Provenance, build_estimate, build_report, totals_from  # noqa: E402
from suite.train.cell import cell_from_dict  # noqa: E402
from suite.validate.physics import _inputs, _priced  # noqa: E402

STEPS = 40
PROMPTS_PER_STEP = 16
START = dt.datetime(2026, 11, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
CREATED = "2026-11-02T09:00:00Z"


def _time(step: int) -> str:
    return (START + dt.timedelta(seconds=95 * step)).isoformat().replace("+00:00", "Z")


def paper_spec(reward: str) -> dict:
    """The run spec of the paper's setup; reward 'sparse' (rule) or 'prm' (Qwen2.5-Math-PRM-7B)."""
    prm = reward == "prm"
    return {
        "id": f"paper-qwen2.5-1.5b-lora64-k2-{reward}",
        "label": f"Qwen2.5-1.5B-Instruct, LoRA r=64, K=2, {'PRM feedback' if prm else 'sparse rule reward'}",
        "seed": 0,
        "policy": "Qwen2.5-1.5B-Instruct",
        "adapter": {"type": "lora", "rank": 64, "alpha": 128},
        "grpo": {"group_size": 2, "prompts_per_step": PROMPTS_PER_STEP, "num_iterations": 1, "beta": 0.0,
                 "max_completion_tokens": 2048, "gradient_checkpointing": True},
        "reward": {"system": "prm", "kind": "prm", "model": "Qwen2.5-Math-PRM-7B"} if prm else {"system": "sparse"},
        "engine": {"name": "trl", "version": "1.16.0"},
        "accounting": {"engine_profile": "trl", "attention": "causal"},
        "budget": {"flops": None, "band": None},
        "evaluations": [
            {"target": "gsm8k-250", "metric": "pass@1", "value": 0.712 if not prm else 0.704, "n": 250},
            {"target": "math500-250", "metric": "pass@1", "value": 0.452 if not prm else 0.46, "n": 250},
        ],
    }


def write_ledger(path: Path, spec: dict, seed: int = 0) -> None:
    """A STEPS-step ledger with seeded Polaris-like lengths (prompts 60-400 tokens, completions
    up to 2,048), priced by suite.accounting."""
    rng = random.Random(seed)
    policy = spec_for(spec["policy"])
    rm = spec_for(spec["reward"]["model"]) if spec["reward"].get("model") else None
    g = GRPOSettings(**spec["grpo"])
    adapter = Adapter(kind="lora", rank=spec["adapter"]["rank"], alpha=float(spec["adapter"]["alpha"]))
    path.unlink(missing_ok=True)
    with LedgerWriter(path, fsync=False) as w:
        for step in range(1, STEPS + 1):
            prompts = [rng.randint(60, 400) for _ in range(g.prompts_per_step)]
            comps = [min(2048, max(8, int(rng.lognormvariate(6.3, 0.6)))) for _ in range(g.prompts_per_step * g.group_size)]
            full = [p for p in prompts for _ in range(g.group_size)]
            reward = [p + c for p, c in zip(full, comps)] if rm else None
            work = work_from_lengths(prompts, comps, g, "trl", reward)
            flops = phase_flops(work, policy, adapter, g, rm, engine="trl", attention="causal")
            w.append(step, time=_time(step), tokens=tokens_from_work(work), work=work, flops=flops,
                     seconds={"rollout": round(rng.uniform(40, 70), 2), "update": round(rng.uniform(15, 25), 2),
                              "reward": round(rng.uniform(8, 12), 2) if rm else round(rng.uniform(0.01, 0.05), 3)})


def band_around(total: int) -> dict:
    """An IsoFLOP band of +-10% around a round number near the total."""
    mag = 10 ** (len(str(total)) - 2)
    centre = round(total / mag) * mag
    return {"low": int(centre * 0.9), "high": int(centre * 1.1)}


def make_valid() -> dict[str, dict]:
    out = HERE / "valid"
    out.mkdir(exist_ok=True)
    docs = {}
    for reward in ("sparse", "prm"):
        spec = paper_spec(reward)
        ledger = out / f"paper-qwen1.5b-lora64-{reward}.ledger.jsonl"
        write_ledger(ledger, spec, seed=1 if reward == "sparse" else 2)
        doc = build_report(ledger, spec, report_dir=out, created=CREATED, provenance=Provenance(
            "measured", recorder="schemas/examples/make_examples.py (seeded per-step lengths)", steps=STEPS)).doc
        total = doc["totals"]["flops"]["total"]
        doc["budget"] = {"flops": band_around(total)["high"] // 11 * 10, "band": band_around(total)}
        doc["run"]["notes"] = ("Transcribed from the source paper's published setup (Polaris-53K prompts, K=2, up to "
                               "2,048 completion tokens); per-step lengths are seeded draws, FLOPs by suite.accounting. "
                               "Evaluation values are illustrative, not the paper's results.")
        write_json_atomic(out / f"paper-qwen1.5b-lora64-{reward}.json", doc)
        docs[reward] = doc
    old = copy.deepcopy(docs["sparse"])          # what version 1.0 wrote: no provenance
    old["schema_version"] = "1.0"
    del old["provenance"], old["pretraining"]      # 1.2's section: a 1.0 report never had it
    write_json_atomic(out / "v1.0-paper-qwen1.5b-lora64-sparse.json", old)
    docs["curve"] = with_curve(docs["sparse"], out / docs["sparse"]["ledger"]["path"])
    write_json_atomic(out / "paper-qwen1.5b-lora64-sparse-curve.json", docs["curve"])
    docs["estimate"] = build_estimate(cell_from_dict(ESTIMATE, check_paths=False).run_spec(),
                                      cell_from_dict(ESTIMATE, check_paths=False).means(), created=CREATED).doc
    write_json_atomic(out / "paper-qwen1.5b-lora64-estimate.json", docs["estimate"])
    docs["staged"] = cell_from_dict(STAGED, check_paths=False).estimate(created=CREATED).doc
    write_json_atomic(out / "staged-filtered-multiturn-estimate.json", docs["staged"])
    pub = cell_from_dict(PUBLISHED, check_paths=False)
    docs["published"] = build_estimate(pub.run_spec(), pub.means(), created=CREATED).doc
    write_json_atomic(out / "published-estimate.json", docs["published"])
    return docs


def with_curve(doc: dict, ledger: Path) -> dict:
    """The sparse report scored along the run (schema 1.2 `curve`): step 0 and every 10th step on the
    first 100 problems, each stamped with the ledger's cumulative FLOPs (illustrative scores)."""
    from suite.evaluate.curve import cumulative_flops

    steps = [0, 10, 20, 30]
    stamps = cumulative_flops(ledger, steps)
    out = copy.deepcopy(doc)
    out["run"]["id"] += "-curve"
    out["curve"] = {"every": 10, "limit": 100, "points": [
        {"step": s, "flops": stamps[s], "evaluations": [
            {"target": "gsm8k-250:first-100", "metric": "pass@1", "value": v, "n": 100}]}
        for s, v in zip(steps, (0.62, 0.66, 0.69, 0.70))]}
    return out


# A paper's setup table as a cell (docs/paper-report.md walks an author through one like it).
ESTIMATE = {
    "name": "paper-qwen2.5-1.5b-lora64-k2-sparse-estimate", "label": "Qwen2.5-1.5B-Instruct, LoRA r=64, K=2 (setup table)",
    "policy": "Qwen2.5-1.5B-Instruct", "reward": {"system": "sparse", "kind": "rule"},
    "lora_rank": 64, "lora_alpha": 128, "K": 2, "prompts_per_step": 64, "max_completion_tokens": 2048, "mu": 1,
    "beta": 0.0, "engine": {"name": "trl", "version": "1.16.0", "profile": "trl"},
    "steps": 200, "mean_prompt_tokens": 212, "mean_completion_tokens": 655,
    "hardware": {"accelerator": "NVIDIA H100 SXM", "count": 8, "dtype": "bf16", "peak_flops": 9.89e14,
                 "wall_seconds": 300},
    "notes": "Estimated from the setup table (mean lengths, step count), not measured per step.",
    "evaluations": [{"target": "gsm8k-250", "metric": "pass@1", "value": 0.712, "n": 250}],
}


# The same setup as a published run re-accounted (leaderboard/published/*.yaml are real ones):
# every number with a source or an assumption and its range.
_URL = "https://example.org/paper"
PUBLISHED = {**ESTIMATE, "name": "published-qwen2.5-1.5b-lora64-k2-sparse",
             "published": {"title": "An example paper (illustrative sources)", "url": _URL, "year": 2026},
             "sources": {k: {"url": _URL, "where": f"Table 2, column {k}"}
                         for k in ("policy", "lora_rank", "group_size", "prompts_per_step", "max_completion_tokens",
                                   "num_iterations", "beta", "steps", "mean_prompt_tokens", "hardware", "peak_flops")},
             "assumed": {"mean_completion_tokens": {"low": 400, "high": 1200, "why": "not in the paper"},
                         "accelerator_hours": {"low": 0.5, "high": 1.0, "why": "'under an hour' on 8 GPUs"}},
             "hardware": {**ESTIMATE["hardware"], "wall_seconds": None, "accelerator_hours": 0.67}}

# A staged run with what real runs do (1.2): two stages (the cap and K grow), DAPO-style
# filtering keeps 80% of the completions, and multi-turn tool outputs are fed back as prefill.
STAGED = {**{k: v for k, v in ESTIMATE.items() if k not in ("steps", "mean_completion_tokens", "K",
                                                            "max_completion_tokens")},
          "name": "staged-qwen2.5-1.5b-lora64-filtered-multiturn",
          "label": "Qwen2.5-1.5B-Instruct, LoRA r=64, two stages, filtered, multi-turn",
          "rollouts": {"kept_share": 0.8, "environment_tokens": 200, "turns": 3, "reasons": ["zero_variance_group"],
                       "off_policy": {"max_lag": 1, "mean_lag": 0.5},
                       "updates": {"kind": "mini_batch", "optimizer_steps_per_generation": 4}},
          "stages": [{"name": "2k", "steps": 120, "group_size": 2, "max_completion_tokens": 2048,
                      "mean_completion_tokens": 655},
                     {"name": "4k", "steps": 80, "group_size": 4, "max_completion_tokens": 4096,
                      "mean_completion_tokens": 1400}]}


# ------------------------------------------------------------------------------------ invalid


def _retotal(doc: dict) -> None:
    """Recompute total, shares, p and the pretraining share after a phase changed (so only the
    intended rule fires)."""
    t = doc["totals"]
    doc["totals"] = totals_from(t["flops"], t["tokens"], t["work"], t["steps"], t.get("seconds"))
    _repretrain(doc)


def _repretrain(doc: dict) -> None:
    """The pretraining share of the document's own total, as the report builder writes it."""
    if "pretraining" in doc:
        doc["pretraining"] = share_of_pretraining(doc["totals"]["flops"]["total"], spec_for(doc["policy"]["name"]))


def invalid_cases(valid: dict[str, dict]):
    """(name, document or raw bytes, expected rule IDs, ledger bytes or None)."""
    sparse, prm = valid["sparse"], valid["prm"]
    base_ledger = (HERE / "valid" / sparse["ledger"]["path"]).read_bytes()

    def mut(src, fn):
        d = copy.deepcopy(src)
        if "ledger" in d:
            d["ledger"]["path"] = "prm.ledger.jsonl" if src is prm else "base.ledger.jsonl"
        fn(d)
        return d

    def setp(path, value):
        def fn(d):
            node = d
            for k in path[:-1]:
                node = node[k]
            node[path[-1]] = value
        return fn

    def both(*fns):
        def fn(d):
            for f in fns:
                f(d)
        return fn

    f = sparse["totals"]["flops"]
    yield "phase-sum", mut(sparse, setp(("totals", "flops", "total"), f["total"] + 10**12)), ["ARITH-001", "PUB-001"]  # the share of pretraining follows the total
    yield "shares", mut(sparse, setp(("totals", "shares", "rollout"), sparse["totals"]["shares"]["rollout"] + 0.01)), ["ARITH-002"]
    yield "update-share", mut(sparse, setp(("totals", "update_share"), 0.5)), ["ARITH-003"]

    def bump_rollout(d):
        d["totals"]["flops"]["rollout"] += d["totals"]["flops"]["rollout"] // 10
        _retotal(d)
    yield "ledger-sums", mut(sparse, bump_rollout), ["ARITH-004", "PHYS-001"]
    yield "ledger-sha256", mut(sparse, setp(("ledger", "sha256"), "0" * 64)), ["ARITH-006"]
    yield "record-count", mut(sparse, both(setp(("ledger", "records"), sparse["ledger"]["records"] + 1),
                                          setp(("totals", "steps"), sparse["totals"]["steps"] + 1))), \
        ["ARITH-007", "WORK-001"]   # 41 steps cannot hold the 40 generation batches the completions make
    yield "tokens-vs-work", mut(sparse, setp(("totals", "tokens", "rollout_completion"),
                                              sparse["totals"]["tokens"]["rollout_completion"] + 1)), ["ARITH-008", "ARITH-004"]
    yield "ledger-missing", mut(sparse, setp(("ledger", "path"), "no-such-ledger.jsonl")), ["LEDGER-003"]
    yield "ledger-escapes", mut(sparse, setp(("ledger", "path"), "../valid/" + sparse["ledger"]["path"])), ["LEDGER-003"]

    def full_priced(d):
        from suite.accounting import Adapter as A, GRPOSettings as G
        from suite.accounting.modelspec import ModelSpec

        w = d["totals"]["work"]
        full = phase_flops(w, ModelSpec.from_dict(d["policy"]["spec"]), A(kind="full"), G(**d["grpo"]), None, "trl", "causal")
        d["totals"]["flops"]["update"] = full["update"]
        _retotal(d)
    yield "lora-priced-as-full", mut(sparse, full_priced), ["PHYS-003", "ARITH-004", "PLAUS-001"]

    def zero_prm(d):
        d["totals"]["flops"]["reward"] = 0
        _retotal(d)
    yield "prm-zero-cost", mut(prm, zero_prm), ["PHYS-004", "ARITH-004", "PLAUS-001"]

    def charge_rule(d):
        d["totals"]["flops"]["reward"] = 10**15
        _retotal(d)
    yield "rule-reward-charged", mut(sparse, charge_rule), ["PHYS-005", "ARITH-004"]

    def floor(d):
        d["totals"]["flops"]["rollout"] = 10**12
        _retotal(d)
    yield "rollout-below-floor", mut(sparse, floor), ["PHYS-002", "PHYS-001", "ARITH-004", "PLAUS-001"]
    yield "param-count", mut(sparse, setp(("policy", "params_total"), sparse["policy"]["params_total"] + 1)), ["PHYS-006"]

    def swap_size(d):
        big = spec_for("Qwen2.5-7B-Instruct")
        d["policy"]["spec"] = {**big.to_dict(), "name": d["policy"]["name"]}
        d["policy"]["params_total"], d["policy"]["params_non_embedding"] = big.params_total, big.params_non_embedding
        d["adapter"]["trainable_params"] = Adapter(kind="lora", rank=64, alpha=128.0).trainable_params(big)
    yield "swapped-model-size", mut(sparse, swap_size), ["PHYS-007", "PHYS-001", "PHYS-002", "PUB-001"]
    yield "trainable-params", mut(sparse, setp(("adapter", "trainable_params"), 1000)), ["PHYS-008"]
    yield "wrong-attention", mut(sparse, setp(("accounting", "attention"), "full")), ["PHYS-001"]
    yield "unknown-engine-profile", mut(sparse, setp(("accounting", "engine_profile"), "megatron")), ["PHYS-001"]
    yield "outside-band", mut(sparse, setp(("budget", "band"), {"low": 1, "high": 2})), ["PLAUS-001"]
    yield "group-size-1", mut(sparse, both(setp(("grpo", "group_size"), 1), setp(("grpo", "prompts_per_step"), 32))), \
        ["PLAUS-002"]
    # The work equations: settings a report declares against the work its ledger records (each
    # edit repriced by a consistent forger: PHYS-001 agrees, the equations do not).
    yield "prompts-per-step-edited", mut(sparse, setp(("grpo", "prompts_per_step"), 64)), \
        ["WORK-001", "WORK-003", "WORK-004"]   # and padded rows no longer come in whole batches
    yield "cap-below-lengths", mut(sparse, setp(("grpo", "max_completion_tokens"), 100)), ["WORK-002"]
    yield "beta-without-reference", mut(sparse, setp(("grpo", "beta"), 0.04)), ["WORK-005"]
    yield "mu-without-passes", mut(sparse, setp(("grpo", "num_iterations"), 4)), ["WORK-004", "WORK-005"]

    def halve_heads(d):
        d["totals"]["work"]["reward.heads"] //= 2
        d["totals"]["flops"] = {**d["totals"]["flops"], **_priced(d["totals"]["work"], _inputs(d))}
        _retotal(d)
    yield "reward-heads-halved", mut(prm, halve_heads), ["WORK-006", "ARITH-004"]

    def more_steps(d):   # 200 -> 400 steps and a longer mean, the totals left as they were
        d["provenance"]["steps"] = d["totals"]["steps"] = 400
        d["provenance"]["means"]["completion_tokens"] = 1310
    yield "estimate-steps-edited", mut(valid["estimate"], more_steps), ["WORK-007"]
    yield "eval-n", mut(sparse, setp(("evaluations", 0, "n"), 200)), ["PLAUS-003"]

    def no_update(d):
        d["totals"]["flops"]["update"] = 0
        _retotal(d)
    yield "update-share-zero", mut(sparse, no_update), ["PLAUS-004", "PHYS-001", "ARITH-004", "PLAUS-001"]
    yield "bad-date-time", mut(sparse, setp(("run", "created"), "2026-13-45T25:61:00Z")), ["SCHEMA-002"]
    yield "typo-key", mut(sparse, lambda d: d.__setitem__("totels", d["totals"])), ["SCHEMA-002"]
    yield "missing-field", mut(sparse, lambda d: d["grpo"].pop("beta")), ["SCHEMA-002"]
    yield "reward-model-incomplete", mut(prm, setp(("reward", "model"), {"name": "Qwen2.5-Math-PRM-7B"})), ["SCHEMA-002"]
    yield "unknown-version", mut(sparse, setp(("schema_version",), "2.0")), ["SCHEMA-001"]
    # Hostile bytes.
    yield "not-json", b"this is not JSON\n", ["INPUT-004"]
    yield "trailing-garbage", json.dumps(sparse).encode() + b"\n}{garbage", ["INPUT-004"]
    yield "nan", json.dumps(sparse).replace('"update_share": ', '"update_share": NaN, "x": ').encode(), ["INPUT-005"]
    yield "infinity", b'{"schema_version": "1.0", "budget": {"flops": Infinity}}', ["INPUT-005"]
    yield "duplicate-keys", b'{"schema_version": "1.0", "schema_version": "2.0"}', ["INPUT-006"]
    yield "deep-nesting", b"[" * 100_000 + b"]" * 100_000, ["INPUT-007"]
    yield "non-utf8", b'{"schema_version": "1.0", "run": {"id": "\xff\xfe"}}', ["INPUT-003"]
    yield "top-level-array", b"[]", ["SCHEMA-001"]
    yield "shares-as-percent", mut(sparse, setp(("totals", "shares", "rollout"), 61.1)), ["SCHEMA-002"]
    yield "no-provenance", mut(sparse, lambda d: d.pop("provenance")), ["SCHEMA-002"]
    yield "estimate-with-steps-missing", mut(valid["estimate"], lambda d: d["provenance"].pop("steps")), ["SCHEMA-002"]

    # Scores along the run (1.2 `curve`): stamped with what the ledger had spent at each step, in order.
    curve = valid["curve"]

    def slide(d):                        # cheaper than the ledger says, still after the point before
        d["curve"]["points"][2]["flops"]["update"] -= 10**15
        pt = d["curve"]["points"][2]["flops"]
        pt["total"] = pt["rollout"] + pt["update"] + pt["reward"]
    yield "curve-off-ledger", mut(curve, slide), ["CURVE-001"]

    def swap(d):
        pts = d["curve"]["points"]
        pts[1], pts[2] = pts[2], pts[1]
    yield "curve-out-of-order", mut(curve, swap), ["CURVE-002"]
    yield "curve-past-the-end", mut(curve, lambda d: d["curve"]["points"].append(
        {**d["curve"]["points"][-1], "step": d["totals"]["steps"], "flops": dict(d["totals"]["flops"])})), ["CURVE-002"]
    yield "curve-in-v1-1", mut(curve, setp(("schema_version",), "1.1")), ["SCHEMA-002"]

    # The hardware cross-check: the claimed FLOPs against what the accelerators deliver at peak.
    est = valid["estimate"]
    hw = est["hardware"]
    need = est["totals"]["flops"]["total"] / hw["peak_flops"] / hw["count"]    # wall seconds at 100% of peak
    yield "utilization-over-1", mut(est, setp(("hardware", "wall_seconds"), round(need / 3, 1))), ["PHYS-009"]
    yield "utilization-high", mut(est, setp(("hardware", "wall_seconds"), round(need / 0.8, 1))), ["PLAUS-005"]
    yield "accelerator-hours", mut(est, setp(("hardware", "accelerator_hours"), 1.0)), ["ARITH-009"]

    # Published work: the pretraining share and the EU check, sources, assumptions and ranges.
    pub = valid["published"]
    yield "pretraining-inflated", mut(pub, setp(("pretraining", "flops"), pub["pretraining"]["flops"] * 10)), \
        ["PUB-001"]
    yield "eu-threshold", mut(pub, setp(("pretraining", "eu", "exceeds"), True)), ["PUB-001"]
    yield "unsourced", mut(pub, lambda d: d["sources"]["facts"].pop("steps")), ["PUB-002"]
    yield "assumption-outside-range", mut(pub, setp(("sources", "assumed", "mean_completion_tokens", "high"), 500)), \
        ["PUB-003"]

    # What real runs do: stages sum, discarded rollouts never trained, mini-batches not epochs.
    staged = valid["staged"]
    yield "stages-do-not-sum", mut(staged, lambda d: d["stages"].pop(0)), ["ST-001", "ST-004", "RO-002"]

    def stage_total(d):
        d["stages"][0]["flops"]["update"] += 10**15
        d["stages"][1]["flops"]["update"] -= 10**15
    yield "stage-row-sum", mut(staged, stage_total), ["ST-002", "ST-004"]
    yield "staged-grpo-not-last", mut(staged, setp(("grpo", "max_completion_tokens"), 2048)), ["ST-003"]

    def all_trained(d):             # the discarded fifth charged to the update after all
        d["rollouts"]["trained"] = d["rollouts"]["generated"]
    yield "discarded-but-trained", mut(staged, all_trained), ["RO-001"]

    def update_tokens(d):           # work and tokens agree: every generated token trained after all
        d["totals"]["tokens"]["update"] = d["totals"]["work"]["count.update"] = \
            round(d["totals"]["tokens"]["update"] / 0.8)
    yield "update-beyond-kept", mut(staged, update_tokens), ["RO-002", "ST-004"]
    yield "discarded-flops", mut(staged, setp(("rollouts", "discarded_rollout_flops"),
                                             staged["totals"]["flops"]["rollout"] + 1)), ["RO-003"]
    yield "minibatch-as-epochs", mut(staged, setp(("rollouts", "updates", "passes_per_token"), 4)), ["RO-004"]
    yield "lag-mean-above-max", mut(staged, setp(("rollouts", "off_policy", "mean_lag"), 3)), ["RO-005"]
    yield "rollouts-in-v1-1", mut(staged, setp(("schema_version",), "1.1")), ["SCHEMA-002"]

    # Ledger problems (the report is rebuilt over its own broken ledger).
    lines = base_ledger.splitlines(keepends=True)
    yield "dup-step", None, ["ARITH-005"], b"".join(lines[:5] + [lines[4]] + lines[5:])
    yield "torn-tail", None, ["LEDGER-001"], base_ledger + lines[5][: len(lines[5]) // 2]
    yield "bad-line", None, ["LEDGER-002"], b"".join(lines[:3] + [b'{"step": "four"}\n'] + lines[3:])
    # Provenance: what a measured ledger must be.
    yield "empty-ledger", None, ["PROV-001"], b""
    yield "fewer-records-than-steps", None, ["PROV-002"], lines[0]
    first = json.loads(lines[0])
    same = b"".join(json.dumps({**first, "step": i + 1}).encode() + b"\n" for i in range(len(lines)))
    yield "identical-records", None, ["PROV-003"], same
    near = lines[:1] + [json.dumps({**first, "step": i + 1}).encode() + b"\n" for i in range(1, len(lines))]
    yield "identical-but-one", None, ["PROV-003"], b"".join(near)     # one record differs: still means
    # Fabricated work (issue 29): every record's update work / 100, rollout work x 0.35, repriced.
    yield "work-fabricated", None, ["WORK-003", "WORK-004"], _forged(sparse, lines, _fabricate)


def _fabricate(work: dict) -> None:
    for k in list(work):
        if k.startswith("update."):
            work[k] //= 100
        elif k.startswith("rollout."):
            work[k] = int(work[k] * 0.35)


def _forged(doc: dict, lines: list, edit) -> bytes:
    """The ledger lines with each record's work edited by `edit` and its FLOPs priced again
    from the report's own specs, as a consistent forger would."""
    out = []
    for line in lines:
        rec = json.loads(line)
        edit(rec["work"])
        rec["flops"] = _priced(rec["work"], _inputs(doc))
        out.append(json.dumps(rec).encode() + b"\n")
    return b"".join(out)


def make_invalid(valid: dict[str, dict]) -> None:
    out = HERE / "invalid"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    (out / "base.ledger.jsonl").write_bytes((HERE / "valid" / valid["sparse"]["ledger"]["path"]).read_bytes())
    (out / "prm.ledger.jsonl").write_bytes((HERE / "valid" / valid["prm"]["ledger"]["path"]).read_bytes())
    from suite.record.ledger import LedgerSummary

    for case in invalid_cases(valid):
        name, doc, expect = case[:3]
        if len(case) == 4:  # a broken ledger; its report sums what is readable, with a true hash
            ledger = out / f"{name}.ledger.jsonl"
            ledger.write_bytes(case[3])
            s = LedgerSummary.scan(ledger)
            doc = copy.deepcopy(valid["sparse"])
            doc["totals"] = totals_from(s.flops, s.tokens, s.work, s.records, s.seconds)
            _repretrain(doc)
            doc["ledger"] = {"path": ledger.name, "sha256": s.sha256, "records": s.records}
            doc["budget"] = {"flops": None, "band": None}
            if name != "fewer-records-than-steps":      # the others declare what their ledger holds
                doc["provenance"]["steps"] = s.records
        if isinstance(doc, bytes):
            (out / f"{name}.json").write_bytes(doc)
        else:
            write_json_atomic(out / f"{name}.json", doc)
        (out / f"{name}.expect").write_text("\n".join(expect) + "\n")


if __name__ == "__main__":
    v = make_valid()
    make_invalid(v)
    for r, d in v.items():
        t = d["totals"]
        if "hardware" in d:
            from suite.record.runspec import Hardware

            print(f"{r}: implied utilization {Hardware(**d['hardware']).utilization(t['flops']['total']):.3f}")
        print(f"{r}: total {t['flops']['total']:.3e} FLOPs, rollout {t['shares']['rollout']:.3f}, "
              f"update p {t['update_share']:.3f}, reward {t['shares']['reward']:.3f}")
