# Over 500 lines: one registry of every model family's construction facts beside the spec they fill, one place to read them in.
"""Model specs: the architecture facts FLOP accounting needs, read from a Hugging Face
`config.json` (a path or its folder) or from the built-in catalog (`suite/accounting/catalog/*.json`,
config facts only, no weights; `suite.accounting.specs` reads it). Parameter counts are exact: they equal
`sum(p.numel() for p in model.parameters())` of the real model (tied embeddings counted once).

Supported (`FAMILIES`): decoder-only transformers as transformers 5 builds them for the model
types llama, mistral, qwen2, qwen3, smollm3, gemma2, gemma3_text (and gemma3 through its text
config), olmo2, olmo3, phi3 (dense); mixtral, qwen3_moe, gpt_oss, deepseek_v3 (mixture of
experts, deepseek_v3 with multi-head latent attention); qwen3_next, qwen3_5 (qwen3_5_text, and
qwen3_5 through its text config) and qwen3_5_moe (qwen3_5_moe_text, qwen3_5_moe through its text
config), hybrids of gated-delta-net linear attention and gated full attention. Each may slide a window over some layers (`layer_types`, `sliding_window`), with or
without an LM head, optionally with a reward head (process reward models, sequence
classifiers). Anything else (encoder-decoder, other model types, options the accounting does not
model) is refused by name with what is missing.
"""

from __future__ import annotations

import functools
from dataclasses import MISSING, asdict, dataclass, fields

from ..errors import RaceError
from ..limits import check_config_count
from .adapter import Adapter, Lora, recipe_lora
from .costs import model_costs
from .work import Needs

PATH_RECIPE = "recipe"
"""`priced_by` of a spec priced by its family's analytic recipe (no torch needed)."""

LAYER_TYPES = ("full_attention", "sliding_attention", "linear_attention")
"""Token mixers of a decoder layer, as transformers' `layer_types` names them."""


@dataclass(frozen=True)
class Family:
    """What a Hugging Face model_type builds beyond the numbers in its config.json (read from
    transformers 5.24's modeling code; the tests check every family against the real model)."""

    model_type: str
    """HF model_type."""
    arch: str
    """Causal-LM class (config `architectures[0]`) that to_hf_config names."""
    tie_default: bool = False
    """tie_word_embeddings when the config omits it (the config class default)."""
    act_key: str = "hidden_act"
    """Config key of the MLP activation (Gemma: hidden_activation)."""
    acts: tuple[str, ...] = ("silu", "swish")
    """Gated-MLP activations accepted (the activation costs no matmul FLOPs; the gate does)."""
    norms: int = 2
    """RMSNorm weights of width h per decoder layer (Gemma: 4, pre and post norms)."""
    post_mlp_norm: bool = False
    """An RMSNorm follows the MLP (Gemma 2/3, OLMo 2/3): it saves the MLP output for its
    backward, so a checkpointed layer recomputes its last matmul too."""
    qk_norm: str = ""
    """'' none; 'head': q_norm and k_norm of head_dim (Qwen3, Gemma 3); 'proj': of the whole
    q and k widths (OLMo 2 and 3). Norms cost no matmul FLOPs, only parameters."""
    qkv_bias: str = "attention_bias"
    """'always' (Qwen2), 'never' (Mistral, Mixtral, Phi-3) or 'attention_bias' (the config key,
    which then also biases o_proj)."""
    fused: bool = False
    """Phi-3: one qkv_proj and one gate_up_proj instead of q/k/v and gate/up."""
    sinks: bool = False
    """gpt-oss: one learned attention-sink logit per head (a parameter, no matmul)."""
    q_gate: bool = False
    """Qwen3-Next / Qwen3.5 full attention: q_proj also emits a sigmoid output gate (2x wide)."""
    moe: str = ""
    """'' dense; 'routed' (router + top-k experts), 'biased' (gpt-oss: router and expert biases),
    'shared' (DeepSeek: plus always-on shared experts, first layers dense), 'gated-shared'
    (Qwen3-Next: plus one shared expert scaled by a sigmoid gate Linear(h, 1))."""
    mla: bool = False
    """DeepSeek-V3 multi-head latent attention."""
    linear: str = ""
    """Gated-delta-net layer projections: 'qkvz' (Qwen3-Next: in_proj_qkvz, in_proj_ba) or
    'split' (Qwen3.5: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a)."""
    all_moe: bool = False
    """Every decoder layer is MoE (Qwen3.5-MoE): the config has no intermediate_size, no
    decoder_sparse_step and no mlp_only_layers."""
    peft_moe: str = ""
    """peft 0.21's v4->v5 conversion pattern for MoE targets ('qwen2_moe', 'mixtral') or ''."""
    text_of: str = ""
    """Multimodal model_type whose text_config this family reads (gemma3, qwen3_5, qwen3_5_moe)."""


FAMILIES: dict[str, Family] = {}
"""Supported model types."""


def _family(model_type: str, arch: str, **facts) -> None:
    if model_type in FAMILIES:
        raise ValueError(f"model family {model_type!r} registered twice")
    FAMILIES[model_type] = Family(model_type, arch, **facts)


_family("llama", "LlamaForCausalLM")
_family("mistral", "MistralForCausalLM", qkv_bias="never")
_family("qwen2", "Qwen2ForCausalLM", qkv_bias="always")
_family("qwen3", "Qwen3ForCausalLM", qk_norm="head")
_family("smollm3", "SmolLM3ForCausalLM", tie_default=True)
_family("gemma2", "Gemma2ForCausalLM", tie_default=True, act_key="hidden_activation",
        acts=("gelu_pytorch_tanh",), norms=4, post_mlp_norm=True)
_family("gemma3_text", "Gemma3ForCausalLM", tie_default=True, act_key="hidden_activation",
        acts=("gelu_pytorch_tanh",), norms=4, post_mlp_norm=True, qk_norm="head", text_of="gemma3")
_family("olmo2", "Olmo2ForCausalLM", qk_norm="proj", post_mlp_norm=True)
_family("olmo3", "Olmo3ForCausalLM", qk_norm="proj", post_mlp_norm=True)
_family("phi3", "Phi3ForCausalLM", qkv_bias="never", fused=True)
_family("mixtral", "MixtralForCausalLM", qkv_bias="never", moe="routed", peft_moe="mixtral")
_family("qwen3_moe", "Qwen3MoeForCausalLM", qk_norm="head", moe="routed", peft_moe="qwen2_moe")
_family("gpt_oss", "GptOssForCausalLM", sinks=True, moe="biased")
_family("deepseek_v3", "DeepseekV3ForCausalLM", moe="shared", mla=True, peft_moe="qwen2_moe")
_family("qwen3_next", "Qwen3NextForCausalLM", qk_norm="head", q_gate=True, moe="gated-shared",
        linear="qkvz", peft_moe="qwen2_moe")
_family("qwen3_5_text", "Qwen3_5ForCausalLM", qk_norm="head", q_gate=True, linear="split", text_of="qwen3_5")
# Qwen3.5-MoE: Qwen3.5's layers with Qwen3-Next's MoE block in every layer; peft 0.21 has no
# conversion pattern for it (transformers' _MODEL_TO_CONVERSION_PATTERN lacks qwen3_5_moe), so
# gate/up/down names adapt the shared expert's nn.Linear modules, not the experts.
_family("qwen3_5_moe_text", "Qwen3_5MoeForCausalLM", qk_norm="head", q_gate=True, moe="gated-shared",
        all_moe=True, linear="split", text_of="qwen3_5_moe")

SUPPORTED_TYPES = tuple(sorted(FAMILIES)) + tuple(sorted(f.text_of for f in FAMILIES.values() if f.text_of))
"""Every model_type the recipes accept (multimodal ones through their text config)."""

_TEXT_OF = {f.text_of: f.model_type for f in FAMILIES.values() if f.text_of}

ATTRIBUTE_MAP: dict[str, dict[str, str]] = {
    # transformers 5.24's `attribute_map` of each supported config class (alias -> attribute):
    # save_pretrained writes the attribute's name, hub files often the alias; both are read.
    # tests/test_families.py checks this table against the config classes.
    "deepseek_v3": {"num_local_experts": "n_routed_experts", "num_mtp_layers": "num_nextn_predict_layers"},
    "gpt_oss": {"num_experts": "num_local_experts"},
    "mixtral": {"num_experts": "num_local_experts"},
    "qwen3_moe": {"num_experts": "num_local_experts"},
}
"""Config keys transformers reads under two spellings, per model_type."""


def _unalias(cfg: dict) -> dict:
    """The config with every aliased key under both of its spellings (a value given under
    either name is the attribute's value; the attribute's own name wins when both are set)."""
    amap = ATTRIBUTE_MAP.get(cfg.get("model_type"), {})
    if not amap:
        return cfg
    cfg = dict(cfg)
    for alias, attr in amap.items():
        if cfg.get(attr) is None and cfg.get(alias) is not None:
            cfg[attr] = cfg[alias]
        if cfg.get(attr) is not None:
            cfg[alias] = cfg[attr]
    return cfg


_MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok",
             "moe_intermediate_size")


@dataclass(frozen=True)
class Linear:
    """One matmul module of a decoder layer, named as transformers names it (the LoRA target)."""

    name: str
    """Leaf module name: q_proj, qkv_proj, kv_b_proj, in_proj_qkvz, gate_proj, ..."""
    fan_in: int
    """in_features."""
    fan_out: int
    """out_features."""
    bias: bool = False
    """Carries a bias (parameters only: a bias add is not a matmul)."""
    part: str = "attn"
    """Where it sits: 'attn' (token mixer), 'mlp' (dense MLP), 'shared' (shared experts and
    their gate), 'router'."""


@dataclass(frozen=True)
class Experts:
    """The routed experts of an MoE layer (3-D parameters, not nn.Linear)."""

    num: int
    """Routed experts E."""
    top_k: int
    """Experts per token k."""
    hidden: int
    """Width h of the residual stream."""
    width: int
    """Expert MLP width I (gate_up_proj: h -> 2I, down_proj: I -> h)."""
    bias: bool = False
    """gate_up_proj_bias and down_proj_bias (gpt-oss)."""

    @property
    def fwd_per_pair(self) -> int:
        """FLOPs of one (token, expert) pair: gate_up and down."""
        return 2 * (self.hidden * 2 * self.width + self.width * self.hidden)

    @property
    def params(self) -> int:
        """Parameters of all E experts."""
        return self.num * (3 * self.hidden * self.width + ((2 * self.width + self.hidden) if self.bias else 0))


@dataclass(frozen=True)
class Layer:
    """One decoder layer: its token mixer, its Linear modules in forward order, its experts."""

    mixer: str
    """'full', 'sliding' (attention over the last `window` keys), 'linear' (gated delta net)
    or 'mla' (multi-head latent attention)."""
    window: int
    """Sliding window (keys) of a sliding layer; 0 otherwise."""
    linears: tuple[Linear, ...]
    """nn.Linear modules in forward order."""
    experts: Experts | None
    """Routed experts of an MoE layer; None for a dense MLP."""
    experts_at: int
    """Position in `linears` before which the experts run (forward order)."""
    other_params: int
    """Parameters that are no matmul: norm weights, biases of the experts' stack excluded,
    attention sinks, conv kernels, decay parameters."""

    @property
    def params(self) -> int:
        """All parameters of the layer."""
        lin = sum(li.fan_in * li.fan_out + (li.fan_out if li.bias else 0) for li in self.linears)
        return lin + (self.experts.params if self.experts else 0) + self.other_params


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, as far as FLOPs and parameter counts go."""

    name: str
    """Catalog name or model id, e.g. Qwen2.5-1.5B-Instruct."""
    model_type: str
    """HF model_type (FAMILIES): qwen2, llama, mistral, qwen3, qwen3_moe, gemma3_text, ..."""
    hidden_size: int
    """Width h of the residual stream."""
    num_layers: int
    """Decoder layers."""
    num_heads: int
    """Query heads."""
    num_kv_heads: int
    """Key/value heads (grouped-query attention when fewer than num_heads)."""
    head_dim: int
    """Width of one attention head (hidden_size // num_heads unless the config overrides it);
    for MLA the query/key head width qk_nope_head_dim + qk_rope_head_dim."""
    intermediate_size: int
    """SwiGLU MLP width of dense layers (gate and up project h -> intermediate, down projects back)."""
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
    """o_proj carries a bias (attention_bias)."""
    mlp_bias: bool = False
    """gate/up/down projections carry biases (Llama mlp_bias)."""
    layer_types: tuple[str, ...] = ()
    """Token mixer of each layer (LAYER_TYPES); () means full attention everywhere."""
    sliding_window: int = 0
    """Keys a sliding_attention layer attends to (the query's own included); 0 if none slide."""
    v_head_dim: int = 0
    """MLA: width of a value head (0: head_dim)."""
    q_lora_rank: int = 0
    """MLA: rank of the low-rank query (q_a_proj, q_b_proj); 0 means one q_proj."""
    kv_lora_rank: int = 0
    """MLA: width of the compressed key/value latent (0: not MLA)."""
    qk_rope_head_dim: int = 0
    """MLA: rotary part of a query/key head, shared by all heads as one key."""
    num_experts: int = 0
    """MoE: routed experts per MoE layer (0: dense)."""
    experts_per_token: int = 0
    """MoE: routed experts each token runs (top-k)."""
    moe_intermediate_size: int = 0
    """MoE: MLP width of one routed expert."""
    shared_expert_intermediate_size: int = 0
    """MoE: MLP width of the always-on shared expert(s), 0 if none."""
    dense_mlp_layers: tuple[int, ...] = ()
    """MoE: layers (0-based) that keep a dense MLP of intermediate_size."""
    linear_num_key_heads: int = 0
    """Gated delta net: query/key heads."""
    linear_num_value_heads: int = 0
    """Gated delta net: value heads."""
    linear_key_head_dim: int = 0
    """Gated delta net: query/key head width."""
    linear_value_head_dim: int = 0
    """Gated delta net: value head width."""
    linear_conv_kernel: int = 0
    """Gated delta net: width of the depthwise causal convolution."""

    def __post_init__(self):
        from ..limits import check_model_spec

        check_model_spec(self.__dict__, self.name)      # bounded work: sizes within the schema's maxima
        # JSON gives lists; keep the dataclass hashable and comparable.
        object.__setattr__(self, "score_head", tuple(tuple(int(x) for x in s) for s in self.score_head))
        object.__setattr__(self, "layer_types", tuple(self.layer_types))
        object.__setattr__(self, "dense_mlp_layers", tuple(int(x) for x in self.dense_mlp_layers))
        if self.model_type not in FAMILIES:
            raise RaceError(f"model spec {self.name}: model_type '{self.model_type}' is not supported",
                            f"supported model types: {', '.join(SUPPORTED_TYPES)}")
        if self.layer_types and len(self.layer_types) != self.num_layers:
            raise RaceError(f"model spec {self.name}: {len(self.layer_types)} layer_types for {self.num_layers} layers")
        bad = sorted(set(self.layer_types) - set(LAYER_TYPES))
        if bad:
            raise RaceError(f"model spec {self.name}: layer type(s) {', '.join(bad)} are not supported",
                            f"the accounting models {', '.join(LAYER_TYPES)}")
        f = FAMILIES[self.model_type]
        facts = {"experts (num_experts, experts_per_token, moe_intermediate_size)": (
                     bool(f.moe), self.num_experts and self.experts_per_token and self.moe_intermediate_size,
                     self.num_experts or self.experts_per_token or self.moe_intermediate_size),
                 "latent attention (kv_lora_rank, qk_rope_head_dim)": (
                     f.mla, self.kv_lora_rank and self.qk_rope_head_dim, self.kv_lora_rank or self.qk_rope_head_dim),
                 "linear attention (linear_* widths)": (
                     bool(f.linear) and "linear_attention" in self.layer_types,
                     self.linear_num_key_heads and self.linear_num_value_heads and self.linear_key_head_dim
                     and self.linear_value_head_dim and self.linear_conv_kernel,
                     "linear_attention" in self.layer_types)}
        for what, (family_has, complete, some) in facts.items():
            if (family_has and not complete) or (some and not family_has):
                raise RaceError(f"model spec {self.name}: {what} " + ("incomplete" if family_has else
                                f"set, but transformers builds no such layer for model_type '{self.model_type}'"),
                                "build the spec from the model's config.json (suite.accounting.modelspec.spec_from_config)")

    # ---- the spec protocol (suite.accounting.specs.Spec) --------------------------------

    @property
    def priced_by(self) -> str:
        """'recipe': priced by the analytic recipe of its family (suite.accounting.costs)."""
        return PATH_RECIPE

    def costs(self, adapter: Adapter, *, rg0: bool, gc: bool, fold: bool = False, early_stop: bool = False) -> dict:
        """{'fwd', 'base', 'bwd', 'recompute'}: FLOPs per stat of the decoder's forward with the
        adapter, without it, its backward and its checkpoint recompute (`costs.model_costs`).
        `rg0`: the first layer's input requires grad; `fold`: peft folds expert LoRAs per call;
        `early_stop`: the checkpoint skips a layer's last matmul. `gc` changes nothing here (the
        recompute is priced apart, by the caller, when checkpointing is on)."""
        return model_costs(self, adapter, fold, rg0, early_stop)

    def lora(self, adapter: Adapter) -> Lora:
        """The LoRA question: what peft adapts, trainable parameters, targets that adapt nothing
        (`adapter.recipe_lora`)."""
        return recipe_lora(self, adapter)

    @property
    def needs(self) -> Needs:
        """Work statistics beyond the base keys that its FLOPs use (windows, decode, chunks, calls)."""
        mixers = {self.mixer_of(i) for i in range(self.num_layers)}
        return Needs(windows=(self.sliding_window,) if "sliding" in mixers else (),
                     decode=bool(mixers & {"mla", "linear"}), chunks="linear" in mixers, calls=self.is_moe)

    # ---- shapes -------------------------------------------------------------------------

    @property
    def family(self) -> Family:
        """The model_type's construction facts."""
        return FAMILIES[self.model_type]

    @property
    def q_dim(self) -> int:
        """Output width of q_proj (num_heads * head_dim)."""
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Output width of k_proj and v_proj (num_kv_heads * head_dim)."""
        return self.num_kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        """Mixture of experts."""
        return self.num_experts > 0

    def projections(self) -> dict[str, tuple[int, int]]:
        """The Linear layers of a dense decoder layer with standard attention: name -> (in_features,
        out_features); the seven q/k/v/o/gate/up/down of Qwen2, Llama, Mistral."""
        return {li.name: (li.fan_in, li.fan_out) for li in self._attention("full") + self._dense_mlp(self.intermediate_size)}

    def mixer_of(self, i: int) -> str:
        """Token mixer of layer i: 'full', 'sliding', 'linear' or 'mla'."""
        t = self.layer_types[i] if self.layer_types else "full_attention"
        if t == "linear_attention":
            return "linear"
        if t == "sliding_attention" and self.sliding_window:
            return "sliding"
        return "mla" if self.family.mla else "full"

    def layer(self, i: int) -> Layer:
        """Decoder layer i (0-based), as transformers builds it."""
        return _layer(self, i)

    def layers(self) -> list[Layer]:
        """Every decoder layer."""
        return [_layer(self, i) for i in range(self.num_layers)]

    def _attention(self, mixer: str) -> list[Linear]:
        h, f = self.hidden_size, self.family
        if mixer == "linear":
            kd = self.linear_num_key_heads * self.linear_key_head_dim
            vd = self.linear_num_value_heads * self.linear_value_head_dim
            nv = self.linear_num_value_heads
            if f.linear == "qkvz":
                ins = [Linear("in_proj_qkvz", h, 2 * kd + 2 * vd), Linear("in_proj_ba", h, 2 * nv)]
            else:
                ins = [Linear("in_proj_qkv", h, 2 * kd + vd), Linear("in_proj_z", h, vd),
                       Linear("in_proj_b", h, nv), Linear("in_proj_a", h, nv)]
            return ins + [Linear("out_proj", vd, h)]
        if mixer == "mla":
            nh, ab = self.num_heads, self.qkv_bias
            qk, v, rope = self.head_dim, self.v_head_dim or self.head_dim, self.qk_rope_head_dim
            q = [Linear("q_a_proj", h, self.q_lora_rank, ab), Linear("q_b_proj", self.q_lora_rank, nh * qk)] \
                if self.q_lora_rank else [Linear("q_proj", h, nh * qk)]
            return q + [Linear("kv_a_proj_with_mqa", h, self.kv_lora_rank + rope, ab),
                        Linear("kv_b_proj", self.kv_lora_rank, nh * (qk - rope + v)),
                        Linear("o_proj", nh * v, h, self.o_bias)]
        qo = self.q_dim * (2 if f.q_gate else 1)
        if f.fused:
            return [Linear("qkv_proj", h, self.q_dim + 2 * self.kv_dim, self.qkv_bias),
                    Linear("o_proj", self.q_dim, h, self.o_bias)]
        return [Linear("q_proj", h, qo, self.qkv_bias), Linear("k_proj", h, self.kv_dim, self.qkv_bias),
                Linear("v_proj", h, self.kv_dim, self.qkv_bias), Linear("o_proj", self.q_dim, h, self.o_bias)]

    def _dense_mlp(self, width: int, part: str = "mlp") -> list[Linear]:
        h, b = self.hidden_size, self.mlp_bias and part == "mlp"
        if self.family.fused:
            return [Linear("gate_up_proj", h, 2 * width, b, part), Linear("down_proj", width, h, b, part)]
        return [Linear("gate_proj", h, width, b, part), Linear("up_proj", h, width, b, part),
                Linear("down_proj", width, h, b, part)]

    # ---- parameter counts ---------------------------------------------------------------

    @property
    def params_layer(self) -> int:
        """Parameters of one decoder layer of a uniform dense model (the mean otherwise)."""
        return sum(lay.params for lay in self.layers()) // self.num_layers

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
        return sum(lay.params for lay in self.layers()) + self.hidden_size + self.params_score_head

    @property
    def params_total(self) -> int:
        """All parameters as the real model has them (tied embeddings counted once)."""
        return self.params_non_embedding + self.params_embedding

    @property
    def params_idle(self) -> int:
        """Routed-expert parameters a token does not run: (E - k) / E of every expert stack."""
        return sum(lay.experts.params * (lay.experts.num - lay.experts.top_k) // lay.experts.num
                   for lay in self.layers() if lay.experts)

    @property
    def params_active(self) -> int:
        """Parameters a token multiplies: all but the input embedding (a lookup; counted when
        tied, as the LM head) and, in MoE layers, all but k of the E routed experts (router,
        shared experts and attention in full). 2 * params_active ~ forward FLOPs per token."""
        idle = self.params_idle
        lookup = self.vocab_size * self.hidden_size if self.params_embedding > self.vocab_size * self.hidden_size \
            or not self.has_lm_head else 0
        return self.params_total - idle - lookup

    def to_hf_config(self) -> dict:
        """A Hugging Face config.json dict that builds this architecture (the backbone only for
        reward models: their score head is not a transformers class)."""
        f = self.family
        cfg = {"model_type": self.model_type, "architectures": [f.arch],
               "hidden_size": self.hidden_size, "num_hidden_layers": self.num_layers,
               "num_attention_heads": self.num_heads, "num_key_value_heads": self.num_kv_heads,
               "head_dim": self.head_dim, "intermediate_size": self.intermediate_size,
               "vocab_size": self.vocab_size, "tie_word_embeddings": self.tie_embeddings,
               f.act_key: f.acts[0]}
        if f.qkv_bias == "attention_bias":
            cfg["attention_bias"] = self.qkv_bias
        if self.model_type in ("llama", "smollm3"):
            cfg["mlp_bias"] = self.mlp_bias
        if self.layer_types or self.sliding_window:
            cfg["layer_types"] = list(self.layer_types or ["full_attention"] * self.num_layers)
            cfg["sliding_window"] = self.sliding_window or None
            if self.model_type in ("qwen2", "qwen3", "smollm3"):
                cfg["use_sliding_window"] = bool(self.sliding_window)
        if self.is_moe:
            cfg["num_experts_per_tok"] = self.experts_per_token
            if self.model_type in ("mixtral", "gpt_oss"):
                cfg["num_local_experts"] = self.num_experts
                cfg["intermediate_size"] = self.moe_intermediate_size
            elif self.model_type == "deepseek_v3":
                cfg.update(n_routed_experts=self.num_experts, moe_intermediate_size=self.moe_intermediate_size,
                           n_shared_experts=self.shared_expert_intermediate_size // self.moe_intermediate_size,
                           first_k_dense_replace=len(self.dense_mlp_layers), n_group=1, topk_group=1)
            else:
                cfg.update(num_experts=self.num_experts, moe_intermediate_size=self.moe_intermediate_size)
                if not f.all_moe:
                    cfg.update(mlp_only_layers=list(self.dense_mlp_layers), decoder_sparse_step=1)
                if self.shared_expert_intermediate_size:
                    cfg["shared_expert_intermediate_size"] = self.shared_expert_intermediate_size
        if f.mla:
            del cfg["head_dim"]  # DeepseekV3Config derives its rotary width from qk_rope_head_dim
            cfg.update(q_lora_rank=self.q_lora_rank or None, kv_lora_rank=self.kv_lora_rank,
                       qk_rope_head_dim=self.qk_rope_head_dim, qk_nope_head_dim=self.head_dim - self.qk_rope_head_dim,
                       v_head_dim=self.v_head_dim or self.head_dim)
        if f.linear:
            cfg.update(linear_num_key_heads=self.linear_num_key_heads, linear_num_value_heads=self.linear_num_value_heads,
                       linear_key_head_dim=self.linear_key_head_dim, linear_value_head_dim=self.linear_value_head_dim,
                       linear_conv_kernel_dim=self.linear_conv_kernel)
        return cfg

    # ---- JSON ---------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """JSON-able dict (score_head as lists). The fields of other families (windows, experts,
        latent and linear attention) appear only when set, so dense specs read as before."""
        d = asdict(self)
        d["score_head"] = [list(s) for s in self.score_head]
        for k in _OPTIONAL_FACTS:
            if not d[k]:
                del d[k]
            elif isinstance(d[k], tuple):
                d[k] = list(d[k])
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


_OPTIONAL_FACTS = ("layer_types", "sliding_window", "v_head_dim", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim",
                   "num_experts", "experts_per_token", "moe_intermediate_size", "shared_expert_intermediate_size",
                   "dense_mlp_layers", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                   "linear_value_head_dim", "linear_conv_kernel")
"""ModelSpec fields beyond the dense Qwen2/Llama/Mistral facts; to_dict leaves them out when unset."""


@functools.lru_cache(maxsize=4096)
def _layer(spec: ModelSpec, i: int) -> Layer:
    f, h = spec.family, spec.hidden_size
    mixer = spec.mixer_of(i)
    linears = spec._attention(mixer)
    other = f.norms * h
    if mixer == "linear":
        kd = spec.linear_num_key_heads * spec.linear_key_head_dim
        vd = spec.linear_num_value_heads * spec.linear_value_head_dim
        # depthwise conv kernel over q, k and v; dt_bias and A_log per value head; gated norm
        other += (2 * kd + vd) * spec.linear_conv_kernel + 2 * spec.linear_num_value_heads + spec.linear_value_head_dim
    elif mixer == "mla":
        other += spec.q_lora_rank + spec.kv_lora_rank  # q_a_layernorm, kv_a_layernorm
    else:
        other += {"head": 2 * spec.head_dim, "proj": spec.q_dim + spec.kv_dim}.get(f.qk_norm, 0)
        other += spec.num_heads if f.sinks else 0
    experts, at = None, 0
    if spec.is_moe and i not in spec.dense_mlp_layers:
        e = spec.num_experts
        router = Linear("router" if f.moe == "biased" else "gate", h, e, f.moe == "biased", "router")
        experts = Experts(e, spec.experts_per_token, h, spec.moe_intermediate_size, f.moe == "biased")
        if f.moe == "gated-shared":  # Qwen3-Next: shared expert, router, experts, sigmoid(gate) * shared
            shared = spec._dense_mlp(spec.shared_expert_intermediate_size, "shared")
            mlp = shared + [router, Linear("shared_expert_gate", h, 1, False, "shared")]
            at = len(linears) + len(shared) + 1
        elif f.moe == "shared":  # DeepSeek: router, experts, then the shared experts
            mlp = [router] + spec._dense_mlp(spec.shared_expert_intermediate_size, "shared")
            at = len(linears) + 1
        else:
            mlp = [router]
            at = len(linears) + 1
    else:
        mlp = spec._dense_mlp(spec.intermediate_size)
    return Layer(mixer, spec.sliding_window if mixer == "sliding" else 0, tuple(linears + mlp), experts, at, other)



# ---- reading config.json ----------------------------------------------------------------


def _need(cfg: dict, key: str, where: str) -> int:
    if key not in cfg or cfg[key] is None:
        raise RaceError(f"{where}: config is missing field '{key}'",
                        "a decoder-only Hugging Face config.json has it; add it or fix the file")
    v = cfg[key]
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise RaceError(f"{where}: field '{key}' must be a positive integer, got {_short(v)}")
    return check_config_count(key, v, where)


def _count(cfg: dict, key: str, where: str, default=MISSING, minimum: int = 1) -> int:
    """A non-negative integer field; `default` when absent or null (the config class default)."""
    v = cfg.get(key)
    if v is None:
        if default is MISSING:
            return _need(cfg, key, where)
        return default
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise RaceError(f"{where}: field '{key}' must be an integer >= {minimum}, got {_short(v)}")
    return check_config_count(key, v, where)


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:60] + "..."


_WINDOW_DEFAULT = {"mistral": 4096, "gemma2": 4096, "gemma3_text": 4096, "olmo3": 4096, "gpt_oss": 128}
"""sliding_window of the config classes whose default is a window (others: None)."""


def _layer_types(cfg: dict, model_type: str, layers: int, where: str) -> tuple[tuple[str, ...], int]:
    """(layer_types, sliding_window) as transformers 5.24's config classes derive them; ((), 0)
    when every layer is full attention."""
    window = cfg.get("sliding_window", _WINDOW_DEFAULT.get(model_type))
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise RaceError(f"{where}: field 'sliding_window' must be a positive integer or null, got {window!r}")
    given = cfg.get("layer_types")
    if given is not None:
        if not isinstance(given, list) or len(given) != layers:
            raise RaceError(f"{where}: layer_types must list one type per layer ({layers})")
        bad = sorted({str(t) for t in given} - set(LAYER_TYPES))
        if bad:
            raise RaceError(f"{where}: layer type(s) {', '.join(bad)} are not supported",
                            f"the accounting models {', '.join(LAYER_TYPES)}")
        types = list(given)
    elif model_type in ("qwen2", "qwen3"):
        on = bool(cfg.get("use_sliding_window")) and window is not None
        first = _count(cfg, "max_window_layers", where, 28, 0)
        types = ["sliding_attention" if on and i >= first else "full_attention" for i in range(layers)]
    elif model_type == "smollm3":
        on = bool(cfg.get("use_sliding_window")) and window is not None
        every = _count(cfg, "no_rope_layer_interval", where, 4)
        nope = cfg.get("no_rope_layers") or [int((i + 1) % every != 0) for i in range(layers)]
        types = ["sliding_attention" if on and not nope[i] else "full_attention" for i in range(layers)]
    elif model_type in ("gemma2", "gpt_oss"):
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
    elif model_type == "gemma3_text":
        every = _count(cfg, "sliding_window_pattern", where, 6)
        types = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(layers)]
    elif model_type == "olmo3":
        types = ["sliding_attention" if (i + 1) % 4 else "full_attention" for i in range(layers)]
    elif model_type in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        every = _count(cfg, "full_attention_interval", where, 4)
        types = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)]
    elif model_type in ("mistral", "mixtral", "phi3") or (model_type == "qwen3_moe" and cfg.get("use_sliding_window")):
        # no layer_types: the cache and the attention slide every layer when a window is set
        types = ["sliding_attention" if window is not None else "full_attention"] * layers
    else:
        types = ["full_attention"] * layers
    if model_type in ("qwen2", "qwen3", "qwen3_moe") and not cfg.get("use_sliding_window"):
        window = None  # the config class drops the window unless use_sliding_window
    if window is None:
        types = ["full_attention" if t == "sliding_attention" else t for t in types]
    if all(t == "full_attention" for t in types):
        return (), 0
    return tuple(types), window or 0


def _moe_facts(cfg: dict, f: Family, layers: int, inter: int, where: str) -> dict:
    """ModelSpec MoE fields of a config (empty for dense families, which refuse MoE keys)."""
    if not f.moe:
        moe = [k for k in _MOE_KEYS if cfg.get(k)]
        if moe:
            raise RaceError(f"{where}: mixture-of-experts config ({moe[0]}={cfg[moe[0]]!r}) for model_type "
                            f"'{f.model_type}', which transformers builds dense",
                            "MoE model types: " + ", ".join(m for m, g in FAMILIES.items() if g.moe))
        return {}
    k = _count(cfg, "num_experts_per_tok", where)
    if f.model_type in ("mixtral", "gpt_oss"):
        e, width, shared, dense = _count(cfg, "num_local_experts", where), inter, 0, ()
    elif f.model_type == "deepseek_v3":
        e, width = _count(cfg, "n_routed_experts", where), _count(cfg, "moe_intermediate_size", where)
        shared = _count(cfg, "n_shared_experts", where, 0, 0) * width
        dense = tuple(range(min(layers, _count(cfg, "first_k_dense_replace", where, 0, 0))))
    else:  # qwen3_moe, qwen3_next, qwen3_5_moe_text
        e, width = _count(cfg, "num_experts", where), _count(cfg, "moe_intermediate_size", where)
        shared = _count(cfg, "shared_expert_intermediate_size", where, 0, 0) if f.moe == "gated-shared" else 0
        if f.model_type == "qwen3_5_moe_text":
            dense = ()  # every layer is MoE: its decoder layer reads no decoder_sparse_step / mlp_only_layers
        else:
            step = _count(cfg, "decoder_sparse_step", where, 1)
            only = cfg.get("mlp_only_layers") or []
            dense = tuple(i for i in range(layers) if i in only or (i + 1) % step)
    if k > e:
        raise RaceError(f"{where}: num_experts_per_tok={k} exceeds the {e} routed experts")
    if f.moe == "gated-shared" and not shared:
        raise RaceError(f"{where}: shared_expert_intermediate_size must be positive for {f.model_type}")
    return dict(num_experts=e, experts_per_token=k, moe_intermediate_size=width,
                shared_expert_intermediate_size=shared, dense_mlp_layers=dense)


def spec_from_config(cfg: dict, name: str, where: str | None = None) -> ModelSpec:
    """Build a ModelSpec from the dict of a Hugging Face config.json. `where` names the source
    in error messages. Multimodal gemma3 / qwen3_5 / qwen3_5_moe configs are read through their text_config
    (the text decoder only: the vision tower is neither counted nor run)."""
    where = where or name
    if not isinstance(cfg, dict):
        raise RaceError(f"{where}: config must be a JSON object")
    if cfg.get("is_encoder_decoder") or any(k in cfg for k in ("encoder_layers", "decoder_layers", "d_model")):
        raise RaceError(f"{where}: encoder-decoder configs are not supported",
                        "accounting covers decoder-only models")
    model_type = cfg.get("model_type")
    if model_type in _TEXT_OF and isinstance(cfg.get("text_config"), dict):
        top, cfg = cfg, {**cfg["text_config"], "model_type": _TEXT_OF[model_type]}
        if "tie_word_embeddings" not in cfg and "tie_word_embeddings" in top:
            cfg["tie_word_embeddings"] = top["tie_word_embeddings"]
        cfg.setdefault("architectures", top.get("architectures"))
        model_type = cfg["model_type"]
    elif "text_config" in cfg or "vision_config" in cfg:
        raise RaceError(f"{where}: multimodal config of model_type '{model_type}' is not supported",
                        "point --config at a text-only decoder config; multimodal types read through their "
                        f"text config: {', '.join(sorted(_TEXT_OF))}")
    if model_type is None:
        raise RaceError(f"{where}: config is missing field 'model_type'",
                        f"supported model types: {', '.join(SUPPORTED_TYPES)}")
    if model_type not in FAMILIES:
        moe = [k for k in _MOE_KEYS if cfg.get(k)]
        kind = "mixture-of-experts " if moe else ""
        raise RaceError(f"{where}: {kind}model_type '{model_type}' is not supported",
                        f"supported model types: {', '.join(SUPPORTED_TYPES)}")
    f = FAMILIES[model_type]
    cfg = _unalias(cfg)
    if cfg.get("use_bidirectional_attention"):
        raise RaceError(f"{where}: use_bidirectional_attention makes a {model_type} an encoder, not a causal LM",
                        "the accounting covers causal decoders")

    h = _need(cfg, "hidden_size", where)
    layers = _need(cfg, "num_hidden_layers", where)
    heads = _need(cfg, "num_attention_heads", where)
    kv = cfg.get("num_key_value_heads") or heads  # HF default: multi-head attention
    if not isinstance(kv, int) or kv <= 0 or heads % kv:
        raise RaceError(f"{where}: num_key_value_heads={kv!r} must be a positive divisor of num_attention_heads={heads}")
    head_dim = cfg.get("head_dim") or h // heads
    if not isinstance(head_dim, int) or head_dim <= 0:
        raise RaceError(f"{where}: field 'head_dim' must be a positive integer, got {head_dim!r}")
    if "head_dim" not in cfg and h % heads and not f.mla:
        raise RaceError(f"{where}: hidden_size {h} is not divisible by num_attention_heads {heads}",
                        "set head_dim in the config")
    # no dense MLP anywhere: the spec's intermediate_size (unused) is the experts' width
    inter = _count(cfg, "intermediate_size", where, _count(cfg, "moe_intermediate_size", where)) if f.all_moe \
        else _need(cfg, "intermediate_size", where)
    vocab = _need(cfg, "vocab_size", where)
    act = cfg.get(f.act_key) or f.acts[0]
    if act not in f.acts:
        raise RaceError(f"{where}: {f.act_key} '{act}' is not supported for {model_type}",
                        f"accounting assumes a gated MLP with {' or '.join(f.acts)}")

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

    attention_bias = bool(cfg.get("attention_bias", model_type == "gpt_oss"))  # gpt-oss defaults to biased
    layer_types, window = _layer_types(cfg, model_type, layers, where)
    extra: dict = _moe_facts(cfg, f, layers, inter, where)
    if f.mla:
        rope, nope = _count(cfg, "qk_rope_head_dim", where), _count(cfg, "qk_nope_head_dim", where)
        if kv != heads:
            raise RaceError(f"{where}: MLA with num_key_value_heads={kv} != num_attention_heads={heads}",
                            "transformers expands the latent into one key/value head per query head")
        head_dim = nope + rope
        extra.update(q_lora_rank=_count(cfg, "q_lora_rank", where, 0), kv_lora_rank=_count(cfg, "kv_lora_rank", where),
                     qk_rope_head_dim=rope, v_head_dim=_count(cfg, "v_head_dim", where))
    if f.linear:
        extra.update({k: _count(cfg, c, where) for k, c in (
            ("linear_num_key_heads", "linear_num_key_heads"), ("linear_num_value_heads", "linear_num_value_heads"),
            ("linear_key_head_dim", "linear_key_head_dim"), ("linear_value_head_dim", "linear_value_head_dim"),
            ("linear_conv_kernel", "linear_conv_kernel_dim"))})
        if extra["linear_num_value_heads"] % extra["linear_num_key_heads"]:
            raise RaceError(f"{where}: linear_num_value_heads must be a multiple of linear_num_key_heads")
    return ModelSpec(
        name=name, model_type=model_type, hidden_size=h, num_layers=layers, num_heads=heads,
        num_kv_heads=heads if f.mla else kv, head_dim=head_dim, intermediate_size=inter, vocab_size=vocab,
        tie_embeddings=bool(cfg.get("tie_word_embeddings", f.tie_default)) and has_lm_head,
        qkv_bias={"always": True, "never": False}.get(f.qkv_bias, attention_bias),
        has_lm_head=has_lm_head, score_head=score_head, score_bias=score_bias,
        o_bias=attention_bias if f.qkv_bias == "attention_bias" else False,
        mlp_bias=bool(cfg.get("mlp_bias", False)) if model_type in ("llama", "smollm3") else False,
        layer_types=layer_types, sliding_window=window, **extra,
    )


def fmt_params(n: int) -> str:
    """Human parameter count: 1.54B, 494M."""
    if n >= 999.5e6:
        return f"{n / 1e9:.2f}B"
    if n >= 1e6:
        return f"{n / 1e6:.0f}M" if n >= 1e8 else f"{n / 1e6:.2f}M"
    return f"{n / 1e3:.1f}K" if n >= 1e3 else str(n)


__all__ = ["ModelSpec", "spec_from_config", "SUPPORTED_TYPES", "PATH_RECIPE", "fmt_params"]
