"""docs/paper-report.md, as written: a paper's setup table becomes a report that `race validate
--strict` passes with no finding, is submitted, and is listed on the site with provenance
"estimated". A renamed flag, a moved file or a new finding fails here, not for an author."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from suite.paths import home

DOC = home() / "docs" / "paper-report.md"


def _doc() -> tuple[str, list[str]]:
    """The paper.yaml block and the commands of the bash block, in order."""
    text = DOC.read_text(encoding="utf-8")
    yaml = re.search(r"<!-- file: paper\.yaml.*?-->\n```yaml\n(.*?)```", text, re.S).group(1)
    bash = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    return yaml, [line.strip() for line in bash.splitlines() if line.strip() and not line.startswith("#")]


def test_the_setup_table_becomes_a_listed_estimate(tmp_path):
    yaml, commands = _doc()
    (tmp_path / "paper.yaml").write_text(yaml, encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    said = {}
    for command in commands:
        r = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        said[command] = r.stdout + r.stderr
        assert r.returncode == 0, f"docs/paper-report.md `{command}`: exit {r.returncode}\n{said[command][-3000:]}"
        assert "Traceback" not in said[command]
    validate = next(c for c in commands if c.startswith("race validate"))
    assert "no findings" in said[validate]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["provenance"]["method"] == "estimated" and report["provenance"]["steps"] == 200
    assert "ledger" not in report and report["totals"]["steps"] == 200
    # The utilization the page quotes is the one the report implies.
    hw = report["hardware"]
    util = report["totals"]["flops"]["total"] / (hw["peak_flops"] * hw["accelerator_hours"] * 3600)
    assert f"{100 * util:.1f}% of peak" in DOC.read_text()
    index = (tmp_path / "site" / "index.html").read_text()
    row = re.search(r"<tr data-origin=\"submitted run\"[^>]*>.*?</tr>", index, re.S).group(0)
    # how the row was obtained: the board's badge, decided from content (suite/site/board.py)
    assert 'data-badge="estimated by its submitter"' in row and '<span class="badge badge-estimated" data-badge="estimated">' in row
    assert "our Table 2" in row                                   # the run's label, in full
