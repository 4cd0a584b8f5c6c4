"""A realistic submissions folder for the leaderboard benchmark: N distinct reports, each with a
ledger of its own, varied in model, reward system, adapter, GRPO settings, length of run,
budget band and scores. Every report is built by suite.record.build.build_report from a ledger priced
by suite.accounting, so every one passes the validator with no findings.

    make_corpus(folder, n, seed=0) -> list of report file names

Pricing uses suite.accounting.coefficients once per run and a dot product per step: FLOPs are
linear in the work statistics (that is what phase_flops computes), so the ledgers are exact.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

from suite.accounting import (Adapter, GRPOSettings, PHASES, coefficients, tokens_from_work,
                              work_from_lengths)
from suite.site.leaderboard import submission_id
from suite.accounting.specs import spec_for
from suite.record.build import Provenance, build_report

POLICIES = ("Qwen2.5-0.5B-Instruct", "Qwen2.5-1.5B-Instruct", "Qwen2.5-3B-Instruct", "Qwen2.5-7B-Instruct")
RULE_REWARDS = ("sparse", "structured", "dense")
PRM = "Qwen2.5-Math-PRM-7B"
RANKS = (8, 16, 32, 64, 128, 256)
START = dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc)


def _price(coef: list, work: dict) -> dict[str, int]:
    out = dict.fromkeys(PHASES, 0)
    for phase, _, c in coef:
        out[phase] += sum(v * work.get(k, 0) for k, v in c.items())
    return out


def _spec(rng: random.Random, i: int) -> dict:
    """A run spec drawn at random (deterministic in the rng)."""
    policy = rng.choice(POLICIES)
    prm = rng.random() < 0.3
    rank = rng.choice(RANKS) if rng.random() < 0.9 else 0
    reward = {"system": "prm", "kind": "prm", "model": PRM} if prm else {"system": rng.choice(RULE_REWARDS)}
    label = (f"{policy} {'full FT' if not rank else f'LoRA r={rank}'} {reward['system']} run {i}")
    return {
        "id": f"bench-{i:05d}", "label": label, "seed": i, "policy": policy,
        "adapter": {"type": "lora", "rank": rank, "alpha": 2 * rank} if rank else {"type": "full"},
        "grpo": {"group_size": rng.choice((2, 2, 4, 8)), "prompts_per_step": rng.choice((4, 8, 16)),
                 "num_iterations": rng.choice((1, 1, 2)), "beta": rng.choice((0.0, 0.0, 0.04)),
                 "max_completion_tokens": rng.choice((1024, 2048)),
                 "gradient_checkpointing": rng.random() < 0.8},
        "reward": reward,
        "accounting": {"engine_profile": (profile := rng.choice(("trl", "trl", "generic"))),
                       "attention": "causal" if rng.random() < 0.9 else "full"},
        "engine": {"name": "trl" if profile == "trl" else "hand-filled", "version": "1.16.0"},  # WORK-008
        "evaluations": [{"target": t, "metric": "pass@1", "value": round(rng.uniform(0.2, 0.9), 4), "n": 250}
                        for t in ("gsm8k-250", "math500-250") if rng.random() < 0.9],
    }


def _write_ledger(path: Path, spec: dict, rng: random.Random, steps: int, start: dt.datetime) -> None:
    policy = spec_for(spec["policy"])
    rm = spec_for(spec["reward"]["model"]) if spec["reward"].get("model") else None
    g = GRPOSettings(**spec["grpo"])
    ad = spec["adapter"]
    adapter = Adapter(kind=ad["type"], rank=ad.get("rank", 0), alpha=float(ad.get("alpha", 0)))
    profile, attention = spec["accounting"]["engine_profile"], spec["accounting"]["attention"]
    coef = coefficients(policy, adapter, g, rm, profile, attention)
    lines = []
    for step in range(1, steps + 1):
        prompts = [rng.randint(60, 400) for _ in range(g.prompts_per_step)]
        comps = [min(g.max_completion_tokens, max(8, int(rng.lognormvariate(6.0, 0.6))))
                 for _ in range(g.prompts_per_step * g.group_size)]
        reward = [p + c for p, c in zip((p for p in prompts for _ in range(g.group_size)), comps)] if rm else None
        work = work_from_lengths(prompts, comps, g, profile, reward)
        t = (start + dt.timedelta(seconds=60 * step + rng.randint(0, 30))).isoformat().replace("+00:00", "Z")
        rec = {"step": step, "time": t, "tokens": tokens_from_work(work), "work": work,
               "flops": _price(coef, work),
               "seconds": {"rollout": round(rng.uniform(20, 70), 2), "update": round(rng.uniform(10, 25), 2),
                           "reward": round(rng.uniform(5, 12), 2) if rm else round(rng.uniform(0.01, 0.05), 3)}}
        lines.append(json.dumps(rec, separators=(",", ":")) + "\n")
    path.write_text("".join(lines))


def make_corpus(folder: Path, n: int, seed: int = 0, steps: tuple[int, int] = (10, 60)) -> list[str]:
    """Write `n` distinct valid submissions into `folder` as `<id>.json`, each with its own
    ledger `ledgers/run-<i>.jsonl` (10-60 steps). Returns the report file names."""
    folder = Path(folder)
    (folder / "ledgers").mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    names = []
    for i in range(n):
        spec = _spec(rng, i)
        ledger = folder / "ledgers" / f"run-{i:05d}.jsonl"
        start = START + dt.timedelta(hours=rng.randint(0, 24 * 60))
        _write_ledger(ledger, spec, rng, rng.randint(*steps), start)
        doc = build_report(ledger, spec, report_dir=folder, created=(start + dt.timedelta(days=2)).isoformat()
                           .replace("+00:00", "Z"), provenance=Provenance("measured", recorder="race RaceLedger (TRL callback)")).doc
        if rng.random() < 0.5:        # half declare an IsoFLOP band that their total lands in
            total = doc["totals"]["flops"]["total"]
            mag = 10 ** (len(str(total)) - 2)
            centre = round(total / mag) * mag
            doc["budget"] = {"flops": centre, "band": {"low": int(centre * 0.9), "high": int(centre * 1.1)}}
        name = f"{submission_id(doc)}.json"
        (folder / name).write_text(json.dumps(doc, indent=2))
        names.append(name)
    return names
