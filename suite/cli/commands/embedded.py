"""`race embedded`: show or rebuild the embedded task's models and data (tasks/arith). The build
recipes are a tool of the checkout (tools/embedded.py), not of the installed package."""

from __future__ import annotations

from suite import jsonstrict
from suite.cli import command
from suite.errors import RaceError


@command("embedded", help="show the shipped embedded models (tiny Qwen2 policies, PRMs) or rebuild them")
def configure(p):
    p.add_argument("action", choices=["info", "build"], nargs="?", default="info",
                   help="info: list the shipped models with their size and build record (default); "
                        "build: regenerate them deterministically (trains; minutes on 2 cores)")
    p.add_argument("--only", action="append", metavar="PIECE",
                   help="with build: only this piece (repeatable): data, tokenizer, policy-s, policy-m, "
                        "policy-l, prm-proxy, prm; default: all, in dependency order")
    p.add_argument("--threads", type=int, default=2, help="with build: torch threads (default 2)")
    p.add_argument("--resume", action="store_true",
                   help="with build: continue the shipped PRMs named by --only (their polish stage) "
                        "instead of training them afresh")
    return run


def run(args) -> int:
    if args.action == "build":
        from suite.paths import checkout_module

        embedded = checkout_module("tools/embedded.py", "race embedded build")
        unknown = [x for x in args.only or [] if x not in embedded.PIECES]
        if unknown:
            raise RaceError(f"unknown piece {unknown[0]!r}", f"pieces: {', '.join(embedded.PIECES)}")
        if args.resume and not args.only:
            raise RaceError("--resume needs the PRMs to continue", "name them: --only prm (or --only prm-proxy)")
        embedded.build(args.only, args.threads, args.resume)
        return 0
    from suite.paths import tasks

    root = tasks() / "arith" / "models"
    if not root.is_dir():
        raise RaceError(f"no embedded models under {root}", "run `race embedded build`")
    print(f"{'model':<10} {'params':>9}  record")
    for folder in sorted(p for p in root.iterdir() if (p / "build.json").is_file()):
        b = jsonstrict.read(folder / "build.json", hint="rebuild it: race embedded build")
        if "greedy_accuracy_heldout100" in b:
            note = f"SFT step {b['chosen_step']}, greedy accuracy {b['greedy_accuracy_heldout100']:.2f} on 100 held-out"
        else:
            note = (f"step accuracy {b['heldout_synthetic']['step_accuracy']:.3f} (synthetic), "
                    f"{b['heldout_policy_samples']['step_accuracy']:.3f} (policy samples), "
                    f"{b['heldout_results']['step_accuracy']:.3f} (result checks)"
                    + "".join(f", {v['step_accuracy']:.3f} ({k.removeprefix('heldout_samples_')} samples)"
                              for k, v in b.items() if k.startswith("heldout_samples_")))
        print(f"{folder.name:<10} {b['parameters']:>9,}  {note}")
    return 0
