"""Bounded work for any input: the largest sizes the suite accepts, from the schemas.

Validation, pricing and the site cost time and memory in proportion to what an input declares
(layers, widths, experts, K x prompts per step, evaluation rows). Real runs stay far below the
maxima the report schema gives (`maximum`, `maxItems`, `maxLength`); a declared size above them
is a unit mistake or hostile, refused with one line before any work is done. The schema is the
source: this module reads its model_spec maxima for specs that do not come from a report (a
config.json, the catalog, a cell).
"""

from __future__ import annotations

from functools import lru_cache

from .errors import RaceError

DEFAULT_MAXIMUM = 1 << 24
"""Bound for a config count the schema does not name (patterns, intervals, labels)."""

# config.json key -> the model_spec field its maximum is read from
CONFIG_FIELDS = {"num_hidden_layers": "num_layers", "num_attention_heads": "num_heads",
                 "num_key_value_heads": "num_kv_heads", "n_routed_experts": "num_experts",
                 "num_local_experts": "num_experts", "num_experts_per_tok": "experts_per_token",
                 "n_shared_experts": "num_experts"}


@lru_cache(maxsize=1)
def model_spec_maxima() -> dict[str, int]:
    """model_spec field -> its schema maximum (schemas/report-v1.schema.json $defs/model_spec)."""
    from . import jsonstrict, paths

    schema = jsonstrict.read(paths.schemas() / "report-v1.schema.json", hint="reinstall the suite")
    props = schema["$defs"]["model_spec"]["properties"]
    return {k: int(v["maximum"]) for k, v in props.items() if isinstance(v, dict) and "maximum" in v}


def config_maximum(key: str) -> int:
    """The largest value accepted for a config.json count `key`."""
    m = model_spec_maxima()
    return m.get(CONFIG_FIELDS.get(key, key), DEFAULT_MAXIMUM)


def check_config_count(key: str, value: int, where: str) -> int:
    """`value` when within config_maximum(key); else RaceError naming the field."""
    top = config_maximum(key)
    if value > top:
        raise RaceError(f"{where}: field '{key}' = {value:.4g} is over the {top:,} the suite accepts",
                        "real models are far smaller; check the config")
    return value


SIZED_CONFIG_KEYS = (*CONFIG_FIELDS, "hidden_size", "intermediate_size", "moe_intermediate_size", "head_dim",
                     "vocab_size", "num_experts")
"""Config counts that size the model transformers builds from a config (layers, widths, heads,
experts, vocabulary): bounded before any model is built from one (the traced path)."""
MAX_LAYER_EXPERTS = 1 << 20
"""Layers x routed experts a traced config may declare (DeepSeek-V3: 61 x 256; Qwen3.5-397B-A17B:
60 x 512): the module count a build walks."""
MAX_TRACED_CONFIG_BYTES = 1 << 16
"""Canonical JSON of one traced config in a report (real configs: 1-10 KB)."""
MAX_TRACED_MODELS = 4
"""Distinct traced configs one report may ask the validator to trace (policy, reward model, judges)."""


def check_config_counts(config, where: str) -> None:
    """RaceError for the first size of a model config (a transformers config object, or a dict)
    over what the suite accepts (SIZED_CONFIG_KEYS; layers x experts at most MAX_LAYER_EXPERTS)."""
    def get(key):
        try:
            v = config.get(key) if isinstance(config, dict) else getattr(config, key, None)
        except RuntimeError:  # a per-layer value of a heterogeneous config (Gemma 4's head_dim): no global one
            return None
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    for key in SIZED_CONFIG_KEYS:
        v = get(key)
        if v is not None:
            check_config_count(key, v, where)
    layers = get("num_hidden_layers") or 0
    experts = max((get(k) or 0 for k in ("n_routed_experts", "num_local_experts", "num_experts")), default=0)
    if layers * experts > MAX_LAYER_EXPERTS:
        raise RaceError(f"{where}: {layers:,} layers x {experts:,} experts is over the {MAX_LAYER_EXPERTS:,} the suite "
                        "accepts", "real models are far smaller; check the config")


def check_model_spec(fields: dict, where: str) -> None:
    """RaceError for the first model_spec field over its schema maximum."""
    for key, top in model_spec_maxima().items():
        v = fields.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > top:
            raise RaceError(f"model spec {where}: {key} = {v:.4g} is over the {top:,} the suite accepts",
                            "real models are far smaller; check the spec")


_BOUNDS = ((list, "maxItems", "{:,} items"), (dict, "maxProperties", "{:,} fields"),
           (str, "maxLength", "text of {:,} characters"))
"""The size bound of each kind of value the walk meets, and how its size reads."""


def _children(value, node: dict):
    """(key, item, the item's sub-schema) of a list's or an object's items; none of a string."""
    if isinstance(value, list):
        items, prefix = node.get("items"), node.get("prefixItems") or []
        return ((i, v, prefix[i] if i < len(prefix) else items) for i, v in enumerate(value))
    if isinstance(value, dict):
        props, extra = node.get("properties") or {}, node.get("additionalProperties")
        return ((k, v, props.get(k, extra if isinstance(extra, dict) else None)) for k, v in value.items())
    return ()


def oversized(instance, schema: dict, *, limit: int = 5) -> list[tuple[list, str]]:
    """Where `instance` is over a size bound of `schema` (maxItems, maxProperties, maxLength):
    (path, message) pairs, at most `limit`. A cheap walk before the full schema check, which
    validates every item of a list before it looks at the list's length (40,000 evaluation rows
    took 6 s); an oversized value is not descended into. Local $refs are followed; anyOf/oneOf
    branches are left to the full check."""
    found: list[tuple[list, str]] = []
    stack = [(instance, schema, [])]
    while stack and len(found) < limit:
        value, node, path = stack.pop()
        for _ in range(8):          # follow "#/..." refs (bounded: no ref cycles in a node)
            ref = node.get("$ref") if isinstance(node, dict) else None
            if not (isinstance(ref, str) and ref.startswith("#/")):
                break
            target = schema
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        bound = next((b for b in _BOUNDS if isinstance(value, b[0])), None)
        if not isinstance(node, dict) or bound is None:
            continue
        _, key, what = bound
        top = node.get(key)
        if isinstance(top, int) and len(value) > top:
            found.append((path, f"{what.format(len(value))}, over the {top:,} the schema allows"))
            continue
        for k, v, sub in _children(value, node):
            if isinstance(sub, dict) and isinstance(v, (list, dict, str)):
                stack.append((v, sub, path + [k]))
    return found


MAX_IMPORT_STEPS = 20_000
"""Training steps (log entries) one `race import` accepts: real GRPO runs log tens to a few
thousand (the MLPerf reference: 7-18; DeepScaleR: 1,750); pricing costs a few milliseconds a
step, so a 200,000-step log is refused while it is read, in seconds and bounded memory."""
