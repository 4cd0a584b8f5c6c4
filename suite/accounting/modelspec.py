"""Model specs: the architecture facts FLOP accounting needs, read from a Hugging Face
`config.json` (a path or its folder) or from the built-in catalog (`suite/accounting/catalog/*.json`,
config facts only, no weights). Parameter counts are exact: they equal
`sum(p.numel() for p in model.parameters())` of the real model (tied embeddings counted once).

Supported: dense decoder-only transformers with SwiGLU MLPs and (grouped-query) attention as
Qwen2, Llama and Mistral build them, with or without an LM head, optionally with a reward
head (process reward models, sequence classifiers). Mixture-of-experts, encoder-decoder and
multimodal configs are refused with the reason.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path

from ..errors import RaceError

CATALOG_DIR = Path(__file__).with_name("catalog")

# model_type -> bias layout of the attention and MLP projections (how HF builds them).
# qwen2 always has q/k/v biases; llama reads `attention_bias` (q, k, v and o) and `mlp_bias`.
SUPPORTED_TYPES = ("llama", "mistral", "qwen2")

_ARCH = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}

_MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok",
             "moe_intermediate_size")


@dataclass(frozen=True)
class ModelSpec:
    """A dense decoder-only transformer, as far as FLOPs and parameter counts go."""

    name: str
    """Catalog name or model id, e.g. Qwen2.5-1.5B-Instruct."""
    model_type: str
    """HF model_type: qwen2, llama or mistral."""
    hidden_size: int
    """Width h of the residual stream."""
    num_layers: int
    """Decoder layers."""
    num_heads: int
    """Query heads."""
    num_kv_heads: int
    """Key/value heads (grouped-query attention when fewer than num_heads)."""
    head_dim: int
    """Width of one attention head (hidden_size // num_heads unless the config overrides it)."""
    intermediate_size: int
    """SwiGLU MLP width (gate and up project h -> intermediate, down projects back)."""
    vocab_size: int
    """Rows of the token embedding (and of the LM head)."""
    tie_embeddings: bool
    """LM head shares the embedding matrix (counted once)."""
    qkv_bias: bool
    """q, k and v projections carry a bias."""
    has_lm_head: bool = True
    """False for a reward-model backbone that ends in a score head instead."""
    score_head: tuple[tuple[int, int], ...] = ()
    """Linear layers (in, out) of a reward head applied to every position; () if none."""
    score_bias: bool = True
    """Whether the score-head Linear layers carry biases."""
    o_bias: bool = False
    """o_proj carries a bias (Llama attention_bias)."""
    mlp_bias: bool = False
    """gate/up/down projections carry biases (Llama mlp_bias)."""

    def __post_init__(self):
        # JSON gives lists; keep the dataclass hashable and comparable.
        object.__setattr__(self, "score_head", tuple(tuple(int(x) for x in s) for s in self.score_head))

    # ---- shapes -------------------------------------------------------------------------

    @property
    def q_dim(self) -> int:
        """Output width of q_proj (num_heads * head_dim)."""
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Output width of k_proj and v_proj (num_kv_heads * head_dim)."""
        return self.num_kv_heads * self.head_dim

    def projections(self) -> dict[str, tuple[int, int]]:
        """The seven Linear layers of one decoder layer: name -> (in_features, out_features)."""
        h, i = self.hidden_size, self.intermediate_size
        return {
            "q_proj": (h, self.q_dim), "k_proj": (h, self.kv_dim), "v_proj": (h, self.kv_dim),
            "o_proj": (self.q_dim, h),
            "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h),
        }

    # ---- parameter counts ---------------------------------------------------------------

    @property
    def params_layer(self) -> int:
        """Parameters of one decoder layer: projections, their biases, two RMSNorm weights."""
        h = self.hidden_size
        p = sum(a * b for a, b in self.projections().values())
        if self.qkv_bias:
            p += self.q_dim + 2 * self.kv_dim
        if self.o_bias:
            p += h
        if self.mlp_bias:
            p += 2 * self.intermediate_size + h
        return p + 2 * h

    @property
    def params_embedding(self) -> int:
        """Input embedding plus an untied LM head (what 'non-embedding' leaves out)."""
        e = self.vocab_size * self.hidden_size
        return e * (2 if self.has_lm_head and not self.tie_embeddings else 1)

    @property
    def params_score_head(self) -> int:
        """Parameters of the reward head (0 if none)."""
        return sum(a * b + (b if self.score_bias else 0) for a, b in self.score_head)

    @property
    def params_non_embedding(self) -> int:
        """Parameters excluding the input embedding and the LM head (decoder layers, final
        norm, score head): the N of scaling-law papers."""
        return self.num_layers * self.params_layer + self.hidden_size + self.params_score_head

    @property
    def params_total(self) -> int:
        """All parameters as the real model has them (tied embeddings counted once)."""
        return self.params_non_embedding + self.params_embedding

    def to_hf_config(self) -> dict:
        """A Hugging Face config.json dict that builds this architecture (the backbone only for
        reward models: their score head is not a transformers class)."""
        cfg = {"model_type": self.model_type, "architectures": [_ARCH[self.model_type]],
               "hidden_size": self.hidden_size, "num_hidden_layers": self.num_layers,
               "num_attention_heads": self.num_heads, "num_key_value_heads": self.num_kv_heads,
               "head_dim": self.head_dim, "intermediate_size": self.intermediate_size,
               "vocab_size": self.vocab_size, "tie_word_embeddings": self.tie_embeddings,
               "hidden_act": "silu"}
        if self.model_type == "llama":
            cfg["attention_bias"], cfg["mlp_bias"] = self.qkv_bias, self.mlp_bias
        return cfg

    # ---- JSON ---------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """JSON-able dict of every field (score_head as lists)."""
        d = asdict(self)
        d["score_head"] = [list(s) for s in self.score_head]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ModelSpec":
        """Inverse of to_dict(); unknown keys are refused, missing optional ones defaulted."""
        known = {f.name for f in fields(cls)}
        extra = sorted(set(d) - known)
        if extra:
            raise RaceError(f"model spec has unknown field(s): {', '.join(extra)}",
                            f"known fields: {', '.join(sorted(known))}")
        required = [f.name for f in fields(cls) if f.default is MISSING]
        missing = [k for k in required if k not in d]
        if missing:
            raise RaceError(f"model spec is missing field(s): {', '.join(missing)}")
        return cls(**d)



# ---- reading config.json ----------------------------------------------------------------


def _need(cfg: dict, key: str, where: str) -> int:
    if key not in cfg or cfg[key] is None:
        raise RaceError(f"{where}: config is missing field '{key}'",
                        "a decoder-only Hugging Face config.json has it; add it or fix the file")
    v = cfg[key]
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise RaceError(f"{where}: field '{key}' must be a positive integer, got {v!r}")
    return v


def spec_from_config(cfg: dict, name: str, where: str | None = None) -> ModelSpec:
    """Build a ModelSpec from the dict of a Hugging Face config.json. `where` names the source
    in error messages."""
    where = where or name
    if not isinstance(cfg, dict):
        raise RaceError(f"{where}: config must be a JSON object")
    if cfg.get("is_encoder_decoder") or any(k in cfg for k in ("encoder_layers", "decoder_layers", "d_model")):
        raise RaceError(f"{where}: encoder-decoder configs are not supported",
                        "accounting covers decoder-only models (Qwen2, Llama, Mistral)")
    moe = [k for k in _MOE_KEYS if cfg.get(k)]
    if moe:
        raise RaceError(f"{where}: mixture-of-experts config ({moe[0]}={cfg[moe[0]]!r}) is not supported",
                        "accounting covers dense decoder-only models; per-expert routing FLOPs are not modelled")
    if "text_config" in cfg or "vision_config" in cfg:
        raise RaceError(f"{where}: multimodal configs (text_config/vision_config) are not supported",
                        "point --config at a text-only decoder config")
    model_type = cfg.get("model_type")
    if model_type is None:
        raise RaceError(f"{where}: config is missing field 'model_type'",
                        f"supported model types: {', '.join(SUPPORTED_TYPES)}")
    if model_type not in SUPPORTED_TYPES:
        raise RaceError(f"{where}: model_type '{model_type}' is not supported",
                        f"supported model types: {', '.join(SUPPORTED_TYPES)}")

    h = _need(cfg, "hidden_size", where)
    layers = _need(cfg, "num_hidden_layers", where)
    heads = _need(cfg, "num_attention_heads", where)
    kv = cfg.get("num_key_value_heads") or heads  # HF default: multi-head attention
    if not isinstance(kv, int) or kv <= 0 or heads % kv:
        raise RaceError(f"{where}: num_key_value_heads={kv!r} must be a positive divisor of num_attention_heads={heads}")
    head_dim = cfg.get("head_dim") or h // heads
    if not isinstance(head_dim, int) or head_dim <= 0:
        raise RaceError(f"{where}: field 'head_dim' must be a positive integer, got {head_dim!r}")
    if "head_dim" not in cfg and h % heads:
        raise RaceError(f"{where}: hidden_size {h} is not divisible by num_attention_heads {heads}",
                        "set head_dim in the config")
    inter = _need(cfg, "intermediate_size", where)
    vocab = _need(cfg, "vocab_size", where)
    act = cfg.get("hidden_act", "silu")
    if act not in ("silu", "swish"):
        raise RaceError(f"{where}: hidden_act '{act}' is not supported", "accounting assumes a SwiGLU (silu) MLP")

    archs = cfg.get("architectures") or []
    arch = archs[0] if archs else ""
    has_lm_head, score_head, score_bias = True, (), True
    if "ProcessRewardModel" in arch or "ForRewardModel" in arch:
        # Qwen2.5-Math-PRM: backbone, then score = Linear(h, h) -> ReLU -> Linear(h, 2), biased.
        has_lm_head, score_head, score_bias = False, ((h, h), (h, cfg.get("num_labels", 2))), True
    elif arch.endswith("ForSequenceClassification") or arch.endswith("ForTokenClassification"):
        # HF classifiers: Linear(h, num_labels, bias=False) on every position.
        labels = cfg.get("num_labels") or len(cfg.get("id2label") or {}) or 2
        has_lm_head, score_head, score_bias = False, ((h, labels),), False

    attention_bias = bool(cfg.get("attention_bias", False))
    return ModelSpec(
        name=name, model_type=model_type, hidden_size=h, num_layers=layers, num_heads=heads,
        num_kv_heads=kv, head_dim=head_dim, intermediate_size=inter, vocab_size=vocab,
        # Qwen2, Llama and Mistral configs all default to untied when the key is absent.
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)) and has_lm_head,
        qkv_bias=True if model_type == "qwen2" else attention_bias,
        has_lm_head=has_lm_head, score_head=score_head, score_bias=score_bias,
        o_bias=attention_bias if model_type == "llama" else False,
        mlp_bias=bool(cfg.get("mlp_bias", False)) if model_type == "llama" else False,
    )


def catalog_names() -> list[str]:
    """Names of the built-in catalog models, sorted."""
    return sorted(p.stem for p in CATALOG_DIR.glob("*.json"))


def _catalog_lookup(name: str) -> Path | None:
    key = name.split("/")[-1].lower()  # accept hub ids like Qwen/Qwen2.5-1.5B-Instruct
    for n in catalog_names():
        if n.lower() == key:
            return CATALOG_DIR / f"{n}.json"
    return None


def in_catalog(name: str) -> bool:
    """Whether `name` (case-insensitive, hub prefix allowed) is a built-in catalog model."""
    return _catalog_lookup(name) is not None


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise RaceError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})")
    except OSError as e:
        raise RaceError(f"{path}: cannot read ({e.strerror})")


def load_spec(name_or_path: str) -> ModelSpec:
    """A ModelSpec from a catalog name (case-insensitive, hub prefix allowed), a config.json
    path, or a folder holding one. Unknown names list the closest catalog names."""
    if not name_or_path or not str(name_or_path).strip():
        raise RaceError("empty model name", f"catalog: {', '.join(catalog_names())}")
    hit = _catalog_lookup(str(name_or_path))
    if hit is not None:
        return spec_from_config(_read_json(hit), hit.stem, where=f"catalog {hit.stem}")
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise RaceError(f"{path.parent}: folder has no config.json")
    if path.is_file():
        cfg = _read_json(path)
        stem = path.parent.name if path.name == "config.json" else path.stem
        return spec_from_config(cfg, cfg.get("_name_or_path") or stem or str(path), where=str(path))
    names = catalog_names()
    close = difflib.get_close_matches(str(name_or_path), names, n=3, cutoff=0.3)
    if not close:  # case differences and partial names ("qwen 7b")
        low = {n.lower(): n for n in names}
        close = [low[n] for n in difflib.get_close_matches(str(name_or_path).lower(), list(low), n=3, cutoff=0.3)]
    hint = f"closest catalog names: {', '.join(close)}" if close else f"catalog: {', '.join(names)}"
    raise RaceError(f"unknown model '{name_or_path}' (not a catalog name, config.json or folder)", hint)


def fmt_params(n: int) -> str:
    """Human parameter count: 1.54B, 494M."""
    if n >= 1e9:
        return f"{n / 1e9:.2f}B"
    if n >= 1e6:
        return f"{n / 1e6:.0f}M" if n >= 1e8 else f"{n / 1e6:.2f}M"
    return f"{n / 1e3:.1f}K" if n >= 1e3 else str(n)


__all__ = ["ModelSpec", "load_spec", "catalog_names", "in_catalog", "spec_from_config", "SUPPORTED_TYPES", "fmt_params"]
