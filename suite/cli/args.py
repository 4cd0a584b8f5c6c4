"""The argument builders every `race` subcommand shares, so the parsers read alike (docs/cli.md):
`--out/-o` for what a command writes, `--format` where it prints in more than one form (with
`--json` as the alias of `--format json`), `--engine-profile` for the accounting profile, the
model / LoRA / GRPO-step blocks of flops, plan and compare, and the time-and-cost block.

Each builder tags the argparse action with its role (ROLE); tests/test_cli_grammar.py walks
the whole parser and refuses an output, a format or a profile option spelled any other way."""

from __future__ import annotations

import argparse

ROLE = "race_role"
"""Attribute set on the argparse actions these builders add: 'out', 'side-output', 'format',
'format-alias', 'engine-profile' or 'deprecated' (an old spelling still accepted)."""


def _tag(action: argparse.Action, role: str) -> argparse.Action:
    setattr(action, ROLE, role)
    return action


def count_arg(text: str) -> float:
    """argparse type of a token count or budget: plain or scientific notation (1e18)."""
    from ..numbers import parse_number

    try:
        return float(parse_number(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"'{text}' is {'not a finite number' if str(e) == 'not finite' else str(e)}")


def _deprecated(p, old: str, dest: str, **kw) -> None:
    """An old spelling kept working for old scripts; hidden from usage, named in the new option's help."""
    _tag(p.add_argument(old, dest=dest, help=argparse.SUPPRESS, **kw), "deprecated")


def add_out(p, help: str, *, metavar: str = "FILE", deprecated: str | None = None, **kw) -> argparse.Action:
    """--out/-o: the file or folder the command writes. `deprecated` keeps an old spelling
    (--output) working as a hidden alias, said so in the help."""
    if deprecated:
        help += f" ({deprecated} is the deprecated spelling, still accepted)"
    a = _tag(p.add_argument("--out", "-o", metavar=metavar, help=help, **kw), "out")
    if deprecated:
        _deprecated(p, deprecated, "out", metavar=metavar, type=kw.get("type"))
    return a


def add_side_output(p, flag: str, help: str, *, metavar: str = "FILE", **kw) -> argparse.Action:
    """A second thing written beside the command's --out (SARIF of a check, an export folder, a
    converted data set, a docs page's generated block): named for what it is."""
    return _tag(p.add_argument(flag, metavar=metavar, help=help, **kw), "side-output")


def add_format(p, choices, *, default: str | None = "text", help: str | None = None, json_alias: bool = True) -> argparse.Action:
    """--format {text,json,...} for a command that prints in more than one form; --json, when
    json is a choice, is the same as --format json (the same bytes)."""
    choices = list(choices)
    shown = default if default is not None else "see below"
    a = _tag(p.add_argument("--format", choices=choices, default=default,
                            help=help or f"output form: {', '.join(choices)} (default: {shown})"), "format")
    if json_alias and "json" in choices:
        _tag(p.add_argument("--json", dest="format", action="store_const", const="json",
                            help="the same as --format json"), "format-alias")
    return a


def add_engine_profile(p, *, default=None, deprecated: str | None = None, what: str = "accounting profile",
                       check: bool = True, default_text: str | None = None) -> argparse.Action:
    """--engine-profile PROFILE: which passes an engine runs and the accounting charges (an
    engine file's profile, tasks/engines/*.yaml); "engine" alone names the engine or its log."""
    from ..accounting import ENGINES

    names = "; ".join(f"{n} ({ENGINES[n].engine})" for n in sorted(ENGINES))
    shown = f"default: {default_text or default}"
    help = (f"{what} whose passes are counted ({shown}); one of the engine files' profiles "
            f"(tasks/engines/*.yaml, docs/accounting.md): {names}")
    if deprecated:
        help += f" ({deprecated} is the deprecated spelling, still accepted)"
    choices = sorted(ENGINES) if check else None     # unchecked: the command's own error names the known ones
    a = _tag(p.add_argument("--engine-profile", default=default, choices=choices, metavar="PROFILE", help=help),
             "engine-profile")
    if deprecated:
        _deprecated(p, deprecated, "engine_profile", choices=choices, metavar="PROFILE")
    return a


def add_model(p, *, list_models: bool = False, config_help: str | None = None, required: bool = True):
    """--model NAME | --config PATH (| --list-models): the one policy priced."""
    m = p.add_mutually_exclusive_group(required=required)
    m.add_argument("--model", metavar="NAME",
                   help="policy from the built-in catalog (see `race flops --list-models`), e.g. Qwen2.5-1.5B-Instruct")
    m.add_argument("--config", metavar="PATH",
                   help=config_help or "policy from a Hugging Face config.json (or the folder holding it)")
    if list_models:
        m.add_argument("--list-models", action="store_true",
                       help="print every catalog entry (recipe and traced) with parameter counts and exit")
    return m


def add_lora(p, *, default: int = 64, alpha_targets: bool = True) -> None:
    """--lora-rank R (0: full fine-tuning) [--lora-alpha A --lora-targets LIST]."""
    p.add_argument("--lora-rank", type=int, default=default, metavar="R",
                   help=f"LoRA rank; 0 means full fine-tuning (default: {default})")
    if alpha_targets:
        p.add_argument("--lora-alpha", type=float, default=None, metavar="A",
                       help="LoRA alpha, recorded only: it scales the adapter, costs no FLOPs (default: 2*R)")
        p.add_argument("--lora-targets", default=None, metavar="LIST",
                       help="comma-separated peft target_modules (default: q_proj,k_proj,v_proj,o_proj,gate_proj,"
                            "up_proj,down_proj), or all-linear; adapted as peft does on the model (MoE: gate/up/down "
                            "become the expert stacks)")


def add_grpo(p, *, group_size: int, prompts_per_step: int, prompt_tokens, completion_tokens,
             token_type=count_arg, checkpointing: bool = True, helps: dict | None = None) -> None:
    """The GRPO batch shape: --group-size K --prompts-per-step B --prompt-tokens P
    --completion-tokens C --num-iterations MU --beta BETA --[no-]gradient-checkpointing."""
    h = {"prompt_tokens": f"mean prompt tokens (default: {prompt_tokens:g})",
         "completion_tokens": f"mean generated tokens per completion, EOS included (default: {completion_tokens:g})",
         **(helps or {})}
    p.add_argument("--group-size", type=int, default=group_size, metavar="K",
                   help=h.get("group_size", f"completions per prompt (default: {group_size})"))
    p.add_argument("--prompts-per-step", type=int, default=prompts_per_step, metavar="B",
                   help=h.get("prompts_per_step", f"prompts per generation batch (default: {prompts_per_step})"))
    p.add_argument("--prompt-tokens", type=token_type, default=prompt_tokens, metavar="P", help=h["prompt_tokens"])
    p.add_argument("--completion-tokens", type=token_type, default=completion_tokens, metavar="C",
                   help=h["completion_tokens"])
    p.add_argument("--num-iterations", type=int, default=1, metavar="MU",
                   help="policy updates per generation batch, mu (default: 1); mu > 1 adds the old-policy forward")
    p.add_argument("--beta", type=count_arg, default=0.0, metavar="BETA",
                   help="KL coefficient; non-zero adds the reference-model forward (default: 0)")
    p.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=checkpointing,
                   help=h.get("gradient_checkpointing",
                              f"recompute decoder activations in the backward (default: {'on, as TRL' if checkpointing else 'off'})"))


def add_cost(p) -> None:
    """--hardware NAME --gpus N [--price-per-gpu-hour X] (race flops, race plan; docs/cost.md)."""
    g = p.add_argument_group("time and cost (docs/cost.md)")
    g.add_argument("--hardware", metavar="NAME", default=None,
                   help="accelerator from the hardware table (H100-SXM, H200, A100-SXM-80GB, B200, GB300, MI300X, "
                        "L40S, A40, ...): predict wall hours per phase from roofline floors and the efficiency "
                        "fitted on runs that state their time")
    g.add_argument("--gpus", type=int, default=None, metavar="N", help="accelerators the run holds (with --hardware)")
    g.add_argument("--price-per-gpu-hour", type=float, default=None, metavar="X",
                   help="your price of one accelerator-hour: adds the cost per phase with its range")


__all__ = ["ROLE", "add_cost", "add_engine_profile", "add_format", "add_grpo", "add_lora", "add_model", "add_out",
           "add_side_output", "count_arg"]
