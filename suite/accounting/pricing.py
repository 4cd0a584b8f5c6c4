"""Pricing: FLOPs of work, a linear function of it whose coefficients depend only on the
model specs, the adapter, gradient checkpointing, the engine profile and the attention
convention (`coefficients` exposes them; docs/accounting.md derives every one).

Conventions: 1 multiply-add = 2 FLOPs; counted are matrix multiplies (every nn.Linear, the LM
head, reward heads) and the attention score and value products; not counted: norms,
activations, softmax, rotary embeddings, residual adds, embedding lookups, optimizer
arithmetic. This is what torch.utils.flop_counter.FlopCounterMode counts for the eager model.

Work is priced under the engine profile it was built for: a `Work` says which; a plain dict
(read from a ledger or report) needs `engine=`; a `Work` priced under another profile is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..errors import RaceError
from .adapter import Adapter
from .costs import add_stat, head_fwd, mla_absorbed
from .engines import get_engine
from .specs import Spec
from .settings import GRPOSettings
from .work import (ATTENTION, PASSES, PHASES, WORK_KEYS, Needs, check_work, reward_tokens_bound, reward_tokens_of,
                   tokens_from_work, work_from_lengths, work_from_means)

METHOD = "race-analytic"
"""Name of this accounting method, as written into reports."""
VERSION = "1.0"
"""Version of the formulas; bump when a coefficient changes."""


def _check_attention(attention: str) -> None:
    if attention not in ATTENTION:
        raise RaceError(f"unknown attention convention '{attention}'", f"use one of: {', '.join(ATTENTION)}")


def profile_of(work: dict, engine: str | None) -> str:
    """The engine profile to price `work` under: the one it was built for, which an explicit
    `engine` must match; a plain dict needs `engine`."""
    built = getattr(work, "engine", None)
    if engine is None:
        if built is None:
            raise RaceError("work does not say which engine profile it was built for",
                            "pass engine= (the report's accounting.engine_profile)")
        return built
    if built is not None and built != engine:
        raise RaceError(f"work built for engine profile '{built}' priced under '{engine}'",
                        f"price it under '{built}', or rebuild the work for '{engine}'")
    return engine


def _map(costs: dict, prefix: str, attn: str, *, rollout: bool = False, absorbed: bool = False,
         calls: bool = True) -> dict:
    """Coefficients of one pass: stats -> work keys of `prefix`."""
    out: dict = {}
    for stat, v in costs.items():
        if stat == "tok":
            add_stat(out, f"{prefix}.tokens", v)
        elif stat == "pair":
            add_stat(out, f"{prefix}.{attn}", v)
        elif stat.startswith("pair.w"):
            add_stat(out, f"{prefix}.{attn}.{stat[5:]}", v)
        elif stat in ("row", "chunk"):
            add_stat(out, f"{prefix}.{stat}s", v)
        elif stat == "chunk2":
            add_stat(out, f"{prefix}.chunks2", v)
        elif stat == "call":
            if calls:
                add_stat(out, f"{prefix}.calls", v)
        elif stat == "kvb":
            if not rollout:
                add_stat(out, f"{prefix}.tokens", v)
            else:  # the prompt's latents once; HF generate re-expands every cached latent per step,
                add_stat(out, "rollout.prefill_tokens", v)  # absorbed weights cost as much per decode token
                add_stat(out, "rollout.decode_pairs" if not absorbed else "rollout.decode_tokens", v)
        elif stat == "dec_tok" and rollout:
            add_stat(out, "rollout.decode_tokens", v)
        elif stat == "dec_pair" and rollout:  # traced: what a decode step adds per cached key
            add_stat(out, "rollout.decode_pairs", v)
    return out


def coefficients(policy: Spec, adapter: Adapter, settings: GRPOSettings,
                 reward_model: Spec | None = None, engine: str = "generic",
                 attention: str = "causal") -> list[tuple[str, str, dict[str, int]]]:
    """The linear map from work to FLOPs: [(phase, pass name, {work key: FLOPs per unit})].
    FLOPs of a pass = sum(coef * work[key])."""
    prof = get_engine(engine)
    _check_attention(attention)
    attn = f"attn_{attention}"
    if not policy.has_lm_head:
        raise RaceError(f"policy {policy.name} has no LM head", "a policy must be a causal LM; reward models go in reward_model")
    head = head_fwd(policy)
    early = prof.checkpoint_early_stop
    rg0, gc = prof.layer0_input_grad(adapter, settings), settings.gradient_checkpointing
    costs = policy.costs(adapter, rg0=rg0, gc=gc, fold=prof.peft_training, early_stop=early)
    # generation: the forward with the adapter, folded as generate runs it (rg0 and gc leave it as it is)
    gen = policy.costs(adapter, rg0=rg0, gc=gc, fold=prof.hf_rollout, early_stop=early)["fwd"]
    roll = _map(gen, "rollout", attn, rollout=True, absorbed=not prof.hf_rollout, calls=prof.hf_rollout)
    if policy.family.mla and not prof.hf_rollout:
        add_stat(roll, "rollout.decode_pairs", policy.num_layers * mla_absorbed(policy))
    add_stat(roll, "rollout.lm_head", head)
    # LM head backward: dx always (something upstream trains); dW only when it trains itself;
    # a fused head first recomputes its logits.
    head_bwd = head * (1 + (adapter.kind == "full") + prof.lm_head_recompute)

    def train(part: str, extra: dict) -> dict:
        return {**_map(costs[part], "update.train", attn), **extra}

    table = [
        ("rollout", "generate forward", roll),
        ("update", "train forward", train("fwd", {"update.train.lm_head": head})),
        ("update", "train backward", train("bwd", {"update.train.lm_head": head_bwd})),
        ("update", "checkpoint recompute", train("recompute", {}) if settings.gradient_checkpointing else {}),
        ("update", "old-policy forward", {**_map(costs["fwd"], "update.old", attn), "update.old.lm_head": head}),
        # With PEFT the reference is the base model with the adapter off; for full fine-tuning a
        # frozen copy of the policy: either way no adapter FLOPs.
        ("update", "reference forward", {**_map(costs["base"], "update.ref", attn), "update.ref.lm_head": head}),
    ]
    if reward_model is not None:
        rc = reward_model.costs(Adapter(kind="full"), rg0=False, gc=False)["base"]
        table.append(("reward", "reward-model forward", {**_map(rc, "reward", attn), "reward.heads": head_fwd(reward_model)}))
    return [(ph, name, {k: v for k, v in coef.items() if v}) for ph, name, coef in table]


def required_keys(policy: Spec, reward_model: Spec | None = None) -> dict[str, list[str]]:
    """Work keys beyond WORK_KEYS each pass of these models may need, by pass ('rollout', ...)."""
    pol, rm = Needs.of(policy), Needs.of(reward_model)
    out = {p: pol.keys(p) for p in PASSES}
    out["reward"] = rm.keys("reward")
    return out


def _check_needs(work: dict, table: list) -> None:
    """Refuse work that lacks a statistic these models' coefficients use, in a pass that ran:
    its FLOPs would silently be missing."""
    for _, name, coef in table:
        for key in coef:
            if key not in work and key not in WORK_KEYS:
                prefix = next(p for p in (*PASSES, "reward") if key.startswith(p + "."))
                if work.get(f"{prefix}.tokens", 0):
                    raise RaceError(f"work has no '{key}', which the {name} of these models needs",
                                    "build the work with work_from_lengths(..., policy=, reward_model=): sliding "
                                    "windows, latent or linear attention and MoE calls need more than token counts")


def pass_breakdown(work: dict, policy: Spec, adapter: Adapter, settings: GRPOSettings,
                   reward_model: Spec | None = None, engine: str | None = None,
                   attention: str = "causal") -> list[tuple[str, str, int]]:
    """FLOPs of each pass: [(phase, pass name, FLOPs)], in the order docs/accounting.md
    derives them. engine: the profile the work was built for (`profile_of`)."""
    engine = profile_of(work, engine)
    check_work(work)
    if reward_model is None and work.get("reward.tokens", 0):
        raise RaceError("work has reward-model tokens but no reward model spec was given",
                        "pass the reward model (--reward-model) or drop reward_lengths")
    table = _coefficients(policy, adapter, settings, reward_model, engine, attention)
    _check_needs(work, table)
    rows = []
    for phase, name, coef in table:
        rows.append((phase, name, sum(c * work.get(key, 0) for key, c in coef.items())))
    return rows


@lru_cache(maxsize=512)
def _cached_coefficients(*args) -> list:
    return coefficients(*args)


def _coefficients(*args) -> list:
    """coefficients(), built once per distinct setting: a leaderboard prices a few settings
    across many reports, an import one setting across many steps."""
    try:
        return _cached_coefficients(*args)
    except TypeError:               # an unhashable spec field: build it the plain way
        return coefficients(*args)


def phase_flops(work: dict, policy: Spec, adapter: Adapter, settings: GRPOSettings,
                reward_model: Spec | None = None, engine: str | None = None,
                attention: str = "causal") -> dict:
    """{"rollout": int, "update": int, "reward": int}: exact FLOPs of `work` (linear in it),
    under the profile it was built for (`profile_of`).

    Args: `work` (work_from_lengths / work_from_means, or a ledger's summed work with
    `engine`); `policy`, `adapter`, `settings`; `reward_model` (None: a rule reward);
    `attention` (causal or full). Returns the FLOPs per phase.
    """
    out = dict.fromkeys(PHASES, 0)
    for phase, _, f in pass_breakdown(work, policy, adapter, settings, reward_model, engine, attention):
        out[phase] += f
    return out


def step_cost_bound(policy, adapter, settings, *, max_prompt_tokens: int, engine: str,
                    attention: str = "causal", reward_model=None, reward_tokens: int | None = None,
                    generation: bool | int = True) -> int:
    """Upper bound on the FLOPs of one optimizer step: every completion runs to
    max_completion_tokens and every prompt is max_prompt_tokens long (longer sequences only
    cost more); a reward model scores `reward_tokens_bound` tokens per sequence unless
    reward_tokens says how many. generation: how many generation batches the step makes (True:
    one; False or 0: a step that trains on buffered generations, e.g. mu > 1 or
    steps_per_generation > gradient_accumulation_steps). The step trains
    gradient_accumulation_steps slices of 1/steps_per_generation of the batch (TRL's schedule;
    one whole pass by default). A run's budget stop (suite.train.trl_callback) and the grid
    planner (suite.analysis.grid) both use it.

    Args: `policy`, `adapter`, `settings`, `engine` (the profile), `max_prompt_tokens`.
    Returns the bound in FLOPs.
    """
    n = settings.group_size * settings.prompts_per_step
    if reward_model is not None and reward_tokens is None:
        reward_tokens = reward_tokens_bound(max_prompt_tokens, settings.max_completion_tokens)
    spg = settings.steps_per_generation or settings.gradient_accumulation_steps
    trained = [0] * max(1, -(-settings.gradient_accumulation_steps * n // spg))   # rows this step trains
    prompts, comps = [max_prompt_tokens] * n, [settings.max_completion_tokens] * n
    gens = int(generation)

    def price(work):
        return sum(phase_flops(work, policy, adapter, settings, reward_model, attention=attention).values())

    total = price(work_from_lengths(prompts, comps, settings, engine, None, iterations=1, generation=False,
                                    policy=policy, reward_model=reward_model, rows=trained))
    if gens:
        total += gens * price(work_from_lengths(prompts, comps, settings, engine,
                                                [reward_tokens] * n if reward_model is not None else None,
                                                iterations=0, generation=True, policy=policy,
                                                reward_model=reward_model))
    return total


@dataclass(frozen=True)
class StepFlops:
    """One GRPO step from means: its work, tokens and per-phase FLOPs."""

    work: dict
    tokens: dict
    flops: dict
    passes: list = field(default_factory=list)

    @property
    def total(self) -> int:
        """rollout + update + reward."""
        return sum(self.flops.values())

    @property
    def update_share(self) -> float:
        """p = C_update / C_total."""
        return self.flops["update"] / self.total if self.total else 0.0


def step_flops(policy: Spec, adapter: Adapter, settings: GRPOSettings, prompt_tokens: float,
               completion_tokens: float, engine: str = "generic", attention: str = "causal",
               reward_model: Spec | None = None, reward_tokens: float | None = None, *,
               kept: float | None = None, environment_tokens: float = 0, turns: float = 1) -> StepFlops:
    """work_from_means + phase_flops for one step. With a reward model and no reward_tokens,
    the reward model scores `reward_tokens_of` (prompt + completion) tokens per sequence.
    kept, environment_tokens, turns: discarded rollouts and multi-turn rollouts (work_from_means).

    Args: `policy`, `adapter`, `settings`; `prompt_tokens` and `completion_tokens`, the mean
    lengths; `engine`, `attention`, `reward_model`, `reward_tokens`. Returns the StepFlops (work,
    flops per phase, tokens).
    """
    if reward_model is not None and reward_tokens is None:
        reward_tokens = reward_tokens_of(prompt_tokens, completion_tokens + (environment_tokens or 0))
    if reward_model is None:
        reward_tokens = None
    work = work_from_means(prompt_tokens, completion_tokens, settings, engine, reward_tokens,
                           policy=policy, reward_model=reward_model, kept=kept,
                           environment_tokens=environment_tokens, turns=turns)
    passes = pass_breakdown(work, policy, adapter, settings, reward_model, attention=attention)
    flops = dict.fromkeys(PHASES, 0)
    for phase, _, f in passes:
        flops[phase] += f
    return StepFlops(work=work, tokens=tokens_from_work(work), flops=flops, passes=passes)


__all__ = ["METHOD", "VERSION", "coefficients", "required_keys", "pass_breakdown", "phase_flops", "StepFlops",
           "step_flops", "step_cost_bound", "profile_of"]
