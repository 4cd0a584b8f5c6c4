#!/usr/bin/env bash
# One-step set-up on a fresh machine: a venv in .venv with the suite installed from this checkout.
#   bash scripts/setup.sh          the suite with its engines (the `train` extra: enough for `race quickstart`)
#   bash scripts/setup.sh --test   plus what the tests need: pytest extras, wheel building and pre-commit,
#                                  Ray, verl's config (for composing launch overrides), the log readers' tensorboard
#                                  and wandb, and Debian's chromium
# (`pip install race-suite` alone is the light core: reports and validation without torch; docs/install.md.)
# Every pip call passes constraints.txt: it pins the CPU torch on disk and the engine versions.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
# (this machine's pip.conf names index folders that may be absent: drop those warnings only)
pip() { .venv/bin/pip install -q --disable-pip-version-check -c constraints.txt "$@" 2> >(grep -v "is ignored: it is neither" >&2); }
if [ "${1:-}" = "--test" ]; then
    pip -e '.[train,test,ray,verl,compare,logs]'
    # verl's own dependency pins clash with ours (transformers<5.11); only its packaged config and its
    # FLOP counter (race compare) are used.
    pip --no-deps verl==0.9.1
    bash scripts/install-browser.sh
else
    pip -e '.[train]'
fi
.venv/bin/python -c "import suite, torch, trl, peft, lm_eval" || { echo "setup: install failed" >&2; exit 1; }
