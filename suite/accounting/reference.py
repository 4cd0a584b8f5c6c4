"""Measured FLOPs: torch's FlopCounterMode over the real Hugging Face / PEFT / TRL code paths,
the reference that suite.accounting is tested against (and the 'measured' column of the docs
table). Models are built from a ModelSpec with eager attention (FlopCounterMode counts CPU
SDPA as 0), on the meta device (no weights, any size) or on the CPU (tiny models).

FlopCounterMode does not count in-place matmuls (aten.addmm_), which TRL's fused LM head uses
for its gradients; flop_counter() adds them, so nothing real is missed. It also counts the
weight gradient of a grouped (depthwise) convolution as if it were dense -- `groups` times too
many FLOPs (torch 2.13); flop_counter() divides that part by the groups. Mixture-of-experts
models are built with `experts_implementation="eager"`: the default grouped_mm kernels are
invisible to the counter.
"""

from __future__ import annotations

import contextlib
from typing import Sequence

from .adapter import Adapter
from .modelspec import ModelSpec


def _inplace_addmm(self_shape, a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * a_shape[0] * a_shape[1] * b_shape[1]


def _inplace_baddbmm(self_shape, a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * a_shape[0] * a_shape[1] * a_shape[2] * b_shape[2]


def _conv_backward(grad_out_shape, x_shape, w_shape, bias, stride, padding, dilation, transposed, output_padding,
                   groups, output_mask, out_shape=None, **kwargs) -> int:
    from torch.utils.flop_counter import conv_flop_count

    def t(shape):
        return [shape[1], shape[0]] + list(shape[2:])

    flops = 0
    if output_mask[0]:  # grad_input: a transposed conv of grad_out with the weight (as torch counts it)
        flops += conv_flop_count(grad_out_shape, w_shape, out_shape[0], not transposed)
    if output_mask[1]:  # grad_weight: torch counts every (in, out) channel pair; a group sees its own
        pair = (t(grad_out_shape), t(x_shape)) if transposed else (t(x_shape), t(grad_out_shape))
        flops += conv_flop_count(*pair, t(out_shape[1]), False) // groups
    return flops


def flop_formulas() -> dict:
    """FlopCounterMode's custom_mapping here: in-place addmm_/baddbmm_ counted, a grouped
    convolution's weight gradient counted per group."""
    import torch

    aten = torch.ops.aten
    return {aten.addmm_: _inplace_addmm, aten.baddbmm_: _inplace_baddbmm, aten.convolution_backward: _conv_backward}


def flop_counter():
    """A FlopCounterMode (no printout) with `flop_formulas`."""
    from torch.utils.flop_counter import FlopCounterMode

    return FlopCounterMode(display=False, custom_mapping=flop_formulas())


def build_model(spec: ModelSpec, device: str = "meta", seed: int = 0):
    """The eager-attention model of `spec` on `device`: a causal LM, or for a reward model the
    backbone plus its score head (Linear layers with ReLU between, on every position)."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    cfg_dict = spec.to_hf_config()
    model_type = cfg_dict.pop("model_type")
    # Token ids 0-2 exist in any vocabulary (Phi-3 and OLMo default to ids beyond a tiny one).
    cfg = AutoConfig.for_model(model_type, pad_token_id=0, eos_token_id=1, bos_token_id=2, **cfg_dict)
    # transformers 5 runs MoE experts through grouped_mm by default, which FlopCounterMode does
    # not count. The eager loop over experts is counted (tokens x top-k, exactly) but needs real
    # routing (nonzero); on the meta device batched_mm gathers each token's top-k experts and
    # runs them as one bmm: the same count without data.
    experts = {"experts_implementation": "batched_mm" if device == "meta" else "eager"} if spec.is_moe else {}
    impl = {"attn_implementation": "eager", **experts}
    torch.manual_seed(seed)
    with torch.device(device):
        if spec.has_lm_head:
            return AutoModelForCausalLM.from_config(cfg, **impl)
        return _RewardModel(AutoModel.from_config(cfg, **impl), spec)


def _reward_model_class():
    import torch

    class RewardModel(torch.nn.Module):
        """Backbone + score head, as Qwen2.5-Math-PRM builds it."""

        def __init__(self, backbone, spec: ModelSpec):
            super().__init__()
            self.model = backbone
            layers = []
            for i, (a, b) in enumerate(spec.score_head):
                if i:
                    layers.append(torch.nn.ReLU())
                layers.append(torch.nn.Linear(a, b, bias=spec.score_bias))
            self.score = torch.nn.Sequential(*layers)

        def forward(self, input_ids, attention_mask=None):
            h = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return self.score(h)

    return RewardModel


def _RewardModel(backbone, spec):  # noqa: N802 - a factory that keeps torch out of import time
    return _reward_model_class()(backbone, spec)


def add_lora(model, adapter: Adapter):
    """Wrap `model` with a peft LoRA matching `adapter` (dropout 0); full adapters: unchanged.
    Dotted targets (experts.gate_up_proj, gate.weight) go to peft's target_parameters."""
    if adapter.kind != "lora":
        return model
    from peft import LoraConfig, get_peft_model

    from .adapter import ALL_LINEAR

    modules = [t for t in adapter.targets if "." not in t]
    params = [t for t in adapter.targets if "." in t]
    config = LoraConfig(r=adapter.rank, lora_alpha=adapter.alpha or 2 * adapter.rank,
                        target_modules=ALL_LINEAR if modules == [ALL_LINEAR] else modules,
                        target_parameters=params or None, lora_dropout=0.0)
    # a meta model's adapters on meta too: peft would allocate and initialise them on the CPU
    # (an expert stack's LoRA of a 400B MoE is gigabytes)
    meta = next(model.parameters()).is_meta
    return get_peft_model(model, config, low_cpu_mem_usage=meta)


def adapted_units(peft_model) -> list[tuple]:
    """What PEFT really adapted, read back from its modules: sorted (layer, name, fan_in,
    fan_out, rank, experts) -- the shape of suite.accounting.LoraUnit. A ParamWrapper's name is
    its parameter (experts.gate_up_proj, gate.weight); nested wrappers are unrolled."""
    out = []
    for path, module in peft_model.named_modules():
        lora_a = getattr(module, "lora_A", None)
        # the decoder layer: the first index in the path (model.layers.3..., GPT-2's transformer.h.3...)
        layer = next((int(p) for p in path.split(".") if p.isdigit()), None)
        if not lora_a or "default" not in lora_a or layer is None:
            continue
        rank = module.r["default"]
        if hasattr(module, "parameter_name"):  # peft ParamWrapper on a 3-D expert stack or a 2-D weight
            owner = [p for p in path.split(".") if p != "base_layer"][-1]  # experts, gate, router
            experts = module.num_experts if module.num_experts > 1 else 0
            out.append((layer, f"{owner}.{module.parameter_name}", module.in_features, module.out_features,
                        rank, experts))
        else:
            out.append((layer, path.split(".")[-1], module.in_features, module.out_features, rank, 0))
    return sorted(out)


def measure_forward(model, batch: int, length: int, device: str = "meta") -> int:
    """FLOPs of one no-grad forward over a batch of full rows (all logits, as HF computes)."""
    import torch

    ids = torch.zeros(batch, length, dtype=torch.long, device=device)
    fc = flop_counter()
    with fc, torch.no_grad():
        model(input_ids=ids)
    return fc.get_total_flops()


def measure_train_pass(spec: ModelSpec, adapter: Adapter, prompt_lengths: Sequence[int],
                       completion_lengths: Sequence[int], gradient_checkpointing: bool = True,
                       device: str = "meta", model=None, fused_head: bool = True) -> int:
    """FLOPs of one TRL 1.16 GRPO training micro-batch: the fused-LM-head log-prob forward over
    [left-padded prompt | right-padded completion] and its backward, with PEFT and gradient
    checkpointing set up as GRPOTrainer does. On meta/CPU the fused head scores every position
    ('trl-cpu' profile). With `fused_head=False` the same pass without TRL's code (`_scored`):
    for a model whose backbone TRL's head cannot read (Llama 4)."""
    m = model if model is not None else build_model(spec, device)
    if fused_head:
        from trl.trainer.utils import add_fused_lm_head

        add_fused_lm_head(m, outputs=("log_probs", "entropy"))
    m = add_lora(m, adapter)
    if adapter.kind == "lora" and gradient_checkpointing:
        m.enable_input_require_grads()
    if gradient_checkpointing:
        m.gradient_checkpointing_enable()
    m.train()
    ids, mask, c_width = _padded_rows(prompt_lengths, completion_lengths, device)
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-c_width] = -100
    fc = flop_counter()
    with fc, _meta_autocast(device):
        if fused_head:
            out = m(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
            loss = out.log_probs.sum() + out.entropy.sum()
        else:
            loss = _scored(m, spec.num_layers, ids, mask, labels)
        loss.backward()
    return fc.get_total_flops()


def _scored(model, n_layers: int, ids, mask, labels):
    """TRL's fused LM head in plain torch: the backbone's (the module holding the decoder layers)
    last hidden states but the last position, every position projected by the LM head (as on a
    device without Triton), log-probs of the labels and the entropy, the head's logits recomputed
    in the backward (a checkpoint, as the fused head's backward recomputes them)."""
    import torch
    from torch.utils.checkpoint import checkpoint

    backbone = next(mod for mod in model.modules() if any(
        isinstance(c, torch.nn.ModuleList) and len(c) == n_layers for c in mod.children()))
    hidden = backbone(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state[:, :-1]
    head, target = model.get_output_embeddings(), labels[:, 1:]

    def score(h):
        logp = torch.log_softmax(head(h).float(), dim=-1)
        return logp.gather(-1, target.clamp(min=0)[..., None]).squeeze(-1), -(logp.exp() * logp).sum(-1)

    log_probs, entropy = checkpoint(score, hidden, use_reentrant=False)
    keep = target != -100
    return (log_probs * keep).sum() + (entropy * keep).sum()


@contextlib.contextmanager
def _meta_autocast(device: str):
    """torch.is_autocast_enabled('meta') raises; TRL's fused head asks it. Answer False there.
    torch.autocast(device_type='meta') raises too; peft's expert-LoRA fold opens one (disabled):
    on meta it is a no-op."""
    import torch

    if device != "meta":
        yield
        return
    original, original_autocast = torch.is_autocast_enabled, torch.autocast

    def patched(*args):
        return False if args and args[0] == "meta" else original(*args)

    def autocast(device_type, *args, **kwargs):
        return contextlib.nullcontext() if device_type == "meta" else original_autocast(device_type, *args, **kwargs)

    torch.is_autocast_enabled, torch.autocast = patched, autocast
    try:
        yield
    finally:
        torch.is_autocast_enabled, torch.autocast = original, original_autocast


def _padded_rows(prompt_lengths, completion_lengths, device):
    import torch

    pw, cw = max(prompt_lengths), max(completion_lengths)
    n = len(completion_lengths)
    ids = torch.ones(n, pw + cw, dtype=torch.long, device=device)
    mask = torch.zeros(n, pw + cw, dtype=torch.long, device=device)
    if device != "meta":
        for i, (p, c) in enumerate(zip(prompt_lengths, completion_lengths)):
            mask[i, pw - p:pw + c] = 1
    return ids, mask, cw


def measure_generate(model, prompt_lengths: Sequence[int], completion_lengths: Sequence[int],
                     pad_id: int = 0, eos_id: int = 1) -> int:
    """FLOPs of HF generate (KV cache, greedy) on left-padded prompts, each row forced to stop
    after exactly its completion length (EOS included); finished rows keep decoding padding
    until the longest is done, as HF does. Needs real weights (device cpu)."""
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    pw, n = max(prompt_lengths), len(prompt_lengths)
    ids = torch.full((n, pw), 2, dtype=torch.long)
    mask = torch.zeros(n, pw, dtype=torch.long)
    for i, p in enumerate(prompt_lengths):
        ids[i, : pw - p] = pad_id
        mask[i, pw - p:] = 1
    want = torch.tensor(list(completion_lengths))

    class ForceLength(LogitsProcessor):
        def __call__(self, input_ids, scores):
            step = input_ids.shape[1] - pw + 1  # the token about to be generated is the step-th
            scores = torch.zeros_like(scores)
            scores[:, 3] = 1.0  # a fixed non-special token ...
            scores[want == step, eos_id] = 2.0  # ... until the row's length is reached
            return scores

    fc = flop_counter()
    with fc, torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=int(want.max()),
                             do_sample=False, pad_token_id=pad_id, eos_token_id=eos_id,
                             logits_processor=LogitsProcessorList([ForceLength()]))
    assert out.shape[1] - pw == int(want.max()), "generation did not run to the longest completion"
    return fc.get_total_flops()


__all__ = ["flop_counter", "build_model", "add_lora", "adapted_units", "measure_forward", "measure_train_pass",
           "measure_generate"]
