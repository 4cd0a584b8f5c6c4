# Over 500 lines: the traced path is one idea -- build, measure, fit, cache and describe a model with no recipe -- kept in one file.
"""The traced path: exact FLOPs for any decoder transformers builds, with no recipe.

A model type with no analytic recipe (`modelspec.FAMILIES`) is priced from the real modeling
code: the Hugging Face model is built on the meta device (no weights, any size) with eager
attention (and eager / batched experts), and FlopCounterMode's formulas count, per decoder layer
(`suite.accounting.layerflops`), a no-grad forward with and without the adapter, a training pass
(with gradient checkpointing if it is on: what its checkpoint recomputes is counted apart) and
two decode steps through the KV cache, at a few sequence lengths. Only the first layer of each
structure runs; the others are priced as it is. Each layer's count is fitted to the exact form
the accounting prices (`suite.accounting.costs`):

    F_layer(b, L) = b * (tok * L + pair * L^2 + row + chunk * ceil(L / 64)) + call

(tok: Linears, experts, convolutions per token; pair: attention score and value products per
(query, key) pair, eager attention computing the whole square; row and chunk: per-sequence and
per-64-token-chunk terms of a chunked scan; call: peft's per-call folds), solved exactly in
rationals from some lengths and verified on another at batch 2; a decode step over n cached keys
costs tok + dec_tok + pair * n (pair * min(n, W) on a W-window layer). The fit is refused, never
guessed, when it does not reproduce the held-out pass exactly. Coefficients are cached per
(config, adapter, checkpointing).

The LM head and reward heads are priced analytically (`costs.head_fwd`), as for the recipes.
What is measured is the transformers/peft code path: an engine with other kernels (vLLM's
unfolded expert LoRA, fused scans) may differ where docs/accounting.md says so.

Needs torch and transformers (the light core prices catalogued models without them):
`traced_spec` raises a RaceError naming them when they are absent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
import warnings

from .. import jsonstrict
from ..errors import RaceError
from .adapter import Adapter, Lora, LoraUnit
from .costs import CHUNK
from .layerflops import Regions, SkipFailed, no_gc, record_outputs, skip, structures
from .work import Needs

PATH_TRACED = "traced"
"""`priced_by` of a spec priced by tracing its Hugging Face code (needs torch and transformers)."""

FIT_LENGTHS = (5, 9, 16)
"""Sequence lengths the per-layer fit solves on at batch 1 (tok, pair, row); a batch-2 pass at
CHECK_LENGTH verifies it."""
CHECK_LENGTH = 100
CHUNK_LENGTHS = (5, 9, 70, 150, 230, 260)
"""Lengths of the chunked fit (adds the per-chunk terms), used when the plain fit fails: the
first five solve, a batch-2 pass at the last and a batch-1 pass at CHECK_LENGTH verify."""
CALL_LENGTH = 5
"""Length of the batch-2 pass that separates per-call from per-row constants."""


@dataclass(frozen=True)
class _Family:
    mla: bool = False
    post_mlp_norm: bool = False
    peft_moe: str = ""


@dataclass(frozen=True)
class TracedSpec:
    """A decoder priced by tracing its Hugging Face modeling code (a `suite.accounting.specs.Spec`,
    as a recipe's ModelSpec is)."""

    name: str
    model_type: str
    config: str
    """The config as canonical JSON (hashable; `config_dict` reads it back)."""
    num_layers: int
    hidden_size: int
    vocab_size: int
    params_total: int
    params_embedding: int
    windows: tuple[int, ...]
    """Keys each decoder layer attends to in decode (0: the whole context)."""
    has_lm_head: bool = True
    tie_embeddings: bool = False
    score_head: tuple[tuple[int, int], ...] = ()
    score_bias: bool = False
    num_experts: int = 0
    experts_per_token: int = 0
    chunk: int = CHUNK
    """Chunk length of a chunked scan (the config's chunk_size, Mamba-2; else 64)."""

    @property
    def priced_by(self) -> str:
        """'traced': FlopCounterMode over its own Hugging Face code, fitted per layer."""
        return PATH_TRACED

    def costs(self, adapter: Adapter, *, rg0: bool, gc: bool, fold: bool = False, early_stop: bool = False) -> dict:
        """{'fwd', 'base', 'bwd', 'recompute'} per stat, measured on its code (`traced_costs`);
        `fold` and `early_stop` are what the code does, so they change nothing here. LoRA targets
        that adapt nothing are refused by name first (`lora`), not inside peft."""
        self.lora(adapter)
        return traced_costs(self, adapter, rg0, gc)

    def to_hf_config(self) -> dict:
        """The Hugging Face config it is traced from."""
        return self.config_dict

    @property
    def family(self) -> _Family:
        return _Family()

    @property
    def is_moe(self) -> bool:
        return False  # no recipe of its experts: the report gives no params_active

    @property
    def sliding_window(self) -> int:
        return max(self.windows, default=0)

    @property
    def params_non_embedding(self) -> int:
        return self.params_total - self.params_embedding

    @property
    def config_dict(self) -> dict:
        return json.loads(self.config)

    def mixer_of(self, i: int) -> str:
        return "sliding" if self.windows[i] else "full"

    def lora(self, adapter: Adapter) -> Lora:
        """The LoRA question, read off the real peft model (`traced_lora`)."""
        if adapter.kind != "lora":
            return Lora((), self.params_total)
        return traced_lora(self, adapter)

    @property
    def needs(self) -> Needs:
        """Work statistics its coefficients may use: every kind (those it does not use price at 0)."""
        return Needs(windows=tuple(sorted({w for w in self.windows if w})), decode=True, chunks=True, calls=True,
                     chunks2=True, chunk_size=self.chunk)

    def to_dict(self) -> dict:
        """A report's model spec: the config itself (everything else is traced from it again;
        suite.accounting.stored.spec_from_dict reads it back)."""
        return {"priced_by": PATH_TRACED, "name": self.name, "model_type": self.model_type,
                "config": json.loads(self.config)}


# ---- building the model ------------------------------------------------------------------------


def _need_torch():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        raise RaceError(f"the traced path needs torch and transformers ({e.name} is not installed)",
                        "pip install 'race-suite[train]' -c constraints.txt (catalogued models and recipe families price "
                        "without them)")


def _hf_config(cfg: dict):
    from transformers import AutoConfig

    d = {k: v for k, v in cfg.items() if k not in ("model_type", "transformers_version", "architectures")}
    d.setdefault("pad_token_id", 0)
    try:
        return AutoConfig.for_model(cfg["model_type"], **d)
    except (ValueError, KeyError) as e:
        raise RaceError(f"transformers cannot build model_type '{cfg.get('model_type')}': {e}",
                        "the traced path prices any decoder transformers builds; check the config's model_type")


@functools.lru_cache(maxsize=4)
def _meta_model(config: str):
    """The meta-device model of a canonical config, built once (from_config initialises every
    module; a deep copy of the meta model costs a fraction of that)."""
    return _build(json.loads(config), "meta")


def _fresh(config: str, device: str, keep: tuple[int, ...] | None = None):
    """A model to measure (and to wrap with peft): a copy of the cached meta model, or on the CPU a
    freshly initialised one (seeded). With `keep` (the layers of `_classes`), every other decoder
    layer is a `layerflops.skip` stand-in: it is never copied, run nor adapted."""
    import copy

    if device != "meta":
        model = _build(json.loads(config), device)
        if keep is not None:
            layers = model.get_submodule(_layer_list(model, len(keep)))
            for j, r in enumerate(keep):
                if r != j:
                    layers[j] = skip(layers[j], layers[r])
        return model
    if keep is None:
        return copy.deepcopy(_meta_model(config))
    meta = _meta_model(config)
    layers = meta.get_submodule(_layer_list(meta, len(keep)))
    memo = {id(layers[j]): skip(layers[j], None) for j, r in enumerate(keep) if r != j}
    model = copy.deepcopy(meta, memo)
    copied = model.get_submodule(_layer_list(model, len(keep)))
    for j, r in enumerate(keep):
        if r != j:
            object.__setattr__(copied[j], "_race_rep", copied[r])
    return model


def _build(cfg: dict, device: str, seed: int = 0):
    import torch
    from transformers import AutoModelForCausalLM

    hf = _hf_config(cfg)
    torch.manual_seed(seed)
    for kw in ({"attn_implementation": "eager", "experts_implementation": "batched_mm" if device == "meta" else "eager"},
               {"attn_implementation": "eager"}):
        try:
            with torch.device(device):
                return AutoModelForCausalLM.from_config(hf, **kw)
        except (TypeError, ValueError) as e:
            err = e
    raise RaceError(f"transformers builds no causal LM for model_type '{cfg['model_type']}' ({err})",
                    "the accounting covers decoder-only models")


def _layer_list(model, n: int) -> str:
    import torch

    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.ModuleList) and len(mod) == n and name:
            return name
    raise RaceError(f"no list of {n} decoder layers found in {type(model).__name__}",
                    "the traced path needs the decoder layers as one nn.ModuleList")


# ---- one layer of each structure ---------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _classes(config: str, windows: tuple[int, ...]) -> tuple[int, ...]:
    """For each decoder layer, the first layer of the same structure (`structures`): layers of
    one structure cost the same FLOPs, so only the first of each is measured."""
    model = _meta_model(config)
    layers = model.get_submodule(_layer_list(model, len(windows)))
    first: dict = {}
    return tuple(first.setdefault(s, i) for i, s in enumerate(structures(layers, windows)))


class _Meter:
    """Per-layer FLOPs of one model's passes (meta device unless it needs data)."""

    def __init__(self, spec: TracedSpec, adapter: Adapter, rg0: bool, gc: bool, keep: tuple[int, ...] | None):
        from .reference import add_lora

        self.spec, self.adapter = spec, adapter
        self.device = _device(spec.config, keep)
        model = _fresh(spec.config, self.device, keep)
        n = spec.num_layers
        layers = model.get_submodule(_layer_list(model, n))
        if keep is not None:
            record_outputs(layers, keep)
        self.regions = Regions(n, {**{i: layers[i] for i in sorted(set(keep or range(n)))},
                                    n + 1: model.get_output_embeddings()}, meta=self.device == "meta")
        self.model = add_lora(model, adapter)
        self.rg0, self.gc = rg0, gc

    def _ids(self, b: int, L: int):
        import torch

        return torch.full((b, L), 3, dtype=torch.long, device=self.device), \
            torch.ones(b, L, dtype=torch.long, device=self.device)

    def forward(self, b: int, L: int, base: bool = False) -> list[int]:
        import contextlib

        import torch

        from .reference import _meta_autocast

        ids, mask = self._ids(b, L)
        m = self.model
        m.eval()
        ctx = m.disable_adapter() if base and hasattr(m, "disable_adapter") else contextlib.nullcontext()
        fc = self.regions.counter()
        with ctx, fc, torch.no_grad(), _meta_autocast(self.device):
            m(input_ids=ids, attention_mask=mask, use_cache=False)
        return fc.per_entry[:-1]  # the head is priced analytically

    def train(self, b: int, L: int, gc: bool) -> tuple[list[int], list[int]]:
        """A training pass: (FLOPs per entry, those its checkpoint recomputes)."""
        from .reference import _meta_autocast

        m = self.model
        if gc:
            m.gradient_checkpointing_enable()
        else:
            m.gradient_checkpointing_disable() if hasattr(m, "gradient_checkpointing_disable") else None
        if self.adapter.kind == "lora" and self.rg0:
            m.enable_input_require_grads()
        m.train()
        ids, mask = self._ids(b, L)
        fc = self.regions.counter()
        with fc, _meta_autocast(self.device):
            out = m(input_ids=ids, attention_mask=mask, use_cache=False)
            self.regions.backward = True
            out.logits.sum().backward()
        m.zero_grad(set_to_none=True)
        if self.adapter.kind == "lora" and self.rg0:
            m.disable_input_require_grads()
        if gc:
            m.gradient_checkpointing_disable()
        return fc.per_entry[:-1], fc.recomputed[:-1]  # the head is priced analytically

    def decode(self, p: int) -> tuple[list[int], list[int]]:
        """Two decode steps after a prefill of p tokens, as generate runs them: over p + 1 keys,
        then p + 2."""
        import torch

        from .reference import _meta_autocast

        m = self.model
        m.eval()
        ids, mask = self._ids(1, p + 2)
        steps = []
        with torch.no_grad(), _meta_autocast(self.device):
            out = m(input_ids=ids[:, :p], attention_mask=mask[:, :p], use_cache=True)
            for k in (p, p + 1):
                fc = self.regions.counter()
                with fc:
                    out = m(input_ids=ids[:, k:k + 1], attention_mask=mask[:, :k + 1],
                            past_key_values=out.past_key_values, use_cache=True)
                steps.append(fc.per_entry[:-1])  # the head is priced analytically
        return steps[0], steps[1]


def _solve(rows: list[list[Fraction]], ys: list[int]) -> list[Fraction] | None:
    """Exact least-squares-free solve of a square system (Gaussian elimination in rationals)."""
    n = len(rows)
    a = [r[:] + [Fraction(y)] for r, y in zip(rows, ys)]
    for c in range(n):
        piv = next((r for r in range(c, n) if a[r][c] != 0), None)
        if piv is None:
            return None
        a[c], a[piv] = a[piv], a[c]
        for r in range(n):
            if r != c and a[r][c] != 0:
                f = a[r][c] / a[c][c]
                a[r] = [x - f * y for x, y in zip(a[r], a[c])]
    return [a[i][n] / a[i][i] for i in range(n)]


def _basis(L: int, chunked: bool, chunk: int = CHUNK) -> list[Fraction]:
    out = [Fraction(L), Fraction(L * L), Fraction(1)]
    c = math.ceil(L / chunk)
    return out + [Fraction(c), Fraction(c * c)] if chunked else out


_STATS = ("tok", "pair", "row", "chunk", "chunk2")


def _value(sol: list[Fraction], L: int, chunked: bool, chunk: int) -> Fraction:
    return sum(c * b for c, b in zip(sol, _basis(L, chunked, chunk)))


def _fit(measure, entries: list[int], what: str, name: str, chunk: int = CHUNK) -> list[dict]:
    """{stat: FLOPs} of each of `entries` (layers; the last, the rest of the model) of a pass,
    exact: F(b, L) = b * g(L) + call. Solved at batch 1 over several lengths (g + call), then a
    batch-2 pass at a length not solved on either confirms call = 0 and the form at once, or
    gives call = 2 F(1, L) - F(2, L) (peft's per-call folds), which two more passes verify."""
    measure = functools.lru_cache(maxsize=None)(measure)
    k = chunk / CHUNK  # the chunked lengths scale with the chunk (crossing 1, 2, 3 chunk boundaries)
    scaled = tuple(L if L < 10 else int(L * k) for L in CHUNK_LENGTHS)
    for chunked, lengths, check in ((False, FIT_LENGTHS, CHECK_LENGTH), (True, scaled[:5], scaled[5])):
        got = {L: measure(1, L) for L in lengths}
        two = measure(2, check)
        sols = []
        for i in entries:
            sol = _solve([_basis(L, chunked, chunk) for L in lengths], [got[L][i] for L in lengths])
            if sol is None or any(x.denominator != 1 for x in sol):
                break
            sols.append((sol, 2 * _value(sol, check, chunked, chunk) - two[i]))
        else:
            checks = [(1, check), (2, CALL_LENGTH)] if any(c for _, c in sols) else []
            checks += [(1, CHECK_LENGTH)] if chunked else []
            if all(measure(b, L)[i] == b * _value(sol, L, chunked, chunk) - (b - 1) * c
                   for b, L in checks for i, (sol, c) in zip(entries, sols)):
                out = []
                for sol, c in sols:
                    d = {s: int(v) for s, v in zip(_STATS, sol)}
                    d["row"] -= int(c)
                    out.append({s: v for s, v in {**d, "call": int(c)}.items() if v})
                return out
    raise RaceError(f"{name}: the traced {what} of this model is not of the form the accounting prices "
                    "(linear in tokens, quadratic attention, per-sequence, per-64-token-chunk and chunks-squared terms)",
                    "report it with the config; its FLOPs would be a guess")


def _diff(a: list[dict], b: list[dict]) -> list[dict]:
    return [{s: x.get(s, 0) - y.get(s, 0) for s in set(x) | set(y)} for x, y in zip(a, b)]


def _sum(layers: list[dict], windows: tuple[int, ...]) -> dict:
    """Per-layer stats summed over the decoder, a windowed layer's pairs under pair.w{W}."""
    out: dict = {}
    for c, w in zip(layers, windows):
        for stat, v in c.items():
            key = f"pair.w{w}" if stat == "pair" and w else stat
            out[key] = out.get(key, 0) + v
    return {k: v for k, v in out.items() if v}


@contextlib.contextmanager
def _quiet():
    """The modeling code's warnings (deprecations, meta-device notes) are not the user's."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(level)


FORMAT = 4
"""Version of the cached coefficients (bump when the fit changes). 2: ops charged to layers by
autograd node, the checkpoint recompute counted as what it recomputes. 3: the first layer priced
alone when its input needs no gradient. 4: decode fitted inside every sliding window."""


def cache_dir() -> Path | None:
    """Where traced coefficients persist between runs: $RACE_TRACED_CACHE ('' or 'off': nowhere),
    else $XDG_CACHE_HOME/race/traced (~/.cache/race/traced)."""
    env = os.environ.get("RACE_TRACED_CACHE")
    if env is not None:
        return None if env in ("", "off") else Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "race" / "traced"


def _cache_file(spec: TracedSpec, adapter: Adapter, rg0: bool, gc: bool) -> Path | None:
    import peft
    import torch
    import transformers

    root = cache_dir()
    if root is None:
        return None
    key = json.dumps([FORMAT, spec.config, repr(adapter), rg0, gc, torch.__version__, transformers.__version__,
                      peft.__version__], sort_keys=True)
    return root / f"{spec.model_type}-{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


@functools.lru_cache(maxsize=128)
def _costs(spec: TracedSpec, adapter: Adapter, rg0: bool, gc: bool) -> dict:
    """{'fwd', 'base', 'bwd', 'recompute'} FLOPs per stat, as costs.model_costs gives them:
    measured once per (config, adapter, rg0, checkpointing, library versions), then read back
    from the cache directory."""
    path = _cache_file(spec, adapter, rg0, gc)
    if path is not None and path.is_file():
        try:
            got = jsonstrict.loads(path.read_bytes())
            if isinstance(got, dict) and set(got) == {"fwd", "base", "bwd", "recompute"}:
                return got
        except (OSError, ValueError):
            pass  # a damaged cache entry is measured again
    with _quiet(), no_gc():
        out = _measure_costs(spec, adapter, rg0, gc)
    if path is not None:
        try:
            from ..atomic import write_json_atomic

            path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, out)
        except OSError:
            pass  # a read-only cache only costs the next run a measurement
    return out


def _measure_costs(spec: TracedSpec, adapter: Adapter, rg0: bool, gc: bool, every_layer: bool = False) -> dict:
    """Measure and fit one layer of each structure (`_classes`), or with `every_layer` each
    decoder layer (the slow reference the fast path is tested against); a model whose layers
    cannot be left out (`SkipFailed`) is measured whole."""
    keep = None if every_layer else _first_alone(_classes(spec.config, spec.windows), rg0)
    if keep is not None and len(set(keep)) < len(keep):
        try:
            return _measure(spec, adapter, rg0, gc, keep)
        except SkipFailed:
            pass
    return _measure(spec, adapter, rg0, gc, None)


def _first_alone(keep: tuple[int, ...], rg0: bool) -> tuple[int, ...]:
    """`keep` with the first decoder layer priced alone when its input needs no gradient (`rg0`
    false: frozen embeddings, no checkpointing hook): every later layer's input does, so it costs
    the input gradients the first layer skips and cannot be priced as the first (issue 39: an
    LFM2 LoRA update was 6.6% low). Those layers take the next of their structure instead."""
    if rg0:
        return keep
    later = [j for j in range(1, len(keep)) if keep[j] == 0]
    return tuple(later[0] if j in later else r for j, r in enumerate(keep))


def _measure(spec: TracedSpec, adapter: Adapter, rg0: bool, gc: bool, keep: tuple[int, ...] | None) -> dict:
    m = _Meter(spec, adapter, rg0, gc, keep)
    n, w, name = spec.num_layers + 1, spec.windows + (0,), spec.name  # + the rest of the model
    k = spec.chunk
    of = (keep or tuple(range(spec.num_layers))) + (spec.num_layers,)  # the entry each layer is priced as
    e = sorted(set(of))

    def fit(measure, what):
        got = dict(zip(e, _fit(measure, e, what, name, k)))
        return [got[of[i]] for i in range(n)]

    fwd = fit(lambda b, L: m.forward(b, L), "forward")
    base = fwd if adapter.kind == "full" else fit(lambda b, L: m.forward(b, L, base=True), "forward")
    # one training pass (with checkpointing if it is on) gives the pass and, apart, what its
    # checkpoint recomputed; the backward is the rest beyond the forward
    train = functools.lru_cache(maxsize=None)(lambda b, L: m.train(b, L, gc))
    t = fit(lambda b, L: train(b, L)[0], "training pass")
    rec = fit(lambda b, L: train(b, L)[1], "checkpoint recompute") if gc else [{}] * n
    out = {"fwd": _sum(fwd, w), "base": _sum(base, w), "bwd": _sum(_diff(_diff(t, fwd), rec), w),
           "recompute": _sum(rec, w)}
    # a decode step over n keys: tok + dec_tok + pair * n (per layer; window-bounded keys). Both
    # measured steps stay inside every window: a step past it attends no more keys, and its slope
    # would read as a negative per-pair cost (issue 39: Gemma 2 with a 4-key window, -1.3%)
    p1 = min([3] + [wi - 2 for wi in spec.windows if wi])
    if p1 < 1:
        raise RaceError(f"{name}: a sliding window of {min(wi for wi in spec.windows if wi)} keys leaves no decode "
                        "step to fit inside it", "the traced path fits windows of 3 keys or more")
    d1, d2 = m.decode(p1)
    dec_tok = dec_pair = 0
    for i in range(n):
        j = of[i]
        slope = d2[j] - d1[j]
        # beyond the pairs of its forward, a decode step may re-expand every cached key (MLA's
        # latents, an indexer's keys): per decode pair
        dec_pair += slope - fwd[i].get("pair", 0)
        dec_tok += d1[j] - slope * (p1 + 1) - fwd[i].get("tok", 0) - fwd[i].get("call", 0)
    if dec_tok:
        out["fwd"]["dec_tok"] = dec_tok
    if dec_pair:
        out["fwd"]["dec_pair"] = dec_pair
    return out


def traced_costs(spec: TracedSpec, adapter: Adapter, rg0: bool, gc: bool) -> dict:
    """What `costs.model_costs` gives for a recipe: FLOPs per stat of the forward with the
    adapter, without it, the backward and the checkpoint recompute (measured, fitted, cached
    per config: the name is not part of the key)."""
    _need_torch()
    return _costs(dataclasses.replace(spec, name=spec.model_type), adapter, rg0, gc)


@functools.lru_cache(maxsize=128)
def traced_lora(spec: TracedSpec, adapter: Adapter) -> Lora:
    """(what peft adapts, trainable parameters) on the real model (meta device): peft wraps one
    layer of each structure (`_classes`); the others adapt what their first does."""
    _need_torch()
    from .reference import adapted_units, add_lora

    keep = _classes(spec.config, spec.windows)
    nothing = RaceError(f"LoRA targets {', '.join(adapter.targets)} adapt nothing in {spec.name} ({spec.model_type})",
                        "name modules the model has (its config.json's family decides: GPT-2's are c_attn, c_proj, "
                        "c_fc), or --lora-targets all-linear")
    try:
        with _quiet():
            model = add_lora(_fresh(spec.config, "meta", keep), adapter)
    except ValueError as e:  # peft's NoMatchingPeftModuleError: no target module in the model
        if "not found in the base model" in str(e):
            raise nothing from None
        raise
    prefix = _layer_list(model, spec.num_layers) + "."
    per_layer: dict[int, int] = {}  # trainable parameters of each adapted layer
    for path, p in model.named_parameters():
        if p.requires_grad and path.startswith(prefix):
            i = int(path[len(prefix):].split(".")[0])
            per_layer[i] = per_layer.get(i, 0) + p.numel()
    units = [LoraUnit(*u) for u in adapted_units(model)]
    units += [dataclasses.replace(u, layer=j) for j, r in enumerate(keep) if r != j for u in units if u.layer == r]
    if adapter.kind == "lora" and not units:
        raise nothing
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    trainable += sum(per_layer.get(r, 0) for j, r in enumerate(keep) if r != j)
    return Lora(tuple(sorted(units, key=dataclasses.astuple)), trainable)


CPU_LIMIT = 20_000_000
"""Parameters up to which a model whose code needs data (.item() on the meta device: Mamba
scans, data-dependent routing) is traced on the CPU with random weights instead."""


@functools.lru_cache(maxsize=256)
def _device(config: str, keep: tuple[int, ...] | None = None) -> str:
    """meta, unless the modeling code needs data: then the CPU for a small model, else refused
    (one forward of the layers `keep` names, as `_fresh` builds them)."""
    import torch

    with _quiet():
        model = _meta_model(config) if keep is None else _fresh(config, "meta", keep)
        if keep is not None:
            record_outputs(model.get_submodule(_layer_list(model, len(keep))), keep)
        ids = torch.full((1, 5), 3, dtype=torch.long, device="meta")
        try:
            with torch.no_grad():
                model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
            return "meta"
        except SkipFailed:
            return _device(config)
        except (RuntimeError, NotImplementedError) as e:
            n = sum(p.numel() for p in _meta_model(config).parameters())
            if n > CPU_LIMIT:
                raise RaceError(f"{json.loads(config).get('model_type')}: its modeling code cannot run on the meta "
                                f"device ({str(e).splitlines()[0][:80]}), and at {n:,} parameters it is too big to "
                                "trace on the CPU", "price a smaller config of the same family (FLOPs per token "
                                "scale with its widths), or add a recipe") from None
            return "cpu"


# ---- specs ----------------------------------------------------------------------------------------


def _score_head(cfg: dict, h: int) -> tuple[bool, tuple, bool]:
    archs = cfg.get("architectures") or []
    arch = archs[0] if archs else ""
    if arch.endswith("ForSequenceClassification") or arch.endswith("ForTokenClassification"):
        labels = cfg.get("num_labels") or len(cfg.get("id2label") or {}) or 2
        return False, ((h, labels),), False
    return True, (), False


def _first_int(hf, keys: tuple[str, ...]) -> int:
    """The first of a config's spellings of one fact that holds an integer (0: none does)."""
    return next((v for v in (getattr(hf, k, None) for k in keys) if type(v) is int), 0)


def canonical(config: dict) -> str:
    """A config as the traced path keys it, and reports store it: sorted keys, `_` keys and
    transformers_version left out."""
    return json.dumps({k: v for k, v in config.items() if not k.startswith("_") and k != "transformers_version"},
                      sort_keys=True, default=str)


def traced_spec(cfg: dict, name: str, where: str | None = None) -> TracedSpec:
    """A TracedSpec of a config.json dict of any decoder transformers builds."""
    _need_torch()
    import torch

    where = where or name
    with _quiet():
        hf = _hf_config(cfg)
    text = getattr(hf, "text_config", None)
    if text is not None and text is not hf and getattr(hf, "get_text_config", None):
        hf = hf.get_text_config()
        cfg = {**hf.to_dict(), "model_type": hf.model_type, "architectures": cfg.get("architectures")}
    from ..limits import check_config_counts

    check_config_counts(hf, where)      # bounded work: no model is built from a hostile size
    if getattr(hf, "is_encoder_decoder", False):
        raise RaceError(f"{where}: encoder-decoder configs are not supported", "accounting covers decoder-only models")
    canon = canonical(cfg)      # what a report stores and the validator traces again
    with _quiet():
        model = _meta_model(canon)
    n = hf.num_hidden_layers
    _layer_list(model, n)
    h, vocab = hf.hidden_size, hf.vocab_size
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    tied = model.get_output_embeddings() is not None and \
        model.get_output_embeddings().weight is model.get_input_embeddings().weight
    has_head, score, bias = _score_head(cfg, h)
    emb = vocab * h * (1 if tied or not has_head else 2)
    if not has_head:  # the backbone plus its score head, not the LM head
        total += -vocab * h * (0 if tied else 1) + sum(a * b for a, b in score)
    types = list(getattr(hf, "layer_types", None) or [])
    if len(types) != n:
        types = ["full_attention"] * n
    sw = getattr(hf, "sliding_window", None) or 0
    chunk = getattr(hf, "attention_chunk_size", None) or 0
    windows = tuple(sw if t == "sliding_attention" else chunk if t == "chunked_attention" else 0 for t in types)
    experts = _first_int(hf, ("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts"))
    del torch
    return TracedSpec(name=name, model_type=cfg["model_type"], config=canon, num_layers=n, hidden_size=h,
                      vocab_size=vocab, params_total=total, params_embedding=emb, windows=windows,
                      has_lm_head=has_head, tie_embeddings=bool(tied) and has_head, score_head=score, score_bias=bias,
                      num_experts=experts, experts_per_token=_first_int(hf, ("num_experts_per_tok", "top_k_experts",
                                                                             "moe_k", "moe_topk")),
                      chunk=int(getattr(hf, "chunk_size", None) or getattr(hf, "mamba_chunk_size", None) or CHUNK))


__all__ = ["TracedSpec", "traced_spec", "traced_costs", "traced_lora", "PATH_TRACED"]
