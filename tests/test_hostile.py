"""Issue 29: no traceback, ever, and never clobber. Every hostile or careless command line the
issue found crashing (36 tracebacks, exit 1) or clobbering (`-o /dev/full` replaced the device,
`validate x.json -o x.json` its input) now ends in one error line and exit 2, with the path named;
device nodes and FIFOs are never replaced. All cases run in this process (race's main), batched.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from suite.cli import main as race

ROOT = Path(__file__).resolve().parents[1]
VALID = ROOT / "schemas" / "examples" / "valid"
REPORT = VALID / "paper-qwen1.5b-lora64-sparse.json"
TRL = ROOT / "tests" / "fixtures" / "trl"
VERL = ROOT / "tests" / "fixtures" / "verl"

# docs/paper-report.md's estimate (paper.yaml), the base the estimate cases edit.
ESTIMATE = """\
name: qwen1.5b-lora64-k2-sparse
policy: Qwen2.5-1.5B-Instruct
reward: {system: sparse, kind: rule}
lora_rank: 64
lora_alpha: 128
group_size: 2
prompts_per_step: 64
max_completion_tokens: 2048
num_iterations: 1
beta: 0.0
engine: {name: trl, version: 1.16.0, profile: trl}
steps: 200
mean_prompt_tokens: 212
mean_completion_tokens: 655
hardware: {accelerator: NVIDIA H100 SXM, count: 8, dtype: bf16, peak_flops: 9.89e14, accelerator_hours: 1.2}
evaluations:
  - {target: gsm8k-250, metric: pass@1, value: 0.712, n: 250}
"""
CONFIG = {"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
          "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    """Every hostile input of the issue, written once."""
    d = tmp_path_factory.mktemp("hostile")
    shutil.copy(REPORT, d / "r.json")
    shutil.copy(VALID / "paper-qwen1.5b-lora64-sparse.ledger.jsonl", d)
    (d / "subs").mkdir()
    edits = {"K": ("group_size: 2", "group_size: 100000000"),
             "pps": ("prompts_per_step: 64", "prompts_per_step: 1000000000000"),
             "hw": (ESTIMATE[ESTIMATE.index("hardware:"):ESTIMATE.index("evaluations:")], "hardware: H100\n"),
             "ev": (ESTIMATE[ESTIMATE.index("evaluations:"):], "evaluations: lots\n"),
             "nan": ("mean_prompt_tokens: 212", "mean_prompt_tokens: .nan"),
             "inf": ("steps: 200", "steps: .inf")}
    for name, (old, new) in edits.items():
        assert old in ESTIMATE
        (d / f"e_{name}.yaml").write_text(ESTIMATE.replace(old, new))
    (d / "paper.yaml").write_text(ESTIMATE)
    state = (TRL / "trainer_state.json").read_text()
    shutil.copy(TRL / "cell-trl-qwen0.5b.yaml", d / "trl.yaml")
    shutil.copy(VERL / "cell-qwen1.5b-r64.yaml", d / "verl.yaml")
    (d / "trl_digits.json").write_text(state.replace('"global_step": 6', '"global_step": ' + "9" * 5000))
    (d / "trl_deep.json").write_text('{"log_history": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (d / "trl_binary.json").write_bytes(b"\x00\xff\xfe binary")
    lines = []
    for line in (VERL / "metrics-qwen1.5b-r64.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec["data"] = {k: (1e300 if "mfu" in k else v) for k, v in rec["data"].items()}
        lines.append(json.dumps(rec))
    (d / "verl_mfu.jsonl").write_text("\n".join(lines) + "\n")
    (d / "self").mkdir()
    shutil.copy(d / "verl_mfu.jsonl", d / "self" / "ledger.jsonl")        # a log named as the import's output
    for name, text in {"digits": json.dumps(CONFIG).replace('"vocab_size": 1000', '"vocab_size": ' + "9" * 5000),
                       "deep": "[" * 100_000 + "]" * 100_000}.items():
        (d / f"cfg_{name}").mkdir()
        (d / f"cfg_{name}" / "config.json").write_text(text)
    (d / "cfg_binary").mkdir()
    (d / "cfg_binary" / "config.json").write_bytes(b"\xff\xfe\x00binary\x00\x01")
    return d


def _erofs(*a, **k):
    raise OSError(errno.EROFS, os.strerror(errno.EROFS), "site/index.html")


def _enospc(*a, **k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "site/index.html")


# (name, argv, what the error line must name, monkeypatch: (module attribute, replacement) or None)
CASES = [
    ("build --out /", ["leaderboard", "build", "--submissions", "subs", "--out", "/"], "file system root", None),
    ("build --out .", ["leaderboard", "build", "--submissions", "subs", "--out", "."], "current folder", None),
    ("build --out ''", ["leaderboard", "build", "--submissions", "subs", "--out", ""], "current folder", None),
    ("build --out /proc/self", ["leaderboard", "build", "--submissions", "subs", "--out", "/proc/self"],
     "system folder", None),
    ("build --out 300 chars", ["leaderboard", "build", "--submissions", "subs", "--out", "a" * 300],
     "File name too long", None),
    ("build read-only", ["leaderboard", "build", "--submissions", "subs", "--out", "ro-site"], "Read-only",
     ("suite.site.render._write", _erofs)),
    ("build disk full", ["leaderboard", "build", "--submissions", "subs", "--out", "full-site"], "No space left",
     ("suite.site.render._write", _enospc)),
    ("submit read-only", ["submit", "r.json", "--submissions", "subs"], "Read-only",
     ("suite.site.leaderboard.write_new", _erofs)),
    ("submit disk full", ["submit", "r.json", "--submissions", "subs"], "No space left",
     ("suite.site.leaderboard.write_new", _enospc)),
    ("validate -o DIR", ["validate", "r.json", "-o", "subs"], "is a folder", None),
    ("validate -o its input", ["validate", "r.json", "-o", "r.json"], "also an input", None),
    ("validate --max-bytes 1e26", ["validate", "r.json", "--max-bytes", "1e26"], "--max-bytes", None),
    ("estimate K 1e8", ["report", "--estimate", "e_K.yaml"], "group_size must be <= 65536", None),
    ("estimate prompts 1e12", ["report", "--estimate", "e_pps.yaml"], "prompts_per_step must be <=", None),
    ("estimate hardware: H100", ["report", "--estimate", "e_hw.yaml"], "hardware must be a mapping", None),
    ("estimate evaluations: lots", ["report", "--estimate", "e_ev.yaml"], "evaluations must be a list", None),
    ("estimate .nan", ["report", "--estimate", "e_nan.yaml"], "prompt_tokens = nan", None),
    ("estimate .inf", ["report", "--estimate", "e_inf.yaml"], "steps must be an integer", None),
    ("estimate -o its input", ["report", "--estimate", "paper.yaml", "-o", "paper.yaml"], "also an input", None),
    ("import --out over its log", ["import", "verl", "self/ledger.jsonl", "--cell", "verl.yaml", "--out", "self",
                                   "--force"], "also an input", None),
    ("import --out /etc", ["import", "verl", "verl_mfu.jsonl", "--cell", "verl.yaml", "--out", "/etc"],
     "system folder", None),
    ("import trl 5000 digits", ["import", "trl", "trl_digits.json", "--cell", "trl.yaml", "--out", "i1"],
     "trl_digits.json", None),
    ("import trl deep", ["import", "trl", "trl_deep.json", "--cell", "trl.yaml", "--out", "i2"], "trl_deep.json", None),
    ("import trl binary", ["import", "trl", "trl_binary.json", "--cell", "trl.yaml", "--out", "i3"], "not UTF-8", None),
    ("flops --config 5000 digits", ["flops", "--config", "cfg_digits"], "cfg_digits", None),
    ("flops --config deep", ["flops", "--config", "cfg_deep"], "cfg_deep", None),
    ("flops --config binary", ["flops", "--config", "cfg_binary"], "not UTF-8", None),
    ("flops --group-size 1e12", ["flops", "--model", "Qwen2.5-1.5B-Instruct", "--group-size", "1e12"],
     "--group-size", None),
    ("flops --group-size 10^12", ["flops", "--model", "Qwen2.5-1.5B-Instruct", "--group-size", str(10 ** 12)],
     "group_size", None),
    ("schema --out DIR", ["schema", "report", "--out", "subs"], "is a folder", None),
    ("schema --out a new file in /dev", ["schema", "report", "--out", "/dev/race-hostile-test"], "in /dev", None),
]


def test_no_traceback_one_line_exit_2(hostile, monkeypatch, capsys):
    """Each case: exit 2, one `race CMD: error:` line (plus at most its hint) naming the problem,
    no traceback, no internal error; the inputs are unchanged."""
    import importlib

    monkeypatch.chdir(hostile)
    before = (hostile / "r.json").read_bytes(), (hostile / "paper.yaml").read_bytes()
    failures = []
    for name, argv, names, patch in CASES:
        with monkeypatch.context() as m:
            if patch:
                mod, attr = patch[0].rsplit(".", 1)
                m.setattr(importlib.import_module(mod), attr, patch[1])
            try:
                rc = race(argv)
            except SystemExit as e:         # argparse usage errors
                rc = e.code
        out, err = capsys.readouterr()
        lines = [x for x in err.splitlines() if x.strip() and not x.startswith(("usage:", " "))]  # argparse's usage
        ok = (rc == 2 and "Traceback" not in out + err and "internal error" not in err and len(lines) == 1
              and lines[0].startswith(f"race {argv[0]}") and "error:" in lines[0] and names in err)
        if not ok:
            failures.append(f"{name}: rc={rc} err={err.strip()[:300]!r}")
    print(f"{len(CASES)} hostile command lines: {len(CASES) - len(failures)} ended in one line and exit 2")
    assert not failures, "\n".join(failures)
    assert ((hostile / "r.json").read_bytes(), (hostile / "paper.yaml").read_bytes()) == before
    assert (hostile / "self" / "ledger.jsonl").read_bytes() == (hostile / "verl_mfu.jsonl").read_bytes()
    assert not any(p.name.startswith(".ro-site") or p.name.startswith(".full-site") for p in hostile.iterdir())


def test_long_names_build_and_verl_mfu_1e300_imports_without_a_comparison(hostile, monkeypatch, capsys):
    """An absurd MFU (1e300) is not a fraction: the import succeeds, its comparison has no MFU column."""
    monkeypatch.chdir(hostile)
    assert race(["leaderboard", "build", "--submissions", "subs", "--out", "a" * 250]) == 0    # 255 is the limit
    assert race(["import", "verl", "verl_mfu.jsonl", "--cell", "verl.yaml", "--out", "iv"]) == 0
    cmp = json.loads((hostile / "iv" / "comparison.json").read_text())
    assert "verl_mfu_update" in cmp and cmp["verl_mfu_update"] is None and cmp["ours"]["update"] > 0


def test_os_errors_name_the_path_and_the_fix():
    from suite.cli.main import as_race_error

    e = as_race_error(OSError(errno.EROFS, "Read-only file system", "/mnt/ro/site"))
    assert "/mnt/ro/site" in e.message and "read-only" in e.hint
    assert "deeply" in as_race_error(RecursionError()).message
    assert "out of memory" in as_race_error(MemoryError()).message


def _device(path: Path, minor: int) -> bool:
    """A character device like /dev/null (minor 3) or /dev/full (7) at `path` (root only)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
        return True
    except (PermissionError, OSError):
        return False


def test_outputs_never_replace_a_device_or_fifo(tmp_path, monkeypatch, capsys):
    """`-o` at a device writes in place (/dev/null-like) or fails in one line (/dev/full-like,
    ENOSPC): the node stays a device. A FIFO with no reader is refused at once, not blocked on.
    Devices are made in tmp_path, never the real /dev (the bug replaced /dev/full)."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(REPORT, tmp_path / "r.json")
    shutil.copy(VALID / "paper-qwen1.5b-lora64-sparse.ledger.jsonl", tmp_path)
    os.mkfifo(tmp_path / "fifo")
    assert race(["validate", "r.json", "-o", "fifo"]) == 2
    assert "no reader" in capsys.readouterr().err and stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode)
    if not (_device(tmp_path / "null", 3) and _device(tmp_path / "full", 7)):
        pytest.skip("making device nodes needs root")
    for argv in (["validate", "r.json"], ["schema", "report"]):
        assert race([*argv, "-o", "null"]) == 0
        assert race([*argv, "-o", "full"]) == 2
        assert "No space left on device" in capsys.readouterr().err
    for dev in ("null", "full"):
        assert stat.S_ISCHR(os.stat(tmp_path / dev).st_mode), f"{dev} was replaced"


def test_a_symlinked_output_keeps_its_link(tmp_path):
    from suite.atomic import write_text_atomic

    (tmp_path / "link").symlink_to("target")
    write_text_atomic(tmp_path / "link", "x")
    assert (tmp_path / "link").is_symlink() and (tmp_path / "target").read_text() == "x"


def test_escape_sequences_never_reach_the_terminal(tmp_path, monkeypatch, capsys):
    """A report whose ledger.path carries ESC/OSC sequences: validate's text shows them escaped."""
    monkeypatch.chdir(tmp_path)
    doc = json.loads(REPORT.read_text())
    doc["ledger"]["path"] = "\x1b]0;pwned\x07\x1b[2Jledger.jsonl"
    (tmp_path / "r.json").write_text(json.dumps(doc))
    race(["validate", "r.json"])
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err and "\\x1b" in out
