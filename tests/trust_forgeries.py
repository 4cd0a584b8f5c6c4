"""The mutation suite's classes of issue 44 -- holes a forger who knows the equations found, each a
strategy that draws new cases (not the issue's own examples):

- trl-schedule: TRL steps_per_generation schedules (spg != gradient_accumulation_steps), measured
  ledgers written as suite.train.trl_callback.RaceLedger writes them (one record per optimizer
  step, each charged the slices it trained, padded to its batch's widths); forged: one training
  pass per generation for mu >= 2, or the same run priced without padding under the padded profile;
- lookalike-name: a policy or reward model given a smaller model's spec under a lookalike of its
  catalog name (a zero-width space, a trailing slash or revision on the hub id, a Cyrillic or
  full-width letter, a separator or a digit/letter swapped), the pretraining share dropped or rebuilt;
- vanishing-padding: a padded profile's ledger rewritten with every batch's lengths at their mean;
- old-schema: a report re-labelled 1.0 (no provenance) whose ledger keeps a subset of the steps;
- declared-setting: a LoRA rank understated, LoRA claimed for full fine-tuning (the saved adapter
  beside the report says otherwise), beta 0 claimed for a run that logged a KL term.

Each forgery is repriced and rebuilt as the others are (validate_strategies._rebuild)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from suite.accounting import ENGINES, GRPOSettings, add_work, phase_flops, tokens_from_work, work_from_lengths
from suite.accounting.specs import spec_for
from suite.record.build import Provenance, build_report, model_entry
from validate_strategies import (MEASURED, POLICIES, PRM, _objects, _rebuild, _records, _reprice_totals, _spec_dict,
                                 _trl_layout_records, ledger_records, write_ledger)

CREATED = "2026-12-03T00:00:00Z"
PADDED = sorted(p for p, e in ENGINES.items() if e.padded)
SCHEDULES = ((2, 1), (4, 2), (4, 1), (1, 2), (2, 4))
"""(steps_per_generation, gradient_accumulation_steps) pairs TRL users run (test_trl_schedules)."""


# ---- the pool: scheduled TRL ledgers and runs that saved their adapter -------------------------

def scheduled_records(spec: dict, lengths: list, spg: int, gas: int) -> list[dict]:
    """Records as RaceLedger writes a steps_per_generation run: micro-step m generates a batch
    when m % (spg x mu) == 0 and trains slice m % spg of the current batch; an optimizer step is
    gas micro-steps, charged the generations it made and the rows it trained (at the batch's
    padded widths: work_from_lengths(rows=...))."""
    policy, adapter, g, rm = _objects(spec)
    eng, att = spec["accounting"]["engine_profile"], spec["accounting"]["attention"]
    n = g.group_size * g.prompts_per_step
    cycle = spg * g.num_iterations
    micro = len(lengths) * cycle
    per = n // spg
    recs, gen = [], -1
    for j in range(micro // gas):
        made, rows = [], {}
        for m in range(j * gas, (j + 1) * gas):
            if m % cycle == 0:
                gen += 1
                made.append(gen)
            s = m % spg
            rows.setdefault(gen, []).extend(range(s * per, (s + 1) * per))
        works = []
        for b in sorted(set(made) | set(rows)):
            prompts, comps = lengths[b]
            new = b in made
            full = [p for p in prompts for _ in range(g.group_size)]
            reward = [p + c for p, c in zip(full, comps)] if rm and new else None
            works.append(work_from_lengths(prompts, comps, g, eng, reward, iterations=1 if b in rows else 0,
                                           generation=new, policy=policy, reward_model=rm, rows=rows.get(b)))
        work = add_work(*works)
        step = j + 1
        recs.append({"step": step, "time": f"2026-12-03T10:{step // 60:02d}:{step % 60:02d}Z",
                     "tokens": tokens_from_work(work), "work": dict(work),
                     "flops": phase_flops(work, policy, adapter, g, rm, engine=eng, attention=att)})
    return recs


def _lengths(rng, g: dict, generations: int) -> list:
    return [([rng.randint(1, 300) for _ in range(g["prompts_per_step"])],
             [rng.randint(1, g["max_completion_tokens"]) for _ in range(g["prompts_per_step"] * g["group_size"])])
            for _ in range(generations)]


def _adapter_header(folder: Path, spec: dict) -> None:
    """The saved weights' safetensors header as peft (LoRA) or transformers (full fine-tuning)
    names them (checked against a real peft save in test_validate_trust.py). Only the header
    is written; the data region is a sparse hole (PROV-005 reads headers only)."""
    from suite.accounting import Adapter

    policy = spec_for(spec["policy"])
    a = spec["adapter"]
    table, off = {}, 0
    if a["type"] == "lora":
        ad = Adapter(kind="lora", rank=a["rank"], alpha=a["alpha"], targets=tuple(a["targets"]))
        for i in range(policy.num_layers):
            for t in ad.targets:
                fan_in, fan_out = _shape(policy, t)
                for part, shape in (("lora_A", [a["rank"], fan_in]), ("lora_B", [fan_out, a["rank"]])):
                    size = 2 * shape[0] * shape[1]
                    table[f"base_model.model.model.layers.{i}.{_block(t)}.{t}.{part}.weight"] = {
                        "dtype": "BF16", "shape": shape, "data_offsets": [off, off + size]}
                    off += size
    else:
        table["model.embed_tokens.weight"] = {"dtype": "BF16", "shape": [policy.vocab_size, policy.hidden_size],
                                              "data_offsets": [0, 2 * policy.vocab_size * policy.hidden_size]}
        off = table["model.embed_tokens.weight"]["data_offsets"][1]
    head = json.dumps(table).encode()
    d = folder / "adapter"
    d.mkdir(exist_ok=True)
    with open(d / ("adapter_model.safetensors" if a["type"] == "lora" else "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        f.truncate(8 + len(head) + off)


def _block(target: str) -> str:
    return "self_attn" if target in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"


def _shape(policy, target: str) -> tuple[int, int]:
    """(in, out) of a dense projection of a recipe spec."""
    h, hd = policy.hidden_size, policy.head_dim
    return {"q_proj": (h, policy.num_heads * hd), "k_proj": (h, policy.num_kv_heads * hd),
            "v_proj": (h, policy.num_kv_heads * hd), "o_proj": (policy.num_heads * hd, h),
            "gate_proj": (h, policy.intermediate_size), "up_proj": (h, policy.intermediate_size),
            "down_proj": (policy.intermediate_size, h)}[target]


DENSE = [n for n in POLICIES if (s := spec_for(n)).model_type in ("qwen2", "llama", "qwen3") and not s.is_moe
         and not s.layer_types and not s.q_lora_rank and not s.kv_lora_rank]
"""Policies whose LoRA shapes _shape gives (dense, full attention, no latent projections)."""


def trust_pool(folder: Path, seed: int = 1, n_scheduled: int = 10, n_saved: int = 6, n_kl: int = 4) -> list:
    """(method, report, folder) of measured TRL-schedule ledgers (every padded profile and a few
    unpadded ones), measured runs that saved their adapter beside the report, and imported runs
    with beta > 0 whose log kept TRL's `kl`."""
    import random

    rng = random.Random(seed)
    out = []
    profiles = PADDED + ["trl-vllm", "generic"]
    for i in range(n_scheduled):
        spg, gas = SCHEDULES[i % len(SCHEDULES)]
        spec = _spec_dict(500 + i, rng, profiles[i % len(profiles)])
        g = spec["grpo"]
        g["num_iterations"] = rng.choice((1, 2, 2, 3))
        g["prompts_per_step"] = spg * rng.randint(1, 2)       # the generation batch splits into spg slices
        g["group_size"] = rng.randint(2, 4)
        g["steps_per_generation"], g["gradient_accumulation_steps"] = spg, gas
        gens = next(x for x in (2, 3, 4, 6) if x * spg * g["num_iterations"] % gas == 0)
        recs = scheduled_records(spec, _lengths(rng, g, gens), spg, gas)
        d = folder / f"s{i}"
        d.mkdir(parents=True)
        write_ledger(d / "ledger.jsonl", recs)
        doc = build_report(d / "ledger.jsonl", spec, created=CREATED, provenance=MEASURED).doc
        out.append(("measured", json.loads(json.dumps(doc)), d))
    for i in range(n_saved):
        spec = _spec_dict(600 + i, rng, sorted(ENGINES)[i % len(ENGINES)]) | {"id": f"saved-{i}"}
        spec["policy"] = DENSE[i % len(DENSE)]
        spec["adapter"] = ({"type": "lora", "rank": (8, 64, 256)[i % 3], "alpha": 16.0,
                            "targets": sorted(rng.sample(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                          "down_proj"], rng.randint(1, 7)))}
                           if i % 3 != 2 else {"type": "full"})
        if spec["adapter"]["type"] == "lora" and ("gate_proj" in spec["adapter"]["targets"]) != (
                "up_proj" in spec["adapter"]["targets"]):
            spec["adapter"]["targets"] = sorted(set(spec["adapter"]["targets"]) | {"gate_proj", "up_proj"})
        g = spec["grpo"]
        recs = (_trl_layout_records if i % 2 else ledger_records)(spec, _lengths(rng, g, rng.randint(2, 3)))
        d = folder / f"a{i}"
        d.mkdir(parents=True)
        write_ledger(d / "ledger.jsonl", recs)
        _adapter_header(d, spec)
        doc = build_report(d / "ledger.jsonl", spec, created=CREATED, provenance=MEASURED).doc
        out.append(("measured", json.loads(json.dumps(doc)), d))
    for i in range(n_kl):
        from validate_strategies import _imported_records

        spec = _spec_dict(700 + i, rng, sorted(ENGINES)[(2 * i) % len(ENGINES)]) | {"id": f"kl-{i}"}
        spec["grpo"]["beta"] = 0.04
        recs, last = _imported_records(spec, rng)
        for r in recs:
            r["metrics"] = {"kl": round(rng.uniform(1e-4, 0.05), 5), "reward": 0.5}
        d = folder / f"k{i}"
        d.mkdir(parents=True)
        write_ledger(d / "ledger.jsonl", recs)
        prov = Provenance("imported", recorder="race import trl", steps=last,
                          source={"engine": "trl", "file": "trainer_state.json",
                                  "fields": ["num_tokens", "completions/mean_length"]})
        doc = build_report(d / "ledger.jsonl", spec, created=CREATED, provenance=prov).doc
        out.append(("imported", json.loads(json.dumps(doc)), d))
    return out


# ---- forgeries ---------------------------------------------------------------------------------

def _scheduled(doc) -> bool:
    g = doc["grpo"]
    return "steps_per_generation" in g and g["steps_per_generation"] != g.get("gradient_accumulation_steps", 1)


def _one_pass(doc, folder, rng):
    """One training pass per generation for mu >= 2: the records whose micro-steps all lie in a
    later pass of their generation cycle (TRL trains pass p on micro-steps p x spg .. (p + 1) x spg
    - 1 of the cycle) train nothing, their tokens and work rebuilt, repriced: the update lies
    between one pass and mu, which a run stopped inside its cycle would too."""
    g = doc["grpo"]
    spg, gas, mu = g["steps_per_generation"], g.get("gradient_accumulation_steps", 1), g["num_iterations"]
    recs = _records(folder)
    for j, r in enumerate(recs):
        if all((m % (spg * mu)) // spg >= 1 for m in range(j * gas, (j + 1) * gas)):
            w = r["work"]
            for k in [k for k in w if k.startswith("update.train.") or k == "count.update"]:
                w[k] = 0
            r["tokens"] = tokens_from_work(w)
    _rebuild(doc, folder, recs)


def _unpadded(doc, folder, rng):
    """The same schedule's training priced without padding: each record's training positions
    the update tokens (every row its own length) and its pairs those of equal rows of that
    length, declared under the run's padded profile, repriced under it."""
    recs = _records(folder)
    for r in recs:
        w = r["work"]
        u = w.get("count.update", 0)
        if not u or w.get("update.train.tokens", 0) == u:
            continue
        f = u / w["update.train.tokens"]
        for k in [k for k in w if k.startswith("update.train.")]:
            w[k] = int(w[k] * (f if k in ("update.train.tokens", "update.train.lm_head") else f * f))
        w["update.train.tokens"] = u
        w["update.train.attn_full"] = 2 * w.get("update.train.attn_causal", 0) - u
    _rebuild(doc, folder, recs)


def _padded_profile(doc) -> bool:
    return ENGINES[doc["accounting"]["engine_profile"]].padded and doc.get("provenance", {}).get("method") != "imported"


def _padding_visible(doc) -> bool:
    """A padded measured ledger with two generation batches, or one of 4 rows or more (WORK-011:
    one batch of 2 or 3 equal rows happens by chance)."""
    g, w = doc["grpo"], doc["totals"]["work"]
    n = g["group_size"] * g["prompts_per_step"]
    return _padded_profile(doc) and (w.get("count.completions", 0) >= 2 * n or n >= 4)


def _mu2(doc) -> bool:
    """A scheduled run with mu >= 2 whose later passes fill whole optimizer steps (spg >= GA)."""
    g = doc["grpo"]
    return _scheduled(doc) and g["num_iterations"] >= 2 and g["steps_per_generation"] >= g.get("gradient_accumulation_steps", 1)


HOMOGLYPHS = {"a": "а", "e": "е", "o": "о", "c": "с", "p": "р", "x": "х", "y": "у", "i": "і", "B": "В", "M": "М",
              "H": "Н", "K": "К", "T": "Т", "Q": "Ԛ", "w": "ԝ", "l": "ӏ"}


def lookalike_of(name: str, rng) -> str:
    """A name a reader takes for `name` (or that is `name` once normalised)."""
    org = {"Qwen": "Qwen", "Llama": "meta-llama", "DeepSeek": "deepseek-ai", "gemma": "google"}.get(
        next((k for k in ("Qwen", "Llama", "DeepSeek", "gemma") if k in name), ""), "org")
    kinds = ["zwsp", "slash", "revision", "homoglyph", "fullwidth", "separator", "case", "url"]
    kind = rng.choice(kinds)
    if kind == "zwsp":
        i = rng.randint(1, len(name) - 1)
        return name[:i] + rng.choice(["\u200b", "\u200d", "\u2060", "\ufeff"]) + name[i:]
    if kind == "slash":
        return f"{org}/{name}/"
    if kind == "revision":
        return f"{org}/{name}@{rng.choice(['main', 'refs/pr/1', '3f2a9c1'])}"
    if kind == "url":
        return f"https://huggingface.co/{org}/{name}/tree/main"
    if kind == "case":
        return name.upper() if rng.random() < 0.5 else name.lower()
    if kind == "fullwidth":
        idx = [i for i, ch in enumerate(name) if ch.isalnum()]
        i = rng.choice(idx)
        return name[:i] + chr(ord(name[i]) + 0xFEE0) + name[i + 1:]
    if kind == "separator" and "-" in name:
        i = rng.choice([i for i, ch in enumerate(name) if ch == "-"])
        return name[:i] + rng.choice(["_", " ", "\u2010", ""]) + name[i + 1:]
    idx = [i for i, ch in enumerate(name) if ch in HOMOGLYPHS]
    if not idx:
        return name + "\u200b"
    i = rng.choice(idx)
    return name[:i] + HOMOGLYPHS[name[i]] + name[i + 1:]


def _smaller(name: str, rng):
    """A dense full-attention catalog model (its price needs no statistic a report's work may
    lack) under 70% of `name`'s parameters."""
    me = spec_for(name)
    small = [n for n in DENSE if spec_for(n).params_total < 0.7 * me.params_total]
    return spec_for(rng.choice(small)) if small else None


def _policy_lookalike(doc, folder, rng):
    """The policy given a smaller catalog model's spec, named a lookalike of the real name; the
    trainable parameters follow the spec; the pretraining share dropped or rebuilt."""
    from suite.errors import RaceError

    name = doc["policy"]["name"]
    other = _smaller(name, rng)
    if other is None:
        other = spec_for(rng.choice([n for n in DENSE if n != name]))
    alias = lookalike_of(name, rng)
    doc["policy"] = model_entry(other) | {"name": alias}
    doc["policy"]["spec"] = {**doc["policy"]["spec"], "name": alias}
    a = doc["adapter"]
    try:
        doc["adapter"]["trainable_params"] = _objects({"policy": other.name, "grpo": doc["grpo"],
                                                       "reward": {"model": None}, "adapter": a})[1].trainable_params(other)
    except RaceError:
        doc["adapter"] = {**a, "type": "full", "rank": None, "alpha": None, "targets": None,
                          "trainable_params": other.params_total}
    _drop_or_rebuild_pretraining(doc, rng)
    _reprice(doc, folder)


def _reward_lookalike(doc, folder, rng):
    """The reward model given a smaller catalog model's spec under a lookalike of its name."""
    rm = doc["reward"]["model"]
    small = _smaller(PRM, rng)
    alias = lookalike_of(rm["name"], rng)
    doc["reward"]["model"] = model_entry(small) | {"name": alias}
    doc["reward"]["model"]["spec"] = {**doc["reward"]["model"]["spec"], "name": alias}
    _reprice(doc, folder)


def _drop_or_rebuild_pretraining(doc, rng):
    from suite.accounting.pretraining import share_of_pretraining
    from suite.accounting.stored import spec_from_dict

    if rng.random() < 0.5:
        doc.pop("pretraining", None)
    else:
        doc["pretraining"] = share_of_pretraining(doc["totals"]["flops"]["total"], spec_from_dict(doc["policy"]["spec"]))


def _reprice(doc, folder):
    if folder is not None:
        pre = "pretraining" in doc
        _rebuild_keep(doc, folder)
        if not pre:
            doc.pop("pretraining", None)
    else:
        _reprice_totals(doc)


def _rebuild_keep(doc, folder):
    """_rebuild, the pretraining share recomputed from the (forged) spec under the (forged) name."""
    from suite.accounting.pretraining import share_of_pretraining
    from suite.accounting.stored import spec_from_dict

    recs = _records(folder)
    had = doc.get("pretraining")
    doc.pop("pretraining", None)
    _rebuild(doc, folder, recs)
    if had is not None:
        doc["pretraining"] = share_of_pretraining(doc["totals"]["flops"]["total"], spec_from_dict(doc["policy"]["spec"]))


def _equal_lengths(doc, folder, rng):
    """Every batch's prompts and completions set to their batch's mean (rounded), repriced under
    the run's padded profile: the padding vanishes."""
    recs = _records(folder)
    policy, _, g, rm = _objects({"policy": doc["policy"]["name"], "grpo": doc["grpo"], "adapter": {"type": "full"},
                                 "reward": {"model": PRM if doc["reward"].get("model") else None}})
    g = GRPOSettings(**{k: v for k, v in doc["grpo"].items() if k in GRPOSettings.__dataclass_fields__})
    eng = doc["accounting"]["engine_profile"]
    n = g.group_size * g.prompts_per_step
    out = []
    for r in recs:
        w = r["work"]
        if not w.get("count.completions"):
            continue        # reuse records are rebuilt from their batch below
        gens = w["count.completions"] // n
        c = max(1, round(w["count.rollout_completion"] / w["count.completions"]))
        p = max(1, round(w["count.rollout_prompt"] / w["count.completions"]))
        prompts, comps = [p] * g.prompts_per_step, [min(c, max(1, g.max_completion_tokens - 1))] * n
        reward = [p + c] * n if rm else None
        work = add_work(*[work_from_lengths(prompts, comps, g, eng, reward, policy=policy, reward_model=rm)] * gens)
        out.append({**r, "step": len(out) + 1, "work": dict(work), "tokens": tokens_from_work(work)})
    doc["provenance"] = {**doc["provenance"], "steps": len(out)} if "provenance" in doc else doc.get("provenance")
    _rebuild(doc, folder, out)


def _old_schema(doc, folder, rng):
    """Re-labelled 1.0 (no provenance, no section of a later version), the ledger keeping a subset
    of its steps (their numbers kept: steps with gaps), rebuilt."""
    recs = _records(folder)
    keep = sorted(rng.sample(range(len(recs)), rng.randint(1, len(recs) - 1)))
    if keep == list(range(len(keep))):      # a prefix is a shorter run: drop one inside instead
        j = rng.randint(0, len(recs) - 2)
        keep = [i for i in range(len(recs)) if i != j]
    for k in ("provenance", "hardware", "rollouts", "curve", "sources", "stages"):
        doc.pop(k, None)
    doc["schema_version"] = "1.0"
    doc["grpo"] = {k: v for k, v in doc["grpo"].items() if k not in ("steps_per_generation", "gradient_accumulation_steps",
                                                                     "pad_to_multiple_of")}
    _rebuild(doc, folder, [recs[i] for i in keep])
    doc.pop("provenance", None)


def _rank_understated(doc, folder, rng):
    a = doc["adapter"]
    a["rank"] = max(1, a["rank"] // rng.choice((2, 4, 8)))
    a["alpha"] = 2.0 * a["rank"]
    from suite.accounting.stored import spec_from_dict

    a["trainable_params"] = _objects({"policy": doc["policy"]["name"], "grpo": doc["grpo"], "reward": {"model": None},
                                      "adapter": a})[1].trainable_params(spec_from_dict(doc["policy"]["spec"]))
    _rebuild(doc, folder, _records(folder))


def _lora_for_full(doc, folder, rng):
    from suite.accounting.stored import spec_from_dict

    r = rng.choice((8, 16, 64))
    doc["adapter"] = {**doc["adapter"], "type": "lora", "rank": r, "alpha": 2.0 * r,
                      "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
    doc["adapter"]["trainable_params"] = _objects({"policy": doc["policy"]["name"], "grpo": doc["grpo"],
                                                   "reward": {"model": None}, "adapter": doc["adapter"]})[1] \
        .trainable_params(spec_from_dict(doc["policy"]["spec"]))
    _rebuild(doc, folder, _records(folder))


def _beta_zero(doc, folder, rng):
    doc["grpo"]["beta"] = 0.0
    recs = _records(folder)
    for r in recs:
        for k in [k for k in r["work"] if k.startswith("update.ref.")]:
            del r["work"][k]
    _rebuild(doc, folder, recs)


def _saved(kind):
    return lambda doc: doc["adapter"]["type"] == kind and doc["ledger"]["path"] == "ledger.jsonl" and \
        doc["run"]["id"].startswith("saved-")


def _has_prm(doc):
    return bool(doc["reward"].get("model"))


def _two_records(doc):
    return doc.get("ledger", {}).get("records", 0) >= 2


TRUST_FORGERIES = {
    # name: (methods, applicable(doc), forge(doc, folder, rng))
    "schedule-one-pass": (("measured",), _mu2, _one_pass),
    "schedule-unpadded": (("measured",), lambda d: _scheduled(d) and _padded_profile(d), _unpadded),
    "policy-lookalike": (("measured", "imported", "estimated"), lambda d: True, _policy_lookalike),
    "reward-lookalike": (("measured", "imported", "estimated"), _has_prm, _reward_lookalike),
    "padding-vanished": (("measured",), _padding_visible, _equal_lengths),
    "old-schema-steps-dropped": (("measured",), _two_records, _old_schema),
    "lora-rank-understated": (("measured",), lambda d: _saved("lora")(d) and d["adapter"]["rank"] >= 2, _rank_understated),
    "lora-claimed-for-full": (("measured",), _saved("full"), _lora_for_full),
    "beta-zero-with-kl": (("imported",), lambda d: d["grpo"]["beta"] > 0 and d["run"]["id"].startswith("kl-"),
                          _beta_zero),
}

CLASS_OF = {"schedule-one-pass": "trl-schedule", "schedule-unpadded": "trl-schedule",
            "policy-lookalike": "lookalike-name", "reward-lookalike": "lookalike-name",
            "padding-vanished": "vanishing-padding", "old-schema-steps-dropped": "old-schema",
            "lora-rank-understated": "declared-setting", "lora-claimed-for-full": "declared-setting",
            "beta-zero-with-kl": "declared-setting"}
"""Issue 44's class of each forgery (the mutation suite prints its counts per class)."""

CLASS_RULES = {"trl-schedule": {"WORK-004", "WORK-011"}, "lookalike-name": {"PHYS-007", "PHYS-011"},
               "vanishing-padding": {"WORK-011"}, "old-schema": {"PROV-002"},
               "declared-setting": {"PROV-005", "PROV-006"}}
"""The rules named for each class: every forgery of the class is refused by one of them."""
