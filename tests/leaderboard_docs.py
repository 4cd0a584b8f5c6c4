"""Report v1 documents for the leaderboard and table tests.

`made_up_report` fills every required field of schemas/report-v1.schema.json (a test checks it)
with made-up FLOPs: good for rendering tests, which never recompute physics. Tests that go
through the validation gate use `valid_examples()` — the shipped schemas/examples/valid reports —
and `variant`, which changes only what physics does not depend on (identity, label, scores).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "schemas" / "examples" / "valid"

# Strings that would run script or inject markup if any page rendered them as HTML.
PAYLOADS = (
    '<script>window.__pwned=1;document.title="pwned"</script>',
    '"><img src=x onerror="window.__pwned=2;document.title=\'pwned\'">',
    "javascript:window.__pwned=3;document.title='pwned'",
    "</title></style></script><svg onload=\"window.__pwned=4\"><a href=\"javascript:window.__pwned=5\">x</a>",
    "<iframe srcdoc=\"<script>parent.__pwned=6</script>\"></iframe>{{ 7*7 }}${7*7}\\begin{x}|a|_b_",
    "<script>__pwned=7</script>",          # short: fits fields limited to 64 characters
)


# Optional free-text fields of report v1 that `hostile` adds when a report lacks them.
OPTIONAL_TEXT = (("run", "label"), ("run", "notes"), ("run", "suite_version"), ("grpo", "loss_type"),
                 ("accounting", "flop_convention"))


def _model(name: str) -> dict:
    from suite.accounting.specs import spec_for

    s = spec_for(name)
    return {"name": name, "spec": s.to_dict(), "params_total": s.params_total,
            "params_non_embedding": s.params_non_embedding}


def made_up_report(*, run_id: str = "run-1", label: str | None = None, model: str = "Qwen2.5-1.5B-Instruct",
                   reward: str = "sparse", rank: int | None = 64, k: int = 2, total: int = 10 ** 18,
                   p: float = 0.3, reward_share: float = 0.0, band: tuple[int, int] | None = None,
                   scores: dict[tuple[str, str], float] | None = None, steps: int = 10) -> dict:
    """A schema-valid report with made-up FLOPs split so that shares are p and reward_share."""
    update = round(total * p)
    reward_flops = round(total * reward_share)
    rollout = total - update - reward_flops
    kind = "rule" if reward_share == 0 else "prm"
    doc = {
        "schema_version": "1.0",
        "run": {"id": run_id, "created": "2026-11-29T20:00:00Z", "engine": {"name": "trl", "version": "1.16.0"}},
        "policy": _model(model),
        "adapter": ({"type": "lora", "rank": rank, "alpha": 2 * rank, "targets": ["q_proj", "v_proj"],
                     "trainable_params": 1000 * rank} if rank else
                    {"type": "full", "rank": None, "alpha": None, "targets": [], "trainable_params": 10 ** 9}),
        "grpo": {"group_size": k, "prompts_per_step": 8, "num_iterations": 1, "beta": 0.0,
                 "max_completion_tokens": 2048, "gradient_checkpointing": True},
        "reward": {"system": reward, "kind": kind, "model": None if kind == "rule" else _model("Qwen2.5-Math-PRM-7B")},
        "accounting": {"method": "race-analytic", "version": "1", "engine_profile": "trl", "attention": "causal"},
        "budget": {"flops": None, "band": None if band is None else {"low": band[0], "high": band[1]}},
        "totals": {"steps": steps, "flops": {"rollout": rollout, "update": update, "reward": reward_flops, "total": total},
                   "shares": {"rollout": rollout / total, "update": update / total, "reward": reward_flops / total},
                   "update_share": update / total,
                   "tokens": {"rollout_prompt": 1000, "rollout_completion": 2000, "update": 3000,
                              "reward": 0 if kind == "rule" else 3000},
                   "work": {}},
        "ledger": {"path": "ledger.jsonl", "sha256": "0" * 64, "records": steps},
        "evaluations": [{"target": t, "metric": m, "value": v, "n": 250}
                        for (t, m), v in (scores or {("gsm8k-250", "pass@1"): 0.5}).items()],
    }
    if label is not None:
        doc["run"]["label"] = label
    return doc


def valid_examples() -> list[tuple[str, dict]]:
    """The shipped valid example reports, (file name, document)."""
    return [(p.name, json.loads(p.read_text(encoding="utf-8"))) for p in sorted(EXAMPLES.glob("*.json"))]


def variant(doc: dict, i: int, *, score: float | None = None) -> dict:
    """A copy of a valid report that is a different submission but the same physics: another
    run id and label, and (optionally) another value for every evaluation score."""
    d = copy.deepcopy(doc)
    d["run"]["id"] = f"{d['run']['id']}-v{i}"
    d["run"]["label"] = f"{d['run'].get('label') or d['run']['id']} variant {i}"
    if score is not None:
        for ev in d.get("evaluations") or ():
            ev["value"] = score
    return d


def string_paths(doc, prefix=()):
    """Every (path, value) of a string leaf in a JSON document."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from string_paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from string_paths(v, prefix + (i,))
    elif isinstance(doc, str):
        yield prefix, doc


def set_path(doc, path, value) -> None:
    """Set the leaf at `path` (a tuple of keys and indexes)."""
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


def hostile(doc: dict, accept) -> tuple[dict, list[tuple]]:
    """Fill every string field of `doc` with a script/markup payload, keeping a payload only
    where `accept(candidate)` (e.g. "the validator finds no error") still holds; returns the
    hostile document and the paths that carry payloads."""
    d = copy.deepcopy(doc)
    for section, key in OPTIONAL_TEXT:        # optional free-text fields of the schema, if absent
        if isinstance(d.get(section), dict):
            d[section].setdefault(key, "placeholder")
    carried = []
    for n, (path, _) in enumerate(list(string_paths(d))):
        if path and path[0] in ("schema_version", "$schema"):
            continue
        old = _get(d, path)
        for k in range(len(PAYLOADS)):
            set_path(d, path, PAYLOADS[(n + k) % len(PAYLOADS)])
            if accept(d):
                carried.append(path)
                break
        else:
            set_path(d, path, old)
    return d, carried


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def reference_cell_report(folder: Path, cell: str = "s-sparse", steps: int = 3) -> dict:
    """A report of one of the suite's own cells (tasks/cells/CELL.yaml: its tiny shipped policy and
    settings), measured with a ledger priced by suite.accounting as the TRL callback writes it,
    the ledger stored in `folder`: what REF-001 accepts as a reference cell."""
    import random

    import yaml

    from suite.record.build import Provenance, build_report

    from validate_strategies import ledger_records, write_ledger

    c = yaml.safe_load((ROOT / "tasks" / "cells" / f"{cell}.yaml").read_text())
    spec = {"id": f"reference-{cell}", "label": f"reference cell {cell}, a tiny policy on 2 CPU cores",
            "policy": str(ROOT / "tasks" / "arith" / "models" / Path(c["policy"]).name),
            "adapter": {"type": "lora", "rank": c["lora_rank"], "alpha": float(c["lora_alpha"]),
                        "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]},
            "grpo": {k: c[k] for k in ("group_size", "prompts_per_step", "max_completion_tokens", "num_iterations",
                                       "beta")} | {"gradient_checkpointing": True},
            "reward": {"system": c["reward"]},
            "engine": {"name": "trl", "version": "1.16.0"},
            "accounting": {"engine_profile": "trl-cpu", "attention": "causal"},
            "evaluations": [{"target": "arith-easy-250", "metric": "pass@1", "value": 0.41, "n": 250}]}
    rng = random.Random(cell)
    g = spec["grpo"]
    lengths = [([rng.randint(20, 40) for _ in range(g["prompts_per_step"])],
                [rng.randint(1, g["max_completion_tokens"]) for _ in range(g["prompts_per_step"] * g["group_size"])])
               for _ in range(steps)]
    name = f"reference-{cell}.ledger.jsonl"
    write_ledger(folder / name, ledger_records(spec, lengths))
    return build_report(folder / name, spec, created="2026-11-29T21:00:00Z",
                        provenance=Provenance("measured", recorder="race RaceLedger (TRL callback)",
                                              reference_cell=cell)).doc
