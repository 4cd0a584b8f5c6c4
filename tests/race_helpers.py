"""Builders of minimal compute-allocation reports (report v1) for frontier and RACE tests.

The reports follow schemas/report-v1.schema.json (a test checks it); their FLOPs are made up to
hit a requested update share and reward share exactly, not recomputed from token counts.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

MODELS = {"tiny-0.2m": 210_000, "tiny-1m": 1_070_000, "tiny-4m": 4_100_000}


def model(name: str) -> dict:
    """A report v1 model block for an embedded tiny policy."""
    spec = {"name": name, "model_type": "qwen2", "hidden_size": 128, "num_layers": 4, "num_heads": 4,
            "num_kv_heads": 2, "head_dim": 32, "intermediate_size": 512, "vocab_size": 330,
            "tie_embeddings": False, "qkv_bias": True}
    return {"name": name, "spec": spec,
            "params_total": MODELS.get(name, 1_000_000), "params_non_embedding": MODELS.get(name, 1_000_000) // 2}


def make_report(*, model_name: str = "tiny-1m", band: tuple[int, int] | None = (900_000_000_000, 1_100_000_000_000),
                reward: str = "sparse", rank: int | None = 16, label: str | None = "a100", seed: int = 0,
                p: float = 0.3, reward_share: float = 0.0, total: int = 1_000_000_000_000,
                scores: dict[tuple[str, str], float] | None = None, native: float | None = 0.4) -> dict:
    """A valid report v1 whose totals have update share ~p and reward share ~reward_share, and one
    evaluation per (target, metric) in `scores` (plus native_reward unless native is None)."""
    update = round(total * p)
    reward_flops = round(total * reward_share)
    rollout = total - update - reward_flops
    evals = [{"target": t, "metric": m, "value": v, "n": 250} for (t, m), v in (scores or {}).items()]
    if native is not None:
        evals.append({"target": "arith-train", "metric": "native_reward", "value": native, "n": 64})
    kind = "rule" if reward in ("sparse", "structured", "dense") else "prm"
    run = {"id": f"{model_name}-{reward}-{label}-r{rank}-s{seed}", "seed": seed,
           "created": "2026-11-29T20:00:00Z", "engine": {"name": "trl", "version": "1.16.0"}}
    if label is not None:
        run["label"] = label
    return {
        "schema_version": "1.0",
        "run": run,
        "policy": model(model_name),
        "adapter": ({"type": "lora", "rank": rank, "alpha": 2.0 * rank, "targets": ["q_proj", "v_proj"],
                     "trainable_params": 1000 * rank} if rank else
                    {"type": "full", "rank": None, "alpha": None, "targets": [], "trainable_params": 1_000_000}),
        "grpo": {"group_size": 8, "prompts_per_step": 8, "num_iterations": 1, "beta": 0.0,
                 "max_completion_tokens": 48, "gradient_checkpointing": True},
        "reward": {"system": reward, "kind": kind, "model": None if kind == "rule" else model("tiny-prm")},
        "accounting": {"method": "race-analytic", "version": "1", "engine_profile": "trl", "attention": "causal"},
        "budget": {"flops": band[1] if band else None,
                   "band": {"low": band[0], "high": band[1]} if band else None},
        "totals": {"steps": 10,
                   "flops": {"rollout": rollout, "update": update, "reward": reward_flops, "total": total},
                   "shares": {"rollout": rollout / total, "update": update / total, "reward": reward_flops / total},
                   "update_share": update / total,
                   "tokens": {"rollout_prompt": 1000, "rollout_completion": 2000, "update": 3000,
                              "reward": 2000 if reward_flops else 0},
                   "work": {}},
        "ledger": {"path": "ledger.jsonl", "sha256": hashlib.sha256(b"").hexdigest(), "records": 10},
        "evaluations": evals,
    }


def write_reports(root: Path, reports: list[dict]) -> Path:
    """Write each report to root/<run id>/report.json; returns root."""
    for i, r in enumerate(reports):
        d = root / f"{i:04d}-{r['run']['id']}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "report.json").write_text(json.dumps(r))
    return root


def surface_reports(surface, ps, *, seeds=(0,), ranks=None, model_name="tiny-1m", reward="sparse",
                    reward_share=0.0, target=("arith-easy", "pass@1"), native=None, noise=None) -> list[dict]:
    """One report per (p, seed) with score surface(p) (+ noise(p, seed) if given). Labels a<i>;
    LoRA ranks cycle through `ranks` by position when given."""
    out = []
    for i, p in enumerate(ps):
        for s in seeds:
            score = surface(p) + (noise(p, s) if noise else 0.0)
            rank = ranks[i % len(ranks)] if ranks else 16
            out.append(make_report(model_name=model_name, reward=reward, rank=rank, label=f"a{i}", seed=s, p=p,
                                   reward_share=reward_share, scores={target: score},
                                   native=None if native is None else native(p)))
    return out
