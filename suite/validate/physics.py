# Over 500 lines: one idea, every phase recomputed from the report's own specs and work, with the readers of
# those specs and settings that every rule shares (read_models, settings_of) kept beside their one use.
"""Physics rules: recompute each phase's FLOPs from the report's own work statistics and model
specs (suite.accounting, under the declared engine profile and attention convention) and
refuse claims no real run can make."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any, Iterable

from ..accounting import PHASES
from ..accounting.specs import PATH_TRACED, priced_by
from .registry import Issue, rule

# Relative deviation allowed between a declared phase and our recomputation. Our own reports
# agree exactly (same integers, and equal to torch's FlopCounterMode in the tests); 1% lets a
# hand-filled report with rounded figures pass, and is also what a report may understate.
TOLERANCE = 0.01
_TOLERANCE = Fraction(1, 100)       # TOLERANCE exactly: compared in integers, one FLOP decides at any size

FORMULAS = {
    "rollout": "prefill 2·N·(prompt tokens) + decode 2·N per generated token + attention to the cached context "
               "(suite.accounting.phase_flops, docs/accounting.md)",
    "update": "μ × (forward + activation-gradient backward [+ adapter weight gradients for LoRA | + all weight "
              "gradients for full FT] [+ checkpoint recompute]) + old-policy and reference forwards the engine runs "
              "(suite.accounting.phase_flops, docs/accounting.md)",
    "reward": "reward-model forward over the scored tokens (0 for rule rewards) (suite.accounting.phase_flops, "
              "docs/accounting.md)",
}


@dataclass(frozen=True)
class Recomputation:
    """Our FLOPs for the report's summed work (per phase), or why they cannot be computed."""

    flops: dict[str, int] | None
    error: str | None = None
    hint: str = ""
    other_adapter: dict[str, int] | None = None  # the same work priced with the other adapter type
    unverifiable: bool = False  # a traced model that cannot be traced here (PHYS-010 says so)


@dataclass(frozen=True)
class ModelRead:
    """A model block's spec as the validator reads it (suite.accounting.stored.spec_from_dict)."""

    where: str
    """JSON path of the model block ($.policy, $.reward.model, $.evaluations[i].judge)."""
    entry: dict
    """The block: name, spec, parameter counts."""
    spec: Any = None
    """The ModelSpec or TracedSpec; None when it cannot be read (problem says why)."""
    problem: str | None = None
    hint: str = ""
    unverifiable: bool = False
    """A traced spec this validator cannot trace (no torch, or over the bounded number): PHYS-010."""


def _model_sections(doc, ok=None):
    """(JSON path, model block) of the policy, the reward model and every judge (of the sections
    `ok(name)` passes, when given)."""
    from ..record.schemas import model_blocks

    return ((where, m) for section, where, m in model_blocks(doc) if ok is None or ok(section))


def read_models(doc: dict, ok=None) -> dict[str, ModelRead]:
    """Every model block's spec, read once: recipe specs as they are, traced ones traced again
    from their configs (cached per config) -- at most limits.MAX_TRACED_MODELS distinct configs
    per report (bounded work: each costs a trace); never raises."""
    from ..accounting.stored import TracedUnverifiable, check_traced, is_traced, spec_from_dict
    from ..errors import RaceError
    from ..limits import MAX_TRACED_MODELS

    out: dict[str, ModelRead] = {}
    traced: set[str] = set()
    for where, m in _model_sections(doc, ok):
        d = m.get("spec")
        try:
            if is_traced(d):
                key = check_traced(d, f"{where}.spec")
                if key not in traced and len(traced) >= MAX_TRACED_MODELS:
                    out[where] = ModelRead(where, m, None, f"{m.get('name')!r} is one traced model more than the "
                                           f"{MAX_TRACED_MODELS} distinct ones a report may carry; it is not traced",
                                           "carry at most that many traced models (policy, reward model, judges)",
                                           True)
                    continue
                traced.add(key)
            out[where] = ModelRead(where, m, spec_from_dict(d))
        except TracedUnverifiable as e:
            out[where] = ModelRead(where, m, None, e.message, e.hint or "", True)
        except (RaceError, TypeError) as e:
            out[where] = ModelRead(where, m, None, f"model spec cannot be read: {e}",
                                   "use suite.accounting.modelspec.ModelSpec.to_dict() (or TracedSpec.to_dict())")
    return out


def settings_of(doc):
    """suite.accounting.GRPOSettings of a report's grpo section; optional schedule fields
    (gradient_accumulation_steps, steps_per_generation, pad_to_multiple_of) default as TRL's."""
    from ..accounting import GRPOSettings

    g = doc["grpo"]
    opt = {k: g[k] for k in ("gradient_accumulation_steps", "steps_per_generation", "pad_to_multiple_of")
           if isinstance(g.get(k), int) and not isinstance(g.get(k), bool)}
    return GRPOSettings(group_size=g["group_size"], prompts_per_step=g["prompts_per_step"],
                        num_iterations=g["num_iterations"], beta=g["beta"],
                        max_completion_tokens=g["max_completion_tokens"],
                        gradient_checkpointing=g["gradient_checkpointing"], **opt)


def specs_of(doc: dict) -> tuple:
    """(policy, reward model or None) of a report's spec blocks, read back here
    (suite.accounting.stored.spec_from_dict; raises as it does). The rules read them once, through
    `read_models`; this is for callers with a document alone."""
    from ..accounting.stored import spec_from_dict

    rm = doc["reward"]["model"]
    return spec_from_dict(doc["policy"]["spec"]), spec_from_dict(rm["spec"]) if rm else None


def _inputs(doc: dict, policy=None, reward_model=None, adapter_type: str | None = None):
    """Accounting objects from a report: (policy, adapter, settings, reward_model, engine, attention);
    the specs as read_models read them (default: `specs_of` the document)."""
    from ..accounting import Adapter

    if policy is None:
        policy, reward_model = specs_of(doc)
    a = doc["adapter"]
    kind = adapter_type or a["type"]
    if kind == a["type"]:
        adapter = Adapter(kind=kind, rank=a["rank"] or 0, alpha=a["alpha"] or 0.0,
                          **({"targets": tuple(a["targets"])} if a["targets"] else {}))
    else:  # the other type's price: full fine-tuning, or a rank-8 LoRA on every projection
        adapter = Adapter.from_rank(0 if kind == "full" else 8)
    acc = doc["accounting"]
    return policy, adapter, settings_of(doc), reward_model, acc["engine_profile"], acc["attention"]


def recompute(doc: dict, models: dict[str, ModelRead] | None = None) -> Recomputation:
    """Recompute the report's per-phase FLOPs from totals.work (with the specs `read_models`
    read); never raises."""
    from ..errors import RaceError

    try:
        from ..accounting import ENGINES
    except ImportError:
        return Recomputation(None, "suite.accounting is not available", "install the suite completely")
    if doc["accounting"]["engine_profile"] not in ENGINES:
        return Recomputation(None, f"unknown engine profile {doc['accounting']['engine_profile']!r}",
                             f"use one of {', '.join(sorted(ENGINES))} (the generic profile suits hand-filled reports)")
    models = read_models(doc) if models is None else models
    specs = []
    for where in ("$.policy", "$.reward.model"):
        r = models.get(where)
        if where == "$.reward.model" and r is None and not isinstance(doc["reward"].get("model"), dict):
            specs.append(None)      # a rule reward
        elif r is None or r.spec is None:
            return Recomputation(None, r.problem if r else f"{where} cannot be read", r.hint if r else "",
                                 unverifiable=bool(r and r.unverifiable))
        else:
            specs.append(r.spec)
    work = doc["totals"]["work"]
    try:
        flops = _priced(work, _inputs(doc, *specs))
    except RaceError as e:
        return Recomputation(None, e.message, e.hint or "")
    except (KeyError, TypeError, ValueError) as e:
        return Recomputation(None, f"totals.work cannot be priced: {type(e).__name__}: {e}",
                             "totals.work must hold the statistics suite.accounting defines (work_from_lengths)")
    except Exception as e:
        if not any(priced_by(s) == PATH_TRACED for s in specs):
            raise                       # a bug of ours: INTERNAL-001
        # a traced config whose own modeling code fails (top-k over more experts than it has, ...)
        return Recomputation(None, f"the traced model's code fails on its config: {type(e).__name__}: "
                             f"{str(e).splitlines()[0][:160] if str(e) else ''}",
                             "check the config (race flops --config DIR prices it)")
    other = None
    # PHYS-003's other price; not for a traced policy, where it would cost a second trace (PHYS-001
    # refuses the mispriced update all the same)
    if doc["adapter"]["type"] in ("lora", "full") and priced_by(specs[0]) != PATH_TRACED:
        flip = "full" if doc["adapter"]["type"] == "lora" else "lora"
        try:
            other = _priced(work, _inputs(doc, *specs, flip))
        except (RaceError, KeyError, TypeError, ValueError):
            other = None    # no such price
    return Recomputation({p: int(flops[p]) for p in PHASES}, other_adapter={p: int(other[p]) for p in PHASES} if other else None)


def _priced(work: dict, args: tuple) -> dict:
    """suite.accounting.phase_flops of `work` under _inputs' (policy, adapter, settings,
    reward model, engine, attention)."""
    from ..accounting import phase_flops

    return phase_flops(work, *args[:4], engine=args[4], attention=args[5])


@lru_cache(maxsize=64)
def catalog_spec(name: str):
    """The catalog ModelSpec a model name names (normalised: identity.catalog_name; hub ids too), or
    None for other names; read once per name (the catalog ships with the package and is part of the
    validator's fingerprint)."""
    from ..accounting.specs import PATH_RECIPE, lookup, spec_for
    from .identity import catalog_name

    hit = catalog_name(name)
    entry = lookup(hit) if hit is not None else None
    return spec_for(entry.name) if entry is not None and entry.priced_by == PATH_RECIPE else None


def _rel(a: int, b: int) -> float:
    return abs(a - b) / max(abs(b), 1)


def _close(a: int, b: int) -> bool:
    # Exact: a float ratio cannot tell one FLOP from none at 10^17 FLOPs (its resolution is ~10^-16).
    return Fraction(abs(a - b)) / max(abs(b), 1) <= _TOLERANCE   # Fraction(float) is exact: 1e15 is a valid integer


_PHYS_REQ = ("policy", "adapter", "grpo", "reward", "accounting", "totals")


@rule("PHYS-001", title="phase FLOPs disagree with the recomputation", requires=_PHYS_REQ)
def phase_recompute(ctx) -> Iterable[Issue]:
    """Each phase is recomputed from `totals.work` and the declared specs with
    `suite.accounting.phase_flops` under the declared engine profile and attention convention.
    A deviation over 1% (TOLERANCE) is an error naming both numbers and the formula. When the
    update matches the other adapter type's price, PHYS-003 reports it instead."""
    r = ctx.recompute
    if r.flops is None:
        if not r.unverifiable:      # a traced model that cannot be traced here: PHYS-010 says so
            yield Issue("$.totals.work", f"cannot recompute the phase FLOPs: {r.error}", r.hint)
        return
    declared = ctx.doc["totals"]["flops"]
    for p in PHASES:
        want, got = r.flops[p], declared[p]
        if _close(got, want):
            continue
        if p == "update" and _swapped_adapter(ctx):
            continue
        if p == "reward" and (_missing_reward_model_cost(ctx) or _rule_reward_charged(ctx)):
            continue
        sign = "+" if got > want else "-"
        yield Issue(f"$.totals.flops.{p}",
                    f"{p} FLOPs declared {got:,} but recomputed {want:,} ({sign}{_rel(got, want):.1%}, tolerance "
                    f"{TOLERANCE:.0%}) under engine profile {ctx.doc['accounting']['engine_profile']!r}, attention "
                    f"{ctx.doc['accounting']['attention']!r}: {FORMULAS[p]}",
                    "count this phase with `race flops` for the same model, adapter and tokens, or correct the specs")


@rule("PHYS-002", title="rollout FLOPs below 2·N per generated token", requires=("policy", "totals"))
def rollout_floor(ctx) -> Iterable[Issue]:
    """Generating one token runs the whole network once: at least 2·N FLOPs with N the
    policy's non-embedding parameters (mixture of experts: the ones a token runs, top-k of the
    routed experts). The floor follows the engine profile: each completion's first token comes
    from the prefill's logits, and where the profile shares a prompt's prefill among its K
    completions (vLLM prefix caching: trl-vllm, verl) one prefill serves K first tokens. So the
    network runs at least T - n + prefills times for T generated tokens of n completions
    (prefills = n, or n / K when shared; without `count.completions`, n = T). Less rollout
    compute than 2·N per such position is impossible. A policy priced by the traced path is
    repriced exactly by PHYS-001 instead: the trace derives no active-parameter count (a traced
    mixture of experts would be held to all its experts), and its non-embedding count holds tables
    no token multiplies through (position and per-layer input embeddings)."""
    from ..accounting import ENGINES
    from ..accounting.stored import is_traced

    if is_traced(ctx.doc["policy"]["spec"]):
        return
    n = ctx.doc["policy"]["params_non_embedding"]
    read = ctx.models.get("$.policy")
    if read is not None and read.spec is not None:      # PHYS-006 reports unreadable specs
        n -= getattr(read.spec, "params_idle", 0)       # the routed experts a token does not run
    gen = ctx.doc["totals"]["tokens"]["rollout_completion"]
    positions, how = gen, f"{gen:,} generated tokens"
    acc, grpo = ctx.doc.get("accounting"), ctx.doc.get("grpo")
    prof = ENGINES.get(acc.get("engine_profile")) if isinstance(acc, dict) and isinstance(acc.get("engine_profile"), str) \
        else None
    k = grpo.get("group_size") if isinstance(grpo, dict) else None
    if prof is not None and not prof.prefill_per_completion and isinstance(k, int) and k >= 1:
        comps = ctx.doc["totals"]["work"].get("count.completions")
        comps = comps if isinstance(comps, int) and 0 <= comps <= gen else gen
        positions = gen - comps + -(-comps // k)
        how = (f"({gen:,} generated tokens - {comps:,} completions + {-(-comps // k):,} shared prefills) "
               f"forward positions")
    floor = 2 * n * positions
    got = ctx.doc["totals"]["flops"]["rollout"]
    if got < floor:
        yield Issue("$.totals.flops.rollout",
                    f"rollout {got:,} FLOPs is below the floor 2·N·T = 2 × {n:,} × {how} = {floor:,}",
                    "count one full forward per generated token (decode) plus the prompt prefill")


def _swapped_adapter(ctx) -> bool:
    r = ctx.recompute
    if r.flops is None or r.other_adapter is None:
        return False
    got = ctx.doc["totals"]["flops"]["update"]
    return not _close(got, r.flops["update"]) and _close(got, r.other_adapter["update"]) \
        and not _close(r.flops["update"], r.other_adapter["update"])


@rule("PHYS-003", title="LoRA update priced like full fine-tuning (or the reverse)", requires=_PHYS_REQ)
def adapter_pricing(ctx) -> Iterable[Issue]:
    """A LoRA update computes weight gradients only for the adapter matrices, so it costs
    about 2/3 of a full fine-tuning update (no frozen-weight gradients). An update that
    matches the other adapter type's price (e.g. the 6·N·T rule applied to a LoRA run, as
    verl does) is mispriced. (A traced policy's update is not priced twice: PHYS-001 refuses it.)"""
    if not _swapped_adapter(ctx):
        return
    r, a = ctx.recompute, ctx.doc["adapter"]
    other = "full fine-tuning" if a["type"] == "lora" else "a LoRA"
    mine = f"LoRA r={a['rank']}" if a["type"] == "lora" else "full fine-tuning"
    got, want = ctx.doc["totals"]["flops"]["update"], r.flops["update"]
    sign = "+" if got > want else "-"
    yield Issue("$.totals.flops.update",
                f"update FLOPs declared {got:,} match the price of {other} (within {TOLERANCE:.0%}), but recomputed for "
                f"the report's adapter ({mine}) the update is {want:,} ({sign}{_rel(got, want):.1%}): "
                f"{FORMULAS['update']}",
                "price the update for the adapter the run used (race flops --lora-rank R; 0 = full fine-tuning)")


def _missing_reward_model_cost(ctx) -> bool:
    return ctx.doc["reward"]["kind"] != "rule" and ctx.doc["totals"]["flops"]["reward"] == 0


def _rule_reward_charged(ctx) -> bool:
    return ctx.doc["reward"]["kind"] == "rule" and ctx.doc["totals"]["flops"]["reward"] > 0


@rule("PHYS-004", title="reward-model inference is missing from the budget", requires=("reward", "totals"))
def reward_model_cost(ctx) -> Iterable[Issue]:
    """An ORM, PRM or judge reward runs a model over every scored completion; zero reward FLOPs
    with a model-based reward system means that inference was left out of the budget."""
    if _missing_reward_model_cost(ctx):
        k = ctx.doc["reward"]["kind"]
        yield Issue("$.totals.flops.reward",
                    f"reward-model inference is missing from the budget: reward kind {k!r} "
                    f"({ctx.doc['reward']['model']['name'] if ctx.doc['reward']['model'] else 'no model'}) but 0 reward FLOPs",
                    "count the reward model's forward over the tokens it scored (race flops --reward-model NAME)")


@rule("PHYS-005", title="rule reward charged model FLOPs", requires=("reward", "totals"))
def rule_reward_cost(ctx) -> Iterable[Issue]:
    """Rule rewards (exact match, format checks) run on the CPU and cost 0 FLOPs under the
    standard; their seconds may be recorded but no FLOPs."""
    if _rule_reward_charged(ctx):
        yield Issue("$.totals.flops.reward",
                    f"reward system {ctx.doc['reward']['system']!r} is a rule reward but is charged "
                    f"{ctx.doc['totals']['flops']['reward']:,} FLOPs",
                    "rule rewards are 0 FLOPs; if a model scores completions, set reward.kind and reward.model")


@rule("PHYS-006", title="parameter counts disagree with the model spec",
      requires=("policy", "reward", "evaluations"))
def param_counts(ctx) -> Iterable[Issue]:
    """`params_total` and `params_non_embedding` (and `params_active`, where given) of the
    policy, the reward model and any judge must equal the counts implied by their `spec` (exact,
    as the real model has them). A traced spec's counts are those of the model transformers builds
    from its config (counted on the meta device); the traced path derives no active parameters,
    so a traced block carries no `params_active`."""
    for where, read in ctx.models.items():
        m, spec = read.entry, read.spec
        if spec is None:
            if not read.unverifiable:   # PHYS-010 reports a traced spec that cannot be traced here
                yield Issue(f"{where}.spec", read.problem or "model spec cannot be read", read.hint)
            continue
        for key in ("params_total", "params_non_embedding", "params_active"):
            want = getattr(spec, key) if key != "params_active" or spec.is_moe else None
            if key in m and m[key] != want:
                has = f"{want:,}" if want is not None else "none (the traced path derives no active parameters)"
                yield Issue(f"{where}.{key}", f"{key} {m[key]:,} but the spec of {m['name']!r} has {has}",
                            "copy the counts from `race flops --json` (the report's model block)")


@rule("PHYS-007", title="model spec differs from the catalog model it names",
      requires=("policy", "reward", "evaluations"))
def catalog_identity(ctx) -> Iterable[Issue]:
    """A model whose `name` is a catalog name (e.g. Qwen2.5-1.5B-Instruct, GLM-4.5-Air) must carry
    that model's spec: a 7B spec under a 1.5B name (or the reverse) makes every FLOP count wrong.
    A recipe catalog model carries its recipe spec; a traced catalog model
    (suite/accounting/catalog/traced) carries the catalog's config, key for key (ids, dtypes and
    versions aside), so a config with its widths shrunk under a real model's name is refused even
    when its counts and FLOPs were edited to match it. Read without torch too."""
    from ..accounting.stored import config_differences, is_traced, traced_catalog_config
    from ..errors import RaceError
    from .identity import catalog_name

    for where, m in _model_sections(ctx.doc):
        name = catalog_name(m["name"])      # normalised: a zero-width space or a trailing slash hides nothing
        if name is None:
            continue
        try:
            cat = catalog_spec(name)       # a catalog name, never a path
            traced_cat = traced_catalog_config(name) if cat is None else None
        except RaceError:
            continue
        d = m["spec"]
        if cat is None and traced_cat is None:
            continue
        fix = f"carry the catalog's spec (race flops --model {name} --json), or rename the model"
        if traced_cat is not None:
            diff = ["a recipe spec for a model priced by the traced path"] if not is_traced(d) else \
                config_differences(d["config"], traced_cat)
        elif is_traced(d):
            diff = ["a traced spec for a model with an analytic recipe"]
        else:
            read = ctx.models.get(where)
            if read is None or read.spec is None:
                continue  # PHYS-006 reports unreadable specs
            spec = read.spec
            diff = [f"{k} {getattr(spec, k)!r} vs {getattr(cat, k)!r}" for k in _SPEC_FIELDS
                    if getattr(spec, k) != getattr(cat, k)]
        if diff:
            yield Issue(f"{where}.spec", f"spec differs from catalog model {name!r} (named {m['name']!r}): "
                        f"{', '.join(diff)}", fix)


_SPEC_FIELDS = ("model_type", "hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim", "intermediate_size",
                "vocab_size", "tie_embeddings", "qkv_bias", "has_lm_head", "score_head", "score_bias", "o_bias", "mlp_bias",
                "layer_types", "sliding_window", "v_head_dim", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim",
                "num_experts", "experts_per_token", "moe_intermediate_size", "shared_expert_intermediate_size",
                "dense_mlp_layers", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                "linear_value_head_dim", "linear_conv_kernel")
"""ModelSpec fields that decide FLOPs and parameter counts (the name may differ: hub ids)."""


@rule("PHYS-008", title="trainable parameters disagree with the adapter", requires=("policy", "adapter"))
def trainable_params(ctx) -> Iterable[Issue]:
    """Full fine-tuning trains every parameter; a LoRA of rank r on a Linear(in, out) adds
    r·(in + out) per adapted module per layer (a traced policy: what peft adapts on the real
    model). `adapter.trainable_params` must match."""
    read = ctx.models.get("$.policy")
    if read is None or read.spec is None:
        return
    want = expected_trainable(read.spec, ctx.doc["adapter"])
    got = ctx.doc["adapter"]["trainable_params"]
    if want is not None and got != want:
        a = ctx.doc["adapter"]
        how = "all parameters" if a["type"] == "full" else f"rank {a['rank']} on {', '.join(a['targets'])}"
        yield Issue("$.adapter.trainable_params", f"trainable_params {got:,} but {how} gives {want:,}",
                    "LoRA: r·(in + out) per adapted Linear per layer; full fine-tuning: params_total")


@rule("PHYS-010", title="a traced model cannot be re-priced here", requires=("policy", "reward", "evaluations"))
def traced_unverifiable(ctx) -> Iterable[Issue]:
    """A model with no analytic recipe is carried as its Hugging Face config (`spec.priced_by:
    traced`, report 1.3) and re-priced by tracing its modeling code (suite.accounting.traced),
    which needs torch and transformers. Where they are not installed (`pip install race-suite`,
    the light core), the report's FLOPs, parameter counts and trainable parameters cannot be
    checked against its model: taken on trust, a consistently edited report would pass, so the
    report is refused until it is validated where the train extra is installed. A report may
    also carry at most limits.MAX_TRACED_MODELS distinct traced configs (each costs a trace);
    the ones beyond are not traced, and refused here."""
    for where, read in ctx.models.items():
        if read.unverifiable:
            yield Issue(f"{where}.spec", read.problem or "traced model not re-priced", read.hint)


def expected_trainable(spec, adapter: dict) -> int | None:
    """Trainable parameters of a report's adapter on a spec (suite.accounting.Adapter); None
    when the adapter cannot be built (unknown target names: not ours to count)."""
    from ..accounting import Adapter
    from ..errors import RaceError

    try:
        a = Adapter(kind=adapter["type"], rank=adapter["rank"] or 0, alpha=adapter["alpha"] or 0.0,
                    **({"targets": tuple(adapter["targets"])} if adapter["targets"] else {}))
        return a.trainable_params(spec)
    except (RaceError, TypeError, ValueError):
        return None   # targets this model does not have: PHYS-001 names why its update cannot be priced


# ---- the hardware cross-check ----------------------------------------------------------------


def hardware_check(doc: dict) -> tuple[float, str] | None:
    """(implied utilization, how it was computed) of a report with a hardware section: total
    FLOPs over what its accelerators deliver at peak in the time it held them."""
    from ..record.runspec import Hardware

    hw = Hardware(**doc["hardware"])
    total = doc["totals"]["flops"]["total"]
    peak = hw.peak_flops * hw.accelerator_seconds
    held = (f"{hw.count} x {hw.wall_seconds:,.6g} s" if hw.wall_seconds is not None
            else f"{hw.accelerator_hours:,.6g} accelerator-hours")
    how = (f"{total:.4g} FLOPs claimed; {hw.accelerator} at {hw.peak_flops:.4g} FLOP/s peak"
           f"{' (' + hw.dtype + ')' if hw.dtype else ''} for {held} deliver at most {peak:.4g} FLOPs")
    return hw.utilization(total), how


@rule("PHYS-009", title="the hardware cannot deliver the claimed FLOPs", requires=("totals", "hardware"))
def hardware_utilization(ctx) -> Iterable[Issue]:
    """The hardware cross-check (Epoch AI's second method): FLOPs claimed divided by what the
    declared accelerators deliver at peak (`peak_flops` x accelerator-seconds) is the implied
    utilization. Above 1 the claim is impossible: a mis-scaled count (tokens for FLOPs, one
    GPU's time for all, a unit off by 1e3) that the arithmetic rules cannot see, since the
    report agrees with itself."""
    util, how = hardware_check(ctx.doc)
    if util > 1:
        yield Issue("$.hardware", f"implied utilization {util:.3g} (over 100% of peak): {how}",
                    "check the scale of the FLOP counts and of the hardware numbers (count, peak_flops for the dtype, "
                    "wall_seconds or accelerator_hours)")
