"""Declared settings against the artefacts a run leaves beside its report: the adapter the run
saved (`adapter/`, as suite.train.trl_callback.RaceLedger writes it: peft's adapter_config.json
and adapter_model.safetensors, or a fully fine-tuned model's safetensors) and the KL the engine
logged. A report that claims rank 64 for a rank-256 run, LoRA for full fine-tuning, or beta 0 for
a run that logged a KL term is priced consistently with its claim -- every equation holds -- and
only these files say otherwise. Read without torch: a safetensors header is 8 bytes of length
and a JSON table of tensor names and shapes."""

from __future__ import annotations

import json
import math
import struct
from functools import reduce
from operator import mul
from pathlib import Path
from typing import Iterable

from .registry import Issue, rule

ADAPTER_DIR = "adapter"
"""Where RaceLedger saves the trained adapter (or model), beside the ledger and the report."""
MAX_HEADER_BYTES = 1 << 26
"""A safetensors header larger than this is not read (a real adapter's: kilobytes; a 400B
model's: a few MB)."""
MAX_FILES = 256


def safetensors_shapes(path: Path) -> dict[str, list[int]] | None:
    """{tensor name: shape} from a safetensors file's header, None when it is not one."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                return None
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                return None
            table = json.loads(f.read(n))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(table, dict):
        return None
    out = {}
    for k, v in table.items():
        if k == "__metadata__" or not isinstance(v, dict):
            continue
        shape = v.get("shape")
        if isinstance(shape, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in shape):
            out[k] = shape
    return out


def saved_adapter(folder: Path) -> dict | None:
    """What the saved weights in `folder` say: {"kind": "lora" | "full", "ranks": set of
    ranks, "targets": adapted module names, "params": parameters saved}, None when there are
    no readable weights."""
    files = sorted(folder.glob("*.safetensors"))[:MAX_FILES] if folder.is_dir() else []
    tensors: dict[str, list[int]] = {}
    for f in files:
        t = safetensors_shapes(f)
        if t:
            tensors.update(t)
    if not tensors:
        return None
    lora_a = {k: s for k, s in tensors.items() if ".lora_A." in k and len(s) == 2}
    if lora_a:
        ranks = {s[0] for s in lora_a.values()}
        targets = {k.split(".lora_A.")[0].rsplit(".", 1)[-1] for k in lora_a}
        lora = {k: s for k, s in tensors.items() if ".lora_A." in k or ".lora_B." in k}
        params = sum(reduce(mul, s, 1) for s in lora.values())
        return {"kind": "lora", "ranks": ranks, "targets": targets, "params": params}
    return {"kind": "full", "ranks": set(), "targets": set(),
            "params": sum(reduce(mul, s, 1) for s in tensors.values())}


@rule("PROV-005", title="the declared adapter disagrees with the adapter the run saved", requires=("adapter",))
def adapter_artefact(ctx) -> Iterable[Issue]:
    """Where the report's folder holds the weights the run saved (`adapter/`: peft's
    adapter_model.safetensors, or a fully fine-tuned model's safetensors), they are the run's
    own record of what was trained: LoRA tensors (`lora_A` of shape [r, in]) or whole weights;
    each `lora_A`'s rank; the modules adapted; the parameters trained. The report's `adapter`
    must say the same: its type (LoRA vs full fine-tuning), its rank (rank 64 claimed for a
    rank-256 run prices a quarter of the adapter's gradients), its targets and its
    `trainable_params` (exactly the LoRA tensors' elements). Read from the safetensors header
    (no torch); a folder without weights is not checked (the ledger alone cannot show the rank:
    docs/validation.md)."""
    if ctx.base_dir is None:
        return
    saved = saved_adapter(Path(ctx.base_dir) / ADAPTER_DIR)
    if saved is None:
        return
    a = ctx.doc["adapter"]
    hint = "declare the adapter the run trained (its saved adapter_config.json), and price the run again"
    if a["type"] != saved["kind"]:
        yield Issue("$.adapter.type", f"the report declares {a['type']!r} but the weights the run saved "
                    f"(adapter/*.safetensors) are {'LoRA tensors' if saved['kind'] == 'lora' else 'whole weights'}",
                    hint)
        return
    if saved["kind"] != "lora":
        return
    if saved["ranks"] != {a["rank"]}:
        yield Issue("$.adapter.rank", f"rank {a['rank']} declared, but the saved LoRA tensors have rank "
                    f"{', '.join(map(str, sorted(saved['ranks'])))}", hint)
    targets = set(a.get("targets") or ())
    if targets and saved["targets"] != targets:
        yield Issue("$.adapter.targets", f"targets {', '.join(sorted(targets))} declared, but the saved adapter adapts "
                    f"{', '.join(sorted(saved['targets']))}", hint)
    if a.get("trainable_params") != saved["params"]:
        yield Issue("$.adapter.trainable_params", f"trainable_params {a.get('trainable_params'):,} declared, but the "
                    f"saved LoRA tensors hold {saved['params']:,} parameters", hint)


KL_METRICS = ("kl", "actor/kl_loss", "actor/ppo_kl_loss", "train/kl", "train/kl_penalty")
"""Per-step KL terms the engines log only when a reference model runs (TRL: `kl` when beta != 0;
verl: actor/kl_loss with use_kl_loss)."""


@rule("PROV-006", title="beta 0 declared, but the log recorded a KL term", requires=("grpo", "ledger"))
def kl_without_beta(ctx) -> Iterable[Issue]:
    """A reference model runs exactly when beta != 0 (WORK-005 ties its forward to beta). The
    engines log the KL against it only then: TRL's `kl` (GRPOTrainer computes it iff beta !=
    0), verl's `actor/kl_loss`. A ledger whose records kept such a metric, non-zero, from a
    run declared with beta 0 had its reference passes dropped with the setting: refused. (A
    ledger without these metrics -- the TRL callback's own -- cannot show it.)"""
    if ctx.doc["grpo"]["beta"] != 0 or ctx.base_dir is None or ctx.ledger_escapes:
        return
    s = ctx.ledger
    if s is None or s.error is not None:
        return
    from ..record.ledger import iter_ledger

    for r in iter_ledger(s.path, strict=False):
        m = r.get("metrics") or {}
        for k in KL_METRICS:
            v = m.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v != 0:
                yield Issue("$.grpo.beta", f"beta 0 declared, but ledger step {r['step']} kept the engine's {k!r} = "
                            f"{v:g}: the run computed a KL against a reference model",
                            "declare the beta the run used; its reference passes are priced with it (WORK-005)")
                return
