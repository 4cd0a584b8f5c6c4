"""What a TRL GRPOTrainer is set up to do, in the accounting's terms: the policy's spec
(`policy_spec_of`), what it trains (`adapter_of`: its PEFT LoRA or full fine-tuning), the spec
of a reward model TRL runs itself (`reward_model_spec_of`), the GRPO settings of its config
(`settings_of`) and the engine profile of its device (`engine_of`). suite.train.trl_callback
prices every step from these; transformers, peft and trl are imported only when called.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import RaceError


def policy_spec_of(model):
    """Spec of a (possibly PEFT-wrapped) transformers model, from its config: the analytic recipe
    where its family has one (ModelSpec), else the traced path (TracedSpec)."""
    from ..accounting.specs import spec_for

    cfg = {**model.config.to_dict(), "model_type": model.config.model_type}
    name = getattr(model.config, "_name_or_path", "") or cfg.get("model_type", "policy")
    return spec_for(cfg, Path(str(name)).name or "policy")


def adapter_of(model, spec=None):
    """accounting.Adapter of the model the trainer trains: its PEFT LoRA (what PEFT really
    adapted, read off the modules: target_modules may be a list, a regex or "all-linear"; MoE
    expert stacks are target_parameters), or full fine-tuning."""
    from ..accounting.adapter import adapter_from_peft
    from ..accounting.reference import adapted_units

    peft_cfg = getattr(model, "peft_config", None)
    if not peft_cfg:
        return adapter_from_peft(None)
    cfg = peft_cfg.get("default") or next(iter(peft_cfg.values()))
    return adapter_from_peft(cfg, units=adapted_units(model), spec=spec or policy_spec_of(model))


def reward_model_spec_of(module):
    """Spec of a reward model TRL runs itself (any transformers sequence classifier), from its
    config: the analytic recipe where its family has one, else the traced path
    (suite.accounting.traced: FlopCounterMode over its own modeling code on the meta device);
    the architecture comes from the class when the config does not name it."""
    from ..accounting.specs import spec_for

    cfg = {**module.config.to_dict(), "model_type": module.config.model_type}
    if not cfg.get("architectures"):
        cfg["architectures"] = [type(module).__name__]
    name = str(getattr(module.config, "_name_or_path", "") or "") or type(module).__name__
    return spec_for(cfg, Path(name).name or name)


def settings_of(args):
    """accounting.GRPOSettings from a TRL GRPOConfig (after its __post_init__)."""
    from ..accounting import GRPOSettings

    k = int(args.num_generations)
    gen_batch = int(args.generation_batch_size or args.per_device_train_batch_size * args.steps_per_generation)
    if gen_batch % k:
        raise RaceError(f"generation batch {gen_batch} is not a multiple of num_generations={k}")
    pad = args.pad_to_multiple_of if isinstance(args.pad_to_multiple_of, int) else None
    return GRPOSettings(group_size=k, prompts_per_step=gen_batch // k, num_iterations=int(args.num_iterations),
                        beta=float(args.beta), max_completion_tokens=int(args.max_completion_length),
                        gradient_checkpointing=bool(args.gradient_checkpointing),
                        gradient_accumulation_steps=int(args.gradient_accumulation_steps),
                        steps_per_generation=int(args.steps_per_generation) if args.steps_per_generation else None,
                        pad_to_multiple_of=pad)


def engine_of(model, args) -> str:
    """Accounting engine profile of this trainer: `trl-vllm` when vLLM generates (use_vllm,
    server or colocate; `trl-vllm-no-is` with vllm_importance_sampling_correction off), `trl`
    where TRL's fused LM head runs its Triton path (CUDA/XPU), `trl-cpu` elsewhere."""
    from transformers.utils import is_triton_available

    if getattr(args, "use_vllm", False):
        return "trl-vllm" if getattr(args, "vllm_importance_sampling_correction", True) else "trl-vllm-no-is"
    dev = next(model.parameters()).device.type
    return "trl" if dev in ("cuda", "xpu") and is_triton_available() else "trl-cpu"


__all__ = ["policy_spec_of", "adapter_of", "reward_model_spec_of", "settings_of", "engine_of"]
