"""Pretraining compute of catalog models, and post-training compute as a share of it: the
indicative EU one-third check.

The facts live in `catalog/pretraining.yaml` (schemas/pretraining-v1.schema.json): tokens in
parts, each with its source, and training FLOPs where a model's report states them. Without
published FLOPs the figure is 6 * N * D -- N the model's parameters (the active ones of a
mixture of experts), D its tokens -- and is marked `6ND`.

The check follows the European Commission's guidelines for providers of general-purpose AI
models, C(2025) 5045, points 59-61: a downstream modification that uses more than one third of
the original model's training compute makes the modifier a provider of the modified model;
where that compute is unknown, the threshold is one third of 10^23 FLOP (one third of 10^25 for
a model with systemic risk). It is an indicative ratio, not legal advice: the guidelines count
all training compute of the modification, and the law decides, not this number.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import RaceError

FACTS = Path(__file__).with_name("catalog") / "pretraining.yaml"
SCHEMA = "pretraining-v1.schema.json"

REFERENCE = ("European Commission, Guidelines on the scope of the obligations for general-purpose AI models, "
             "C(2025) 5045, points 59-61")
DEFAULT_ORIGINAL_FLOPS = 10 ** 23
"""The guidelines' stand-in for an original model whose training compute is unknown (10^25 for a
model with systemic risk, which the facts cannot tell: `eu.basis` says so)."""


@dataclass(frozen=True)
class Pretraining:
    """A catalog model's pretraining compute and where it comes from."""

    model: str
    """Catalog name."""
    tokens: int
    """Pretraining tokens, all parts summed."""
    flops: int
    """Training FLOPs: published, else 6 * N * D."""
    method: str
    """`published` (the report states the FLOPs) or `6ND` (computed here)."""
    sources: tuple[str, ...]
    """URLs the numbers were read from."""
    note: str = ""
    """What the figure leaves out."""


@lru_cache(maxsize=1)
def _entries() -> tuple[dict, ...]:
    """The facts file, checked against its schema (a broken shipped file is a bug, said in one line)."""
    import jsonschema
    import yaml

    from .. import jsonstrict, paths

    try:
        from ..yamlstrict import loads

        doc = loads(FACTS.read_text(encoding="utf-8"), str(FACTS))
        schema = jsonstrict.read(paths.schemas() / SCHEMA, hint="reinstall the suite")
    except (OSError, yaml.YAMLError) as e:
        raise RaceError(f"cannot read the pretraining facts {FACTS.name}: {e}", "reinstall the suite") from None
    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    if err is not None:
        raise RaceError(f"{FACTS.name} at {'/'.join(map(str, err.absolute_path)) or 'top'}: {err.message}",
                        f"the file must follow schemas/{SCHEMA}")
    return tuple(doc["models"])


def pretraining(spec) -> Pretraining | None:
    """The pretraining compute of a model spec (by its catalog name), None when not known."""
    key = spec.name.split("/")[-1].lower()
    for e in _entries():
        if key in (m.lower() for m in e["models"]):
            tokens = int(sum(p["value"] for p in e["tokens"]))
            urls = [p["source"]["url"] for p in e["tokens"]]
            if "published_flops" in e:
                flops, method = int(e["published_flops"]["value"]), "published"
                urls.append(e["published_flops"]["source"]["url"])
            else:
                n = spec.params_active if spec.is_moe else spec.params_total
                flops, method = 6 * n * tokens, "6ND"
            return Pretraining(spec.name, tokens, flops, method, tuple(dict.fromkeys(urls)), e.get("note", ""))
    return None


def share_of_pretraining(post_training_flops: int, spec) -> dict:
    """The report's `pretraining` section: the base model's pretraining compute (when known),
    post-training / pretraining, and the indicative EU one-third check against it -- or, when the
    original compute is unknown, against the guidelines' default (one third of 10^23 FLOP)."""
    pre = pretraining(spec)
    out: dict = {"model": spec.name}
    if pre is None:
        out.update(flops=None, method="unknown", ratio=None)
        original = DEFAULT_ORIGINAL_FLOPS
        basis = "default: original compute unknown, one third of 10^23 FLOP (10^25 for systemic-risk models)"
    else:
        out.update(flops=pre.flops, method=pre.method, tokens=pre.tokens, sources=list(pre.sources),
                   ratio=post_training_flops / pre.flops)
        if pre.note:
            out["note"] = pre.note
        original, basis = pre.flops, "one third of the original model's training compute"
    threshold = original // 3
    out["eu"] = {"threshold_flops": threshold, "basis": basis, "exceeds": post_training_flops > threshold,
                 "reference": REFERENCE, "indicative": "an indicative ratio, not legal advice"}
    return out


def describe(section: dict, post_training_flops: float) -> list[str]:
    """The section as `race flops` and `race plan` print it."""
    eu = section["eu"]
    verdict = "above" if eu["exceeds"] else "below"
    if section["flops"] is None:
        return [f"pretraining compute of {section['model']}: unknown (not in the pretraining facts)",
                f"EU indicator (C(2025) 5045, points 59-61): {post_training_flops:.3e} FLOPs is {verdict} the default "
                f"threshold {eu['threshold_flops']:.3e} (one third of 10^23 FLOP); indicative, not legal advice"]
    how = "published" if section["method"] == "published" else f"6*N*D, D = {section['tokens']:.3g} tokens"
    return [f"pretraining compute of {section['model']}: {section['flops']:.3e} FLOPs ({how})",
            f"post-training / pretraining = {section['ratio']:.3e} ({section['ratio']:.4%})",
            f"EU indicator (C(2025) 5045, points 59-61): {verdict} one third of the original training compute "
            f"({eu['threshold_flops']:.3e} FLOPs); indicative, not legal advice"]


__all__ = ["Pretraining", "pretraining", "share_of_pretraining", "describe", "REFERENCE",
           "DEFAULT_ORIGINAL_FLOPS"]
