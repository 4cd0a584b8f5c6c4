"""The engines' own FLOP counters, run on a `Case` (suite.accounting.refcase) the way each
engine runs them, for the referee (suite.accounting.referee) to set beside the exact count.

Two origins, said in every table:
- **installed**: the engine's code is called from its installed package (the `compare` extra:
  verl 0.9.1 installed with --no-deps as scripts/setup.sh does, TRL 1.16, transformers 5.24);
  nothing is copied. verl's FlopsCounter is broken into parts by the light re-implementation in
  suite.accounting.compare, which must sum to what verl's code returns (a mismatch shows as an
  'unexplained' part);
- **from code, not run**: engines that do not install here (CUDA-only or unpublished packages)
  are transcribed from their source, cited by repository, file and commit
  (suite.accounting.transcribed).

A counter returns a `Figure`: per pass group it meters ("update", "old-policy forward",
"reference forward", "rollout prefill", "rollout decode") its FLOPs by part ("matmuls",
"embedding", "LM head", "attention", "linear-attention scan"), and per part the convention that
makes it differ from an exact count. Passes a counter does not meter are absent.
"""

from __future__ import annotations

import contextlib
import copy
import io
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Callable

from ..registry import Registry
from .compare import verl_update_parts
from .refcase import Case

PREFILL, DECODE, FWD, BWD = "rollout prefill", "rollout decode", "update forward", "update backward"
OLD, REF = "old-policy forward", "reference forward"
GROUPS = (PREFILL, DECODE, FWD, BWD, OLD, REF)
"""Passes a counter meters; the update's forward and backward are summed over the mu iterations
(a counter that prices the update as one figure is split by its own convention: 3 x forward is
one forward and a backward of two)."""

INSTALLED, FROM_CODE, RULE = "installed", "from code, not run", "rule"


@dataclass(frozen=True)
class Figure:
    """What one counter says about one case."""

    passes: dict = field(default_factory=dict)
    """{pass group: {part: FLOPs}} for the groups it meters."""
    notes: dict = field(default_factory=dict)
    """{part or "pass:part": why it differs from the exact count}; "*" names a reason for the whole figure."""
    error: str = ""
    """The engine's code raised this (its figure is then empty)."""
    ran: str = ""
    """What ran instead of the counter's own origin (verl's re-implementation where verl is not
    installed); empty when it is the counter's own code."""

    def total(self, group: str) -> int | None:
        parts = self.passes.get(group)
        return None if parts is None else sum(parts.values())

    def update_total(self) -> int | None:
        """The update's forward and backward together (None: not metered)."""
        f, b = self.total(FWD), self.total(BWD)
        return None if f is None and b is None else (f or 0) + (b or 0)


@dataclass(frozen=True)
class Counter:
    """An engine's FLOP counter."""

    name: str
    title: str
    origin: str
    """INSTALLED, FROM_CODE or RULE."""
    source: str
    """Package and function, or repository, file and commit."""
    count: Callable[[Case], Figure]


COUNTERS: Registry[Counter] = Registry("engine counter", loader="suite.accounting.transcribed")
"""Every counter, in the order of the tables: the installed ones here, then the ones transcribed
from the engines' code (suite.accounting.transcribed, imported at the first lookup)."""


def counter(name: str, title: str, origin: str, source: str):
    """Register a counting function as the counter `name`."""
    return COUNTERS.register(name, lambda fn: Counter(name, title, origin, source, fn))


# ---- helpers ---------------------------------------------------------------------------------

@lru_cache(maxsize=64)
def _hf_config(config_json: str):
    """The transformers config object an engine builds from the checkpoint's config.json."""
    import json

    from transformers import AutoConfig

    d = json.loads(config_json)
    return AutoConfig.for_model(d["model_type"], **{k: v for k, v in d.items() if k != "model_type"})


def _scaled(parts: dict, num: int, den: int = 1) -> dict:
    return {k: int(Fraction(v) * num / den) for k, v in parts.items()}


def _passes_run(case: Case, exact_runs: dict, update: dict, forward: dict | None, update_fwd: dict | None = None) -> dict:
    """An update counter's passes: the update x mu, split into its forward (`update_fwd`; by
    default a third of each part: 3 x forward) and its backward (the rest); its forward-only
    figure for the old-policy and reference passes where they ran and the engine meters them
    (forward None: it does not)."""
    fwd = update_fwd if update_fwd is not None else _scaled(update, 1, 3)
    out = {FWD: _scaled(fwd, case.mu), BWD: {k: (v - fwd.get(k, 0)) * case.mu for k, v in update.items()}}
    if forward is not None:
        for g in (OLD, REF):
            if exact_runs.get(g):
                out[g] = dict(forward)
    return out


def _runs(case: Case) -> dict:
    """Which of the old-policy and reference passes run in this case (the exact profile's rules)."""
    from .engines import get_engine

    prof, s = get_engine(case.profile), case.settings
    return {OLD: prof.old_policy_pass(s), REF: prof.reference_pass(s)}


def _mm_notes(case: Case, extra: str = "", per: str = "6 FLOPs per weight and token whatever the adapter") -> dict:
    """Matmul notes of a 3 x forward counter, per pass: its forward prices no LoRA branch, its
    backward charges frozen weights a weight gradient they never get (the LoRA backward)."""
    lora = case.lora_rank > 0
    return {"matmuls": per + extra,
            f"{FWD}:matmuls": "forward: 2 FLOPs per weight and token" + ("; the LoRA branch not counted" if lora else "")
                              + extra,
            f"{BWD}:matmuls": "backward as 2 x forward" + ("; a LoRA's frozen weights get no weight gradient (LoRA "
                                                           "backward), the adapter's own FLOPs are not counted"
                                                           if lora else "") + extra}


# ---- verl 0.9.1 (installed) ------------------------------------------------------------------

VERL_VERSION = "0.9.1"


@lru_cache(maxsize=1)
def verl_flops_module():
    """verl.utils.flops_counter of the installed verl, or None. verl's package __init__ pulls in
    Ray and tensordict (the worker stack) which the --no-deps install leaves out; the counter
    needs neither, so it is imported under a bare parent package whose path is verl's own
    folder (nothing is copied or patched), and the stand-ins are removed again."""
    import importlib
    import importlib.util
    import types

    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    if "verl" in sys.modules and hasattr(sys.modules["verl"], "DataProto"):
        return importlib.import_module("verl.utils.flops_counter")   # the real package is loaded
    root = list(spec.submodule_search_locations)[0]
    before = set(sys.modules)
    for name, sub in (("verl", ""), ("verl.utils", "/utils")):
        stub = types.ModuleType(name)
        stub.__path__ = [root + sub]
        sys.modules[name] = stub
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return importlib.import_module("verl.utils.flops_counter")
    except ImportError:
        return None
    finally:
        for k in set(sys.modules) - before:
            if k == "verl" or k.startswith("verl."):
                del sys.modules[k]


def verl_installed_flops(config, seq_lengths) -> tuple[int, str]:
    """FLOPs verl's own FlopsCounter estimates for one update pass over sequences of these
    lengths (its TFLOP/s at delta_time = 1 s, times 1e12), and what it printed (an unknown
    model type: "MFU will always be zero"). The device-peak lookup, which needs a GPU and is
    not part of the count, answers 1."""
    from unittest import mock

    fc = verl_flops_module()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), mock.patch.object(fc, "get_device_flops", lambda *a, **k: 1.0):
        achieved, _ = fc.FlopsCounter(config).estimate_flops(list(seq_lengths), 1.0)
    return round(achieved * 1e12), out.getvalue().strip()


def verl_flops(spec, config: dict, seq_lengths) -> tuple[int | None, str]:
    """verl's estimate of one update pass: its installed code where verl installs, else the
    re-implementation (suite.accounting.compare) -- and which ran ('installed' or 're-implementation')."""
    if verl_flops_module() is not None:
        import json

        return verl_installed_flops(_hf_config(json.dumps(config, sort_keys=True)), seq_lengths)[0], INSTALLED
    parts = verl_update_parts(spec, seq_lengths, config.get("model_type"))
    return (None if parts is None else sum(parts.values())), "re-implementation"


@counter("verl", f"verl {VERL_VERSION} FlopsCounter", INSTALLED,
         f"verl=={VERL_VERSION}: verl/utils/flops_counter.py FlopsCounter.estimate_flops, as "
         "verl/workers/engine_workers.py calls it per mini-batch (sequence lengths from the nested tensor's "
         "offsets; forward-only passes: mfu / 3)")
def _verl(case: Case) -> Figure:
    mt = case.config.get("model_type")
    parts = verl_update_parts(case.spec, case.rows, mt)
    installed = verl_flops_module() is not None
    if installed:
        total, printed = verl_installed_flops(_hf_config(case.config_json), case.rows)
    else:
        total, printed = (0 if parts is None else sum(parts.values())), ""
    if parts is None:
        parts = {"matmuls": 0}
        notes = {"*": f"model type '{mt}' is not in verl's table: MFU 0" + (f" (verl prints: {printed[:60]}...)"
                                                                         if printed else "")}
    else:
        notes = {
            **_mm_notes(case, "; head_dim from hidden_size // heads" if mt == "qwen3_vl" else ""),
            "embedding": "the embedding counted as a matmul (a lookup: 0 FLOPs)",
            "LM head": "LM head at every position with its weight gradient, whatever is scored or trained",
            "attention": "6·ΣL² per layer (causal) over the lengths it is given"
                         + (": packed rows, not sequences" if case.pack_tokens else "")
                         + ("; head_dim from hidden_size // heads" if mt == "qwen3_vl" else ""),
            "linear-attention scan": "15·d_k·d_v per value head and token",
        }
        diff = total - sum(parts.values())
        if abs(diff) > max(1e-9 * total, 1e6):
            parts = {**parts, "unexplained": diff}
            notes["unexplained"] = "verl's installed code differs from its re-implementation"
    fwd = _scaled(parts, 1, 3)   # engine_workers.py: forward_only -> mfu /= 3
    return Figure(passes=_passes_run(case, _runs(case), parts, fwd), notes=notes,
                  ran="" if installed else "re-implementation (verl is not installed: pip install --no-deps verl==0.9.1)")


# ---- TRL 1.16 (installed) -------------------------------------------------------------------

@counter("trl", "TRL 1.16 compute_flops_per_token", INSTALLED,
         "trl==1.16.0: trl/trainer/utils.py compute_flops_per_token(config, int(mean_seq_len)) x forwarded tokens, "
         "as trl/experimental/async_distillation/async_distillation_trainer.py logs perf/mfu (GRPOTrainer calls none)")
def _trl(case: Case) -> Figure:
    from trl.trainer.utils import compute_flops_per_token

    cfg = _hf_config(case.config_json).get_text_config()
    tokens = sum(case.rows)
    mean = int(tokens / len(case.rows))
    try:
        per, base = compute_flops_per_token(cfg, mean), compute_flops_per_token(cfg, 0)
        headless = copy.deepcopy(cfg)
        headless.vocab_size = 0
        layers = compute_flops_per_token(headless, 0)
    except Exception as e:  # noqa: BLE001 - the engine's own code failing is the finding
        return Figure(error=f"{type(e).__name__}: {e}", notes={"*": f"raises {type(e).__name__}: {e}"})
    parts = {"matmuls": layers * tokens, "LM head": (base - layers) * tokens, "attention": (per - base) * tokens}
    sp = case.spec
    notes = {**_mm_notes(case, ("; MoE: routed experts and router, no shared experts" if sp.is_moe else "")
                         + ("; MLA priced as GQA attention" if sp.family.mla else "")
                         + ("; linear-attention layers priced as attention" if sp.family.linear else "")),
             "LM head": "LM head at every position, 3 x forward",
             "attention": f"full L² square at the mean row length ({mean} tokens), every layer"
                          + (" (packed rows)" if case.pack_tokens else "")
                          + ("; sliding windows ignored" if sp.sliding_window else "")}
    return Figure(passes=_passes_run(case, _runs(case), parts, None), notes=notes)


# ---- transformers 5.24 Trainer (installed): what TRL's GRPOTrainer logs as total_flos -------------

@lru_cache(maxsize=16)
def _meta_model(config_json: str):
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(_hf_config(config_json))


class _TrainerModel:
    """The model as Trainer.floating_point_ops reads it: its class's main_input_name at once, the
    model itself (built on the meta device) for anything more -- the parameter count it asks for
    when the batch holds that input."""

    def __init__(self, config_json: str):
        self._key = config_json

    def __getattr__(self, name):
        if name == "main_input_name":
            from transformers import AutoModelForCausalLM

            return AutoModelForCausalLM._model_mapping[type(_hf_config(self._key))].main_input_name
        return getattr(_meta_model(self._key), name)


@counter("hf-trainer", "transformers 5.24 Trainer.floating_point_ops (total_flos)", INSTALLED,
         "transformers==5.24.0: transformers/trainer.py Trainer.floating_point_ops, added to state.total_flos per "
         "micro-batch; TRL 1.16's GRPOTrainer feeds it the dict of trl/trainer/grpo_trainer.py "
         "_generate_and_score_completions")
def _hf_trainer(case: Case) -> Figure:
    import types

    import torch
    from transformers import Trainer

    rows, width = len(case.rows), case.row_width
    p, c = max(case.prompt_lengths), max(case.completion_lengths)
    meta = dict(device="meta", dtype=torch.long)
    inputs = {"prompt_ids": torch.empty(rows, p, **meta), "prompt_mask": torch.empty(rows, p, **meta),
              "completion_ids": torch.empty(rows, c, **meta), "completion_mask": torch.empty(rows, c, **meta),
              "advantages": torch.empty(rows, device="meta"), "num_items_in_batch": torch.tensor(rows * width)}
    flops = Trainer.floating_point_ops(types.SimpleNamespace(model=_TrainerModel(case.config_json)), inputs)
    notes = {"matmuls": "6·N_non-embedding x input_ids.numel(); GRPO's batch has no input_ids, so 0"
             if not flops else "6·N_non-embedding per padded input token"}
    return Figure(passes=_passes_run(case, _runs(case), {"matmuls": int(flops)}, None), notes=notes)


__all__ = ["Counter", "Figure", "COUNTERS", "GROUPS", "FWD", "BWD", "OLD", "REF", "PREFILL", "DECODE", "INSTALLED",
           "FROM_CODE", "RULE", "verl_flops", "verl_flops_module", "verl_installed_flops", "VERL_VERSION"]
