"""The README's tour commands that need no training, run exactly as written, from a fresh folder
holding a copy of the checkout's data: a renamed flag or a moved file fails here, not for a user."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from suite.paths import home

MARK = "tests/test_readme.py"


def tour_lines() -> list[tuple[str, int, list[str]]]:
    """(command, expected exit status, words its output must hold) of every line of the README
    block that names this file; `# exit 1, PHYS-003` sets both."""
    text = (home() / "README.md").read_text(encoding="utf-8")
    intro = text.index(MARK)
    block = re.search(r"```bash\n(.*?)```", text[intro:], re.S).group(1)
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("source "):
            continue
        m = re.search(r"#\s*exit (\d+)((?:,\s*\S+)*)", line)
        words = [w.strip() for w in m.group(2).split(",") if w.strip()] if m else []
        out.append((line.split("#")[0].strip(), int(m.group(1)) if m else 0, words))
    return out


def test_the_tour_block_is_found():
    cmds = [c for c, _, _ in tour_lines()]
    for name in ("flops", "plan", "validate", "report", "submit", "leaderboard build"):
        assert any(c.startswith(f"race {name}") or f"&& race {name}" in c for c in cmds), name


def test_the_tour_runs_as_written(tmp_path):
    for name in ("schemas", "leaderboard", "tasks"):
        shutil.copytree(home() / name, tmp_path / name, symlinks=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for command, status, words in tour_lines():     # in order: later lines use what earlier ones wrote
        r = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
        said = r.stdout + r.stderr
        assert r.returncode == status, f"README line `{command}`: exit {r.returncode}, want {status}\n{said[-3000:]}"
        assert "Traceback" not in said, f"README line `{command}`\n{said[-3000:]}"
        for w in words:
            assert w in said, f"README line `{command}` does not say {w}"
    assert (tmp_path / "site" / "index.html").is_file()
