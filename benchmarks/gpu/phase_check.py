"""GPU phase check: one GRPO step of each phase on a real-size policy, timed and counted.

On a CUDA machine (target: one H200, under 5 minutes):

    python benchmarks/gpu/phase_check.py                     # Qwen2.5-1.5B policy, Qwen2.5-Math-PRM-7B reward
    python benchmarks/gpu/phase_check.py --json out.json     # also write the numbers

builds the policy from the suite's catalog config with random weights (no download), and runs

- rollout: HF generate (KV cache) of K completions for each of B prompts, every row forced to
  exactly --completion-len tokens;
- update: one LoRA (all seven projections) forward + backward in bf16 through TRL's fused LM head
  with gradient checkpointing, as TRL 1.16's GRPOTrainer runs it;
- reward: one forward of a PRM-shaped model (backbone + score head on every position) over the
  prompt + completion tokens.

For each phase it prints tokens/s, the ledger's FLOPs (suite.accounting, causal convention),
achieved FLOP/s and MFU against the device's dense bf16 peak, and the ledger's FLOPs under the
'full' attention convention against torch's FlopCounterMode count of the same pass (models use
eager attention, which computes the whole L x L square: that is what 'full' counts).

Without CUDA it exits with a message. `--device cpu --tiny` runs the same code on a tiny
architecture (tests/test_gpu_phase_check.py), so everything but the GPU is tested on CPU.
It needs a CUDA build of torch with transformers, peft and trl (the suite's pins otherwise).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout without installing

from suite.accounting import Adapter, GRPOSettings, pass_breakdown, work_from_lengths  # noqa: E402
from suite.accounting.modelspec import ModelSpec
from suite.accounting.specs import spec_for  # noqa: E402

PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "H800": 989.0, "A100": 312.0, "L40S": 362.0,
                    "B200": 2250.0, "GB200": 2500.0}
"""Dense bf16 peak TFLOP/s by device-name substring (vendor spec sheets, no sparsity)."""


def tiny_specs() -> tuple[ModelSpec, ModelSpec]:
    """A tiny Qwen2 policy and a tiny PRM-shaped reward model (head_dim 32) for CPU runs."""
    policy = ModelSpec(name="tiny-policy", model_type="qwen2", hidden_size=64, num_layers=2, num_heads=2,
                       num_kv_heads=1, head_dim=32, intermediate_size=128, vocab_size=256,
                       tie_embeddings=False, qkv_bias=True)
    prm = ModelSpec(name="tiny-prm", model_type="qwen2", hidden_size=64, num_layers=2, num_heads=2,
                    num_kv_heads=1, head_dim=32, intermediate_size=128, vocab_size=256,
                    tie_embeddings=False, qkv_bias=True, has_lm_head=False, score_head=((64, 64), (64, 2)))
    return policy, prm


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


METER = None
"""The GPUs' energy counters (suite.train.energy.open_meter), opened by main."""
JOULES: list = []
"""Joules of each timed call, in order (None where not measured or across a counter reset)."""


def _timed(fn, device: str) -> tuple[object, float]:
    from suite.train.energy import Meter

    _sync(device)
    e0 = METER.read() if METER is not None else None
    t0 = time.perf_counter()
    out = fn()
    _sync(device)
    seconds = time.perf_counter() - t0
    JOULES.append(Meter.between(e0, METER.read()) if METER is not None and e0 is not None else None)
    return out, seconds


def _counted(fn) -> int:
    from suite.accounting.reference import flop_counter

    fc = flop_counter()
    with fc:
        fn()
    return fc.get_total_flops()


def _build(spec: ModelSpec, device: str, dtype):
    from suite.accounting.reference import build_model

    return build_model(spec, device=device).to(dtype)


def rollout(spec, adapter, n, p, c, device, dtype):
    """HF generate of n rows through the PEFT model (TRL generates with the adapter unmerged),
    each prompt p tokens and forced to exactly c new tokens."""
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    from suite.accounting.reference import add_lora

    model = add_lora(_build(spec, device, dtype), adapter).eval()
    ids = torch.full((n, p), 3, dtype=torch.long, device=device)
    mask = torch.ones_like(ids)

    class Fixed(LogitsProcessor):  # random weights: pick a fixed token, never EOS, until c tokens
        def __call__(self, input_ids, scores):
            out = torch.zeros_like(scores)
            out[:, 4] = 1.0
            return out

    def run():
        with torch.no_grad():
            return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=c, min_new_tokens=c,
                                  do_sample=False, pad_token_id=0, eos_token_id=1,
                                  logits_processor=LogitsProcessorList([Fixed()]))

    with torch.no_grad():  # warm-up: kernels, cuBLAS handles, allocator
        model(input_ids=ids[:, :8])
    out, seconds = _timed(run, device)
    assert out.shape == (n, p + c), f"generate returned {tuple(out.shape)}, wanted {(n, p + c)}"
    counted = _counted(run)
    return seconds, counted


def update(spec, adapter, n, p, c, device, dtype):
    """One LoRA training micro-batch as TRL 1.16 runs it: fused LM head over the completion
    labels, PEFT, gradient checkpointing; forward and backward."""
    import torch
    from trl.trainer.utils import add_fused_lm_head

    from suite.accounting.reference import add_lora

    model = _build(spec, device, dtype)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    model = add_lora(model, adapter)
    model.enable_input_require_grads()
    # transformers 5 renamed gradient checkpointing to activation checkpointing
    (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
    model.train()
    ids = torch.full((n, p + c), 3, dtype=torch.long, device=device)
    mask = torch.ones_like(ids)
    labels = ids.clone()
    labels[:, :p] = -100  # score only the completion tokens

    def run():
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        (out.log_probs.float().sum() + out.entropy.float().sum()).backward()
        model.zero_grad(set_to_none=True)

    run()  # warm-up (Triton autotuning of the fused head on CUDA)
    _, seconds = _timed(run, device)
    counted = _counted(run)
    return seconds, counted


def reward(spec, n, length, device, dtype):
    """One no-grad forward of the reward model over n rows of `length` tokens."""
    import torch

    model = _build(spec, device, dtype).eval()
    ids = torch.full((n, length), 3, dtype=torch.long, device=device)

    def run():
        with torch.no_grad():
            return model(input_ids=ids)

    run()
    _, seconds = _timed(run, device)
    counted = _counted(run)
    return seconds, counted


def ledger(policy, adapter, settings, prm, n, p, c, engine, attention) -> dict:
    """Ledger FLOPs per phase (and the update's train passes) from suite.accounting."""
    work = work_from_lengths([p] * n, [c] * n, settings, engine=engine, reward_lengths=[p + c] * n)
    rows = pass_breakdown(work, policy, adapter, settings, prm, engine, attention)
    out = {"rollout": 0, "update": 0, "reward": 0}
    for phase, _, f in rows:
        out[phase] += f
    return out


def energy_line(results: dict, meter, table) -> str:
    """One line: joules and mean watts per phase from the counters (against the board power of
    the hardware table's entry), or "not measured" and why."""
    info = meter.info() if meter is not None else {"measured": False, "reason": "no meter opened"}
    if not info["measured"]:
        return f"energy: not measured: {info['reason']}"
    parts = []
    for phase, r in results.items():
        if r["joules"] is None:
            parts.append(f"{phase} not measured (counter reset or unreadable)")
        else:
            parts.append(f"{phase} {r['joules']:.1f} J ({r['watts'] / info['devices']:.0f} W a device)")
    cap = f"; board power {table.tdp_watts:g} W ({table.name})" if table is not None else ""
    return f"energy ({info['devices']} device(s), NVML): " + ", ".join(parts) + cap


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (with --tiny, for tests)")
    ap.add_argument("--tiny", action="store_true", help="tiny policy and PRM instead of the catalog models")
    ap.add_argument("--policy", default="Qwen2.5-1.5B-Instruct", help="catalog policy (default: %(default)s)")
    ap.add_argument("--prm", default="Qwen2.5-Math-PRM-7B", help="catalog reward model (default: %(default)s)")
    ap.add_argument("--prompts", type=int, default=8, help="B: prompts (default: %(default)s)")
    ap.add_argument("--k", type=int, default=2, help="K: completions per prompt (default: %(default)s)")
    ap.add_argument("--prompt-len", type=int, default=256, help="tokens per prompt (default: %(default)s)")
    ap.add_argument("--completion-len", type=int, default=512, help="tokens per completion (default: %(default)s)")
    ap.add_argument("--rank", type=int, default=64, help="LoRA rank on all seven projections (default: %(default)s)")
    ap.add_argument("--peak-tflops", type=float,
                    help="device dense bf16 peak in TFLOP/s (default: from the device name, e.g. H200 989)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args(argv)

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("phase_check: no CUDA device here; this check needs a GPU (e.g. one H200). "
              "Use --device cpu --tiny to run the same code on a tiny model.", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    global METER
    from suite.train.energy import open_meter

    METER = open_meter()     # NVML's total-energy counters, or why there are none
    JOULES.clear()
    cuda = args.device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    if not cuda:
        torch.set_num_threads(1)
    policy, prm = tiny_specs() if args.tiny else (spec_for(args.policy), spec_for(args.prm))
    adapter = Adapter.from_rank(args.rank)
    n, p, c = args.prompts * args.k, args.prompt_len, args.completion_len
    settings = GRPOSettings(group_size=args.k, prompts_per_step=args.prompts, num_iterations=1, beta=0.0,
                            max_completion_tokens=c, gradient_checkpointing=True)
    # TRL's fused LM head scores only completion tokens where Triton runs (CUDA), every position elsewhere.
    engine = "trl" if cuda else "trl-cpu"
    device_name = torch.cuda.get_device_name() if cuda else "cpu"
    peak = args.peak_tflops
    from suite.accounting.hardware import match

    table = match(device_name)     # the hardware table: peak and board power of the device
    if peak is None and table is not None:
        peak = table.peak_flops / 1e12
    if peak is None:
        peak = next((v for k, v in sorted(PEAK_BF16_TFLOPS.items(), key=lambda kv: -len(kv[0]))
                     if k in device_name), None)
    causal = ledger(policy, adapter, settings, prm, n, p, c, engine, "causal")
    full = ledger(policy, adapter, settings, prm, n, p, c, engine, "full")

    t_all = time.perf_counter()
    results = {}
    for phase, tokens, fn in (
            ("rollout", n * c, lambda: rollout(policy, adapter, n, p, c, args.device, dtype)),
            ("update", n * (p + c), lambda: update(policy, adapter, n, p, c, args.device, dtype)),
            ("reward", n * (p + c), lambda: reward(prm, n, p + c, args.device, dtype))):
        before = len(JOULES)
        seconds, counted = fn()
        joules = JOULES[before] if len(JOULES) > before else None   # the timed call (the counted one is not)
        if cuda:
            torch.cuda.empty_cache()
        achieved = causal[phase] / seconds
        results[phase] = {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds,
                          "ledger_flops": causal[phase], "achieved_flops_per_s": achieved,
                          "mfu": achieved / (peak * 1e12) if peak else None,
                          "ledger_flops_full": full[phase], "flopcounter_flops": counted,
                          "ledger_over_counted": full[phase] / counted if counted else None,
                          "joules": joules, "watts": joules / seconds if joules is not None else None}

    print(f"device {device_name}  dtype {str(dtype).split('.')[-1]}  peak "
          f"{f'{peak:g} TFLOP/s' if peak else 'unknown (pass --peak-tflops)'}  engine profile {engine}")
    print(f"policy {policy.name} + LoRA r={args.rank}, reward model {prm.name}; B={args.prompts} K={args.k} "
          f"prompt {p} completion {c} tokens")
    print(f"{'phase':8} {'tokens':>8} {'seconds':>9} {'tokens/s':>11} {'ledger FLOPs':>13} {'FLOP/s':>10} "
          f"{'MFU':>7} {'ledger(full)/FlopCounter':>25}")
    for phase, r in results.items():
        mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "-"
        ratio = f"{r['ledger_over_counted']:.4f}" if r["ledger_over_counted"] else "-"
        print(f"{phase:8} {r['tokens']:>8} {r['seconds']:>9.3f} {r['tokens_per_s']:>11.1f} "
              f"{r['ledger_flops']:>13.4g} {r['achieved_flops_per_s']:>10.3g} {mfu:>7} {ratio:>25}")
    print(energy_line(results, METER, table))
    wall = time.perf_counter() - t_all
    print(f"wall {wall:.1f} s")
    if args.json:
        doc = {"device": device_name, "dtype": str(dtype), "peak_tflops": peak, "engine_profile": engine,
               "policy": policy.name, "reward_model": prm.name, "lora_rank": args.rank, "prompts": args.prompts,
               "k": args.k, "prompt_len": p, "completion_len": c, "wall_seconds": wall, "phases": results,
               "energy": METER.info() if METER is not None else None}
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
