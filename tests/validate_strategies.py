"""Hypothesis strategies for reports: valid reports priced by suite.accounting (optionally with
a ledger on disk), and single-invariant mutations with the rule meant to catch each."""

from __future__ import annotations

import copy
import random as _random
import json
import tempfile
from pathlib import Path

from hypothesis import strategies as st

from suite.accounting import (ENGINES, PROJECTIONS, Adapter, GRPOSettings, phase_flops, tokens_from_work,
                              work_from_lengths)
from suite.errors import RaceError
from suite.record.ledger import LedgerWriter
from suite.accounting.specs import catalog_names, spec_for
from suite.record.build import Provenance, build_report, model_entry, totals_from

MEASURED = Provenance("measured", recorder="race report (a per-step ledger)")

POLICIES = [n for n in catalog_names("recipe") if "PRM" not in n]
PRM = "Qwen2.5-Math-PRM-7B"


def engine_of_profile(profile: str) -> str:
    """An engine a report priced under `profile` may name (WORK-008): the profile's own engine,
    or one without profiles for the generic profile."""
    from suite.validate.equations import profile_engine

    return "hand-filled" if profile == "generic" else profile_engine(profile)


def _paired(targets: list) -> list:
    """gate_proj and up_proj together (peft fuses them into MoE expert stacks and refuses one alone)."""
    if ("gate_proj" in targets) != ("up_proj" in targets):
        targets = [*targets, "up_proj" if "gate_proj" in targets else "gate_proj"]
    return targets


def _adaptable(policy: str, targets: list) -> list:
    """Targets that adapt something in `policy` (gpt-oss has no gate_proj/up_proj of its own:
    a LoRA on only those is refused; DeepSeek-V3 has no q_proj), adding o_proj where they would not."""
    try:
        Adapter(kind="lora", rank=8, alpha=16.0, targets=tuple(targets)).trainable_params(_load(policy))
    except RaceError:
        return [*targets, "o_proj"] if "o_proj" not in targets else targets   # every family has an o_proj
    return targets


@st.composite
def run_specs(draw) -> dict:
    """A run spec a real GRPO run could have (no plausibility warnings)."""
    rank = draw(st.sampled_from([0, 1, 8, 64, 256]))
    targets = _paired(draw(st.lists(st.sampled_from(PROJECTIONS), min_size=1, max_size=7, unique=True)))
    prm = draw(st.booleans())
    mcl = draw(st.sampled_from([16, 256, 2048]))
    policy = draw(st.sampled_from(POLICIES))
    targets = _adaptable(policy, targets)
    return {
        "id": "fuzz", "label": "fuzz", "seed": draw(st.integers(0, 9)),
        "policy": policy,
        "adapter": {"type": "lora", "rank": rank, "alpha": 2.0 * rank, "targets": targets} if rank else {"type": "full"},
        "grpo": {"group_size": draw(st.integers(2, 8)), "prompts_per_step": draw(st.integers(1, 8)),
                 "num_iterations": draw(st.integers(1, 3)), "beta": draw(st.sampled_from([0.0, 0.04])),
                 "max_completion_tokens": mcl, "gradient_checkpointing": draw(st.booleans())},
        "reward": {"system": "prm", "kind": "prm", "model": PRM} if prm else {"system": draw(st.sampled_from(["sparse", "dense"]))},
        "accounting": {"engine_profile": (profile := draw(st.sampled_from(sorted(ENGINES)))),
                       "attention": draw(st.sampled_from(["causal", "full"]))},
        "engine": {"name": engine_of_profile(profile), "version": "1.16.0"},
        "evaluations": draw(st.lists(st.sampled_from([
            {"target": "gsm8k-250", "metric": "pass@1", "value": 0.5, "n": 250},
            {"target": "math500-250", "metric": "process_judge", "value": 0.3, "n": 250,
             "judge": model_entry(spec_for(PRM)), "compute": {"tokens": 1000, "flops": 10**15}},
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
        _SPEC_CACHE[name] = spec_for(name)
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
    if len(lengths) >= 3 and lengths.count(lengths[0]) == len(lengths):
        lengths = lengths[:2]       # real steps differ: three identical ones are means (PROV-003)
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
                        "targets": _adaptable(POLICIES[i % len(POLICIES)], _paired(rng.sample(PROJECTIONS, rng.randint(1, 7))))}
            if rank else {"type": "full"},
            "grpo": {"group_size": rng.randint(2, 8), "prompts_per_step": rng.randint(1, 8),
                     "num_iterations": rng.randint(1, 3), "beta": rng.choice([0.0, 0.04]),
                     "max_completion_tokens": rng.choice([16, 256, 2048]), "gradient_checkpointing": rng.random() < 0.5},
            "reward": {"system": "prm", "kind": "prm", "model": PRM} if prm else {"system": "sparse"},
            "engine": {"name": engine_of_profile(sorted(ENGINES)[i % len(ENGINES)]), "version": "1.16.0"},
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


def _priced_apart(doc, spec) -> bool:
    """The report's work priced for `spec` differs from its FLOPs by more than PHYS-001's 1 % in
    some phase. A near twin (Qwen2.5-14B and Qwen3-14B: 0.27 % apart on the same tokens) is
    within it, so a report renamed to it is a hand-filled report's rounding to PHYS-001 (and
    PUB-001's pretraining share tells them apart), not the mutation PHYS-001 exists for."""
    from suite.accounting import PHASES
    from suite.validate.physics import _close, _inputs, _priced

    try:
        got = _priced(doc["totals"]["work"], (spec, *_inputs(doc)[1:]))
    except RaceError:
        return True         # its architecture needs statistics this work lacks: priced apart
    return any(not _close(int(got[p]), doc["totals"]["flops"][p]) for p in PHASES)


def _other_architecture(doc, delta, apart: bool = False):
    """Another catalog policy of a different architecture (a twin -- Qwen2.5-7B and
    DeepSeek-R1-Distill-Qwen-7B, or Qwen2.5-1.5B-Instruct and its untied distill -- has the same
    shapes and costs, so swapping to it is no mutation of the compute); `apart`: one whose
    price for this report's work is also more than 1 % away (_priced_apart)."""
    def arch(spec: dict) -> dict:   # tied or untied embeddings cost the same FLOPs (the head runs either way)
        return {k: v for k, v in spec.items() if k not in ("name", "tie_embeddings")}

    adapter = _objects(_spec_like(doc))[1]

    def adapts(spec) -> bool:
        try:
            adapter.trainable_params(spec)
            return True
        except RaceError:   # gpt-oss has no gate_proj/up_proj: a LoRA on only those is no run
            return False

    names = [n for n in POLICIES if arch(spec_for(n).to_dict()) != arch(doc["policy"]["spec"]) and adapts(_load(n))
             and (not apart or _priced_apart(doc, _load(n)))]
    return spec_for(names[delta % len(names)])


def _swap_model(doc, folder, delta):
    other = _other_architecture(doc, delta)
    doc["policy"] = model_entry(other) | {"name": doc["policy"]["name"]}
    doc["policy"]["spec"] = {**doc["policy"]["spec"], "name": doc["policy"]["name"]}


def _swap_model_and_name(doc, folder, delta):
    other = _other_architecture(doc, delta, apart=True)
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



# ---- consistent forgeries: the held-out mutation suite ---------------------------------------
#
# A forger edits a valid report *and everything that follows from the edit*: every ledger
# record's FLOPs priced again from the report's own specs (suite.validate.physics), the ledger
# rewritten, the totals, shares, p, sha256, record count and pretraining share rebuilt. PHYS-001
# and the ARITH rules then agree with the forgery; only the work equations (WORK-*) and the
# provenance rules can refuse it. Each forgery either changes the compute the report implies
# while its declared run stays the same, or changes a declared setting without pricing the run
# that setting implies: every one must be refused.


def _spec_dict(i: int, rng, profile: str) -> dict:
    rank = rng.choice([0, 1, 8, 64])
    prm = i % 3 == 0
    return {
        "id": f"forge-{i}", "policy": POLICIES[i % len(POLICIES)],
        "adapter": {"type": "lora", "rank": rank, "alpha": 2.0 * rank,
                    "targets": _adaptable(POLICIES[i % len(POLICIES)], _paired(rng.sample(PROJECTIONS, rng.randint(1, 7))))}
        if rank else {"type": "full"},
        "grpo": {"group_size": rng.randint(2, 6), "prompts_per_step": rng.randint(1, 6),
                 "num_iterations": rng.choice([1, 1, 2, 3]), "beta": rng.choice([0.0, 0.04]),
                 "max_completion_tokens": rng.choice([64, 256, 2048]), "gradient_checkpointing": rng.random() < 0.5},
        "reward": {"system": "prm", "kind": "prm", "model": PRM} if prm else {"system": "sparse"},
        "engine": {"name": engine_of_profile(profile), "version": "1.16.0"},
        "accounting": {"engine_profile": profile, "attention": rng.choice(["causal", "full"])},
        "evaluations": [],
    }


def _trl_layout_records(spec: dict, lengths: list) -> list[dict]:
    """Records as the TRL callback writes them: one per optimizer step, mu per generation (the
    first generates with iterations=1, the others reuse its batch with generation=False)."""
    policy, adapter, g, rm = _objects(spec)
    eng, att = spec["accounting"]["engine_profile"], spec["accounting"]["attention"]
    recs, step = [], 0
    for prompts, comps in lengths:
        full = [p for p in prompts for _ in range(g.group_size)]
        for j in range(g.num_iterations):
            step += 1
            reward = [p + c for p, c in zip(full, comps)] if rm and j == 0 else None
            work = work_from_lengths(prompts, comps, g, eng, reward, iterations=1, generation=j == 0,
                                     policy=policy, reward_model=rm)
            recs.append({"step": step, "time": f"2026-11-29T20:{step // 60:02d}:{step % 60:02d}Z",
                         "tokens": tokens_from_work(work), "work": dict(work),
                         "flops": phase_flops(work, policy, adapter, g, rm, engine=eng, attention=att)})
    return recs


def _imported_records(spec: dict, rng) -> tuple[list[dict], int]:
    """Records as `race import trl` writes them: per log entry, work_from_means of its mean
    lengths times the generations it covers (steps in multiples of mu). Returns (records, last step)."""
    from suite.accounting import add_work, work_from_means

    policy, adapter, g, rm = _objects(spec)
    eng, att = spec["accounting"]["engine_profile"], spec["accounting"]["attention"]
    recs, step = [], 0
    for _ in range(rng.randint(1, 4)):
        gens = rng.randint(1, 3)
        step += gens * g.num_iterations
        p, c = rng.uniform(5, 300), rng.uniform(1, g.max_completion_tokens)
        one = work_from_means(p, c, g, eng, p + c if rm else None, policy=policy, reward_model=rm)
        work = add_work(*([one] * gens))
        recs.append({"step": step, "tokens": tokens_from_work(work), "work": dict(work),
                     "flops": phase_flops(work, policy, adapter, g, rm, engine=eng, attention=att)})
    return recs, step


def forgery_pool(folder: Path, n_measured: int = 24, n_imported: int = 12, n_estimated: int = 12,
                 seed: int = 1) -> list[tuple[str, dict, Path | None]]:
    """Valid reports of every provenance, each in its own folder: (method, report, folder or
    None). Measured ones in both ledger layouts (one record per generation; TRL's one per
    optimizer step), every engine profile."""
    from suite.record.build import Means, build_estimate
    from suite.record.runspec import RunSpec

    rng = _random.Random(seed)
    profiles = sorted(ENGINES)
    out = []
    for i in range(n_measured + n_imported):
        spec = _spec_dict(i, rng, profiles[i % len(profiles)])
        d = folder / f"f{i}"
        d.mkdir(parents=True)
        g = spec["grpo"]
        if i < n_measured:
            lengths = [([rng.randint(1, 300) for _ in range(g["prompts_per_step"])],
                        [rng.randint(1, g["max_completion_tokens"]) for _ in range(g["prompts_per_step"] * g["group_size"])])
                       for _ in range(rng.randint(1, 3))]
            recs = _trl_layout_records(spec, lengths) if i % 2 else ledger_records(spec, lengths)
            prov = MEASURED
        else:
            recs, last = _imported_records(spec, rng)
            prov = Provenance("imported", recorder="race import trl", steps=last,
                              source={"engine": "trl", "file": "trainer_state.json",
                                      "fields": ["num_tokens", "completions/mean_length"]})
        write_ledger(d / "ledger.jsonl", recs)
        doc = build_report(d / "ledger.jsonl", spec, created="2026-11-29T21:00:00Z", provenance=prov).doc
        out.append((prov.method, doc, d))
    for i in range(n_estimated):
        spec = _spec_dict(100 + i, rng, profiles[i % len(profiles)])
        spec["steps"] = rng.randint(1, 500)
        cap = spec["grpo"]["max_completion_tokens"]
        means = Means(prompt_tokens=round(rng.uniform(5, 400), 1), completion_tokens=round(rng.uniform(1, cap), 1))
        out.append(("estimated", build_estimate(RunSpec.from_dict(spec), means, created="2026-11-29T21:00:00Z").doc,
                    None))
    return out


def _records(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "ledger.jsonl").read_text().splitlines() if x.strip()]


def _rebuild(doc: dict, folder: Path, recs: list[dict]) -> None:
    """Reprice every record from the report's specs, rewrite the ledger and the report's totals,
    sha256 and record count: what a forger who knows the suite does."""
    from suite.accounting.modelspec import ModelSpec
    from suite.accounting.pretraining import share_of_pretraining
    from suite.record.summary import LedgerSummary
    from suite.validate.physics import _inputs, _priced

    args = _inputs(doc)
    for r in recs:
        r["flops"] = _priced(r["work"], args)
    (folder / "ledger.jsonl").unlink()
    write_ledger(folder / "ledger.jsonl", recs)
    s = LedgerSummary.scan(folder / "ledger.jsonl")
    doc["totals"] = totals_from(s.flops, s.tokens, s.work, s.records, s.seconds)
    doc["ledger"] = {**doc["ledger"], "sha256": s.sha256, "records": s.records}
    if doc.get("pretraining"):
        doc["pretraining"] = share_of_pretraining(doc["totals"]["flops"]["total"],
                                                  ModelSpec.from_dict(doc["policy"]["spec"]))
    _rollouts_follow(doc)


def _rollouts_follow(doc: dict) -> None:
    """The rollouts section (report 1.2) rebuilt from the totals, as race report writes it."""
    ro = doc.get("rollouts")
    if ro is None:
        return
    w = doc["totals"]["work"]
    gen, disc, env = w.get("count.completions", 0), w.get("count.discarded", 0), w.get("count.rollout_env", 0)
    ro.update(generated=gen, trained=gen - disc, discarded=disc, discarded_share=disc / gen if gen else 0.0,
              discarded_rollout_flops=round(doc["totals"]["flops"]["rollout"] * disc / gen) if gen else 0)
    if env:
        ro["multi_turn"] = {"turns": 1.0, **ro.get("multi_turn", {}), "environment_tokens": env}
    else:
        ro.pop("multi_turn", None)


def _reprice_totals(doc: dict) -> None:
    """An estimate (no ledger) repriced from its own totals.work, totals rebuilt."""
    from suite.validate.physics import _inputs, _priced

    t = doc["totals"]
    t["flops"] = {**t["flops"], **_priced(t["work"], _inputs(doc))}
    _retotal(doc)
    _rollouts_follow(doc)


def _scale(pred, f):
    def edit(work: dict) -> None:
        for k in list(work):
            if pred(k):
                work[k] = int(work[k] * f)
    return edit


def _is_update(k):
    return k.startswith("update.")


def _is_rollout(k):
    return k.startswith("rollout.")


def _is_reward(k):
    return k.startswith("reward.")


def _is_flop_work(k):
    return not k.startswith("count.")


def _is_chunk(k):
    return k.endswith((".chunks", ".chunks2"))


def _chunk_edit(doc, folder, rng):
    """Linear-attention chunk counts scaled, repriced. Halved or less, or more than doubled:
    a count inside [max(rows, tokens / 64), tokens / 64 + rows] needs the lengths to be seen
    (WORK-010; docs/validation.md says how little it moves)."""
    recs = _records(folder)
    edit = _scale(_is_chunk, rng.choice((0.01, 0.35, 0.45, 2.2)))
    for r in recs:
        edit(r["work"])
    _rebuild(doc, folder, recs)


def _has_chunks(doc):
    return any(_is_chunk(k) and v for k, v in doc["totals"]["work"].items())


def _is_attention(k):
    return ".attn_" in k


FACTORS = (0.01, 0.35, 0.5, 0.9, 0.99, 1.5, 2.0)
"""What a forger multiplies work by (below 1 claims less compute; above, more)."""


def _work_edit(pred):
    def forge(doc, folder, rng):
        recs = _records(folder)
        edit = _scale(pred, rng.choice(FACTORS))
        for r in recs:
            edit(r["work"])
        _rebuild(doc, folder, recs)
    return forge


def _drop_pass(name):
    def forge(doc, folder, rng):
        recs = _records(folder)
        for r in recs:
            for k in r["work"]:
                if k.startswith(name + "."):
                    r["work"][k] = 0
        _rebuild(doc, folder, recs)
    return forge


def _has_pass(name):
    return lambda doc: doc["totals"]["work"].get(f"{name}.tokens", 0) > 0


def _inflate_tokens(doc, folder, rng):
    """Token totals and count.* inflated together, the work left as it was."""
    f = rng.choice((1.2, 1.05, 0.8))
    recs = _records(folder)
    for r in recs:
        for k in list(r["work"]):
            if k.startswith("count.") and k != "count.completions":
                r["work"][k] = int(r["work"][k] * f)
        r["tokens"] = tokens_from_work(r["work"])
    _rebuild(doc, folder, recs)


def _dress_as_means(doc, folder, rng):
    """Every record replaced by the first (means dressed as a measurement), one nudged by a token."""
    recs = _records(folder)
    first = recs[0]
    out = []
    for i in range(max(len(recs), 3 + rng.randint(0, 5))):
        r = copy.deepcopy(first) | {"step": i + 1}
        out.append(r)
    k = "count.rollout_completion"
    out[rng.randint(0, len(out) - 1)]["work"][k] += 1
    for r in out:
        r["tokens"] = tokens_from_work(r["work"])
    doc["provenance"] = {**doc["provenance"], "steps": len(out)}
    _rebuild(doc, folder, out)


def _setting(key, value_of):
    """A declared GRPO setting changed, the ledger repriced under it (the work as the run did it)."""
    def forge(doc, folder, rng):
        doc["grpo"][key] = value_of(doc, rng)
        if folder is not None:
            _rebuild(doc, folder, _records(folder))
        else:
            _reprice_totals(doc)
    return forge


def _other_profile(doc, folder, rng):
    """The work priced under another engine profile (the work kept as the run's profile built
    it). An estimate may declare the generic convention (the declared setup is then priced
    under it: no forgery), so estimates swap among the engines' own profiles."""
    cur = doc["accounting"]["engine_profile"]
    doc["accounting"]["engine_profile"] = rng.choice([p for p in sorted(ENGINES) if p != cur and (
        folder is not None or p != "generic") and (      # a twin (same facts, one engine) prices the same run
        ENGINES[p].describe() | {"name": "", "description": ""} != ENGINES[cur].describe() | {"name": "", "description": ""}
        or engine_of_profile(p) != engine_of_profile(cur))])
    if folder is not None:
        _rebuild(doc, folder, _records(folder))
    else:
        _reprice_totals(doc)


def _estimate_work(pred):
    def forge(doc, folder, rng):
        _scale(pred, rng.choice(FACTORS))(doc["totals"]["work"])
        doc["totals"]["tokens"] = tokens_from_work(doc["totals"]["work"])
        _reprice_totals(doc)
    return forge


def _estimate_steps(doc, folder, rng):
    """More (or fewer) steps declared, the totals left at the old step count."""
    s = doc["provenance"]["steps"]
    doc["provenance"]["steps"] = doc["totals"]["steps"] = max(1, s * rng.choice((2, 3)) if rng.random() < 0.7 else s // 2) \
        if s > 1 else 2


def _estimate_mean(key):
    def forge(doc, folder, rng):
        m = doc["provenance"]["means"]
        m[key] = round(m[key] * rng.choice((0.5, 2.0, 1.1)), 3)
        if key == "completion_tokens":
            m[key] = min(m[key], doc["grpo"]["max_completion_tokens"])
        if m.get("reward_tokens") is not None:
            m["reward_tokens"] = m["prompt_tokens"] + m["completion_tokens"]
    return forge


def _steps_as_float(doc, folder, rng):
    """provenance.steps written 200.0 (JSON Schema's integer admits it), the update work scaled
    and repriced: a rule that read only ints skipped its check."""
    doc["provenance"]["steps"] = float(doc["provenance"]["steps"])
    if folder is not None:
        _work_edit(_is_update)(doc, folder, rng)
    else:
        _estimate_work(_is_update)(doc, folder, rng)


def _mul(key, choices):
    return lambda doc, rng: doc["grpo"][key] * rng.choice(choices)


def _cap_below(doc, rng):
    w = doc["totals"]["work"]
    n = max(w.get("count.completions", 1), 1)
    mean = w.get("count.rollout_completion", n) / n
    return max(1, int(mean * rng.choice((0.5, 0.9))) if mean >= 2 else 1)


def _cap_ok(doc):
    w = doc["totals"]["work"]
    return w.get("count.rollout_completion", 0) >= 2 * max(w.get("count.completions", 1), 1)


def _beta_flip(doc, rng):
    return 0.0 if doc["grpo"]["beta"] else rng.choice((0.04, 0.1))


def _always(doc):
    return True


def _two_generations(doc):
    """A mu edit is visible once a run has generated twice (the ledger's rhythm, or every record
    carrying its mu passes); a run shorter than one cycle of the edited mu is that run stopped
    early -- the same ledger, no forgery."""
    w, g = doc["totals"]["work"], doc["grpo"]
    return w.get("count.completions", 0) >= 2 * g["group_size"] * g["prompts_per_step"]


def _counts_determined(doc):
    """Token counts the work determines. A measured ledger of a profile that pads every row and
    projects every position (trl-cpu) bounds its prompt and completion counts by the padded rows
    without fixing them: a count moved inside the padding moves no FLOP and is not detectable
    (docs/validation.md says so)."""
    from suite.accounting import get_engine

    p = get_engine(doc["accounting"]["engine_profile"])
    return not (p.padded and p.lm_head_train == "all" and doc.get("provenance", {}).get("method") != "imported")


def _changes_when_not_one(key):
    return lambda doc: True


FORGERIES = {
    # name: (methods it applies to, applicable(doc), forge(doc, folder, rng))
    "update-work-scaled": (("measured", "imported"), _always, _work_edit(_is_update)),
    "rollout-work-scaled": (("measured", "imported"), _always, _work_edit(_is_rollout)),
    "all-work-scaled": (("measured", "imported"), _always, _work_edit(_is_flop_work)),
    "attention-scaled": (("measured", "imported"), _always, _work_edit(_is_attention)),
    "linear-chunks-scaled": (("measured", "imported"), _has_chunks, _chunk_edit),
    "reward-work-scaled": (("measured", "imported"), lambda d: d["reward"]["model"] is not None, _work_edit(_is_reward)),
    "old-policy-pass-dropped": (("measured", "imported"), _has_pass("update.old"), _drop_pass("update.old")),
    "reference-pass-dropped": (("measured", "imported"), _has_pass("update.ref"), _drop_pass("update.ref")),
    "tokens-inflated-with-counts": (("measured", "imported"), _counts_determined, _inflate_tokens),
    "means-dressed-as-measurement": (("measured",), _always, _dress_as_means),
    "prompts-per-step-edited": (("measured", "imported", "estimated"), _always,
                                _setting("prompts_per_step", _mul("prompts_per_step", (2, 3, 4)))),
    "group-size-edited": (("measured", "imported", "estimated"), _always,
                          _setting("group_size", _mul("group_size", (2, 3, 4)))),
    "num-iterations-edited": (("measured", "imported", "estimated"), _two_generations,
                              _setting("num_iterations", lambda d, r: d["grpo"]["num_iterations"] + r.choice((1, 2, 3)))),
    "beta-flipped": (("measured", "imported", "estimated"), _always, _setting("beta", _beta_flip)),
    "cap-below-lengths": (("measured", "imported", "estimated"), _cap_ok, _setting("max_completion_tokens", _cap_below)),
    "engine-profile-swapped": (("measured", "imported", "estimated"), _always, _other_profile),   # estimates: not to generic
    "estimate-work-scaled": (("estimated",), _always, _estimate_work(_is_flop_work)),
    "estimate-update-work-scaled": (("estimated",), _always, _estimate_work(_is_update)),
    "estimate-steps-edited": (("estimated",), _always, _estimate_steps),
    "steps-as-float-work-scaled": (("imported", "estimated"), _always, _steps_as_float),
    "estimate-completion-mean-edited": (("estimated",), _always, _estimate_mean("completion_tokens")),
    "estimate-prompt-mean-edited": (("estimated",), _always, _estimate_mean("prompt_tokens")),
}


def forge(method: str, doc: dict, src: Path | None, name: str, seed: int, table: dict | None = None
          ) -> tuple[dict, Path | None]:
    """A consistent forgery `name` (of `table`, default FORGERIES) of a pool report: (forged
    report, folder holding its forged ledger or None). The caller removes the folder."""
    import shutil

    rng = _random.Random(seed)
    doc = copy.deepcopy(doc)
    folder = None
    if src is not None:
        folder = Path(tempfile.mkdtemp(prefix="race-forge-"))
        shutil.copy(src / "ledger.jsonl", folder / "ledger.jsonl")
        if (src / "adapter").is_dir():      # the weights a run saved beside its report (PROV-005), linked: never edited
            (folder / "adapter").symlink_to((src / "adapter").resolve(), target_is_directory=True)
    (table or FORGERIES)[name][2](doc, folder, rng)
    return json.loads(json.dumps(doc)), folder


def applicable_forgeries(method: str, doc: dict, table: dict | None = None) -> list[str]:
    """The forgeries (of `table`, default FORGERIES) that apply to a report of this provenance."""
    return [n for n, (methods, ok, _) in (table or FORGERIES).items() if method in methods and ok(doc)]
