"""What one model's passes cost per statistic: FLOPs per token through every layer (its
Linears, LoRA branches, MoE experts), per attention (query, key) pair, per MLA latent, per
linear-attention sequence and chunk, per forward call (peft's expert-LoRA folds) and per output
head position -- for the forward with and without the adapter, its backward (autograd computes
an input gradient only where the input requires grad, a weight gradient only where the weight
trains) and its checkpoint recompute. `suite.accounting.pricing` maps these onto work keys.

Per model, each pass kind costs FLOPs per unit of a few statistics ("stats"): tok (a token
through every layer), pair / pair.w{W} (a (query, key) pair of full / W-window layers), kvb
(an MLA latent expanded by kv_b_proj), row and chunk (a sequence and a 64-token chunk of a
linear-attention scan), dec_tok / dec_pair (what a decode step adds per token / per pair),
call (a forward call: peft folds expert LoRAs into the weights once per call) and head (a
position of the output head).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from .adapter import Adapter, LoraUnit, recipe_lora

if TYPE_CHECKING:  # the recipe's spec calls this module (ModelSpec.costs), so it sits below it
    from .modelspec import ModelSpec

CHUNK = 64
"""Chunk length of transformers' torch_chunk_gated_delta_rule (linear attention) and the default
chunk of a chunked scan: work counts chunks of it."""


def add_stat(c: dict, stat: str, v: int) -> None:
    if v:
        c[stat] = c.get(stat, 0) + v


def _lin(i: int, o: int) -> int:
    return 2 * i * o


def _lora_tok(u: LoraUnit) -> int:
    """x @ A then @ B, per token (per routed token for an expert stack)."""
    return 2 * u.rank * (u.fan_in + u.fan_out)


def _fold(u: LoraUnit) -> int:
    """One fold of a peft ParamWrapper: s * B @ A over every expert (a baddbmm onto W), or B @ A
    for the 2-D router weight."""
    return 2 * max(1, u.experts) * u.fan_in * u.fan_out * u.rank


def _fold_fwd(u: LoraUnit) -> int:
    """A ParamWrapper's forward, per call: the expert stack is folded twice -- torch's
    register_parametrization evaluates the fold once to check its shape, then the forward uses
    it (peft registers and removes the parametrization on every call); the router's delta is
    computed once, outside the parametrization."""
    return _fold(u) * (2 if u.experts else 1)


def _units_by_layer(spec: ModelSpec, adapter: Adapter) -> list[dict[str, LoraUnit]]:
    out = [{} for _ in range(spec.num_layers)]
    for u in recipe_lora(spec, adapter).units:
        out[u.layer][u.name] = u
    return out


def _pair_widths(spec: ModelSpec) -> tuple[int, int]:
    """FLOPs per (query, key) pair of one layer: q.k over every query head, and p.v."""
    v = spec.v_head_dim or spec.head_dim
    return 2 * spec.num_heads * spec.head_dim, 2 * spec.num_heads * v


def _linear_dims(spec: ModelSpec) -> tuple[int, int, int, int, int]:
    """(value heads, key head width, value head width, conv channels, conv kernel)."""
    kd = spec.linear_num_key_heads * spec.linear_key_head_dim
    vd = spec.linear_num_value_heads * spec.linear_value_head_dim
    return (spec.linear_num_value_heads, spec.linear_key_head_dim, spec.linear_value_head_dim,
            2 * kd + vd, spec.linear_conv_kernel)


def _chunk_fwd(spec: ModelSpec) -> int:
    """torch_chunk_gated_delta_rule per 64-token chunk: k_beta.k^T and q.k^T (C x C), the
    intra-chunk output (C x C).(C x dv), and the state products k_cumdecay.S, q.S, k^T.v_new;
    per value head (queries and keys are repeated to the value heads). The two triangular
    solves are not counted (FlopCounterMode counts no linalg solve)."""
    nv, dk, dv, _, _ = _linear_dims(spec)
    c = CHUNK
    return nv * (4 * c * c * dk + 2 * c * c * dv + 6 * c * dk * dv)


def _mixer_fwd(spec: ModelSpec, lay, c: dict) -> None:
    """Attention products and the linear-attention scan of one layer, per stat."""
    if lay.mixer == "linear":
        _, _, _, cd, k = _linear_dims(spec)
        add_stat(c, "tok", 2 * cd * k)            # depthwise causal conv, padded by k-1 ...
        add_stat(c, "row", 2 * cd * k * (k - 1))  # ... on the left of every sequence
        add_stat(c, "chunk", _chunk_fwd(spec))
        add_stat(c, "dec_tok", 2 * cd * k)        # a decode step convolves [state | token]: two outputs
        return                                # (the recurrent decode update is elementwise: 0)
    qk, pv = _pair_widths(spec)
    add_stat(c, f"pair.w{lay.window}" if lay.window else "pair", qk + pv)


def _layer_fwd(spec: ModelSpec, lay, units: dict, lora: bool, fold: bool) -> dict:
    """Forward FLOPs of one decoder layer per stat. kv_b_proj (MLA) goes to 'kvb'."""
    c: dict = {}
    for li in lay.linears:
        stat = "kvb" if li.name == "kv_b_proj" else "tok"
        add_stat(c, stat, _lin(li.fan_in, li.fan_out))
        u = units.get(f"{li.name}.weight" if li.part == "router" else li.name) if lora else None
        if u is not None:
            add_stat(c, "call", _fold_fwd(u)) if fold and u.is_param else add_stat(c, stat, _lora_tok(u))
    ex = lay.experts
    if ex:
        add_stat(c, "tok", ex.top_k * ex.fwd_per_pair)
        for name in ("experts.gate_up_proj", "experts.down_proj"):
            u = units.get(name) if lora else None
            if u is not None:
                add_stat(c, "call", _fold_fwd(u)) if fold else add_stat(c, "tok", ex.top_k * _lora_tok(u))
    _mixer_fwd(spec, lay, c)
    return c


def _lora_bwd(u: LoraUnit, rg_x: bool) -> int:
    """LoRA branch backward per token: B's weight grad and input grad, A's weight grad, A's
    input grad when x requires grad."""
    r, i, o = u.rank, u.fan_in, u.fan_out
    return 2 * r * o + 2 * r * o + 2 * i * r + (2 * i * r if rg_x else 0)


class _Bwd:
    """Backward of one decoder layer: autograd computes an input gradient only where the input
    requires grad and a weight gradient only for weights that require grad."""

    def __init__(self, spec: ModelSpec, units: dict, full: bool, fold: bool):
        self.spec, self.units, self.full, self.fold, self.c = spec, units, full, fold, {}

    def linear(self, li, rg_x: bool, stat: str = "tok") -> bool:
        """One nn.Linear (or the router's F.linear); returns whether its output requires grad."""
        f = _lin(li.fan_in, li.fan_out)
        u = self.units.get(f"{li.name}.weight" if li.part == "router" else li.name)
        if self.full:
            add_stat(self.c, stat, 2 * f if rg_x else f)
            return True
        add_stat(self.c, stat, f if rg_x else 0)
        if u is None:
            return rg_x
        if u.is_param:  # folded router weight: its gradient per token, then through B @ A per call
            add_stat(self.c, stat, f)
            add_stat(self.c, "call", 2 * _fold(u))
        else:
            add_stat(self.c, stat, _lora_bwd(u, rg_x))
        return True

    def experts(self, ex, rg_x: bool) -> bool:
        """Routed experts, per (token, expert) pair: gate_up then down."""
        k = ex.top_k
        r_out = rg_x
        for name, (i, o) in (("experts.gate_up_proj", (ex.hidden, 2 * ex.width)),
                             ("experts.down_proj", (ex.width, ex.hidden))):
            f = _lin(i, o)
            u = self.units.get(name)
            w_grad = self.full or (u is not None and self.fold)
            add_stat(self.c, "tok", k * ((f if r_out else 0) + (f if w_grad else 0)))
            if u is not None:
                if self.fold:
                    add_stat(self.c, "call", 2 * _fold(u))
                else:
                    add_stat(self.c, "tok", k * _lora_bwd(u, r_out))
            r_out = r_out or w_grad or u is not None
        return r_out

    def pairs(self, lay, rq: bool, rk: bool, rv: bool) -> None:
        qk, pv = _pair_widths(self.spec)
        stat = f"pair.w{lay.window}" if lay.window else "pair"
        # scores = q k^T: dq, dk; out = p v: dp (p requires grad when q or k does), dv
        add_stat(self.c, stat, qk * (rq + rk) + pv * ((rq or rk) + rv))

    def layer(self, lay, rg_in: bool) -> bool:
        by = {li.name: li for li in lay.linears}
        if lay.mixer == "linear":
            r_attn = self.linear_attention(lay, by, rg_in)
        elif lay.mixer == "mla":
            if "q_proj" in by:
                rq = self.linear(by["q_proj"], rg_in)
            else:
                rq = self.linear(by["q_b_proj"], self.linear(by["q_a_proj"], rg_in))
            rkva = self.linear(by["kv_a_proj_with_mqa"], rg_in)
            rkvb = self.linear(by["kv_b_proj"], rkva)
            self.pairs(lay, rq, rkva or rkvb, rkvb)
            r_attn = self.linear(by["o_proj"], rq or rkva or rkvb)
        else:
            if "qkv_proj" in by:
                rq = rk = rv = self.linear(by["qkv_proj"], rg_in)
            else:
                rq, rk, rv = (self.linear(by[n], rg_in) for n in ("q_proj", "k_proj", "v_proj"))
            self.pairs(lay, rq, rk, rv)
            r_attn = self.linear(by["o_proj"], rq or rk or rv)
        r_mid = rg_in or r_attn  # residual stream after the token mixer
        mlp = [li for li in lay.linears if li.part != "attn"]
        if lay.experts is None:
            r_out = self.dense(mlp, r_mid)
            return r_mid or r_out
        r_out = False
        shared = [li for li in mlp if li.part == "shared" and li.name != "shared_expert_gate"]
        if shared:
            r_out = self.dense(shared, r_mid)
        for li in mlp:
            if li.part == "router" or li.name == "shared_expert_gate":
                r_out = self.linear(li, r_mid) | r_out
        r_out = self.experts(lay.experts, r_mid) | r_out
        return r_mid or r_out

    def dense(self, mlp: list, rg_x: bool) -> bool:
        by = {li.name: li for li in mlp}
        if "gate_up_proj" in by:
            r_act = self.linear(by["gate_up_proj"], rg_x)
        else:
            r_act = self.linear(by["gate_proj"], rg_x) | self.linear(by["up_proj"], rg_x)
        return self.linear(by["down_proj"], r_act)

    def linear_attention(self, lay, by: dict, rg_in: bool) -> bool:
        """In-projections, the depthwise conv, the chunked scan, the gated norm, out_proj."""
        spec = self.spec
        if "in_proj_qkvz" in by:
            r_qkv = r_z = self.linear(by["in_proj_qkvz"], rg_in)
            r_b = r_a = self.linear(by["in_proj_ba"], rg_in)
        else:
            r_qkv, r_z = self.linear(by["in_proj_qkv"], rg_in), self.linear(by["in_proj_z"], rg_in)
            r_b, r_a = self.linear(by["in_proj_b"], rg_in), self.linear(by["in_proj_a"], rg_in)
        r_ba = r_b or r_a
        nv, dk, dv, cd, k = _linear_dims(spec)
        conv_tok, conv_row = 2 * cd * k, 2 * cd * k * (k - 1)
        n_conv = (1 if r_qkv else 0) + (1 if self.full else 0)  # input grad, weight grad
        add_stat(self.c, "tok", n_conv * conv_tok)
        add_stat(self.c, "row", n_conv * conv_row)
        r_core = r_qkv or self.full or r_ba
        if r_core:
            c = CHUNK
            # every chunk product gets both operand gradients, the two triangular solves one matmul
            # each (the solved-for matrix) ...
            add_stat(self.c, "chunk", 2 * _chunk_fwd(spec) + nv * 2 * c * c * (dk + dv))
            # ... except the products of the zero initial state and of the unused final state
            add_stat(self.c, "row", -nv * 4 * 2 * c * dk * dv)
            if not (r_qkv or self.full):  # only beta and the decay need grads: q.k^T gets none,
                add_stat(self.c, "chunk", -nv * 3 * 2 * c * c * dk)  # k_beta.k^T none for k
                if not r_a:  # beta alone (measured): one C x C product and two state products fewer
                    add_stat(self.c, "chunk", -nv * (2 * c * c * dk + 2 * 2 * c * dk * dv))
                    add_stat(self.c, "row", nv * 2 * c * dk * dv)
                elif not r_b:  # the decay alone (measured): one C x C product fewer
                    add_stat(self.c, "chunk", -nv * 2 * c * c * dk)
        return self.linear(by["out_proj"], r_core or r_z)


def _skipped(spec: ModelSpec, lay, units: dict) -> int:
    """FLOPs per token torch's non-reentrant checkpoint does not recompute: the layer's last
    matmul when its output feeds only the residual add (a dense MLP's or DeepSeek's shared
    experts' down_proj; peft runs a LoRA's base layer first, so then its B). Nothing is skipped
    where the last output is saved: MoE layers whose experts or a sigmoid-gated shared expert
    come last, and families with a norm after the MLP (Gemma 2/3, OLMo 2/3)."""
    last = lay.linears[-1]
    if last.name != "down_proj" or spec.family.post_mlp_norm or \
            (lay.experts is not None and lay.experts_at >= len(lay.linears)):
        return 0
    u = units.get("down_proj")
    return 2 * u.rank * last.fan_out if u is not None else _lin(last.fan_in, last.fan_out)


@lru_cache(maxsize=256)
def model_costs(spec: ModelSpec, adapter: Adapter, fold: bool, rg0: bool, early_stop: bool) -> dict:
    """{'fwd', 'base', 'bwd', 'recompute'}: FLOPs per stat of the decoder's forward with the
    adapter, without it, its backward, and its checkpoint recompute."""
    units = _units_by_layer(spec, adapter)
    out = {"fwd": {}, "base": {}, "bwd": {}, "recompute": {}}
    rg = rg0
    for i in range(spec.num_layers):
        lay = spec.layer(i)
        fwd = _layer_fwd(spec, lay, units[i], True, fold)
        for part, c in (("fwd", fwd), ("recompute", fwd), ("base", _layer_fwd(spec, lay, {}, False, fold))):
            for stat, v in c.items():
                add_stat(out[part], stat, v)
        if early_stop:
            add_stat(out["recompute"], "tok", -_skipped(spec, lay, units[i]))
        b = _Bwd(spec, units[i], adapter.kind == "full", fold)
        rg = b.layer(lay, rg)
        for stat, v in b.c.items():
            add_stat(out["bwd"], stat, v)
    return out


def head_fwd(spec: ModelSpec) -> int:
    """FLOPs per position of the output head: the score head if any, else the LM head."""
    if spec.score_head:
        return sum(2 * i * o for i, o in spec.score_head)
    return 2 * spec.hidden_size * spec.vocab_size if spec.has_lm_head else 0


def mla_absorbed(spec: ModelSpec) -> int:
    """MLA decode in the latent space (vLLM), per decode pair: scores over latent + rope and
    values over the latent, in place of the expanded pair (returned as the difference). Per
    decode token, q_nope through W_UK and the latent output through W_UV cost 2 n_h r (d_nope +
    d_v): exactly kv_b_proj on one latent, which the 'kvb' stat already charges per decode token."""
    nh, r, rope = spec.num_heads, spec.kv_lora_rank, spec.qk_rope_head_dim
    qk, pv = _pair_widths(spec)
    return 2 * nh * (r + rope) + 2 * nh * r - qk - pv

