# Over 500 lines: the callback and what it observes (the generation, every kind of reward) build one step's record together.
"""The public TRL integration: a live per-step FLOP ledger for your own GRPOTrainer.

    from suite.train.trl_callback import RaceLedger
    trainer = GRPOTrainer(model=..., reward_funcs=[my_reward], args=GRPOConfig(...), ...)
    ledger = RaceLedger("runs/my-run", budget_flops=3e15).attach(trainer)
    trainer.train()                  # also saves the adapter to runs/my-run/adapter/
    ledger.write_report()            # runs/my-run/report.json

`attach` adds the callback and observes every generation where TRL scores it: the trainer's
reward step (`_calculate_rewards`) hands over the prompts and the EXACT completion token ids,
and the prompts are tokenized exactly as TRL does (the token total is checked against TRL's own
`num_input_tokens_seen`). Each optimizer step becomes one ledger line, flushed and fsynced at
`on_step_end`, built by `suite.accounting.work_from_lengths` from those lengths and the
trainer's settings (K, mu, beta, gradient checkpointing, accumulation, padding) under the
engine profile of the device (`trl` on CUDA, `trl-cpu` elsewhere): every pass TRL runs is
counted -- generation, old-policy log-probs, reference forward, training forward and backward,
checkpoint recompute -- and so is every reward model:

- a reward model TRL runs itself (`reward_funcs=[model]` or a model id, a sequence
  classifier) is watched by hooks on its forward: the batch it really ran (its own tokenizer
  and chat template, right-padded as TRL pads) is charged as a forward of its own spec
  (read from its config), and the report names it;
- a Python reward function is wrapped; one that runs a model (`kind != "rule"`,
  `model_path`, `last_scored_lengths`, as suite.train.rewards defines them) is charged for
  the tokens it reports.

A reward that cannot be priced (a model whose architecture the accounting does not cover, a
model callable that does not say what it scored) makes `attach` refuse, naming it: never a
silent 0.

Budget stop: after each step the callback predicts an UPPER BOUND of the next step's cost
(every completion at max_completion_length, every prompt as long as `max_prompt_tokens` or the
longest seen so far, model rewards over twice prompt + completion) and stops training if that
bound would cross the budget. So a run never exceeds its budget when `max_prompt_tokens` is
given (race run passes the dataset's longest prompt); the price is at most one step left unbought.

Timing: rollout seconds run from the step's start to the end of TRL's generation call; reward
seconds are the reward calls; update seconds the rest of the step, the old-policy and reference
forwards included (TRL runs them between generating and scoring, and the ledger prices them as
update FLOPs, so FLOPs / seconds is each phase's achieved rate). A trainer without TRL's
`_generate` method times rollout up to its reward step instead.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable

from transformers import TrainerCallback

from ..accounting import step_cost_bound  # noqa: F401  (public here too: the budget stop's bound)
from ..accounting.work import reward_tokens_bound
from ..atomic import write_jsonl_atomic
from ..errors import RaceError
from .trlsetup import adapter_of, engine_of, policy_spec_of, reward_model_spec_of, settings_of

log = logging.getLogger(__name__)

LEDGER_FILE = "ledger.jsonl"
DISCARDED_FILE = "ledger.discarded.jsonl"
ADAPTER_DIR = "adapter"
RECORDER = "race RaceLedger (TRL callback)"


# ---- the callback -------------------------------------------------------------------------------


class RaceLedger(TrainerCallback):
    """A TrainerCallback that writes one ledger line per optimizer step of a TRL GRPOTrainer,
    plus a reward-function wrapper that observes each generation. See the module docstring.

    out_dir: folder for ledger.jsonl (and report.json).
    budget_flops: stop before the step whose cost bound would cross it (None: no stop).
    max_prompt_tokens: longest prompt of the dataset, for the conservative bound.
    attention: FLOP convention, 'causal' (default) or 'full' (what eager attention computes).
    engine: accounting profile; None picks it from the device.
    policy / adapter / settings / reward_model: override what is read from the trainer.
    resume: continue an existing ledger; records after the checkpoint's step move to
        ledger.discarded.jsonl so no step is counted twice.
    progress: show a tqdm bar of FLOPs spent of the budget and the phase split.
    run_spec: suite.record.runspec.RunSpec (or mapping) for write_report().
    save_adapter: save the trained adapter and tokenizer to DIR/adapter when training ends.
    """

    def __init__(self, out_dir: str | os.PathLike, *, budget_flops: float | None = None,
                 max_prompt_tokens: int | None = None, attention: str = "causal", engine: str | None = None,
                 policy=None, adapter=None, settings=None, reward_model=None, resume: bool = False,
                 progress: bool = False, run_spec=None, fsync: bool = True, save_adapter: bool = True):
        self.out_dir = Path(out_dir)
        self.budget = None if budget_flops is None else int(float(budget_flops))
        self.max_prompt_tokens = max_prompt_tokens
        self.attention = attention
        self.engine = engine
        self.policy, self.adapter, self.settings, self.reward_model = policy, adapter, settings, reward_model
        self.resume, self.progress, self.run_spec, self.fsync = resume, progress, run_spec, fsync
        self.save_adapter = save_adapter
        self.spent = {"rollout": 0, "update": 0, "reward": 0}
        self.steps = 0
        self.stopped_by_budget = False
        self.next_step_bound: int | None = None
        self.overhead_seconds = 0.0  # wall time spent in the ledger's own code (benchmarks)
        self.step_overheads: list[tuple[float, float]] = []  # (ledger seconds, step seconds) per step
        self._step_overhead = 0.0
        self._t_step_begin_done = 0.0
        self._writer = None
        self._bar = None
        self._tokenizer = None
        self._chat_kwargs: dict = {}
        self._prompt_cache: dict[str, int] = {}  # prompt -> tokens (prompts repeat K times)
        self._in_step = False
        self._gen: dict | None = None  # observation of this step's generation
        self._last_gen: dict | None = None  # lengths of the generation batch being reused (mu > 1)
        self._sliced = False          # the trainer's slices are observed (TRL's buffered schedule)
        self._step_gens: list[dict] = []    # generations made during this optimizer step
        self._step_slices: list[tuple[dict, list[int]]] = []  # (generation, rows) trained this step
        self._buffer_gen: dict | None = None  # the generation whose slices TRL's buffer holds
        self._micro = 0               # micro-steps (slices) trained since training (re)started
        self._attached = False
        self._tokens_seen = None
        self._t_step = 0.0
        self._t_generated: float | None = None  # when this step's generation call returned
        self._meter = None            # the GPUs' energy counters (suite.train.energy), opened at train begin
        self._e_step = self._e_generated = None  # counter readings taken with _t_step and _t_generated
        self._longest_prompt = 0
        self._longest_reward = 0
        self._warned = set()
        self._policy_ref: str | None = None  # loadable policy config (folder) for the report
        self.seed: int | None = None  # the trainer's seed (args.seed), recorded in the report
        self._reward_ref: dict = {"system": "custom"}

    @property
    def ledger_path(self) -> Path:
        """DIR/ledger.jsonl."""
        return self.out_dir / LEDGER_FILE

    @property
    def adapter_dir(self) -> Path:
        """DIR/adapter: the trained adapter (or full model) and tokenizer, saved when training ends."""
        return self.out_dir / ADAPTER_DIR

    @property
    def total_flops(self) -> int:
        """FLOPs recorded so far (all phases)."""
        return sum(self.spent.values())

    # ---- public wiring ------------------------------------------------------------------------

    def attach(self, trainer) -> "RaceLedger":
        """Add this callback to `trainer`, observe its reward step and wrap or hook every reward
        it runs (see the module docstring). Refuses, naming the reward and the fix, a reward
        whose compute could not be charged."""
        funcs = trainer.reward_funcs
        names = list(getattr(trainer, "reward_func_names", None) or
                     [getattr(f, "__name__", type(f).__name__) for f in funcs])
        # TRL names a reward model by its _name_or_path: empty for one built in memory.
        names = [str(n) or type(f).__name__ for n, f in zip(names, funcs)]
        self._observe_reward_step(trainer, funcs)
        specs: dict[str, Any] = {}     # reward name -> the model spec it is charged by
        for i, f in enumerate(funcs):
            if _is_module(f):
                specs[names[i]] = self._hook_reward_model(f, names[i])
            elif _is_async(f):
                if getattr(f, "kind", "rule") != "rule":
                    raise RaceError(f"RaceLedger cannot see what the async model reward {names[i]!r} scores",
                                    "make it a plain function that sets last_scored_lengths, or pass the model "
                                    "itself in reward_funcs")
            elif not getattr(f, "_race_wrapped", False):
                funcs[i] = self.wrap(f)
                if getattr(f, "kind", "rule") != "rule":
                    if self.reward_model is None:
                        raise RaceError(f"model reward {names[i]!r} names no model to charge",
                                        "give it a model_path (its config folder) or pass "
                                        "RaceLedger(reward_model=spec_for(...))")
                    specs[names[i]] = self.reward_model
        if len({s for s in specs.values()}) > 1:
            raise RaceError(f"rewards {', '.join(map(repr, specs))} run different models; the ledger charges one "
                            "reward-model spec per run", "score with one reward model, or ledger each run separately")
        if specs:
            self.reward_model = self.reward_model or next(iter(specs.values()))
        self._reward_ref["system"] = "+".join(names) if len(names) > 1 else (names[0] if names else "custom")
        generate = getattr(trainer, "_generate", None)
        if callable(generate) and not getattr(generate, "_race_wrapped", False):
            trainer._generate = self._timed_generation(generate)
        self._observe_slices(trainer)
        self._fit_traced_policy(trainer)
        self._attached = True
        trainer.add_callback(self)
        return self

    def _fit_traced_policy(self, trainer) -> None:
        """A policy with no analytic recipe is priced by tracing its modeling code: fitted here,
        before training, as a traced reward model is (a refused fit fails before the first step;
        the first step's seconds and a profiler around trainer.train() never see the tracing)."""
        model, args = getattr(trainer, "model", None), getattr(trainer, "args", None)
        if model is None or args is None or not hasattr(model, "config"):
            return
        policy = self.policy or policy_spec_of(model)
        from ..accounting.specs import PATH_TRACED

        if policy.priced_by == PATH_TRACED:
            from ..accounting.pricing import coefficients

            coefficients(policy, self.adapter or adapter_of(model, policy), self.settings or settings_of(args),
                         engine=self.engine or engine_of(model, args), attention=self.attention)

    def _observe_slices(self, trainer) -> None:
        """See which rows of a generation batch each micro-step trains. TRL 1.16 generates one
        batch for steps_per_generation x mu micro-steps, shuffles it, splits it into
        steps_per_generation slices and trains one slice per micro-step (_prepare_inputs): each
        generated row is tagged with its index (a column TRL shuffles and splits with the rest),
        read and removed where the slice is handed to the loss."""
        gen = getattr(trainer, "_generate_and_score_completions", None)
        prep = getattr(trainer, "_prepare_inputs", None)
        if not (callable(gen) and callable(prep)):
            return
        self._sliced = True
        if getattr(gen, "_race_owner", None) is self:
            return
        import torch

        key = f"_race_rows_{id(self)}"  # this ledger's column (another ledger may wrap the trainer too)

        def generate_and_score(*args, **kwargs):
            training = self._in_step and bool(getattr(getattr(trainer, "model", None), "training", True))
            if training:
                self._gen = self._t_generated = self._e_generated = None   # a new generation batch: _see_generation fills it
                t0, e0 = time.perf_counter(), self._read_energy()
            out = gen(*args, **kwargs)
            if not training:
                return out
            g = self._gen
            if g is None:
                raise RaceError("RaceLedger did not see the generation TRL just scored",
                                "attach RaceLedger with attach(trainer) before trainer.train()")
            g["t_begin"], g["t_generated"] = t0, self._t_generated
            g["e_begin"], g["e_generated"] = e0, self._e_generated
            self._step_gens.append(g)
            self._buffer_gen = g
            ids = out.get("prompt_ids") if isinstance(out, dict) else None
            if ids is not None and ids.shape[0] == len(g["completions"]):
                out[key] = torch.arange(ids.shape[0], device=ids.device)
            return out

        def prepare(*args, **kwargs):
            out = prep(*args, **kwargs)
            if not isinstance(out, dict) or key not in out:
                return out
            if self._in_step and self._buffer_gen is not None:
                self._step_slices.append((self._buffer_gen, [int(i) for i in out[key].tolist()]))
            return {k: v for k, v in out.items() if k != key}

        generate_and_score._race_owner = prepare._race_owner = self
        trainer._generate_and_score_completions = generate_and_score
        trainer._prepare_inputs = prepare

    def _timed_generation(self, generate: Callable) -> Callable:
        """TRL's generation call, noting when it returns (the end of the rollout phase)."""

        def timed(*args, **kwargs):
            out = generate(*args, **kwargs)
            self._t_generated = time.perf_counter()
            self._e_generated = self._read_energy()
            return out

        timed._race_wrapped = True
        return timed

    def _observe_reward_step(self, trainer, funcs) -> None:
        """See every generation where TRL scores it: `_calculate_rewards(inputs, prompts,
        completions, completion_ids_list)` gets the prompts and exact completion ids, whatever
        the rewards are. Without that method (another TRL) a wrapped Python reward sees them."""
        import inspect

        calc = getattr(trainer, "_calculate_rewards", None)
        params = list(inspect.signature(calc).parameters) if callable(calc) else []
        if params[:4] != ["inputs", "prompts", "completions", "completion_ids_list"]:
            if not any(callable(f) and not _is_module(f) and not _is_async(f) for f in funcs):
                raise RaceError("RaceLedger cannot observe this trainer's generations: it has no "
                                "_calculate_rewards(inputs, prompts, completions, completion_ids_list) and no Python "
                                "reward function", "use TRL 1.16's GRPOTrainer, or add a plain Python reward function")
            return
        if getattr(calc, "_race_owner", None) is self:
            return

        def calculate(inputs, prompts, completions, completion_ids_list):
            self._see_generation(prompts, completion_ids_list, trainer.state, time.perf_counter())
            return calc(inputs, prompts, completions, completion_ids_list)

        calculate._race_wrapped, calculate._race_owner = True, self
        trainer._calculate_rewards = calculate

    def _hook_reward_model(self, module, name: str):
        """Hooks on a reward model's forward: each call is charged as a forward of its own spec
        over the batch it ran (rows right-padded to the longest, as TRL pads them). Returns the spec."""
        from ..accounting import Adapter
        from ..accounting.specs import PATH_TRACED, lookup

        if self.reward_model is not None:
            spec = self.reward_model
        else:
            try:
                spec = reward_model_spec_of(module)
            except RaceError as e:
                raise RaceError(f"cannot price reward model {name!r}: {e.message}",
                                "pass its spec as RaceLedger(reward_model=spec_for(ITS_CONFIG_FOLDER)) "
                                "(docs/trl-integration.md); a reward model's compute is never counted as 0") from None
            except AttributeError:
                raise RaceError(f"cannot price reward model {name!r}: it has no transformers config",
                                "pass RaceLedger(reward_model=spec_for(ITS_CONFIG_FOLDER)) (a config folder, "
                                "config dict or catalog name)") from None
        # its costs now: a traced spec fits them here (a refused fit fails before the first step, and
        # a profiler around trainer.train() never sees the tracing); a recipe's cost nothing
        spec.costs(Adapter(kind="full"), rg0=False, gc=False)
        ref = str(getattr(getattr(module, "config", None), "_name_or_path", "") or "")
        if self.reward_model is not None or spec.priced_by == PATH_TRACED:
            model = spec        # the override (or the traced spec) is what the report carries
        else:
            model = ref if ref and (Path(ref) / "config.json").is_file() else ref if ref and lookup(ref) else spec
        self._reward_ref.update(kind="orm", model=model)
        starts: list[float] = []
        marks: list = []

        def before(mod, args, kwargs):
            marks.append(self._read_energy())
            starts.append(time.perf_counter())

        def after(mod, args, kwargs, output):
            t0 = starts.pop() if starts else time.perf_counter()
            e0 = marks.pop() if marks else None
            ids = kwargs.get("input_ids", args[0] if args else None)
            mask = kwargs.get("attention_mask")
            if ids is None:
                raise RaceError(f"reward model {name!r} was called without input_ids",
                                "RaceLedger prices a reward model from the token ids it runs over")
            rows, width = int(ids.shape[0]), int(ids.shape[-1])
            lengths = [int(n) for n in mask.sum(-1).tolist()] if mask is not None else [width] * rows
            self._add_reward([max(1, n) for n in lengths], [width] * rows, time.perf_counter() - t0)
            self._add_reward_energy(e0)

        module.register_forward_pre_hook(before, with_kwargs=True)
        module.register_forward_hook(after, with_kwargs=True)
        return spec

    def wrap(self, func: Callable) -> Callable:
        """A TRL reward function that calls `func` and lets the ledger observe the generation
        (prompts, exact completion ids, seconds, reward-model tokens). Pass the result in
        GRPOTrainer(reward_funcs=...) if you do not use attach()."""

        def wrapped(prompts, completions, completion_ids=None, **kwargs):
            e0 = self._read_energy()
            t0 = time.perf_counter()
            out = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
            t1 = time.perf_counter()
            self._observe(func, prompts, completion_ids, kwargs.get("trainer_state"), out, t0, t1 - t0)
            self._add_reward_energy(e0)
            self._step_overhead += time.perf_counter() - t1
            return out

        wrapped.__name__ = getattr(func, "__name__", type(func).__name__)  # TRL logs rewards by name
        wrapped.__doc__ = getattr(func, "__doc__", None)
        wrapped.__wrapped__ = func
        wrapped._race_wrapped = True
        path = getattr(func, "model_path", None)
        if getattr(func, "kind", "rule") != "rule" and path:
            self._reward_ref.update(kind="prm", model=str(path))
            if self.reward_model is None:
                from ..accounting.specs import spec_for

                self.reward_model = spec_for(str(path))  # the reward model is charged by its own spec (any family)
        if self._reward_ref.get("system") == "custom":
            self._reward_ref["system"] = wrapped.__name__
        return wrapped

    # ---- observing a generation ---------------------------------------------------------------

    def _see_generation(self, prompts, completion_ids, state, t0: float) -> dict | None:
        """The generation being scored: prompt and completion lengths, once per step."""
        if not self._in_step:  # evaluation generations are not training compute
            return None
        if self._gen is None:
            if completion_ids is None:
                raise RaceError("the reward step got no completion_ids", "use TRL >= 1.0's GRPOTrainer")
            completions = [len(c) for c in completion_ids]
            prompt_lens = self._prompt_lengths(prompts)
            self._check_tokens(state, sum(prompt_lens) + sum(completions))
            self._gen = {"prompts": prompt_lens, "completions": completions, "reward_lengths": None,
                         "reward_widths": None, "t_reward": t0, "reward_seconds": 0.0, "rewards": [],
                         "e_reward": self._read_energy(), "reward_joules": 0.0}
        return self._gen

    # ---- energy (suite.train.energy): counter readings beside the seconds ------------------------

    def _read_energy(self):
        """The GPUs' energy counter now (millijoules), None without one."""
        return self._meter.read() if self._meter is not None else None

    def _add_reward_energy(self, e0) -> None:
        """Charge a reward window (from reading e0 to now) to this step's generation."""
        g = self._gen if self._in_step else None
        if g is None or self._meter is None or not self._meter.info()["measured"]:
            return
        from .energy import Meter

        j = Meter.between(e0, self._read_energy())
        g["reward_joules"] = None if j is None or g.get("reward_joules") is None else g["reward_joules"] + j

    def _step_joules(self, gens: list[dict], e_end, reused: bool) -> dict | None:
        """Joules per phase of the step that just ended, over the same intervals as its seconds;
        None when a reading is missing or a counter went backwards (never a partial total)."""
        from .energy import Meter

        total = Meter.between(self._e_step, e_end)
        if total is None:
            return None
        rollout = reward = 0.0
        for i, g in enumerate([] if reused else gens):
            start = self._e_step if i == 0 else g.get("e_begin")
            gen_end = g.get("e_generated") if g.get("t_generated") and g["t_generated"] <= g["t_reward"] else g.get("e_reward")
            r = Meter.between(start, gen_end)
            if r is None or g.get("reward_joules") is None:
                return None
            rollout, reward = rollout + r, reward + g["reward_joules"]
        return {"rollout": rollout, "update": max(0.0, total - rollout - reward), "reward": reward}

    def _add_reward(self, lengths: list[int], widths: list[int] | None, seconds: float) -> None:
        """A reward model's forward over sequences of `lengths` tokens (`widths`: their padded
        widths). Several model rewards add their sequences (one reward-model spec is charged)."""
        g = self._gen if self._in_step else None
        if g is None:
            return
        g["reward_seconds"] += seconds
        g["reward_lengths"] = (g["reward_lengths"] or []) + lengths
        g["reward_widths"] = (g["reward_widths"] or []) + (widths or lengths)

    def _observe(self, func, prompts, completion_ids, state, rewards, t0, seconds) -> None:
        g = self._see_generation(prompts, completion_ids, state, t0)
        if g is None:
            return
        kind = getattr(func, "kind", "rule")
        if kind != "rule":
            lengths = list(getattr(func, "last_scored_lengths", None) or [])
            if len(lengths) != len(completion_ids):
                raise RaceError(f"model reward {getattr(func, '__name__', func)!r} did not report the tokens it scored",
                                "a model reward must set last_scored_lengths (one entry per completion)")
            # A completion the model did not score (0 tokens) costs nothing.
            scored = [n for n in lengths if n > 0]
            self._add_reward(scored, None, seconds)
        else:
            g["reward_seconds"] += seconds
        vals = [float(r) for r in rewards if r is not None]
        if vals:
            g["rewards"].append(sum(vals) / len(vals))

    def _prompt_lengths(self, prompts) -> list[int]:
        """Prompt token ids exactly as GRPOTrainer._tokenize_prompts builds them (text models)."""
        tok = self._tokenizer
        if tok is None:
            raise RaceError("RaceLedger saw a generation before training began", "add the callback to the trainer")
        # Each prompt comes K times and recurs across epochs: tokenize each distinct one once.
        keys = [p if isinstance(p, str) else json.dumps(p, sort_keys=True, default=str) for p in prompts]
        todo = {k: p for k, p in zip(keys, prompts) if k not in self._prompt_cache}
        if todo:
            new = list(todo.values())
            if not isinstance(new[0], str):
                ids = tok.apply_chat_template(conversation=new, add_generation_prompt=True, tokenize=True,
                                              return_dict=True, **self._chat_kwargs)["input_ids"]
            else:
                ids = tok(text=new)["input_ids"]
            if len(self._prompt_cache) > 100_000:
                self._prompt_cache.clear()
            self._prompt_cache.update(zip(todo, (len(x) for x in ids)))
        return [self._prompt_cache[k] for k in keys]

    def _check_tokens(self, state, total: int) -> None:
        """TRL adds prompt + completion tokens of each generation to num_input_tokens_seen:
        the ledger's own count must agree, or it is not exact."""
        seen = getattr(state, "num_input_tokens_seen", None)
        if seen is None or self._tokens_seen is None:
            self._tokens_seen = seen
            return
        delta, self._tokens_seen = seen - self._tokens_seen, seen
        if delta != total and "tokens" not in self._warned:
            self._warned.add("tokens")
            log.warning("race: TRL counted %d prompt+completion tokens in this generation, the ledger %d; "
                        "prompt tokenization differs from the trainer's", delta, total)

    # ---- TrainerCallback events ---------------------------------------------------------------

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        """Read the trainer's settings, open (or resume) the ledger, check the budget."""
        from ..record.ledger import LedgerWriter

        if not self._attached:
            raise RaceError("RaceLedger was added to the trainer without attach(): it cannot see the generations, "
                            "and the first step would be wasted",
                            "use RaceLedger(...).attach(trainer) instead of trainer.add_callback(RaceLedger(...))")
        self._tokenizer = processing_class
        self._chat_kwargs = dict(getattr(args, "chat_template_kwargs", None) or {})
        ref = str(getattr(model.config, "_name_or_path", "") or "")
        self._policy_ref = ref if ref and Path(ref).is_dir() else None
        self.policy = self.policy or policy_spec_of(model)
        self.adapter = self.adapter or adapter_of(model, self.policy)
        self.settings = self.settings or settings_of(args)
        found = engine_of(model, args)
        vllm = found.startswith("trl-vllm")
        # a vLLM trainer's profile is exactly what it runs (with or without the IS correction's forward)
        if self.engine is not None and (self.engine.startswith("trl-vllm") != vllm or (vllm and self.engine != found)):
            raise RaceError(f"RaceLedger(engine={self.engine!r}) contradicts the trainer: "
                            f"args.use_vllm={bool(getattr(args, 'use_vllm', False))}, vllm_importance_sampling_correction="
                            f"{bool(getattr(args, 'vllm_importance_sampling_correction', True))}, so it runs as {found!r}",
                            f"drop engine= (the ledger follows the trainer), or pass engine={found!r}")
        self.engine = self.engine or found
        spg, ga = self.settings.steps_per_generation, self.settings.gradient_accumulation_steps
        if not self._sliced and spg not in (None, ga):
            raise RaceError(f"RaceLedger cannot see which part of a generation batch each step trains "
                            f"(steps_per_generation={spg}, gradient_accumulation_steps={ga}) on this trainer",
                            "use TRL 1.16's GRPOTrainer, or set steps_per_generation = gradient_accumulation_steps")
        if self.seed is None and getattr(args, "seed", None) is not None:
            self.seed = int(args.seed)
        self._tokens_seen = state.num_input_tokens_seen
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.resume:
            self._truncate_to(state.global_step)
        elif self.ledger_path.exists() and self.ledger_path.stat().st_size:
            raise RaceError(f"ledger {self.ledger_path} already exists", "resume it or choose a new output folder")
        self._writer = LedgerWriter(self.ledger_path, resume=self.resume, fsync=self.fsync)
        from .energy import open_meter, write_sidecar

        self._meter = open_meter()      # NVML's counters, or why there are none (the report says so)
        write_sidecar(self.out_dir, self._meter)
        self.steps = state.global_step
        self._last_gen = self._buffer_gen = None
        self._micro = 0
        if self.progress and self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.budget, unit="FLOP", unit_scale=True, dynamic_ncols=True,
                             desc="budget" if self.budget else "FLOPs", initial=self.total_flops)
        self._budget_check(state, control, first=True)

    def on_step_begin(self, args, state, control, **kwargs):
        """A new optimizer step: start its clock."""
        self._in_step = True
        self._gen = None
        self._step_gens, self._step_slices = [], []
        self._t_generated = self._e_generated = None
        self._e_step = self._read_energy()
        self._t_step = time.perf_counter()
        self._t_step_begin_done = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        """Account the step that just finished, flush its ledger line, check the budget."""
        from ..accounting import phase_flops, tokens_from_work, work_from_lengths

        t_end = time.perf_counter()
        e_end = self._read_energy()
        self._in_step = False
        self._step_overhead += self._t_step_begin_done - self._t_step
        g = self._gen
        step_gens = [g] if g is not None else []
        if self._sliced:
            work, seconds, gens = self._sliced_step(state, t_end)
            step_gens = gens
            g = gens[0] if gens else None
            if len(gens) > 1:
                g = {"rewards": [r for x in gens for r in x["rewards"]]}
        elif g is not None:
            self._last_gen = g
            self._longest_prompt = max(self._longest_prompt, max(g["prompts"]))
            if g["reward_widths"]:
                self._longest_reward = max(self._longest_reward, max(g["reward_widths"]))
            work = work_from_lengths(g["prompts"], g["completions"], self.settings, self.engine,
                                     g["reward_lengths"] or None, iterations=1, generation=True,
                                     reward_widths=g["reward_widths"] or None, policy=self.policy,
                                     reward_model=self.reward_model)
            rolled = min(self._t_generated or g["t_reward"], g["t_reward"])
            seconds = {"rollout": rolled - self._t_step, "reward": g["reward_seconds"],
                       "update": t_end - rolled - g["reward_seconds"]}
        else:
            last = self._last_gen
            if last is None:
                raise RaceError(f"optimizer step {state.global_step} reused a generation the ledger never saw",
                                "attach RaceLedger before training starts (and wrap a reward function)")
            work = work_from_lengths(last["prompts"], last["completions"], self.settings, self.engine,
                                     None, iterations=1, generation=False, policy=self.policy)
            seconds = {"rollout": 0.0, "reward": 0.0, "update": t_end - self._t_step}
        if not self._sliced:
            self._micro += self.settings.gradient_accumulation_steps
        flops = phase_flops(work, self.policy, self.adapter, self.settings, self.reward_model, self.engine,
                            self.attention)
        metrics = {"reward": sum(g["rewards"]) / len(g["rewards"])} if g is not None and g["rewards"] else None
        if self._meter is not None and self._meter.info()["measured"]:
            from .energy import step_metrics

            for x in step_gens:
                x.setdefault("t_generated", self._t_generated if x is self._gen else None)
                x.setdefault("e_generated", self._e_generated if x is self._gen else None)
            metrics = {**(metrics or {}), **step_metrics(self._step_joules(step_gens, e_end, not step_gens))}
        self._writer.append(state.global_step, tokens=tokens_from_work(work), work=work, flops=flops,
                            seconds={k: max(0.0, round(v, 6)) for k, v in seconds.items()}, metrics=metrics)
        for k in self.spent:
            self.spent[k] += flops[k]
        self.steps = state.global_step
        if self._bar is not None:
            self._bar.update(sum(flops.values()))
            tot = self.total_flops or 1
            self._bar.set_postfix_str(f"step {self.steps} rollout {self.spent['rollout'] / tot:.0%} "
                                      f"update {self.spent['update'] / tot:.0%} reward {self.spent['reward'] / tot:.0%}")
        self._budget_check(state, control)
        done = time.perf_counter()
        own = self._step_overhead + done - t_end
        self.overhead_seconds += own
        self.step_overheads.append((own, done - self._t_step))
        self._step_overhead = 0.0

    def _sliced_step(self, state, t_end: float):
        """Work and seconds of an optimizer step from what it really did: the generations it made
        (rollout, reward, old-policy and reference passes over each whole batch) and the slices it
        trained (one training pass over each slice's rows, at the batch's padded widths)."""
        from ..accounting import add_work, work_from_lengths

        gens, slices = self._step_gens, self._step_slices
        self._step_gens, self._step_slices = [], []
        if not slices:
            raise RaceError(f"optimizer step {state.global_step} trained no batch the ledger saw",
                            "attach RaceLedger with attach(trainer) before trainer.train()")
        self._micro += len(slices)
        for g in gens:
            self._last_gen = g
            self._longest_prompt = max(self._longest_prompt, max(g["prompts"]))
            if g["reward_widths"]:
                self._longest_reward = max(self._longest_reward, max(g["reward_widths"]))
        rows: dict[int, list[int]] = {}
        batches = {id(g): g for g in gens}
        for g, r in slices:
            batches[id(g)] = g
            rows.setdefault(id(g), []).extend(r)
        made = {id(g) for g in gens}
        works = []
        for key, g in batches.items():
            new = key in made
            trained = rows.get(key)
            works.append(work_from_lengths(
                g["prompts"], g["completions"], self.settings, self.engine,
                (g["reward_lengths"] or None) if new else None, iterations=1 if trained else 0, generation=new,
                reward_widths=(g["reward_widths"] or None) if new else None, policy=self.policy,
                reward_model=self.reward_model, rows=trained))
        rollout = reward = 0.0
        for i, g in enumerate(gens):
            start = self._t_step if i == 0 else g["t_begin"]
            rollout += min(g["t_generated"] or g["t_reward"], g["t_reward"]) - start
            reward += g["reward_seconds"]
        seconds = {"rollout": rollout, "reward": reward, "update": t_end - self._t_step - rollout - reward}
        return add_work(*works), seconds, gens

    def on_train_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        """Close the ledger and the progress bar; save the trained adapter (or, for full
        fine-tuning, the model) with its tokenizer to DIR/adapter, where `race eval` reads it."""
        self.close()
        if self.save_adapter and model is not None and state.is_world_process_zero:
            model.save_pretrained(self.adapter_dir)
            if processing_class is not None:
                processing_class.save_pretrained(self.adapter_dir)

    # ---- budget ---------------------------------------------------------------------------------

    def _budget_check(self, state, control, first: bool = False) -> None:
        if self.budget is None:
            return
        generation = self._generations_next()
        longest = max(self.max_prompt_tokens or 0, self._longest_prompt)
        if not longest:
            return  # nothing seen yet and no bound given: cannot predict the first step
        reward_tokens = None
        if self.reward_model is not None:
            reward_tokens = max(self._longest_reward, reward_tokens_bound(longest, self.settings.max_completion_tokens))
        bound = step_cost_bound(self.policy, self.adapter, self.settings, max_prompt_tokens=longest,
                                engine=self.engine, attention=self.attention, reward_model=self.reward_model,
                                reward_tokens=reward_tokens, generation=generation)
        self.next_step_bound = bound
        if self.total_flops + bound > self.budget:
            self.stopped_by_budget = True
            control.should_training_stop = True
            if first:
                log.warning("race: budget %.3e FLOPs (%.3e left) cannot buy one step of up to %.3e FLOPs; "
                            "not training", self.budget, self.budget - self.total_flops, bound)
            else:
                log.warning("race: budget stop after step %d: %.3e of %.3e FLOPs spent, the next step may cost "
                            "up to %.3e", state.global_step, self.total_flops, self.budget, bound)

    def _generations_next(self) -> int:
        """Generation batches the next optimizer step makes. TRL generates on micro-steps 0,
        steps_per_generation x mu, ... (counted from the (re)start: its buffer starts empty); an
        optimizer step runs gradient_accumulation_steps micro-steps."""
        s = self.settings
        ga = s.gradient_accumulation_steps
        every = (s.steps_per_generation or ga) * s.num_iterations
        m = self._micro
        if m == 0 or self._last_gen is None:
            return max(1, len(range(0, ga, every)))
        return sum(1 for x in range(m, m + ga) if x % every == 0)

    # ---- resume -----------------------------------------------------------------------------------

    def _truncate_to(self, step: int) -> None:
        """Keep ledger records up to `step` (the checkpoint being resumed); move later ones to
        ledger.discarded.jsonl, since their steps will run again."""
        from ..record.ledger import LedgerReader

        path = self.ledger_path
        self.spent = dict.fromkeys(self.spent, 0)
        if not path.exists():
            return
        keep, drop = [], []
        reader = LedgerReader(path)
        for rec in reader:
            (keep if rec["step"] <= step else drop).append(rec)
        if drop or reader.torn is not None:
            if drop:
                with open(self.out_dir / DISCARDED_FILE, "a", encoding="utf-8") as f:
                    for rec in drop:
                        f.write(json.dumps(rec, separators=(",", ":")) + "\n")
            write_jsonl_atomic(path, keep)
        for rec in keep:
            for k in self.spent:
                self.spent[k] += rec["flops"][k]
        if keep and keep[-1]["step"] != step:
            raise RaceError(f"ledger ends at step {keep[-1]['step']} but the checkpoint is at step {step}",
                            "the ledger and the checkpoints come from different runs")

    def close(self) -> None:
        """Close the ledger file and the progress bar (idempotent)."""
        if self._writer is not None:
            self._writer.close()
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    # ---- report -----------------------------------------------------------------------------------

    def write_report(self, run_spec=None, path: str | os.PathLike | None = None) -> Path:
        """Build report.json from the ledger (suite.record.build.build_report, provenance
        measured, with the steps the trainer took) and write it atomically."""
        from ..record.report import write_report
        from ..record.build import Provenance, build_report
        from ..record.runspec import RunSpec

        spec = run_spec or self.run_spec or self.default_run_spec()
        if not isinstance(spec, RunSpec):
            spec = RunSpec.from_dict(spec)
        report = build_report(self.ledger_path, spec, report_dir=self.out_dir,
                              provenance=Provenance("measured", recorder=RECORDER, steps=self.steps))
        return write_report(path or self.out_dir / "report.json", report)

    def default_run_spec(self):
        """The run spec (suite.record.runspec.RunSpec) of what the callback read off the trainer.
        Models that no file or catalog name describes (a reward model built in memory) are
        carried as their specs."""
        from dataclasses import asdict, replace

        from ..record.runspec import RunSpec

        ad = asdict(self.adapter)
        ad["type"] = ad.pop("kind")
        reward = dict(self._reward_ref)
        model = reward.get("model")
        in_memory = model is not None and not isinstance(model, str)
        if in_memory:
            reward["model"] = "in-memory"          # a placeholder the spec replaces below
        spec = RunSpec.from_dict({"policy": self._policy_ref or self.policy.name, "adapter": ad,
                                  "grpo": self.settings.to_dict(), "reward": reward,
                                  "accounting": {"engine_profile": self.engine, "attention": self.attention},
                                  "budget": {"flops": self.budget}, "seed": self.seed})
        if in_memory or not self._policy_ref:
            spec = replace(spec, policy=self._policy_ref or self.policy,
                           reward=replace(spec.reward, model=model) if in_memory else spec.reward)
        return spec


def _is_async(f: Any) -> bool:
    import inspect

    return inspect.iscoroutinefunction(f) or inspect.iscoroutinefunction(getattr(f, "__call__", None))


def _is_module(f: Any) -> bool:
    try:
        import torch

        return isinstance(f, torch.nn.Module)
    except ImportError:  # pragma: no cover
        return False


__all__ = ["RaceLedger", "step_cost_bound"]
