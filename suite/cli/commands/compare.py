"""`race compare`: every engine's own FLOP counter beside the exact count, pass by pass, with the
named term behind each difference (suite.accounting.referee); `--conformance` writes the matrix
of docs/conformance.md."""

from __future__ import annotations

import argparse
import json

from suite.cli import command
from suite.cli.args import add_format, add_grpo, add_lora, add_model, add_side_output
from suite.errors import RaceError


def _case(args):
    from suite.accounting.refcase import Case
    from suite.accounting.specs import PATH_RECIPE, lookup, read_entry, spec_for

    if args.model:
        hit = lookup(args.model)
        if hit is None or hit.priced_by != PATH_RECIPE:
            spec_for(args.model)   # raises, naming the closest catalog models
            raise RaceError(f"'{args.model}' has no recipe in the catalog", "give its config.json with --config")
        config = read_entry(hit)
    else:
        from pathlib import Path

        path = Path(args.config).expanduser()
        path = path / "config.json" if path.is_dir() else path
        if not path.is_file():
            raise RaceError(f"{args.config}: no such config.json", "give a Hugging Face config.json or its folder")
        from suite import jsonstrict

        config = jsonstrict.read(path)
    spec = spec_for(config, args.model or None)
    if spec.priced_by != PATH_RECIPE:
        raise RaceError(f"{spec.name}: model type '{config.get('model_type')}' has no analytic recipe",
                        "race compare needs a recipe family (race flops --list-models lists them)")
    return Case(name=spec.name, spec=spec, config=config, lora_rank=args.lora_rank, group_size=args.group_size,
                prompts=args.prompts_per_step, prompt_tokens=args.prompt_tokens,
                completion_tokens=args.completion_tokens, mu=args.num_iterations, beta=args.beta, layout=args.layout,
                pack_tokens=args.pack_tokens, gradient_checkpointing=args.gradient_checkpointing, spread=args.spread)


def _conformance(args) -> int:
    from suite.accounting.conformance import BEGIN, END, document
    from pathlib import Path

    from suite.atomic import write_block_atomic

    path = Path(args.conformance)
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if BEGIN not in text or END not in text.split(BEGIN, 1)[-1]:
        raise RaceError(f"{path}: no generated block ({BEGIN} ... {END})",
                        "add the two markers where the matrix goes (docs/conformance.md has them)")
    body = document()
    if args.check:
        old = text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")
        if old != body:
            print(f"{path}: the conformance matrix is stale; rerun `race compare --conformance {path}`")
            return 1
        print(f"{path}: up to date")
        return 0
    write_block_atomic(path, BEGIN, END, body)
    print(f"wrote the conformance matrix to {path}")
    return 0


@command("compare", help="Every engine's own FLOP/MFU counter beside the exact count, per pass, with the named "
                         "reason of each difference")
def configure(p: argparse.ArgumentParser):
    from suite.accounting.refcase import LAYOUTS

    p.epilog = ("Engines: verl 0.9.1's FlopsCounter, TRL 1.16's compute_flops_per_token and transformers' "
                "Trainer.floating_point_ops run from their installed code (the compare extra); Megatron-LM, "
                "prime-rl and vLLM's MFU metrics transcribed from their code at a cited commit (not run); 6·N·T. "
                "Exact: the suite's pricing under the layout's engine profile (padded: trl, packed: verl). "
                "docs/conformance.md explains every column.")
    m = add_model(p, config_help="a Hugging Face config.json (or its folder), as the engines read it")
    add_side_output(m, "--conformance", metavar="MD",
                    help="write the conformance matrix into this page's generated block (docs/conformance.md) and exit")
    p.add_argument("--check", action="store_true", help="with --conformance: exit 1 if the page's matrix is stale")
    add_lora(p, alpha_targets=False)
    add_grpo(p, group_size=4, prompts_per_step=16, prompt_tokens=512, completion_tokens=1024, token_type=int,
             checkpointing=False,
             helps={"prompt_tokens": "mean prompt tokens (prompts spread over 0.75P..1.25P; default 512)",
                    "completion_tokens": "mean completion tokens (spread over C(1 ± spread); default 1024)",
                    "gradient_checkpointing": "recompute activations in the backward (a term: MFU counters leave it "
                                              "out; default off)"})
    p.add_argument("--spread", type=float, default=0.5, help="relative spread of completion lengths (default 0.5)")
    p.add_argument("--layout", choices=LAYOUTS, default="packed",
                   help="padded (one padded row per sequence, exact: trl profile) or packed (no padding, exact: "
                        "verl profile); default packed")
    p.add_argument("--pack-tokens", type=int, default=0, metavar="N",
                   help="packed: sequences share rows of up to N tokens, which the counters see as one sequence")
    p.add_argument("--engines", metavar="LIST", default=None,
                   help="comma-separated engines whose counters run (default: all)")
    add_format(p, ("text", "json"), help="text: the table (default); json: the same for machines")

    def run(args) -> int:
        if args.check and not args.conformance:
            raise RaceError("--check needs --conformance PAGE", "e.g. race compare --conformance docs/conformance.md --check")
        if args.conformance:
            return _conformance(args)
        from suite.accounting.counters import COUNTERS
        from suite.accounting.referee import judge_all, render, to_json

        names = [n.strip() for n in args.engines.split(",") if n.strip()] if args.engines else None
        for n in names or ():
            COUNTERS[n]   # an unknown name is one line naming the known ones
        case = _case(args)
        passes, verdicts = judge_all(case, names)
        print(json.dumps(to_json(case, passes, verdicts), indent=2) if args.format == "json" else render(case, passes, verdicts))
        return 0

    return run
