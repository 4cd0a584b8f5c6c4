"""Hypothesis strategies for reports: valid reports priced by suite.accounting (optionally with
a ledger on disk), and single-invariant mutations with the rule meant to catch each."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

from hypothesis import strategies as st

from suite.accounting import (ENGINES, PROJECTIONS, Adapter, GRPOSettings, phase_flops, tokens_from_work,
                              work_from_lengths)
from suite.record.ledger import LedgerWriter
from suite.accounting.modelspec import catalog_names, load_spec
from suite.record.report import Provenance, build_report, model_entry, totals_from

MEASURED = Provenance("measured", recorder="race report (a per-step ledger)")

POLICIES = [n for n in catalog_names() if "PRM" not in n]
PRM = "Qwen2.5-Math-PRM-7B"


def _paired(targets: list) -> list:
    """gate_proj and up_proj together (peft fuses them into MoE expert stacks and refuses one alone)."""
    if ("gate_proj" in targets) != ("up_proj" in targets):
        targets = [*targets, "up_proj" if "gate_proj" in targets else "gate_proj"]
    return targets


@st.composite
def run_specs(draw) -> dict:
    """A run spec a real GRPO run could have (no plausibility warnings)."""
    rank = draw(st.sampled_from([0, 1, 8, 64, 256]))
    targets = _paired(draw(st.lists(st.sampled_from(PROJECTIONS), min_size=1, max_size=7, unique=True)))
    prm = draw(st.booleans())
    mcl = draw(st.sampled_from([16, 256, 2048]))
    return {
        "id": "fuzz", "label": "fuzz", "seed": draw(st.integers(0, 9)),
        "policy": draw(st.sampled_from(POLICIES)),
        "adapter": {"type": "lora", "rank": rank, "alpha": 2.0 * rank, "targets": targets} if rank else {"type": "full"},
        "grpo": {"group_size": draw(st.integers(2, 8)), "prompts_per_step": draw(st.integers(1, 8)),
                 "num_iterations": draw(st.integers(1, 3)), "beta": draw(st.sampled_from([0.0, 0.04])),
                 "max_completion_tokens": mcl, "gradient_checkpointing": draw(st.booleans())},
        "reward": {"system": "prm", "kind": "prm", "model": PRM} if prm else {"system": draw(st.sampled_from(["sparse", "dense"]))},
        "engine": {"name": "trl", "version": "1.16.0"},
        "accounting": {"engine_profile": draw(st.sampled_from(sorted(ENGINES))),
                       "attention": draw(st.sampled_from(["causal", "full"]))},
        "evaluations": draw(st.lists(st.sampled_from([
            {"target": "gsm8k-250", "metric": "pass@1", "value": 0.5, "n": 250},
            {"target": "math500-250", "metric": "process_judge", "value": 0.3, "n": 250,
             "judge": model_entry(load_spec(PRM)), "compute": {"tokens": 1000, "flops": 10**15}},
            {"target": "arith-easy-250", "metric": "native_reward", "value": 0.7, "n": 250, "stderr": 0.01}]),
            max_size=2, unique_by=lambda e: e["target"])),
    }


@st.composite
def step_lengths(draw, spec: dict, steps: int) -> list:
    """Per step: (prompt lengths per prompt, completion lengths per completion)."""
    g = spec["grpo"]
    out = []
    for _ in range(steps):
        prompts = draw(st.lists(st.integers(1, 300), min_size=g["prompts_per_step"], max_size=g["prompts_per_step"]))
        comps = draw(st.lists(st.integers(1, g["max_completion_tokens"]), min_size=g["prompts_per_step"] * g["group_size"],
                              max_size=g["prompts_per_step"] * g["group_size"]))
        out.append((prompts, comps))
    return out


@st.composite
def _lengths_for(draw, spec):
    return draw(step_lengths(spec, draw(st.integers(1, 3))))


_SPEC_CACHE: dict = {}


def _load(name):
    if name not in _SPEC_CACHE:
        _SPEC_CACHE[name] = load_spec(name)
    return _SPEC_CACHE[name]


def _objects(spec: dict):
    a = spec["adapter"]
    adapter = Adapter(kind="lora", rank=a["rank"], alpha=a["alpha"], targets=tuple(a["targets"])) if a["type"] == "lora" \
        else Adapter(kind="full")
    return _load(spec["policy"]), adapter, GRPOSettings(**spec["grpo"]), \
        (_load(spec["reward"]["model"]) if spec["reward"].get("model") else None)


def ledger_records(spec: dict, lengths: list) -> list[dict]:
    """Ledger records priced by suite.accounting, as the TRL callback writes them."""
    policy, adapter, g, rm = _objects(spec)
    eng, att = spec["accounting"]["engine_profile"], spec["accounting"]["attention"]
    recs = []
    for step, (prompts, comps) in enumerate(lengths, 1):
        full = [p for p in prompts for _ in range(g.group_size)]
        reward = [p + c for p, c in zip(full, comps)] if rm else None
        work = work_from_lengths(prompts, comps, g, eng, reward, policy=policy, reward_model=rm)
        recs.append({"step": step, "time": f"2026-11-29T20:{step // 60:02d}:{step % 60:02d}Z",
                     "tokens": tokens_from_work(work), "work": dict(work),
                     "flops": phase_flops(work, policy, adapter, g, rm, engine=eng, attention=att)})
    return recs


def write_ledger(path: Path, recs: list[dict]) -> None:
    with LedgerWriter(path, fsync=False) as w:
        for r in recs:
            w.write(r)


@st.composite
def valid_reports(draw, with_ledger: bool = False):
    """(report dict, folder holding its ledger or None). Without a ledger the totals are
    the sum of the records, as build_report would write them."""
    spec = draw(run_specs())
    lengths = draw(step_lengths(spec, draw(st.integers(1, 3))))
    recs = ledger_records(spec, lengths)
    folder = Path(tempfile.mkdtemp(prefix="race-fuzz-"))
    write_ledger(folder / "ledger.jsonl", recs)
    doc = build_report(folder / "ledger.jsonl", spec, created="2026-11-29T21:00:00Z", provenance=MEASURED).doc
    total = doc["totals"]["flops"]["total"]
    if draw(st.booleans()):
        doc["budget"] = {"flops": total, "band": {"low": total // 2, "high": total * 2}}
    if not with_ledger:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        return doc, None
    return doc, folder


def make_pool(n: int, folder: Path, seed: int = 0) -> list[tuple[dict, Path]]:
    """n varied valid reports with ledgers under `folder`, from a seeded generator (built once
    per session so the mutation and crash fuzzers spend their time validating, not pricing)."""
    import random

    rng = random.Random(seed)
    out = []
    for i in range(n):
        rank = rng.choice([0, 1, 8, 64, 256])
        prm = i % 3 == 0
        spec = {
            "id": f"pool-{i}", "policy": POLICIES[i % len(POLICIES)],
            "adapter": {"type": "lora", "rank": rank, "alpha": 2.0 * rank,
                        "targets": _paired(rng.sample(PROJECTIONS, rng.randint(1, 7)))} if rank else {"type": "full"},
            "grpo": {"group_size": rng.randint(2, 8), "prompts_per_step": rng.randint(1, 8),
                     "num_iterations": rng.randint(1, 3), "beta": rng.choice([0.0, 0.04]),
                     "max_completion_tokens": rng.choice([16, 256, 2048]), "gradient_checkpointing": rng.random() < 0.5},
            "reward": {"system": "prm", "kind": "prm", "model": PRM} if prm else {"system": "sparse"},
            "engine": {"name": "trl", "version": "1.16.0"},
            "accounting": {"engine_profile": sorted(ENGINES)[i % len(ENGINES)], "attention": rng.choice(["causal", "full"])},
            "evaluations": [{"target": "gsm8k-250", "metric": "pass@1", "value": rng.random(), "n": 250}],
        }
        g = spec["grpo"]
        lengths = [([rng.randint(1, 300) for _ in range(g["prompts_per_step"])],
                    [rng.randint(1, g["max_completion_tokens"]) for _ in range(g["prompts_per_step"] * g["group_size"])])
                   for _ in range(rng.randint(1, 4))]
        d = folder / f"r{i}"
        d.mkdir(parents=True)
        write_ledger(d / "ledger.jsonl", ledger_records(spec, lengths))
        out.append((build_report(d / "ledger.jsonl", spec, created="2026-11-29T21:00:00Z", provenance=MEASURED).doc, d))
    return out


# ---- single-invariant mutations: (name, rule that must catch it, mutate(doc, folder)) -------

def _retotal(doc):
    """Totals, shares and p rebuilt from the phase FLOPs, and the pretraining share with them (as a
    consistent forger would)."""
    t = doc["totals"]
    doc["totals"] = totals_from(t["flops"], t["tokens"], t["work"], t["steps"], t.get("seconds"))
    pre, total = doc.get("pretraining"), doc["totals"]["flops"]["total"]
    if pre:
        if pre.get("flops"):
            pre["ratio"] = total / pre["flops"]
        pre["eu"]["exceeds"] = total > pre["eu"]["threshold_flops"]


def _change_phase(phase):
    def m(doc, folder, delta):
        doc["totals"]["flops"][phase] += delta
    return m


def _change_phase_consistently(doc, folder, delta):
    doc["totals"]["flops"]["rollout"] = doc["totals"]["flops"]["rollout"] * 2 + delta
    _retotal(doc)


def _other_architecture(doc, delta):
    """Another catalog policy of a different architecture (a twin -- Qwen2.5-7B and
    DeepSeek-R1-Distill-Qwen-7B -- has the same shapes, counts and costs, so swapping to it is no
    mutation)."""
    def arch(spec: dict) -> dict:
        return {k: v for k, v in spec.items() if k != "name"}

    names = [n for n in POLICIES if arch(load_spec(n).to_dict()) != arch(doc["policy"]["spec"])]
    return load_spec(names[delta % len(names)])


def _swap_model(doc, folder, delta):
    other = _other_architecture(doc, delta)
    doc["policy"] = model_entry(other) | {"name": doc["policy"]["name"]}
    doc["policy"]["spec"] = {**doc["policy"]["spec"], "name": doc["policy"]["name"]}


def _swap_model_and_name(doc, folder, delta):
    other = _other_architecture(doc, delta)
    doc["policy"] = model_entry(other)
    doc["adapter"]["trainable_params"] = _objects(_spec_like(doc))[1].trainable_params(other)


def _spec_like(doc):
    a = doc["adapter"]
    return {"policy": doc["policy"]["name"], "grpo": doc["grpo"], "reward": {"model": None},
            "adapter": {"type": a["type"], "rank": a["rank"], "alpha": a["alpha"], "targets": a["targets"]}}


def _zero_prm(doc, folder, delta):
    doc["totals"]["flops"]["reward"] = 0
    _retotal(doc)


def _shares(doc, folder, delta):
    doc["totals"]["shares"]["update"] = (doc["totals"]["shares"]["update"] + 0.001 + (delta % 7) / 10) % 1


def _p(doc, folder, delta):
    doc["totals"]["update_share"] = (doc["totals"]["update_share"] + 0.001 + (delta % 7) / 10) % 1


def _drop_step(doc, folder, delta):
    p = folder / "ledger.jsonl"
    lines = p.read_bytes().splitlines(keepends=True)
    del lines[delta % len(lines)]
    p.write_bytes(b"".join(lines))


def _dup_step(doc, folder, delta):
    p = folder / "ledger.jsonl"
    lines = p.read_bytes().splitlines(keepends=True)
    i = delta % len(lines)
    lines.insert(i, lines[i])
    p.write_bytes(b"".join(lines))


def _hash(doc, folder, delta):
    h = doc["ledger"]["sha256"]
    doc["ledger"]["sha256"] = h[:-1] + ("0" if h[-1] != "0" else "1")


def _tokens(doc, folder, delta):
    doc["totals"]["tokens"]["rollout_completion"] += 1 + delta


MUTATIONS = {
    # name: (rule that must fire, needs a ledger, mutate, applicable(doc))
    "change-rollout": ("ARITH-001", False, _change_phase("rollout"), lambda d: True),
    "change-update": ("ARITH-001", False, _change_phase("update"), lambda d: True),
    "change-reward": ("ARITH-001", False, _change_phase("reward"), lambda d: True),
    "change-phase-consistently": ("PHYS-001", False, _change_phase_consistently, lambda d: True),
    "swap-model-size": ("PHYS-007", False, _swap_model, lambda d: True),
    "swap-model-and-name": ("PHYS-001", False, _swap_model_and_name, lambda d: True),
    "zero-prm-cost": ("PHYS-004", False, _zero_prm, lambda d: d["reward"]["kind"] == "prm"),
    "shares": ("ARITH-002", False, _shares, lambda d: True),
    "update-share": ("ARITH-003", False, _p, lambda d: True),
    "drop-step": ("ARITH-007", True, _drop_step, lambda d: True),
    "duplicate-step": ("ARITH-005", True, _dup_step, lambda d: True),
    "ledger-hash": ("ARITH-006", True, _hash, lambda d: True),
    "tokens": ("ARITH-004", True, _tokens, lambda d: True),
    "tokens-vs-work": ("ARITH-008", False, _tokens, lambda d: True),
}


def mutate(doc: dict, folder, name: str, delta: int) -> dict:
    doc = copy.deepcopy(doc)
    MUTATIONS[name][2](doc, folder, delta)
    return json.loads(json.dumps(doc))
