"""FLOPs of one pass per decoder layer, as the traced path (`suite.accounting.traced`) measures
them on the meta device, fast enough for a 400B model's first pricing:

- one layer of each structure runs (`structures`: module classes, parameter shapes, plain
  attributes, window); the others are `skip`ped, passing their hidden states through;
- each FLOP is charged to the layer whose forward ran it, or in a backward to the layer whose
  forward created the autograd node being run (`Regions`), so a layer's count can stand for its
  peers' (a module tracker's backward hooks hand neighbours' ops to a module);
- meta kernels run once per input layout (`MetaKernels`): torch runs most in Python;
- the cyclic garbage collector waits (`no_gc`).

Needs torch (imported where used; the light core never imports this module's torch paths).
"""

from __future__ import annotations

import bisect
import contextlib
import functools


def _fact(v):
    """A hashable fact of a module attribute that may change what its forward computes (None: not
    a fact -- configs, caches, other objects, which a layer shares with its peers or which its
    parameters and submodules already describe)."""
    import enum
    import types

    import torch

    if isinstance(v, (bool, int, str)) or v is None:
        return v
    if isinstance(v, float):
        return repr(v)  # nan == nan
    if isinstance(v, (torch.dtype, torch.device, enum.Enum)):
        return str(v)
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)):
        f = getattr(v, "func", v)
        return f"{getattr(f, '__module__', '')}.{getattr(f, '__qualname__', type(f).__name__)}"
    if isinstance(v, (tuple, list)):
        got = tuple(_fact(x) for x in v)
        return (type(v).__name__, got) if all(x is not None or y is None for x, y in zip(got, v)) else None
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        got = tuple(sorted((k, _fact(x)) for k, x in v.items()))
        return ("dict", got) if all(x is not None or v[k] is None for k, x in got) else None
    return None


def structures(layers, windows: tuple[int, ...]) -> list:
    """What decides each layer's FLOPs: per submodule its class, its parameter and buffer shapes
    and dtypes and its plain attributes (flags, sizes, windows, layer kinds), and the layer's
    window. An integer attribute equal to the layer's index plus a constant in every layer that
    has it (layer_idx, layer_number) names the layer, not its structure, and is left out."""
    import torch

    base = set(vars(torch.nn.Module()))
    raw = []
    for layer in layers:
        shape, attrs = [], {}
        for path, mod in layer.named_modules():
            tensors = [*mod._parameters.items(), *mod._buffers.items()]
            shape.append((path, type(mod).__module__, type(mod).__qualname__,
                          tuple((k, tuple(t.shape), str(t.dtype)) for k, t in tensors if t is not None)))
            for k, v in vars(mod).items():
                if k not in base:
                    attrs[(path, k)] = _fact(v)
        raw.append((tuple(shape), attrs))
    index = set()  # among the layers that have it (a hybrid's attention layers, its Mamba layers)
    for k in set().union(*(a for _, a in raw)):
        has = [(i, a[k]) for i, (_, a) in enumerate(raw) if k in a]
        if len(has) > 1 and all(type(v) is int for _, v in has) and len({v - i for i, v in has}) == 1:
            index.add(k)
    return [(shape, tuple(sorted((k, repr(v)) for k, v in a.items() if k not in index)), w)
            for (shape, a), w in zip(raw, windows)]


@functools.lru_cache(maxsize=1)
def _skip_class():
    import torch

    class Skip(torch.nn.Module):
        """A decoder layer left out of a measurement (an earlier layer of its structure is
        measured): it passes its hidden states through, in the container its measured peer
        returned, and answers attribute reads (attention_type, layer_idx) as the layer would."""

        def forward(self, *args, **kwargs):
            hidden = args[0] if args else kwargs.get("hidden_states")
            out = getattr(self._race_rep, "_race_out", None)
            first = out[0] if isinstance(out, tuple) else out
            if not (isinstance(hidden, torch.Tensor) and isinstance(first, torch.Tensor)
                    and hidden.shape == first.shape):
                raise SkipFailed(type(self._race_layer).__name__)
            # a new tensor (a view: no FLOPs), so the FLOP counter's per-module backward hooks on
            # this layer's input and output do not land on its measured peer's output
            hidden = hidden.view_as(hidden)
            return (hidden, *out[1:]) if isinstance(out, tuple) else hidden

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(object.__getattribute__(self, "_race_layer"), name)

    return Skip


class SkipFailed(RuntimeError):
    """A left-out layer could not stand in for its layer (its inputs or outputs are not one hidden
    state): the measurement runs every layer instead."""


def skip(layer, rep):
    s = _skip_class()()
    object.__setattr__(s, "_race_layer", layer)
    object.__setattr__(s, "_race_rep", rep)
    return s


def record_outputs(layers, keep: tuple[int, ...]) -> None:
    """Each measured layer of `layers` (the decoder's list) that stands for others keeps its last
    output (what its Skips return)."""

    def hook(mod, args, out):
        object.__setattr__(mod, "_race_out", out)

    for r in sorted(set(keep)):
        if keep.count(r) > 1:
            layers[r].register_forward_hook(hook)


# ---- measuring ----------------------------------------------------------------------------------


class Regions:
    """Which entry of a pass each counted op belongs to: decoder layer i (i < n), the rest of the
    model (n) or the output head (n + 1). In a forward (a checkpoint's recompute included), the
    region whose forward is running; in a backward, the region whose forward created the autograd
    node being run (its sequence number falls in the region's span). A module tracker's backward
    hooks (FlopCounterMode's) hand some of a module's neighbours' backward ops to it (Gemma 4's
    per-layer inputs land in layer 0), which would be copied with the layer."""

    def __init__(self, n: int, modules: dict, meta: bool = True):
        import torch

        self.n, self.stack, self.starts, self.spans, self.backward = n, [], [], [], False
        self.kernels = MetaKernels() if meta else _run  # shared by the passes of one model
        self._seq, self._node = torch._C._autograd._get_sequence_nr, torch._C._current_autograd_node
        for i, mod in modules.items():
            self._wrap(mod, i)

    def _wrap(self, mod, i: int) -> None:
        inner = mod.forward

        def forward(*args, **kwargs):
            start = self._seq()
            self.stack.append(i)
            try:
                return inner(*args, **kwargs)
            finally:  # a checkpoint's recompute may stop early by raising
                self.stack.pop()
                self.starts.append(start)
                self.spans.append((self._seq(), i))

        mod.forward = forward

    def where(self) -> int:
        if self.stack:
            return self.stack[-1]
        node = self._node()
        if node is None:
            return self.n
        s = node._sequence_nr()
        k = bisect.bisect_right(self.starts, s) - 1
        return self.spans[k][1] if k >= 0 and s < self.spans[k][0] else self.n

    def counter(self):
        """A FlopCounterMode for one pass, its FLOPs per entry in `.per_entry`, and those a
        checkpoint recomputed in the backward (a region's forward running while `backward` is
        set) in `.recomputed`."""
        self.stack.clear()
        self.starts.clear()
        self.spans.clear()
        self.backward = False
        return _counter_class()(self)


class MetaKernels:
    """Outputs of meta-device ops by their inputs' shapes, strides and dtypes and their other
    arguments: a meta kernel is a pure function of those, and torch runs most of them (every
    elementwise op) in Python, two thirds of a pass's time. A repeat (the same layer structure
    at the same length, the next pass) gets a fresh tensor of the recorded layout. Only ops that
    neither mutate nor alias their inputs, nor depend on data or a random seed, are recorded."""

    SKIP = ("data_dependent_output", "dynamic_output_shape", "inplace_view", "nondeterministic_seeded")

    def __init__(self):
        import torch

        self.torch = torch
        self.leaf = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.memory_format, torch.layout)
        self.ops: dict = {}
        self.outputs: dict = {}

    def _pure(self, func) -> bool:
        ok = self.ops.get(func)
        if ok is None:
            schema, tags = func._schema, {t.name for t in func.tags}
            ok = self.ops[func] = (func.namespace == "aten" and not func.is_view and not tags & set(self.SKIP)
                                   and all(a.alias_info is None for a in (*schema.arguments, *schema.returns)))
        return ok

    def _key(self, func, args, kwargs):
        key = [func]
        return tuple(key) if self._flat(args, key) and self._flat(kwargs, key) else None

    def _flat(self, x, key: list) -> bool:
        t = self.torch
        if isinstance(x, t.Tensor):
            if not x.is_meta or x.layout != t.strided:
                return False
            key.append((x.shape, x.stride(), x.dtype, x.storage_offset()))
        elif isinstance(x, (tuple, list)):
            key.append((type(x), len(x)))
            return all(self._flat(y, key) for y in x)
        elif isinstance(x, dict):
            key.append((dict, tuple(x)))
            return all(self._flat(y, key) for y in x.values())
        elif isinstance(x, self.leaf):
            key.append((type(x), x))  # True and 1 are different arguments
        else:
            return False
        return True

    def _layout(self, out):
        t = self.torch
        if isinstance(out, t.Tensor):
            return (out.shape, out.stride(), out.dtype) if out.is_meta and out.storage_offset() == 0 \
                and out.layout == t.strided and type(out) is t.Tensor else None
        if isinstance(out, (tuple, list)):
            got = [self._layout(o) for o in out]
            return (type(out), got) if all(g is not None for g in got) else None
        return None

    def _make(self, layout):
        if isinstance(layout[0], type):
            return layout[0](self._make(x) for x in layout[1])
        return self.torch.empty_strided(layout[0], layout[1], dtype=layout[2], device="meta")

    def __call__(self, func, args, kwargs):
        key = self._key(func, args, kwargs) if self._pure(func) else None
        if key is None:
            return func(*args, **kwargs)
        layout = self.outputs.get(key)
        if layout is not None:
            return self._make(layout)
        out = func(*args, **kwargs)
        layout = self._layout(out)
        if layout is not None:
            self.outputs[key] = layout
        return out


def _run(func, args, kwargs):
    return func(*args, **kwargs)


@functools.lru_cache(maxsize=1)
def _counter_class():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry, shape_wrapper

    from .reference import flop_formulas

    formulas = {**flop_registry, **{k: shape_wrapper(v) for k, v in flop_formulas().items()}}
    composite = torch._C.DispatchKey.CompositeImplicitAutograd
    decomposes: dict = {}

    class RegionFlops(TorchDispatchMode):
        """FlopCounterMode's formulas and decompositions, counted per `Regions` entry: no module
        tracker, an op offered to its decomposition only when it has one (FlopCounterMode
        re-enters itself to ask for every op), meta kernels run once per layout (`MetaKernels`)."""

        def __init__(self, regions: Regions):
            super().__init__()
            self.regions, self.run = regions, regions.kernels
            self.per_entry = [0] * (regions.n + 2)
            self.recomputed = [0] * (regions.n + 2)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if isinstance(func, torch._ops.HigherOrderOperator):
                return NotImplemented
            formula = formulas.get(func._overloadpacket)
            if formula is None:
                d = decomposes.get(func)
                if d is None:
                    d = decomposes[func] = composite in func.py_kernels or \
                        torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), composite)
                if d:
                    with self:
                        out = func.decompose(*args, **kwargs)
                    if out is not NotImplemented:
                        return out
                return self.run(func, args, kwargs)
            out = self.run(func, args, kwargs)
            r, flops = self.regions, formula(*args, **kwargs, out_val=out)
            self.per_entry[r.where()] += flops
            if r.backward and r.stack:
                self.recomputed[r.stack[-1]] += flops
            return out

    return RegionFlops


@contextlib.contextmanager
def no_gc():
    """The cyclic garbage collector paused while measuring: a pass allocates thousands of short-lived
    meta tensors and autograd nodes, and a full collection walks every object of torch and
    transformers (a third of a 400B model's first pricing); what is left is collected after."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


__all__ = ["structures", "skip", "SkipFailed", "record_outputs", "Regions", "MetaKernels", "no_gc"]
