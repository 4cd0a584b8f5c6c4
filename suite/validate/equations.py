# Over 500 lines: one idea, the closed system of work equations -- every relation between settings, tokens and work, checked together.
"""Work equations: the closed system that ties a report's declared settings (K, prompts per
step, steps, mu, beta, the completion cap, the engine profile) to its token counts and its work
statistics, so that work cannot be fabricated while the FLOPs priced from it (PHYS-001) still
agree with themselves.

Measured and imported reports (one rule per relation, WORK-001..006), with
n = count.completions, P = count.rollout_prompt, C = count.rollout_completion,
U = count.update, N = K x prompts_per_step (sequences per generation), G = n / N generations,
and what real runs do: D = count.discarded (generated, never trained), E = count.rollout_env
(a multi-turn rollout's environment tokens, prefilled) over T policy turns:

- WORK-001  n = N x G with G the generations the declared steps imply;
- WORK-002  n x T <= C, C + E <= n x max_completion_tokens (the cap holds every completion);
- WORK-003  rollout work against P, C, E and n (prefill and decode positions, logits, pairs);
- WORK-004  update work against U = passes x the kept rows' tokens (L = P + C + E, or
            K x P + C + E when the profile shares a prompt's prefill among its K completions;
            with discards, each ledger record's share kept);
- WORK-005  old-policy and reference passes present iff mu and beta say so, each one pass;
- WORK-006  reward-model work against the reward model and the tokens it scored.

Estimates (WORK-007): totals.work = steps x work_from_means(means, settings), key by key, the
means with their kept share, environment tokens and turns; a staged estimate stage by stage
(ST-004 in rollout_rules). Every ledger-backed report (WORK-008): the engine profile is one of
the engine's own. WORK-009: discards and environment tokens only where a run can make them.
WORK-010: linear-attention chunk counts within what the scanned tokens and rows allow.
WORK-011: a padded profile's ledger has padded rows (no vanished padding; TRL schedules too).

Tolerances: a measured ledger's work is built from integer lengths, so every equation is
exact. An imported ledger prices per-step *means* and rounds each statistic once per generation
batch: an equation allows half a unit per statistic it reads (times its coefficient) per batch.
Bounds (attention pairs between the equal-length minimum and the one-long-sequence maximum)
hold for any lengths and are never widened.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Iterable

from ..numbers import json_count
from .physics import settings_of, specs_of
from .registry import Issue, rule

_REQ = ("grpo", "accounting", "totals")
BASE = ("tokens", "attn_causal", "attn_full", "lm_head")
TEMPLATE_TOKENS = 256
"""Tokens a reward model's own template may add to each sequence it scores (system prompt, step tags)."""
HINT = "rebuild the ledger and report from the run (race report LEDGER --spec SPEC); work is not edited by hand"


def _method(doc) -> str | None:
    prov = doc.get("provenance")
    return prov.get("method") if isinstance(prov, dict) else None


class System:
    """The quantities every equation reads, from one report (None when it cannot apply) and,
    where it can be read, the ledger's layout (LedgerSummary: which records generated)."""

    def __init__(self, doc, led=None):
        from ..accounting import ENGINES

        self.doc = doc
        self.method = _method(doc)
        t = doc["totals"]
        # JSON Schema's integer admits 12.0: the equations read whole numbers as ints
        self.w = {k: int(v) for k, v in t["work"].items() if isinstance(v, (int, float)) and float(v).is_integer()}
        self.steps = int(t["steps"])
        prof = doc["accounting"]["engine_profile"]
        self.prof = ENGINES[prof] if prof in ENGINES else None
        try:
            self.s = settings_of(doc)
        except Exception:       # noqa: BLE001 -- the schema reports the setting; nothing to equate
            self.s = None
        g = doc["grpo"]
        self.K, self.B, self.mu, self.cap = (int(g[k]) for k in ("group_size", "prompts_per_step", "num_iterations",
                                                                 "max_completion_tokens"))
        self.N = self.K * self.B
        get = self.w.get
        self.n, self.P, self.C = get("count.completions"), get("count.rollout_prompt", 0), \
            get("count.rollout_completion", 0)
        self.U, self.R = get("count.update", 0), get("count.reward", 0)
        self.G = self.n // self.N if self.n is not None and self.N else 0
        prov = doc.get("provenance") if isinstance(doc.get("provenance"), dict) else {}
        declared = json_count(prov.get("steps"))
        self.declared = self.steps if declared is None else declared
        spg, gas = g.get("steps_per_generation"), g.get("gradient_accumulation_steps")
        self.scheduled = isinstance(spg, int) and spg != (gas if isinstance(gas, int) else 1)
        # TRL's schedule: one generation batch per spg x mu micro-steps, gas micro-steps an optimizer step
        self.spg = spg if isinstance(spg, int) and spg >= 1 else 1
        self.gas = gas if isinstance(gas, int) and gas >= 1 else 1
        # Discarded completions (count.discarded: generated, never trained) and multi-turn
        # environment tokens (count.rollout_env: prefill, over T policy turns a completion).
        self.D, self.E = get("count.discarded", 0), get("count.rollout_env", 0)
        ro = doc.get("rollouts") if isinstance(doc.get("rollouts"), dict) else {}
        mt = ro.get("multi_turn") if isinstance(ro.get("multi_turn"), dict) else {}
        turns = mt.get("turns")
        self.T = Fraction(turns) if isinstance(turns, (int, float)) and not isinstance(turns, bool) \
            and math.isfinite(turns) and turns >= 1 else Fraction(1)
        # A staged run has per-stage settings: an estimate, priced stage by stage (ST-004, ST-005).
        self.staged = "stages" in doc
        self.led = self.sums = None
        if led is not None and led.records and not led.n_step_problems and led.records == self.steps:
            self.sums = led     # the kept rows and tokens of a filtered ledger, record by record
            if self.method in (None, "measured") and not self.scheduled:
                self.led = led

    @property
    def cycle(self) -> int:
        """Micro-steps one generation batch serves (TRL: steps_per_generation x mu)."""
        return self.spg * self.mu

    @property
    def micro(self) -> int:
        """Micro-steps the run took: the declared optimizer steps x gradient accumulation."""
        return (self.declared if self.method == "imported" else self.steps) * self.gas

    @property
    def ok(self) -> bool:
        """The equations apply: a ledger-backed report (not an estimate) with a known profile,
        valid settings and the completion count."""
        return self.method != "estimated" and self.prof is not None and self.s is not None and self.n is not None \
            and not self.staged

    @property
    def layout(self) -> str | None:
        """How a measured ledger's records map to generation batches: "per-generation" (every
        record generated, with its batch's mu passes), "per-step" (TRL: one record per optimizer
        step, the batch reused for mu of them), None when the ledger is not at hand."""
        if self.led is None:
            return None
        return "per-generation" if self.led.generations == self.led.records else "per-step"

    @property
    def padded_import(self) -> bool:
        """An import priced with the padding its log bounds (race import trl under a padded
        profile: every row at the step's longest completion, `completions/max_length` among the
        source's fields)."""
        prov = self.doc.get("provenance") if isinstance(self.doc.get("provenance"), dict) else {}
        src = prov.get("source") if isinstance(prov.get("source"), dict) else {}
        return self.method == "imported" and "completions/max_length" in (src.get("fields") or ())

    @property
    def padded(self) -> bool:
        """Training rows are padded: the profile pads and the lengths were real (imported means
        are every row's length, so padding adds nothing unless pad_to_multiple_of rounds it, or
        the import priced the logged longest completion)."""
        return self.prof.padded and (self.method != "imported" or self.s.pad_to_multiple_of is not None
                                     or self.padded_import)

    @property
    def rollout_padded(self) -> bool:
        """Generation rows are padded (as `padded`, for the rollout)."""
        return self.prof.rollout_is_padded and (self.method != "imported" or self.s.pad_to_multiple_of is not None
                                                or self.padded_import)

    @property
    def whole(self) -> bool:
        """Padded rows come in whole generation batches of N (integer lengths, WORK-001 holds)."""
        return self.method != "imported" and bool(self.N) and self.n % self.N == 0

    @property
    def shared(self) -> bool:
        """One prefill per prompt, shared by its K completions (prefix caching)."""
        return not self.prof.prefill_per_completion

    @property
    def groups(self) -> int:
        """Prefills run: one per prompt (shared) or one per completion."""
        return self.n // self.K if self.shared else self.n

    @property
    def k(self) -> int:
        """How often L counts a prompt's tokens: K where the prefill is shared (count.rollout_prompt
        holds one prompt per group), else 1 (one per completion). The coefficient of P in the
        tolerances."""
        return self.K if self.shared else 1

    def seq_tokens(self, prompt: int, completion: int) -> int:
        """Tokens of the generated sequences (prompt + completion of each) from the counts."""
        return (self.K * prompt if self.shared else prompt) + completion

    @property
    def L(self) -> int:
        """Tokens of all generated sequences, once (environment tokens are in the context)."""
        return self.seq_tokens(self.P, self.C) + self.E

    @property
    def kept(self) -> tuple | None:
        """(rows, prompt, completion, environment tokens) the update trained: every generated
        row; with discards, each ledger record's counts times its kept share (an importer
        prices a discarded row at its step's means); None when discards cannot be placed
        (no ledger at hand)."""
        if not self.D:
            return self.n, self.P, self.C, self.E
        if self.sums is None:
            return None
        return (self.sums.kept_rows, *self.sums.kept_tokens)

    @property
    def Lk(self):
        """Tokens of the sequences the update trained, once (None: unknown, see `kept`)."""
        k = self.kept
        return None if k is None else self.seq_tokens(k[1], k[2]) + k[3]

    @property
    def env_rows(self) -> int:
        """Completions of the records with environment tokens (all of them, without a ledger)."""
        if not self.E:
            return 0
        return self.sums.env_completions if self.sums is not None else self.n

    @property
    def regular(self) -> bool:
        """Per-step layout: every batch but the last served mu steps (no resume in between)."""
        return self.led.gen_gaps <= {self.mu}

    @property
    def last_uses(self) -> int:
        """Per-step layout: training passes over the last batch (mu, or fewer when the run
        stopped inside its cycle)."""
        return self.led.last_step - self.led.last_gen_step + 1

    def update_tokens(self):
        """What count.update must be: ("eq", value) or ("range", low, high)."""
        mu, L = self.mu, self.Lk
        if L is None:   # discards, no ledger: each kept row holds 2 tokens at least, each discarded row too
            return "range", 2 * mu * (self.n - self.D), mu * (self.L - 2 * self.D)
        if self.layout == "per-step" and not self.regular:
            return "range", L, mu * L       # a resumed run: one batch served fewer steps
        if self.layout == "per-step":
            t = self.led.last_gen_tokens
            last = self.seq_tokens(t["rollout_prompt"], t["rollout_completion"])
            return "eq", mu * L - (mu - self.last_uses) * last
        if self.layout == "per-generation" and self.led.records == 1 and mu > 1:
            return "range", L, mu * L       # one record: its batch's mu passes, or TRL's first step of mu
        if self.layout == "per-generation" or self.method == "imported" or mu == 1:
            return "eq", mu * L
        if self.scheduled:      # whole cycles of spg x mu micro-steps: every batch trained mu times
            return ("eq", mu * L) if self.complete else ("range", L, mu * L)
        if self.G == self.steps or self.G * mu == self.steps:
            return "eq", mu * L
        return "range", L, mu * L

    @property
    def complete(self) -> bool:
        """Every generation batch was trained on mu times: one record per generation (each with
        its mu passes), or TRL's one record per optimizer step over whole mu-step cycles. A
        run stopped inside a cycle trained its last batch fewer times."""
        if self.method == "imported" or self.mu == 1:
            return True
        if self.layout == "per-generation":
            return self.led.records > 1
        if self.layout == "per-step":
            return self.regular and self.last_uses == self.mu
        if self.scheduled:
            # TRL's steps_per_generation: the run ends on a whole cycle of spg x mu micro-steps
            # and made one generation per cycle (WORK-001 ties G to the steps)
            return self.micro % self.cycle == 0 and self.G * self.cycle == self.micro
        return self.G == self.steps or self.G * self.mu == self.steps

    def slack(self, coef: int | float = 2) -> int:
        """Absolute tolerance of an equation: 0 for integer lengths (measured). Imported work
        prices per-step means and rounds each statistic once per generation batch: half a unit
        per statistic per batch, times the equation's coefficients (`coef`, their absolute
        sum)."""
        if self.method != "imported":
            return 0
        return int(-(-Fraction(coef * max(self.G, 1)) // 2)) + 1


def _tri(x) -> Fraction:
    x = Fraction(x)
    return x * (x + 1) / 2


def pair_bounds(rows: int, tokens: int) -> tuple[Fraction, int]:
    """Causal (query, key) pairs of `rows` sequences of at least one token holding `tokens` in
    all: at least rows x tri(tokens / rows) (all equally long: tri is convex), at most
    tri(tokens - rows + 1) + rows - 1 (one long sequence, the others of one token)."""
    if rows <= 0:
        return Fraction(0), 0
    return rows * _tri(Fraction(tokens, rows)), int(_tri(max(tokens - rows + 1, 0))) + rows - 1


def _fmt(x) -> str:
    return f"{int(x):,}" if Fraction(x).denominator == 1 else f"{float(x):,.1f}"


def _eq(path: str, got: int, want, what: str, slack: int, hint: str = HINT):
    if abs(Fraction(got) - Fraction(want)) > slack:
        tol = "exactly" if not slack else f"within {slack:,}"
        return Issue(path, f"{what}: {got:,} but {_fmt(want)} is implied ({tol})", hint)
    return None


def _ge(path: str, got: int, low, what: str, slack: int = 0, hint: str = HINT):
    if Fraction(got) < Fraction(low) - slack:
        return Issue(path, f"{what}: {got:,} is below {_fmt(low)}, the least that is possible", hint)
    return None


def _le(path: str, got: int, high, what: str, slack: int = 0, hint: str = HINT):
    if Fraction(got) > Fraction(high) + slack:
        return Issue(path, f"{what}: {got:,} is above {_fmt(high)}, the most that is possible", hint)
    return None


def _wp(key: str) -> str:
    return f'$.totals.work["{key}"]'


def _led(ctx):
    """The report's ledger summary when it is at hand and readable (None otherwise)."""
    if ctx.base_dir is None or not ctx.section_ok("ledger") or ctx.ledger_escapes:
        return None
    s = ctx.ledger
    return s if s is not None and s.error is None else None


def _system(ctx, any_method: bool = False) -> System | None:
    sy = ctx.__dict__.get("_work_system")
    if sy is None:
        sy = ctx.__dict__["_work_system"] = System(ctx.doc, _led(ctx))
    return sy if sy.ok or (any_method and sy.prof is not None) else None


def _generations_allowed(sy: System) -> set[int]:
    """Generation batches the declared steps imply, under the layouts a ledger may have."""
    d = sy.declared if sy.method == "imported" else sy.steps
    allowed = {d, -(-d // sy.mu)}
    g = sy.doc["grpo"]
    spg, gas = g.get("steps_per_generation"), g.get("gradient_accumulation_steps")
    if isinstance(spg, int) and spg != (gas if isinstance(gas, int) else spg):
        # TRL: one generation per spg x mu / gas optimizer steps (h32 schedules)
        gas = gas if isinstance(gas, int) else 1
        per = Fraction(spg * sy.mu, gas)
        allowed.add(int(-(-Fraction(d) // per)))
        allowed.add(int(Fraction(d) / per) if per else d)
    return allowed


@rule("WORK-001", title="completions disagree with K x prompts per step x steps", requires=_REQ)
def sequences(ctx) -> Iterable[Issue]:
    """Every generation batch holds K x prompts_per_step completions, so `count.completions` =
    K x prompts_per_step x G, with G the generation batches the run made. With the ledger at
    hand, G is the number of records that generated, and their layout must be one an engine
    writes: every record generating (each with its batch's mu updates), or TRL's one record per
    optimizer step, generating on the first and then every mu steps (the last cycle may be
    cut short; a resumed run regenerates early once, so a gap below mu is allowed beside gaps
    of mu, never one above). Without it, G must be what the declared steps imply: one per step, or one per
    mu steps (with `grpo.steps_per_generation`, one per steps_per_generation x mu /
    gradient_accumulation_steps). Imported logs count the declared `provenance.steps`. Exact.
    A measured ledger of a TRL steps_per_generation schedule keeps TRL's rhythm record by record:
    optimizer step j generates a batch on each of its gradient_accumulation_steps micro-steps
    that is a multiple of steps_per_generation x mu, and on no other.
    A report whose prompts per step, K or mu was edited (16 -> 64, 2 -> 8, 1 -> 4) no longer
    divides its own completions or its ledger's rhythm."""
    sy = _system(ctx, any_method=True)
    if sy is None or sy.method == "estimated" or sy.staged:
        return
    w = sy.w
    if sy.n is None:
        if w.get("rollout.tokens", 0) or w.get("update.train.tokens", 0):
            yield Issue(_wp("count.completions"), "totals.work has no count.completions: its work cannot be tied "
                        "to the completions the run generated", "build the work with suite.accounting "
                        "(work_from_lengths), which counts them")
        return
    if sy.steps == 0 or sy.s is None:
        return  # PROV-001; SCHEMA
    hint = "declare the group size, prompts per step and num_iterations the run used"
    if sy.n % sy.N:
        yield Issue(_wp("count.completions"), f"{sy.n:,} completions is not a whole number of generation batches "
                    f"of K x prompts_per_step = {sy.K} x {sy.B} = {sy.N}", hint)
        return
    led, mu = sy.led, sy.mu
    if sy.layout is not None:
        if sy.G != led.generations:
            yield Issue(_wp("count.completions"), f"{sy.n:,} completions are {sy.G:,} generation batches of {sy.N}, "
                        f"but {led.generations:,} ledger records generated", hint)
        if sy.layout == "per-step" and led.first_gen_step is None:
            yield Issue(_wp("count.completions"), f"none of the ledger's {led.records:,} records generated: a run "
                        "trains on completions it generated", hint)
        elif sy.layout == "per-step":
            gaps = sorted(led.gen_gaps)
            # A batch serves at most mu steps; a resumed run regenerates early once (a gap < mu),
            # so mu itself must still be among the gaps.
            if led.first_gen_step != led.first_step or sy.last_uses > mu or any(g > mu for g in gaps) \
                    or (gaps and mu not in gaps):
                yield Issue("$.grpo.num_iterations", f"the ledger's records generate at steps {led.first_gen_step:,}, "
                            f"every {', '.join(map(str, gaps)) or '-'} steps, the last {sy.last_uses} steps before its "
                            f"end; with mu = {mu}, TRL generates on the first step and then every {mu} steps", hint)
        return
    if sy.scheduled and sy.method in (None, "measured") and sy.sums is not None and sy.mu >= 1:
        bad = _schedule_rhythm(sy, sy.sums.path)
        if bad is not None:
            step, got, want = bad
            yield Issue(_wp("count.completions"), f"ledger step {step:,} generated {got:,} completions, but TRL's "
                        f"schedule (steps_per_generation {sy.spg}, gradient_accumulation_steps {sy.gas}, mu = {mu}: one "
                        f"generation batch of {sy.N} every {sy.cycle} micro-steps) generates {want:,} there", hint)
            return
    allowed = _generations_allowed(sy)
    if sy.G not in allowed:
        yield Issue(_wp("count.completions"), f"{sy.n:,} completions are {sy.G:,} generation batches of {sy.N}, "
                    f"but {sy.steps:,} steps with mu = {mu} imply {' or '.join(f'{a:,}' for a in sorted(allowed))}",
                    hint)


def _schedule_rhythm(sy: System, path) -> tuple[int, int, int] | None:
    """The first ledger record whose generated completions break TRL's steps_per_generation
    rhythm, (step, completions, what the schedule generates there), or None: optimizer step j
    (1-based, one record a step) runs micro-steps (j - 1) x gas .. j x gas - 1 and generates a
    batch of N on each micro-step that is a multiple of spg x mu."""
    from ..record.ledger import iter_ledger

    cycle, gas = sy.cycle, sy.gas
    for j, r in enumerate(iter_ledger(path, strict=False), 1):
        lo = (j - 1) * gas
        gens = (lo + gas - 1) // cycle - (lo - 1) // cycle if lo else (gas - 1) // cycle + 1
        got = r["work"].get("count.completions", 0)
        if got != gens * sy.N:
            return r["step"], got, gens * sy.N
    return None


@rule("WORK-002", title="completion tokens outside [1, max_completion_tokens] per completion", requires=_REQ)
def completion_cap(ctx) -> Iterable[Issue]:
    """Each completion has at least one token a policy turn and at most
    `grpo.max_completion_tokens` of policy and environment tokens, and each prompt at least one:
    n x T <= C, C + E <= n x cap (E the environment tokens of multi-turn rollouts, T their mean
    policy turns, 1 for single-turn) and P >= one token per prefill. A cap lowered below the
    lengths the ledger records (2048 -> 100 with a mean of 771) is refused; so is a padded
    rollout whose logits (n x the longest completion) exceed n x cap. Exact (imported: within
    the rounding of per-step means)."""
    sy = _system(ctx)
    if sy is None:
        return
    env = f" and {sy.E:,} environment" if sy.E else ""
    for i in (_ge(_wp("count.rollout_completion"), sy.C, sy.n * sy.T,
                  "completion tokens (one per completion at least)" if sy.T == 1 else
                  f"completion tokens (one per policy turn at least, {float(sy.T):g} turns a completion)",
                  sy.slack(1)),
              _le(_wp("count.rollout_completion"), sy.C + sy.E, sy.n * sy.cap,
                  f"completion{env} tokens of {sy.n:,} completions capped at max_completion_tokens = {sy.cap:,}",
                  sy.slack(2), hint="declare the max_completion_tokens the run used"),
              _ge(_wp("count.rollout_prompt"), sy.P, sy.groups, "prompt tokens (one per prefill at least)"),
              _le(_wp("rollout.lm_head"), sy.w.get("rollout.lm_head", 0), sy.n * sy.cap,
                  f"rollout logits of {sy.n:,} completions capped at {sy.cap:,} tokens",
                  hint="declare the max_completion_tokens the run used")):
        if i:
            yield i


@rule("WORK-003", title="rollout work disagrees with the prompt and completion tokens", requires=_REQ)
def rollout_work(ctx) -> Iterable[Issue]:
    """Generation runs prefill over the prompt tokens (once per prompt where the profile shares
    it among the K completions) and one decode step per generated token but the first:
    unpadded, `rollout.tokens` = P + C + E - n and `rollout.lm_head` = C exactly (imported too) -- every
    completion is generated, trained on or discarded, and a multi-turn rollout's E environment
    tokens pass the model once, as prefill, with no logit; padded (HF generate: every row runs
    to the longest prompt and completion) at least that, in whole rows (a multiple of K x
    prompts_per_step), and in each generating record of the ledger the pairs are exactly
    n x tri(positions / n). Attention pairs lie between all-equal and one-long sequences over
    those positions (pair_bounds), `attn_full` >= `attn_causal`. Latent and linear models
    decode C - n x T tokens and prefill P + E + n x (T - 1) (each later turn's first token
    follows prefilled environment tokens; T the mean policy turns, 1 for single-turn, over the
    records with environment tokens). Imported: within half a unit per statistic and
    generation batch (the rounding of per-step means)."""
    sy = _system(ctx)
    if sy is None:
        return
    w, n, P, C, E = sy.w, sy.n, sy.P, sy.C, sy.E
    Ct = C + E          # the completion side of every sequence: the policy's tokens and the environment's
    tok, lm = w.get("rollout.tokens", 0), w.get("rollout.lm_head", 0)
    pos = P + Ct - n
    sl = sy.slack(3 + (1 if E else 0))      # positions, P, C (and E), each rounded once per batch
    out = []
    padded = sy.rollout_padded
    ne = sy.env_rows
    decode, prefill = C - ne * sy.T - (n - ne), P + E + ne * (sy.T - 1)
    if not padded:
        env = " + environment E" if E else ""
        out += [_eq(_wp("rollout.tokens"), tok, pos, f"rollout positions (prefill P{env} + decode C - n)", sl),
                # exact for imports too: the importers give each record's logits and completion
                # count from the same integer lengths (a 2% edit of a tiny import's rollout hid in `sl`)
                _eq(_wp("rollout.lm_head"), lm, C, "rollout logits (one per generated token)", 0)]
        if "rollout.decode_tokens" in w:
            out.append(_eq(_wp("rollout.decode_tokens"), w["rollout.decode_tokens"], decode,   # reads C
                           "decode steps (C - n)" if not E else "decode steps (C - n x T)", sy.slack(2)))
        if "rollout.prefill_tokens" in w:
            out.append(_eq(_wp("rollout.prefill_tokens"), w["rollout.prefill_tokens"], prefill,
                           "prefill tokens (P)" if not E else "prefill tokens (P + E + n x (T - 1))", sl))
        if "rollout.rows" in w:     # linear attention: one scan per prefill, one more per later turn
            out.append(_eq(_wp("rollout.rows"), w["rollout.rows"], sy.groups + ne * (sy.T - 1),
                           "rollout sequence scans (one a prefill" + (", one a later turn)" if E else ")"), sy.slack(1)))
    else:
        out += [_ge(_wp("rollout.tokens"), tok, pos, "rollout positions (prefill P + decode C - n, padded)", sl),
                _ge(_wp("rollout.lm_head"), lm, C, "rollout logits (n x the longest completion)", sl)]
        if sy.whole:
            for key, v in (("rollout.tokens", tok), ("rollout.lm_head", lm)):
                if sy.N and v % sy.N:
                    out.append(Issue(_wp(key), f"padded rollout {key.split('.')[1]} {v:,} is not a whole number of "
                                     f"rows of {sy.N} (K x prompts_per_step)", HINT))
        if "rollout.decode_tokens" in w:
            out.append(_ge(_wp("rollout.decode_tokens"), w["rollout.decode_tokens"], decode, "decode steps", sl))
        led = sy.led
        if led is not None and led.rollout_rows_equal != led.generations:
            out.append(Issue(_wp("rollout.attn_causal"), f"{led.generations - led.rollout_rows_equal:,} of the ledger's "
                             f"{led.generations:,} generating records have rollout pairs that are not n x tri(positions "
                             f"/ n): a padded rollout runs every row to the same length", HINT))
    causal, full = w.get("rollout.attn_causal", 0), w.get("rollout.attn_full", 0)
    psl = sy.slack(3 + Fraction(sy.seq_tokens(P, Ct), max(n, 1)))   # a bound moves by ~the mean length per token rounded
    if not sy.shared:   # every completion's own sequence: sum of tri(prompt + completion - 1)
        lo, hi = pair_bounds(n, tok)
    else:               # prefill pairs per prompt + decode pairs (c - 1) p + tri(c - 1) per completion
        g = sy.groups
        lo = pair_bounds(g, P)[0] + (n * _tri(Fraction(Ct - n, n)) + (Ct - n) if n else 0)
        hi = pair_bounds(n, sy.K * P + Ct - n)[1]
    out += [_ge(_wp("rollout.attn_causal"), causal, lo, "rollout causal attention pairs", psl),
            _le(_wp("rollout.attn_causal"), causal, hi, "rollout causal attention pairs", psl),
            _ge(_wp("rollout.attn_full"), full, causal, "rollout full-square pairs (at least the causal ones)", psl)]
    for key in w:
        if key.startswith("rollout.attn_") and ".w" in key:
            base = key.rsplit(".", 1)[0]
            out.append(_le(_wp(key), w[key], w.get(base, 0), f"{key} (a window sees at most every key)", psl))
    yield from (i for i in out if i)


def _passes(sy: System) -> tuple[bool, bool]:
    return sy.prof.old_policy_pass(sy.s), sy.prof.reference_pass(sy.s)


@rule("WORK-004", title="update work disagrees with the trained tokens x passes", requires=_REQ)
def update_work(ctx) -> Iterable[Issue]:
    """Every training pass runs over each sequence the update kept, prompt and completion:
    `count.update` U = mu x L with L = P + C + E (K x P + C + E where the prompt prefill is
    shared; E a multi-turn rollout's environment tokens, in the context once a pass),
    exactly when every batch was trained mu times (one record per generation, or whole mu-step
    cycles); a run stopped inside a cycle lies between L and mu x L. Discarded completions
    (count.discarded) are generated but never trained: L then counts each ledger record's
    tokens times its kept share (count.completions - count.discarded) / count.completions, the
    rows are the kept ones and the completion logits their policy tokens (without the ledger at
    hand: U between 2 mu tokens a kept row and mu x (L - 2 a discarded row)). Unpadded training:
    `update.train.tokens` = U; padded: at least U, in whole rows (each ledger record's
    positions^2 / full pairs a whole multiple of its batch). Logits: mu x C (completion
    positions) or every position but the last of each row. Pairs: `attn_full` = 2 x
    `attn_causal` - tokens (each row is a full square), causal pairs within pair_bounds.
    Dividing a ledger's update work by 100 (726 update tokens a step against 31,956) is
    refused here. Imported: within half a unit per statistic and
    generation batch (the rounding of per-step means)."""
    sy = _system(ctx)
    if sy is None or sy.n == 0:
        return
    w, mu, L, U = sy.w, sy.mu, sy.Lk, sy.U
    # L reads P with coefficient k (K where the prefill is shared, else 1), C once and E once
    sl = sy.slack(mu * (sy.k + 1 + (1 if sy.E else 0)) + 2)
    out = []
    kind, *want = sy.update_tokens()
    kept = " kept" if sy.D else ""
    if kind == "eq":
        cut = "" if want[0] == mu * L else f", the last batch trained {sy.last_uses} times"
        out.append(_eq(_wp("count.update"), U, want[0],
                       f"update tokens (mu = {mu} passes x {_fmt(L)}{kept} sequence tokens{cut})", sl))
    else:
        out += [_ge(_wp("count.update"), U, want[0], f"update tokens (each{kept} batch trained once at least)", sl),
                _le(_wp("count.update"), U, want[1], f"update tokens (each{kept} batch trained at most mu = {mu} times)", sl)]
    if L is None:
        yield from (i for i in out if i)
        return      # discards without the ledger: which rows were kept is unknown
    nk, _, Ck, _ = sy.kept
    tok, lm = w.get("update.train.tokens", 0), w.get("update.train.lm_head", 0)
    uses = Fraction(mu) if sy.complete or not L else Fraction(U) / L   # passes per batch (on average when cut short)
    rows = uses * nk
    sl = sy.slack(mu + 2)       # the training statistics round the same sums as the update count
    if not sy.padded:
        # the same sum as count.update, rounded the same way: half a unit each per batch
        out.append(_eq(_wp("update.train.tokens"), tok, U, "training positions (the update tokens, unpadded)",
                       sy.slack(2)))
        want_lm = uses * Ck if sy.prof.lm_head_train == "completion" else U - rows
    else:
        out.append(_ge(_wp("update.train.tokens"), tok, U, "training positions (the update tokens, padded)", sl))
        # TRL's steps_per_generation trains slices of N / spg rows (each at its batch's padded widths)
        unit = sy.N // sy.spg if sy.scheduled and sy.N % sy.spg == 0 else sy.N
        if sy.whole and tok % unit:
            out.append(Issue(_wp("update.train.tokens"), f"padded training positions {tok:,} are not a whole number "
                             f"of rows of {unit}", HINT))
        want_lm = uses * Ck if sy.prof.lm_head_train == "completion" else tok - rows
        led = sy.led
        if led is not None and led.train_rows_equal != led.train_records:
            out.append(Issue(_wp("update.train.attn_full"), f"{led.train_records - led.train_rows_equal:,} of the ledger's "
                             f"{led.train_records:,} training records are not whole padded rows (positions^2 / full "
                             f"pairs a multiple of the batch's completions)", HINT))
    if sy.complete:
        out.append(_eq(_wp("update.train.lm_head"), lm, want_lm, "training logits", sl))
    elif sy.prof.lm_head_train == "completion":
        out += [_ge(_wp("update.train.lm_head"), lm, Ck, "training logits", sl),
                _le(_wp("update.train.lm_head"), lm, mu * Ck, "training logits", sl)]
    else:
        out += [_ge(_wp("update.train.lm_head"), lm, (tok if sy.prof.padded else U) - mu * nk, "training logits", sl),
                _le(_wp("update.train.lm_head"), lm, (tok if sy.prof.padded else U) - nk, "training logits", sl)]
    if "update.train.rows" in w and sy.complete:    # linear attention: one scan a trained row and pass
        out.append(_eq(_wp("update.train.rows"), w["update.train.rows"], rows, "training sequence scans (a row a pass)", sl))
    out += _pair_checks(sy, "update.train", int(rows) if rows.denominator == 1 else None)
    yield from (i for i in out if i)


def _pair_checks(sy: System, name: str, rows: int | None) -> list:
    """A full-sequence pass: full = 2 causal - tokens (exact per row), causal pairs in bounds."""
    w = sy.w
    tok, causal, full = w.get(f"{name}.tokens", 0), w.get(f"{name}.attn_causal", 0), w.get(f"{name}.attn_full", 0)
    psl = sy.slack(4)
    out = [_eq(_wp(f"{name}.attn_full"), full, 2 * causal - tok, f"{name} full-square pairs (2 x causal - tokens)", psl)]
    if rows:
        lo, hi = pair_bounds(rows, tok)
        psl = sy.slack(3 + Fraction(tok, rows))     # a bound moves by ~the row length per token rounded
        out += [_ge(_wp(f"{name}.attn_causal"), causal, lo, f"{name} causal attention pairs", psl),
                _le(_wp(f"{name}.attn_causal"), causal, hi, f"{name} causal attention pairs", psl)]
    return out


@rule("WORK-005", title="old-policy or reference pass disagrees with mu and beta", requires=_REQ)
def logprob_passes(ctx) -> Iterable[Issue]:
    """The old-policy log-prob forward runs once per generation exactly when the engine profile
    says so for the declared settings (mu > 1 in most; verl always), the reference forward
    exactly when beta != 0: `update.old.*` and `update.ref.*` are present iff their setting
    says so. When they run, each is one pass over the batch the training passes ran over:
    every statistic equals the other's, and the training pass's is mu times it (between 1 and
    mu times for a run stopped inside a cycle). A beta raised to 0.04 or a mu raised to 4
    without their passes is refused. Imported: within half a unit per statistic and
    generation batch (the rounding of per-step means)."""
    sy = _system(ctx)
    if sy is None or sy.n == 0:
        return
    w, mu = sy.w, sy.mu
    old, ref = _passes(sy)
    g = ctx.doc["grpo"]
    for name, runs, why in (("update.old", old, f"num_iterations mu = {mu} under profile {sy.prof.name!r}"),
                            ("update.ref", ref, f"beta = {g['beta']}")):
        has = w.get(f"{name}.tokens", 0) > 0
        if has != runs:
            yield Issue(_wp(f"{name}.tokens"),
                        f"the {'old-policy' if name == 'update.old' else 'reference'} forward "
                        f"{'is missing' if runs else 'is charged'}, but {why} says it {'runs' if runs else 'does not run'}",
                        "declare the num_iterations and beta the run used, and rebuild its work")
    passes = [p for p, r in (("update.old", old), ("update.ref", ref)) if r and w.get(f"{p}.tokens", 0) > 0]
    sl = sy.slack(mu + 1)
    stats = sorted({k.split(".", 2)[2] for k in w if k.startswith(passes[0] + ".")}) if passes else []
    for s in stats:
        if s == "calls":
            continue  # forward calls per pass follow micro-batches, not rows
        one = w.get(f"{passes[0]}.{s}", 0)
        psl = sl
        for other in passes[1:]:
            if s in ("lm_head", "tokens", "attn_causal", "attn_full") or f"{other}.{s}" in w:
                i = _eq(_wp(f"{other}.{s}"), w.get(f"{other}.{s}", 0), one, f"{other}.{s} (one pass, as {passes[0]})", psl)
                if i:
                    yield i
        train = w.get(f"update.train.{s}", 0)
        if sy.complete:
            i = _eq(_wp(f"update.train.{s}"), train, mu * one, f"update.train.{s} (mu = {mu} x one pass)", psl)
        else:
            i = _ge(_wp(f"update.train.{s}"), train, one, f"update.train.{s}", psl) or \
                _le(_wp(f"update.train.{s}"), train, mu * one, f"update.train.{s}", psl)
        if i:
            yield i
    kept = sy.kept
    for p in passes:
        for i in _pair_checks(sy, p, kept[0] if kept else None):
            if i:
                yield i


@rule("WORK-006", title="reward-model work disagrees with the reward model", requires=_REQ + ("reward",))
def reward_work(ctx) -> Iterable[Issue]:
    """A reward model scores sequences when the report names one: `reward.tokens` > 0 iff
    `reward.model` is set (and completions were generated). Its forward runs over at least the
    tokens it scored (`count.reward`: exactly those where the profile does not pad, at least
    those where TRL pads a model reward's batch), its causal pairs lie within pair_bounds, its score head projects every
    position (`reward.heads` = `reward.tokens`), each sequence is a full square
    (`attn_full` = 2 x `attn_causal` - tokens), and it scores at most twice each sequence's prompt
    and completion (`reward_tokens_bound`: its own tokenizer may spell the text longer) plus
    TEMPLATE_TOKENS a sequence (a PRM's chat template and step separators: the suite's own PRM
    cells score 2.2x their policy tokens).
    Imported: within half a unit per statistic and
    generation batch (the rounding of per-step means)."""
    sy = _system(ctx)
    if sy is None or sy.n == 0:
        return
    w = sy.w
    model = ctx.doc["reward"].get("model")
    rt = w.get("reward.tokens", 0)
    if bool(model) != (rt > 0):
        yield Issue(_wp("reward.tokens"), f"reward-model tokens {rt:,} but the report {'names' if model else 'has no'} "
                    "reward model", "declare the reward model the run used, and rebuild its work")
        return
    if not model:
        return
    sl = sy.slack(2 * (sy.k + 1 + (1 if sy.E else 0)) + 1)
    one = sy.slack(2)       # positions, heads and tokens scored round the same sum: half a unit each per batch
    seq = sy.L if sy.L else 0
    pos = (_eq(_wp("reward.tokens"), rt, sy.R, "reward-model positions (the tokens scored, unpadded)", one)
           if not sy.padded else
           _ge(_wp("reward.tokens"), rt, sy.R, "reward-model positions (at least the tokens scored)", sl))
    causal = w.get("reward.attn_causal", 0)
    for i in (pos, _eq(_wp("reward.heads"), w.get("reward.heads", 0), rt, "reward score-head positions", one),
              _le(_wp("count.reward"), sy.R, 2 * seq + TEMPLATE_TOKENS * sy.n,
                  f"tokens scored (at most twice each prompt + completion, and {TEMPLATE_TOKENS} of a template each)", sl),
              _ge(_wp("reward.attn_causal"), causal, pair_bounds(sy.n, rt)[0], "reward-model causal pairs",
                  sy.slack(3 + Fraction(rt, max(sy.n, 1)))),
              _le(_wp("reward.attn_causal"), causal, _tri(rt), "reward-model causal pairs", sy.slack(4)),
              *_pair_checks(sy, "reward", None)):
        if i:
            yield i


@rule("WORK-007", title="an estimate's totals are not its setup priced", requires=_REQ + ("policy", "adapter", "reward"))
def estimate_work(ctx) -> Iterable[Issue]:
    """An estimate is every declared step priced as a step of its mean lengths:
    `totals.work` = `provenance.steps` x work_from_means(means, settings, profile) key by key,
    exactly (what `race report --estimate` writes), and the mean completion fits
    `max_completion_tokens`. What real runs do is priced from the means too: `kept_share` (the
    completions the update trained, of each generation batch), `environment_tokens` and `turns`
    (multi-turn rollouts); an estimate whose work discards completions or feeds environment
    tokens must declare them there. Editing steps (100 -> 200), the means, prompts per step, K,
    the cap, beta, mu or the kept share without pricing them again is refused; priced again, the
    edited setup is the one the report claims, and its FLOPs follow (PHYS-001). A staged
    estimate is priced stage by stage (ST-004)."""
    if _method(ctx.doc) != "estimated" or "stages" in ctx.doc:
        return
    doc = ctx.doc
    prov = doc.get("provenance") or {}
    means, steps = prov.get("means"), json_count(prov.get("steps"))     # 200.0 is a count too
    if not isinstance(means, dict) or steps is None:
        return  # SCHEMA: an estimate needs both
    one = priced_means(doc, means, settings_of(doc))
    if isinstance(one, Issue):
        yield one
        return
    if one is None:
        return  # PHYS-006 / SCHEMA report unreadable specs
    want = {k: v * steps for k, v in one.items()}
    work = doc["totals"]["work"]
    bad = [k for k in sorted(set(want) | set(work)) if want.get(k, 0) != work.get(k, 0)]
    if bad:
        k = bad[0]
        more = f" (and {len(bad) - 1} more statistics)" if len(bad) > 1 else ""
        yield Issue(_wp(k), f"work {k} is {work.get(k, 0):,} but {steps:,} steps x work_from_means(prompt "
                    f"{means['prompt_tokens']:g}, completion {means['completion_tokens']:g}) under the declared settings "
                    f"give {want.get(k, 0):,}{more}",
                    "price the estimate again from its setup: race report --estimate SPEC")


def priced_means(doc, means: dict, settings, where: str = "$.provenance.means"):
    """One generation batch of `means` (prompt, completion, reward, environment tokens, turns,
    kept share) under `settings` and the report's profile and specs: work_from_means, as
    `race report --estimate` prices it. An Issue when the means cannot be priced; None when the
    specs cannot be read (PHYS-006 and SCHEMA say why)."""
    from ..accounting import reward_tokens_of, work_from_means
    from ..errors import RaceError

    try:    # recipe or traced specs (traced again, cached per config); PHYS-006 / PHYS-010 say why not
        policy, rspec = specs_of(doc)
    except (RaceError, KeyError, TypeError, ValueError):
        return None
    try:
        env = means.get("environment_tokens", 0)
        rtok = means.get("reward_tokens") if rspec is not None else None
        if rspec is not None and rtok is None:
            rtok = reward_tokens_of(means["prompt_tokens"], means["completion_tokens"] + env)   # as priced
        ks = means.get("kept_share")
        n = settings.group_size * settings.prompts_per_step
        return work_from_means(means["prompt_tokens"], means["completion_tokens"], settings,
                               doc["accounting"]["engine_profile"], rtok, policy=policy, reward_model=rspec,
                               kept=None if ks is None else n * ks, environment_tokens=env,
                               turns=means.get("turns", 1))
    except RaceError as e:
        return Issue(where, f"the estimate's setup cannot be priced: {e.message}",
                     e.hint or "mean lengths must fit the declared settings (max_completion_tokens)")
    except (KeyError, TypeError, ValueError):
        return None


def profile_engine(profile: str) -> str:
    """The engine a profile models: the engine whose file owns it (tasks/engines/*.yaml `profiles`);
    for a plugin's Python profile, the shortest registered profile name it is or extends with
    "-..." (acme-fast -> acme); itself otherwise."""
    from ..accounting import ENGINES
    from ..accounting.enginefile import profile_owner

    owner = profile_owner(profile)
    if owner is not None:
        return owner
    owners = [p for p in ENGINES if profile_owner(p) is None and (profile == p or profile.startswith(p + "-"))]
    return min(owners, key=len) if owners else profile


def engine_identity(name: object) -> str:
    """The engine a report's run.engine.name means: its engine file's canonical name when the
    name or an alias matches after normalisation ('TRL', 'huggingface-trl', 'trl ', a Cyrillic
    lookalike: trl), else the name itself (an unknown engine stays unknown)."""
    from ..accounting.enginefile import canonical_engine

    return canonical_engine(name) or str(name)


def own_profiles(engine: str) -> set[str]:
    """The registered engine profiles that model `engine` (any of its names): those its engine
    file owns, and plugins' Python profiles named after it (acme, acme-fast for acme); empty for
    an engine without profiles of its own."""
    from ..accounting import ENGINES
    from ..accounting.enginefile import owned_profiles, profile_owner

    engine = engine_identity(engine)
    python = {p for p in ENGINES if profile_owner(p) is None and (p == engine or p.startswith(engine + "-"))}
    return owned_profiles(engine) | python


@rule("WORK-008", title="engine profile is not one of the engine's own", requires=("run", "accounting"))
def engine_profile(ctx) -> Iterable[Issue]:
    """A measured or imported ledger was priced under the profile of the engine that ran it (the
    suite's callback and importers pick it): an engine with profiles of its own (its engine file's
    `profiles`: trl, trl-cpu, trl-vllm, trl-vllm-no-is for trl) must declare one of them, and a
    profile an engine owns is declared by that engine only, in every report. The engine is
    run.engine.name read through the engine files' names and aliases after normalisation, so
    'TRL' or 'huggingface-trl' is trl. A profile any engine may declare (generic, useful work only)
    suits engines without a profile and any estimate; declared on a TRL ledger it drops the
    padding, head recompute and passes TRL really runs."""
    estimate = _method(ctx.doc) == "estimated"
    engine = engine_identity(ctx.doc["run"]["engine"]["name"])
    prof = ctx.doc["accounting"]["engine_profile"]
    from ..accounting import ENGINES

    if prof not in ENGINES:
        return  # PHYS-001 names the unknown profile
    shared = ENGINES[prof].any_engine
    own = own_profiles(engine)
    family = profile_engine(prof)
    foreign = not shared and family != engine
    if (own and prof not in own and not (estimate and shared)) or foreign:
        yield Issue("$.accounting.engine_profile", f"engine profile {prof!r} (engine {family!r}) for a ledger of engine "
                    f"{ctx.doc['run']['engine']['name']!r}"
                    + (f" (engine {engine!r})" if engine != ctx.doc["run"]["engine"]["name"] else "")
                    + f", whose own profiles are {', '.join(sorted(own)) or 'none (generic suits it)'}",
                    "price the run under the profile of the engine that ran it (race report picks it)")


@rule("WORK-009", title="discarded or environment tokens without the run that makes them", requires=_REQ)
def discards_and_environment(ctx) -> Iterable[Issue]:
    """Discarded completions (`count.discarded`: generated, never trained) and environment tokens
    (`count.rollout_env`: a multi-turn rollout's tool outputs, prefilled) are priced from means:
    an importer's per-step kept count and the run description's environment tokens, or an
    estimate's setup. So: at most every completion is discarded; a report whose work has either
    states them in its `rollouts` section (RO-001 ties the two); `rollouts.multi_turn.turns`
    above 1 needs environment tokens between the turns; and a measured ledger has neither -- it
    prices the rows it trained from their real lengths (work_from_lengths), which say nothing of
    rows it did not train or tokens the policy did not generate. Exact."""
    sy = _system(ctx, any_method=True)
    if sy is None or sy.n is None:
        return
    if sy.D > sy.n:
        yield Issue(_wp("count.discarded"), f"{sy.D:,} completions discarded of the {sy.n:,} generated",
                    "a run discards at most what it generated")
    if (sy.D or sy.E) and "rollouts" not in ctx.doc:
        what = " and ".join(x for x, v in (("discarded completions", sy.D), ("environment tokens", sy.E)) if v)
        yield Issue("$.rollouts", f"the work has {what} but the report has no rollouts section stating them",
                    "rebuild the report (race import / race report --estimate write the rollouts section, report 1.2)")
    if sy.T > 1 and not sy.E:
        yield Issue("$.rollouts.multi_turn.turns", f"{float(sy.T):g} policy turns a rollout, but no environment tokens "
                    "between them", "a multi-turn rollout feeds tool/environment tokens back between turns")
    if sy.method in (None, "measured") and (sy.D or sy.E):
        yield Issue(_wp("count.discarded" if sy.D else "count.rollout_env"),
                    "a measured ledger prices the rows it trained from their real lengths: it has no discarded "
                    "completions or environment tokens", "import the run's log (race import), which prices them "
                    "from its per-step counts, or declare provenance imported or estimated")


@rule("WORK-010", title="linear-attention chunk counts outside what the scanned tokens allow", requires=_REQ)
def chunk_counts(ctx) -> Iterable[Issue]:
    """A linear-attention (or chunked SSM) pass scans each sequence in chunks of the model's
    chunk size c (64 for the recipes; a traced Mamba-2's config chunk_size): `X.chunks` =
    sum of ceil(length / c) over its `X.rows` scans, so max(rows, tokens / c) <= chunks <
    tokens / c + rows, whatever the lengths (every scan has a token, a chunk holds at most c);
    `X.chunks2` (sums of squares) lies between max(chunks, chunks^2 / rows) and one long scan's
    (chunks - rows + 1)^2 + rows - 1. The tokens are the pass's positions (the rollout's:
    its prefill tokens; the rows are tied to the completions by WORK-003/004/005). A chunk count
    halved or doubled is always outside; inside the band, at most rows chunks can move without
    the lengths (docs/validation.md). Imported: within half a unit per statistic and generation
    batch."""
    from ..accounting.work import Needs
    from ..errors import RaceError

    sy = _system(ctx)
    if sy is None or not any(k.endswith((".rows", ".chunks")) and v for k, v in sy.w.items()):
        return
    try:    # the chunk size is the model's; PHYS-006 / PHYS-010 say why a spec cannot be read
        policy, rspec = specs_of(ctx.doc)
    except (RaceError, KeyError, TypeError, ValueError):
        return
    w, sl = sy.w, sy.slack(3)
    for name in ("rollout", "update.train", "update.old", "update.ref", "reward"):
        needs = Needs.of(rspec if name == "reward" else policy)
        rows, chunks = w.get(f"{name}.rows", 0), w.get(f"{name}.chunks", 0)
        tokens = w.get("rollout.prefill_tokens" if name == "rollout" else f"{name}.tokens", 0)
        if not (needs.chunks or needs.chunks2) or not (rows or chunks) \
                or name == "rollout" and "rollout.prefill_tokens" not in w:
            continue
        c = Fraction(tokens, needs.chunk_size)
        what = f"{name} chunks ({rows:,} scans of {tokens:,} tokens in chunks of {needs.chunk_size})"
        for i in (_ge(_wp(f"{name}.chunks"), chunks, max(rows, c), what, sl),
                  _le(_wp(f"{name}.chunks"), chunks, c + rows, what, sl)):
            if i:
                yield i
        if needs.chunks2 and rows:
            sq = w.get(f"{name}.chunks2", 0)
            for i in (_ge(_wp(f"{name}.chunks2"), sq, max(chunks, Fraction(chunks * chunks, rows)),
                          f"{name} squared chunk counts ({chunks:,} chunks over {rows:,} scans)", sl),
                      _le(_wp(f"{name}.chunks2"), sq, (chunks - rows + 1) ** 2 + rows - 1,
                          f"{name} squared chunk counts ({chunks:,} chunks over {rows:,} scans)", sl)):
                if i:
                    yield i


MIN_UNPADDED = 2
"""Zero-padded training records from this many on (more than half of them) are equal-length
rows written from means, not a padded engine's batches (PROV-003's rule for identical records)."""


class _Padding:
    """One pass over a measured ledger under a padded profile: training records with no padding
    at all, generating records whose completions all hit the cap, and (TRL steps_per_generation
    schedules) records whose rows are not whole padded rows."""

    def __init__(self, sy: System, path):
        from ..record.ledger import iter_ledger

        self.train = self.unpadded = self.generating = self.capped = 0
        self.bad_rollout: list[int] = []
        self.bad_train: list[int] = []
        N, slice_rows = sy.N, (sy.N // sy.spg if sy.N % sy.spg == 0 else None)
        one_batch = sy.cycle % sy.gas == 0      # each optimizer step's micro-steps lie in one cycle
        for r in iter_ledger(path, strict=False):
            w = r["work"]
            n = w.get("count.completions", 0)
            if n:
                self.generating += 1
                if w.get("count.rollout_completion", 0) >= n * sy.cap:
                    self.capped += 1
                roll = w.get("rollout.tokens", 0)
                if sy.scheduled and sy.rollout_padded and n == N and 2 * n * w.get("rollout.attn_causal", 0) != roll * (roll + n):
                    self.bad_rollout.append(r["step"])
            tu, u, full = w.get("update.train.tokens", 0), w.get("count.update", 0), w.get("update.train.attn_full", 0)
            if not u:
                continue
            self.train += 1
            if tu == u:
                self.unpadded += 1
            if sy.scheduled and one_batch and slice_rows:
                rows, rem = divmod(tu * tu, full) if full else (0, 1)
                if rem or rows % slice_rows:
                    self.bad_train.append(r["step"])


@rule("WORK-011", title="a padded profile's ledger has rows no padded engine runs", requires=_REQ + ("ledger",))
def padded_rows(ctx) -> Iterable[Issue]:
    """Under a padded profile (trl, trl-cpu; trl-vllm trains padded) every row of a batch runs to
    the batch's longest prompt and completion. Two things a forger can write and a padded engine
    cannot:

    - *padding that vanishes*: training records whose positions equal the unpadded tokens
      (`update.train.tokens` = `count.update`) have rows all of one length -- every prompt and
      every completion of the batch equally long. A real batch is (sampled completions differ),
      except when every completion hits the cap. From MIN_UNPADDED such records on, more than
      half of them, or a one-record ledger of 4 completions or more, the ledger was written from
      means (equal lengths) and priced without the padding the engine ran: refused, like
      identical records (PROV-003), unless every generating record's completions fill the cap.
    - *TRL steps_per_generation schedules* (steps_per_generation != gradient_accumulation_steps):
      the per-record padded-row checks of WORK-003/004 hold there too. A record holding one
      generation batch of N = K x prompts_per_step rows has rollout pairs n x tri(positions / n);
      a record whose micro-steps lie in one generation cycle (spg x mu a multiple of
      gradient_accumulation_steps) trains whole slices of the batch at its padded width:
      positions^2 / full pairs is a whole number of rows, a multiple of the slice (N /
      steps_per_generation).

    Measured ledgers only (an import prices means: it has no padding to see, PROV-004 says how
    TRL imports are priced)."""
    sy = _system(ctx)
    if sy is None or sy.method not in (None, "measured") or not sy.prof.padded:
        return
    led = _led(ctx)
    if led is None or led.n_step_problems or not led.records:
        return
    cache = ctx.__dict__.get("_padding")
    if cache is None:
        cache = ctx.__dict__["_padding"] = _Padding(sy, led.path)
    p = cache
    hint = ("a padded engine runs every row to the batch's longest prompt and completion: rebuild the ledger from the "
            "run (suite.train.trl_callback.RaceLedger), or declare the profile the engine ran")
    if p.generating and p.capped < p.generating and p.unpadded and (
            (p.unpadded >= MIN_UNPADDED and 2 * p.unpadded > p.train) or (p.train == 1 and (sy.n or 0) >= 4)):
        yield Issue(_wp("update.train.tokens"), f"{p.unpadded:,} of the ledger's {p.train:,} training records have no "
                    f"padding at all (training positions = update tokens) under the padded profile {sy.prof.name!r}: "
                    "every prompt and completion of their batches equally long, which sampled completions are not",
                    hint)
    for steps, what in ((p.bad_rollout, "rollout pairs that are not n x tri(positions / n)"),
                        (p.bad_train, f"training rows that are not whole padded slices of {sy.N // sy.spg} rows")):
        if steps:
            yield Issue(_wp("update.train.attn_full" if steps is p.bad_train else "rollout.attn_causal"),
                        f"{len(steps):,} ledger records (steps {', '.join(map(str, steps[:5]))}"
                        f"{', ...' if len(steps) > 5 else ''}) have {what}, under TRL's steps_per_generation "
                        f"{sy.spg} / gradient_accumulation_steps {sy.gas} schedule", hint)
