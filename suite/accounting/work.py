# Over 500 lines: one idea (the token statistics of steps) whose builders -- real lengths, means, schedules, staged, filtered and multi-turn rollouts -- share the private pass arithmetic.
"""Work: the token statistics of GRPO steps, from which FLOPs are priced (a flat JSON dict of
non-negative ints, additive over steps): tokens through the decoder per pass kind, attention
(query, key) pairs under both conventions, LM-head positions, reward-model tokens, and the
statistics other architectures need (`Needs`: sliding windows, latent or linear attention, MoE
forward calls). `work_from_lengths` builds it from the real lengths of every completion,
following what an engine profile really computes (padding, which passes run); `work_from_means`
from mean lengths. Both return a `Work`, which remembers the profile it was built for: pricing
it under another profile is an error (`suite.accounting.pricing`).

Reward-model tokens, one convention: a reward model scores each sequence's prompt and
completion, `prompt + completion` tokens (`reward_tokens_of`), unless the caller says how many it
scored; a *bound* (the budget stop's, the grid planner's) allows twice that
(`reward_tokens_bound`), because a reward model's own tokenizer and template may spell the same
text in more tokens than the policy's.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from ..errors import RaceError
from .costs import CHUNK
from .engines import EngineProfile, get_engine
from .settings import MAX_TOKENS, GRPOSettings

if TYPE_CHECKING:  # specs say what they need (Spec.needs), so this module sits below them
    from .specs import Spec

ATTENTION = ("causal", "full")
"""Attention conventions: causal counts the lower triangle (with the diagonal) of each L x L
score matrix; full counts the whole square, as eager attention computes it."""

PHASES = ("rollout", "update", "reward")
"""The phases of a GRPO step, in the order every ledger, report and table lists them."""
TOKEN_KEYS = ("rollout_prompt", "rollout_completion", "update", "reward")
"""Token counts per phase as ledgers and reports write them (tokens_from_work)."""

# Pass kinds of the policy and the statistics kept for each (all additive over steps).
_STATS = ("tokens", "attn_causal", "attn_full", "lm_head")
PASSES = ("rollout", "update.train", "update.old", "update.ref")
_REWARD_STATS = ("tokens", "attn_causal", "attn_full", "heads")
COUNT_KEYS = ("count.completions", "count.rollout_prompt", "count.rollout_completion",
              "count.update", "count.reward")
WORK_KEYS = tuple(f"{p}.{s}" for p in PASSES for s in _STATS) \
    + tuple(f"reward.{s}" for s in _REWARD_STATS) + COUNT_KEYS
"""Every key a work dict may hold. count.* are plain token counts (0 FLOPs), kept for reports."""

class Work(dict):
    """Work (a dict of statistics, as ledgers store it) that remembers the engine profile it
    was built for; `engine` is None for work read back from a file (the report names its profile)."""

    def __init__(self, data=(), engine: str | None = None):
        super().__init__(data)
        self.engine = engine

    def __reduce__(self):  # pickled with its profile (grid workers send work between processes)
        return (Work, (dict(self), self.engine))


def reward_tokens_of(prompt_tokens, completion_tokens):
    """Tokens a reward model scores per sequence when the caller does not say: prompt + completion."""
    return prompt_tokens + completion_tokens


def reward_tokens_bound(prompt_tokens, completion_tokens):
    """Most tokens a reward model may score per sequence, for bounds: twice prompt + completion
    (its own tokenizer and template may spell the text in more tokens than the policy's)."""
    return 2 * reward_tokens_of(prompt_tokens, completion_tokens)


def _priceable(prof: EngineProfile) -> EngineProfile:
    """The profile, unless its engine runs work the suite does not price (a PPO critic's values
    forward and update): refused by name rather than dropped."""
    if prof.critic:
        raise RaceError(f"engine profile {prof.name!r} runs a PPO critic (a values forward and a critic update every "
                        "step), which the suite does not price", "price a critic-free (GRPO) run, or leave the critic "
                        "out of the report by name: it is not GRPO work")
    return prof


def _check_lengths(values: Sequence, what: str, minimum: int = 1, integral: bool = True,
                   scalar: bool = False) -> list:
    if integral and values and set(map(type, values)) == {int} and min(values) >= minimum \
            and max(values) <= MAX_TOKENS:
        return list(values)  # the ledger's per-step path: plain ints, checked at C speed
    out = []
    for i, v in enumerate(values):
        name = what if scalar else f"{what}[{i}]"
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise RaceError(f"{name} = {v!r} is not a finite number")
        if integral and not float(v).is_integer():
            raise RaceError(f"{name} = {v!r} is not a whole number of tokens")
        if v < minimum:
            raise RaceError(f"{name} = {v:g} is below {minimum}", "token counts are positive")
        if v > MAX_TOKENS:
            raise RaceError(f"{name} = {v:g} is absurd (more than {MAX_TOKENS:,} tokens)",
                            "pass token counts, not characters or FLOPs")
        out.append(int(v) if integral else float(v))
    return out


def _ceil_to(x, m: int | None):
    return x if not m else -(-x // m) * m


def _decode_pairs(p, c):
    """Key positions attended by decode steps 1..c-1 over a prompt of p: sum_j (p + j)."""
    return (c - 1) * p + (c - 1) * c / 2 if isinstance(c, float) or isinstance(p, float) \
        else (c - 1) * p + (c - 1) * c // 2


def _tri(n):
    return n * (n + 1) / 2 if isinstance(n, float) else n * (n + 1) // 2


def _build_work(prompts: list, completions: list, settings: GRPOSettings, prof: EngineProfile,
                reward: list | None, iterations: int, generation: bool,
                needs: tuple["Needs", "Needs"] | None = None, reward_widths: list | None = None,
                rows: list | None = None, exact: bool = False) -> dict:
    """The work of one generation batch (generation=True) plus `iterations` training passes
    over `rows` (indices into the batch, repeats allowed; None: every row); `needs` (policy's,
    reward model's) adds the statistics other architectures need.
    reward_widths: the padded width of each sequence the reward model ran over (None: unpadded)."""
    w = dict.fromkeys(WORK_KEYS, 0)
    if needs is not None:       # a reward model's statistics follow what its forward ran over
        w.update(_extra_work(prompts, completions, settings, prof, reward_widths or reward, iterations, generation,
                             *needs, rows=rows))
    n = len(completions)
    k = settings.group_size
    lens = [p + c for p, c in zip(prompts, completions)]
    if prof.prefill_per_completion:
        pre = prompts
    else:  # K consecutive completions share one prompt prefill (prefix caching)
        pre = [prompts[i] if i % k == 0 else 0 for i in range(n)]
    if prof.padded:
        pw = _ceil_to(max(prompts), settings.pad_to_multiple_of)
        cw = _ceil_to(max(completions), settings.pad_to_multiple_of)
        cmax = max(completions)  # generation stops when the longest completion ends
        lw = pw + cw
        roll = {"tokens": n * (pw + cmax - 1),
                "attn_causal": n * (_tri(pw) + _decode_pairs(pw, cmax)),
                "attn_full": n * (pw * pw + _decode_pairs(pw, cmax)),
                "lm_head": n * cmax}

        def passes(idx):  # one log-prob pass over the rows idx, each padded to the batch's widths
            m = len(idx)
            lm = sum(completions[i] for i in idx) if prof.lm_head_train == "completion" else m * (lw - 1)
            return {"tokens": m * lw, "attn_causal": m * _tri(lw), "attn_full": m * lw * lw, "lm_head": lm}
    else:
        def passes(idx):
            ls = [lens[i] for i in idx]
            lm = sum(completions[i] for i in idx) if prof.lm_head_train == "completion" else sum(x - 1 for x in ls)
            return {"tokens": sum(ls), "attn_causal": sum(_tri(x) for x in ls),
                    "attn_full": sum(x * x for x in ls), "lm_head": lm}
    one = passes(range(n))
    trained = one if rows is None else passes(rows)
    if not prof.rollout_is_padded:  # each completion decodes its own tokens; logits only where sampled
        roll = {"tokens": sum(pre) + sum(c - 1 for c in completions),
                "attn_causal": sum(_tri(p) for p in pre) + sum(_decode_pairs(p, c) for p, c in zip(prompts, completions)),
                "attn_full": sum(p * p for p in pre) + sum(_decode_pairs(p, c) for p, c in zip(prompts, completions)),
                "lm_head": sum(completions)}
    for s in _STATS:
        w[f"update.train.{s}"] = iterations * trained[s]
    w["count.update"] = iterations * (sum(lens) if rows is None else sum(lens[i] for i in rows))
    if generation:
        for s in _STATS:
            w[f"rollout.{s}"] = roll[s]
            w[f"update.old.{s}"] = one[s] if prof.old_policy_pass(settings) else 0
            w[f"update.ref.{s}"] = one[s] if prof.reference_pass(settings) else 0
        w["count.completions"] = n
        w["count.rollout_prompt"] = sum(prompts if prof.prefill_per_completion else pre)
        w["count.rollout_completion"] = sum(completions)
        if reward:
            run = reward_widths or reward      # what the forward ran over; the count is real tokens
            w["reward.tokens"] = sum(run)
            w["reward.attn_causal"] = sum(_tri(r) for r in run)
            w["reward.attn_full"] = sum(r * r for r in run)
            w["reward.heads"] = sum(run)       # score heads project every position, padding included
            w["count.reward"] = sum(reward)
    if exact:  # unrounded, for shape_rollouts
        return w
    return {key: int(round(v)) for key, v in w.items()}


@dataclass(frozen=True)
class Needs:
    """Statistics beyond the base work keys that a model's FLOPs depend on."""

    windows: tuple[int, ...] = ()
    """Sliding windows of its layers: pairs within each window, per convention."""
    decode: bool = False
    """Rollout split into prefill and decode (MLA expands cached latents per decode step;
    linear attention decodes through a recurrent update)."""
    chunks: bool = False
    """Linear attention: sequences and 64-token chunks of full-sequence passes."""
    chunk_size: int = CHUNK
    """Tokens per chunk of `chunks` (traced Mamba-2 scans: the config's chunk_size)."""
    chunks2: bool = False
    """Chunked SSM scans (Mamba-2's torch path, traced): squares of each sequence's chunk count
    (the inter-chunk decay matrix)."""
    calls: bool = False
    """MoE: forward calls (peft folds an expert LoRA into the expert weights once per call)."""

    @classmethod
    def of(cls, spec: Spec | None) -> "Needs":
        """What `spec` needs (`spec.needs`; nothing for None)."""
        return cls() if spec is None else spec.needs

    def keys(self, pass_name: str) -> list[str]:
        """Work keys these needs add to one pass kind (rollout, update.train, ..., reward)."""
        out = [f"{pass_name}.attn_{a}.w{w}" for w in self.windows for a in ATTENTION]
        if self.chunks:
            out += [f"{pass_name}.rows", f"{pass_name}.chunks"]
        if self.chunks2:
            out.append(f"{pass_name}.chunks2")
        if self.decode and pass_name == "rollout":
            out += ["rollout.prefill_tokens", "rollout.decode_tokens", "rollout.decode_pairs"]
        if self.calls and pass_name in ("rollout", "update.train", "update.old"):  # the adapter runs
            out.append(f"{pass_name}.calls")
        return out


def _win(n, w: int):
    """Causal (query, key) pairs of n tokens when each query sees at most the last w keys."""
    return _tri(n) if n <= w else _tri(w) + (n - w) * w


def _seq_stats(length, needs: Needs) -> dict:
    """Extra statistics of one full-sequence forward over `length` tokens."""
    out = {}
    for w in needs.windows:
        out[f"attn_causal.w{w}"] = _win(length, w)
        out[f"attn_full.w{w}"] = length * length  # eager attention computes the square, then masks
    if needs.chunks:
        out["rows"], out["chunks"] = 1, math.ceil(length / needs.chunk_size)
    if needs.chunks2:
        out["chunks2"] = math.ceil(length / needs.chunk_size) ** 2
    return out


def _decode_stats(p, c, needs: Needs) -> dict:
    """Extra statistics of the c-1 decode steps after a prefill of p tokens (window-bounded:
    the cache keeps the last w keys of a sliding layer)."""
    out = {}
    for w in needs.windows:
        out[f"attn_causal.w{w}"] = out[f"attn_full.w{w}"] = _win(p + c - 1, w) - _win(p, w)
    if needs.decode:
        out["decode_tokens"], out["decode_pairs"] = c - 1, _decode_pairs(p, c)
    return out


def _acc(total: dict, prefix: str, stats: dict, times=1) -> None:
    for key, v in stats.items():
        total[f"{prefix}.{key}"] = total.get(f"{prefix}.{key}", 0) + times * v


def _extra_work(prompts: list, completions: list, settings: GRPOSettings, prof: EngineProfile,
                reward: list | None, iterations: int, generation: bool, pol: Needs, rm: Needs,
                rows: list | None = None) -> dict:
    """The statistics `pol` and `rm` add, over the same passes _build_work counts."""
    w = {key: 0 for p in PASSES for key in pol.keys(p)}
    w.update({key: 0 for key in rm.keys("reward")} if reward else {})
    n, k = len(completions), settings.group_size
    lens = [p + c for p, c in zip(prompts, completions)]
    pw = _ceil_to(max(prompts), settings.pad_to_multiple_of)
    lw = pw + _ceil_to(max(completions), settings.pad_to_multiple_of)
    train = [lw] * n if prof.padded else lens
    if prof.rollout_is_padded:
        cmax = max(completions)
        gen = [(pw, cmax, True)] * n
        calls = cmax  # one batched generate: the prefill, then one forward per decode step
    else:
        gen = [(p, c, prof.prefill_per_completion or i % k == 0) for i, (p, c) in enumerate(zip(prompts, completions))]
        calls = 0  # engines without HF generate (vLLM) run no peft forward per step
    micro = prof.micro_batches(settings)

    def passes(idx):
        out = {}
        for i in idx:
            _acc(out, "x", _seq_stats(train[i], pol))
        return {key[2:]: v for key, v in out.items()}

    one = passes(range(n))
    _acc(w, "update.train", one if rows is None else passes(rows), iterations)
    if pol.calls:  # one forward call per micro-batch (a slice of n / micro rows)
        w["update.train.calls"] += iterations * (micro if rows is None else -(-len(rows) * micro // n))
    if generation:
        for p, c, prefill in gen:
            if prefill:
                _acc(w, "rollout", _seq_stats(p, pol))
                if pol.decode:
                    w["rollout.prefill_tokens"] += p
            _acc(w, "rollout", _decode_stats(p, c, pol))
        if pol.calls:
            w["rollout.calls"] += calls
        for name, runs in (("update.old", prof.old_policy_pass(settings)), ("update.ref", prof.reference_pass(settings))):
            if runs:
                _acc(w, name, one)
                if f"{name}.calls" in w:
                    w[f"{name}.calls"] += micro
        for r in reward or ():
            _acc(w, "reward", _seq_stats(r, rm))
    return w


def work_from_lengths(prompt_lengths: Sequence[int], completion_lengths: Sequence[int],
                      settings: GRPOSettings, engine: str = "generic",
                      reward_lengths: Sequence[int] | None = None, *,
                      iterations: int | None = None, generation: bool = True,
                      reward_widths: Sequence[int] | None = None,
                      policy: Spec | None = None, reward_model: Spec | None = None,
                      rows: Sequence[int] | None = None) -> dict:
    """Exact work of one GRPO generation batch from real token lengths.

    prompt_lengths: one entry per completion (K per prompt, consecutive), or one per prompt
    (then repeated K times). completion_lengths: generated tokens of each completion, EOS
    included, as the engine returned them. reward_lengths: lengths of the sequences a reward
    model scored, in its own tokenizer; None for rule rewards. reward_widths: where the reward
    model ran over a padded batch (TRL's model rewards: right-padded to the longest sequence),
    the padded width of each of those sequences: FLOPs follow the widths, the reward token
    count the lengths.

    By default the batch's whole life is counted: rollout, reward, old-policy and reference
    passes, and settings.num_iterations training passes. A ledger that records TRL's mu
    optimizer steps separately passes iterations=1 for each, generation=False for all but the
    step that generated: the parts add up to the whole.

    rows: the rows of the batch (indices into the completions, repeats allowed) that the
    `iterations` training passes ran over; None: every row. TRL trains a generation batch in
    steps_per_generation slices, one per micro-step (a micro-step of every optimizer step with
    gradient accumulation), each padded to the whole batch's widths: an optimizer step is
    charged the slices it trained, so the steps of one generation add up to its passes.

    policy, reward_model: the specs, when their architecture needs more than the base statistics
    (sliding windows, latent or linear attention, MoE forward calls: `Needs`); dense
    full-attention models need none.

    Returns the work (a Work: statistic name -> integer, built for `engine`).
    """
    prof = _priceable(get_engine(engine))
    comps = _check_lengths(list(completion_lengths), "completion_lengths")
    prompts = _check_lengths(list(prompt_lengths), "prompt_lengths")
    if not comps:
        raise RaceError("no completions: completion_lengths is empty")
    k = settings.group_size
    if len(prompts) * k == len(comps) and k > 1:
        prompts = [p for p in prompts for _ in range(k)]
    if len(prompts) != len(comps):
        raise RaceError(f"{len(prompt_lengths)} prompt lengths for {len(comps)} completions",
                        f"give one prompt length per completion, or one per prompt (K={k} completions each)")
    if not prof.prefill_per_completion and len(comps) % k:
        raise RaceError(f"{len(comps)} completions is not a multiple of the group size K={k}")
    longest = max(comps)
    if longest > settings.max_completion_tokens:
        raise RaceError(f"a completion has {longest} tokens, more than max_completion_tokens="
                        f"{settings.max_completion_tokens}", "raise max_completion_tokens or check the lengths")
    reward = widths = None
    if reward_lengths is not None:
        reward = _check_lengths(list(reward_lengths), "reward_lengths")
    if reward_widths is not None:
        widths = _check_lengths(list(reward_widths), "reward_widths")
        if reward is None or len(widths) != len(reward) or any(w < r for w, r in zip(widths, reward)):
            raise RaceError("reward_widths must give one padded width >= its length per reward_lengths entry")
    its = settings.num_iterations if iterations is None else iterations
    if isinstance(its, bool) or not isinstance(its, int) or its < 0:
        raise RaceError(f"iterations must be a non-negative integer, got {its!r}")
    if rows is not None:
        rows = list(rows)
        if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(comps) for i in rows):
            raise RaceError(f"rows must be indices into the {len(comps)} completions of the batch")
    return Work(_build_work(prompts, comps, settings, prof, reward, its, generation, _needs(policy, reward_model),
                            widths, rows), engine)


def work_from_means(prompt_tokens: float, completion_tokens: float, settings: GRPOSettings,
                    engine: str = "generic", reward_tokens: float | None = None, *,
                    policy: Spec | None = None, reward_model: Spec | None = None,
                    kept: float | None = None, environment_tokens: float = 0, turns: float = 1) -> dict:
    """Work of one GRPO step (a generation batch of K*B completions and mu updates) when every
    prompt has `prompt_tokens` and every completion `completion_tokens` tokens (means may be
    fractional; each work entry is rounded to an integer). reward_tokens: tokens per sequence
    scored by a reward model, None for rule rewards.

    What real runs do (`shape_rollouts`): `kept`, the completions per generation batch the update
    trains on (default all K*B; the rest were generated and discarded: filtered groups, overlong
    masks, stale samples dropped); `environment_tokens`, tool/environment tokens per completion
    that a multi-turn rollout feeds back into the context (prefill, never decode), over `turns`
    policy turns (completion_tokens are then the policy's own tokens only).

    settings: the GRPO settings; engine: the profile the work is built for. Returns the work (a
    Work built for `engine`).
    """
    prof = _priceable(get_engine(engine))
    (p,) = _check_lengths([prompt_tokens], "prompt_tokens", integral=False, scalar=True)
    (c,) = _check_lengths([completion_tokens], "completion_tokens", integral=False, scalar=True)
    e = _check_env(environment_tokens, turns, c)
    if c + e > settings.max_completion_tokens:
        raise RaceError(f"completion_tokens {c + e:g} exceeds max_completion_tokens={settings.max_completion_tokens}")
    n = settings.group_size * settings.prompts_per_step
    r = None
    if reward_tokens is not None:
        (rt,) = _check_lengths([reward_tokens], "reward_tokens", integral=False, scalar=True)
        r = [rt] * n
    if prof.padded:  # every row equally long: padding only from pad_to_multiple_of
        p, c = (math.ceil(p), math.ceil(c)) if settings.pad_to_multiple_of else (p, c)
    if kept is None and not e:
        return Work(_build_work([p] * n, [c] * n, settings, prof, r, settings.num_iterations, True,
                                _needs(policy, reward_model)), engine)
    raw = _build_work([p] * n, [c + e] * n, settings, prof, r, settings.num_iterations, True,
                      _needs(policy, reward_model), exact=True)
    return Work(shape_rollouts(raw, n, c, e, turns, n if kept is None else kept, prof), engine)


def _check_env(environment_tokens, turns, c) -> float:
    if isinstance(turns, bool) or not isinstance(turns, numbers.Real) or not math.isfinite(turns) or turns < 1:
        raise RaceError(f"turns = {turns!r} must be a number >= 1", "policy turns per multi-turn rollout")
    if turns > c:
        raise RaceError(f"turns = {turns:g} exceeds the policy's {c:g} tokens per completion",
                        "every turn generates at least one token")
    if environment_tokens in (0, None):
        if turns != 1:
            raise RaceError(f"turns = {turns:g} without environment_tokens",
                            "a multi-turn rollout feeds tool/environment tokens back between turns")
        return 0
    (e,) = _check_lengths([environment_tokens], "environment_tokens", integral=False, scalar=True)
    return e


def shape_rollouts(raw: dict, n: int, c: float, e: float, turns: float, kept: float,
                   prof: EngineProfile) -> dict:
    """Work of a batch whose rollouts were not all trained on, or were multi-turn, from the raw
    work of `n` completions of c + e tokens each (unrounded, as `_build_work(exact=True)` gives it).

    - Multi-turn (e > 0 environment tokens per completion over `turns` policy turns): every token
      still passes the policy once and attends to its whole prefix (prefix caching keeps the
      context between turns), but environment tokens are prefilled, not decoded: no LM-head
      position in the rollout (and none in training passes that score only completion tokens),
      and, for models whose decode differs from their prefill (MLA, linear attention), the
      environment tokens and each later turn's first token move from decode to prefill (the
      turns assumed evenly interleaved).
    - Discarded rollouts (kept < n): generation (and the reward, which decides what is kept)
      ran for all n; every update pass (train, old-policy, reference) runs over the kept ones only.

    count.rollout_completion counts the policy's tokens; count.rollout_env the environment
    tokens; count.discarded the completions generated and never trained on."""
    if isinstance(kept, bool) or not isinstance(kept, numbers.Real) or not 0 <= kept <= n:
        raise RaceError(f"kept = {kept!r} completions: must be between 0 and the {n} generated",
                        "kept counts the completions the update trained on")
    w = dict(raw)
    if e:
        w["rollout.lm_head"] -= n * e
        w["count.rollout_completion"] = n * c
        w["count.rollout_env"] = n * e
        if prof.lm_head_train == "completion":
            for part in ("train", "old", "ref"):
                w[f"update.{part}.lm_head"] *= c / (c + e)
        if "rollout.decode_tokens" in w:
            moved = e + turns - 1
            naive = c + e - 1
            w["rollout.decode_tokens"] -= n * moved
            w["rollout.prefill_tokens"] += n * moved
            w["rollout.decode_pairs"] *= (naive - moved) / naive if naive else 0
        if "rollout.rows" in w and turns > 1:  # each later turn's prefill is one more scanned chunk run
            w["rollout.rows"] += n * (turns - 1)
            w["rollout.chunks"] += n * (turns - 1) * math.ceil((e / (turns - 1) + 1) / CHUNK)
    if kept != n:
        f = kept / n
        for key in list(w):
            if key.startswith("update.") and not key.endswith(".calls"):
                w[key] *= f
        w["count.update"] *= f
        w["count.discarded"] = n - kept
    return {key: int(round(v)) for key, v in w.items()}


def _needs(policy: Spec | None, reward_model: Spec | None) -> tuple[Needs, Needs] | None:
    if policy is None and reward_model is None:
        return None
    return Needs.of(policy), Needs.of(reward_model)


def add_work(*works: dict) -> Work:
    """Sum of work dicts (work is additive over steps); it keeps the profile they were built
    for, and refuses to add work of two profiles."""
    engines = {w.engine for w in works if getattr(w, "engine", None) is not None}
    if len(engines) > 1:
        raise RaceError(f"work of engine profiles {', '.join(sorted(engines))} cannot be added",
                        "price each profile's work on its own")
    out = Work(dict.fromkeys(WORK_KEYS, 0), next(iter(engines), None))
    for w in works:
        for key, v in w.items():
            out[key] = out.get(key, 0) + v
    return out


def tokens_from_work(work: dict) -> dict:
    """Tokens per phase, as ledgers and reports write them: rollout_prompt, rollout_completion,
    update (real prompt+completion tokens per iteration), reward.

    Args: `work`, the work statistics. Returns the token counts per phase.
    """
    return {"rollout_prompt": work.get("count.rollout_prompt", 0),
            "rollout_completion": work.get("count.rollout_completion", 0),
            "update": work.get("count.update", 0), "reward": work.get("count.reward", 0)}


_EXTRA_KEY = re.compile(r"^(?:(?:rollout|update\.train|update\.old|update\.ref|reward)\.(?:attn_(?:causal|full)\.w[1-9][0-9]*"
                        r"|rows|chunks|chunks2)|(?:rollout|update\.train|update\.old)\.calls"
                        r"|rollout\.(?:prefill_tokens|decode_tokens|decode_pairs)"
                        r"|count\.(?:rollout_env|discarded))$")
"""Work keys `Needs` adds (calls only where the adapter runs: not the reference, not the reward model)."""


def check_work(work: dict) -> None:
    if not isinstance(work, dict):
        raise RaceError("work must be a JSON object of token statistics")
    for key, v in work.items():
        if key not in WORK_KEYS and not (isinstance(key, str) and _EXTRA_KEY.match(key)):
            raise RaceError(f"work has unknown key '{key}'", f"known keys: {', '.join(WORK_KEYS)} (and what Needs adds)")
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise RaceError(f"work['{key}'] = {v!r} must be a non-negative integer")


__all__ = ["ATTENTION", "PHASES", "TOKEN_KEYS", "WORK_KEYS", "COUNT_KEYS", "CHUNK", "Work", "Needs", "work_from_lengths",
           "work_from_means", "shape_rollouts", "add_work", "tokens_from_work", "reward_tokens_of", "reward_tokens_bound"]
