"""Issue 29: bounded work for any input, and an all-or-nothing site.

Each hang of the issue (a 3 KB report declaring a billion layers, a config with 10^12 layers, a
FIFO named x.json in a folder, billion-laughs YAML, 40,000 evaluation targets) is refused in well
under a few seconds, with a message that never reprs the whole instance; duplicate keys are
refused in every file kind the suite reads. A leaderboard build killed (os._exit, what kill -9
does: no handler, no finally) at every point leaves the old site or the new one at --out, and the
next build removes what the killed ones left; a forged validation-cache entry lists nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from suite.cli import main as race
from suite.errors import RaceError

ROOT = Path(__file__).resolve().parents[1]
VALID = ROOT / "schemas" / "examples" / "valid"
REPORT = VALID / "paper-qwen1.5b-lora64-sparse.json"
LEDGER = VALID / "paper-qwen1.5b-lora64-sparse.ledger.jsonl"


@contextmanager
def within(seconds: float):
    """Fail (instead of hanging the suite) when the block runs longer than `seconds`."""
    def expired(*_):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.perf_counter()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.perf_counter() - start < seconds


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(REPORT.read_text())


def _rules(findings) -> set[str]:
    return {f.rule_id for f in findings if f.severity == "error"}


def test_declared_sizes_are_bounded_by_the_schema(doc, tmp_path):
    """A billion layers under a non-catalog name, 40,000 evaluation targets, a 10 MB list where a
    number belongs: each refused by the schema stage in under 2 s, every message short."""
    from suite.validate import validate_report

    layers = json.loads(json.dumps(doc))
    layers["policy"]["name"] = layers["policy"]["spec"]["name"] = "my-model"
    layers["policy"]["spec"]["num_layers"] = 1_000_000_000
    evals = json.loads(json.dumps(doc))
    evals["evaluations"] = [{"target": f"t{i}", "metric": "pass@1", "value": 0.5, "n": 10} for i in range(40_000)]
    wide = json.loads(json.dumps(doc))
    wide["grpo"]["group_size"] = list(range(1_000_000))
    for bad in (layers, evals, wide):
        with within(2.0):
            findings = validate_report(bad, base_dir=VALID, file="bad.json")
        assert any(r.startswith("SCHEMA") for r in _rules(findings)), findings[:3]
        assert max(len(f.message) + len(f.hint or "") for f in findings) < 600


def test_model_sizes_are_bounded_everywhere(tmp_path, capsys):
    """num_hidden_layers 10^12 in a config.json (reached 2.5 GB in 15 s), a ModelSpec built in code,
    K x prompts per step beyond any run: one line each, at once."""
    from suite.accounting.specs import spec_for
    from suite.accounting.settings import GRPOSettings

    cfg = {"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 10 ** 12, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with within(2.0):
        assert race(["flops", "--config", str(tmp_path)]) == 2
    assert "num_hidden_layers" in capsys.readouterr().err
    spec = spec_for("Qwen2.5-1.5B-Instruct")
    with pytest.raises(RaceError, match="num_layers"):
        type(spec)(**{**spec.__dict__, "num_layers": 100_000})
    with pytest.raises(RaceError, match="completions"):
        GRPOSettings(group_size=65_536, prompts_per_step=1 << 20)
    assert GRPOSettings(group_size=64, prompts_per_step=16_384).group_size == 64      # 2^20: allowed


def test_fifo_in_a_folder_is_skipped(tmp_path):
    """A FIFO named x.json inside a folder blocked `race validate DIR` forever: now not read."""
    from suite.validate.runner import iter_folder, validate_path

    shutil.copy(REPORT, tmp_path / "r.json")
    shutil.copy(LEDGER, tmp_path)
    os.mkfifo(tmp_path / "x.json")
    os.mkfifo(tmp_path / "y.jsonl")
    assert [p.name for p in iter_folder(tmp_path)] == [LEDGER.name, "r.json"]
    with within(5.0):
        findings = validate_path(tmp_path)
    assert not [f for f in findings if f.file.endswith(("x.json", "y.jsonl"))]
    assert not _rules(findings)


# A FIFO named at every argument of every command that reads a named file (suite.cli.main.INPUTS).
FIFO = "f"
FIFO_ARGS = [
    ["validate", FIFO], ["validate", "-", FIFO], ["report", FIFO], ["report", "--estimate", FIFO],
    ["report", "l.jsonl", "--spec", FIFO], ["report", "--estimate", "e.yaml", "--evaluations", FIFO],
    ["submit", FIFO], ["import", "trl", FIFO, "--cell", "c.yaml", "--out", "o"],
    ["import", "trl", "log", "--cell", FIFO, "--out", "o"],
    ["import", "nemo-rl", "log", "--cell", "c.yaml", "--key-map", FIFO, "--out", "o"],
    ["flops", "--config", FIFO], ["flops", "--model", FIFO], ["flops", "--model", "Qwen2.5-0.5B-Instruct", "--reward-model", FIFO],
    ["compare", "--config", FIFO], ["compare", "--model", FIFO],
    ["plan", "--budget", "1e18", "--reward-model", FIFO], ["curves", FIFO], ["diagnose", FIFO], ["findings", FIFO],
    ["frontier", FIFO], ["eval", FIFO], ["eval", "--base", FIFO], ["eval", "r", "--judge", FIFO],
    ["eval", "r", "--model", FIFO], ["eval", "r", "--native-reward-model", FIFO], ["eval", "r", "--data-dir", FIFO],
    ["export", "verl", FIFO], ["grid", FIFO], ["quickstart", "--grid", FIFO], ["run", FIFO], ["run", "c.yaml", "--resume", FIFO],
    ["study", FIFO], ["study", "s.yaml", "--calibrate", FIFO], ["bench", "--baseline", FIFO], ["bench", "--compare", FIFO],
    ["leaderboard", "build", "--submissions", FIFO, "--out", "site"],
    ["leaderboard", "build", "--out", "site", "--findings", FIFO]]


def test_a_fifo_named_on_the_command_line_is_refused(tmp_path, monkeypatch, capsys):
    """Issue 29: `race validate x.json` with x.json a FIFO waited for a writer forever. Every
    command refuses a FIFO named as an input in one line (and its hint), exit 2, at once; a FIFO
    as --output is written in place (suite.outputs) and standard input stays allowed."""
    from suite.cli.main import INPUTS

    monkeypatch.chdir(tmp_path)
    os.mkfifo(FIFO)
    for argv in FIFO_ARGS:
        with within(5.0):
            code = race(argv)
        err = capsys.readouterr().err
        assert code == 2 and f"input {FIFO} is a FIFO, not a regular file" in err, (argv, err)
        assert len(err.strip().splitlines()) == 2, err      # the error and its hint
    for command, dests in INPUTS.items():           # a case for each input argument of each command
        assert len([a for a in FIFO_ARGS if a[0] == command]) >= len(dests), command
    shutil.copy(REPORT, tmp_path / "r.json")
    shutil.copy(LEDGER, tmp_path)
    with open(tmp_path / "r.json") as stdin, within(5.0):
        monkeypatch.setattr("sys.stdin", stdin)
        assert race(["validate", "-"]) == 0


def test_strict_readers_refuse_a_fifo(tmp_path):
    """The readers every suite file goes through look before they open (an API caller too)."""
    from suite import jsonstrict, yamlstrict

    os.mkfifo(tmp_path / "f")
    with within(5.0):
        with pytest.raises(jsonstrict.JSONInputError, match="a FIFO"):
            jsonstrict.load(tmp_path / "f")
        with pytest.raises(RaceError, match=r"/f: not a regular file \(a FIFO\) \("):    # not "not valid JSON"
            jsonstrict.read(tmp_path / "f")
        with pytest.raises(RaceError, match="is a FIFO"):
            yamlstrict.load(tmp_path / "f")


BILLION_LAUGHS = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))


@pytest.mark.parametrize("text, says", [
    ("notes: &x hello\n", "anchor &x"),
    ('l0: &l0 "lol"\n' + BILLION_LAUGHS + "notes: *l8\n", "anchor &l0"),
    ("notes: x\nsteps: 200\nsteps: 400\n", "duplicate key 'steps' at line 3"),
])
def test_yaml_anchors_aliases_and_duplicate_keys_refused(text, says):
    from suite.yamlstrict import loads

    with within(2.0), pytest.raises(RaceError, match=says):
        loads(text, "cell")
    with pytest.raises(RaceError, match="alias"):
        loads("a: 1\nb: *a\n", "cell")


def test_duplicate_keys_refused_in_every_file_kind(tmp_path, capsys):
    """cell YAML, config.json, trainer_state.json and verl's metrics lines: the second value used
    to win silently; now each is one error naming the key."""
    cell = (ROOT / "tests" / "fixtures" / "trl" / "cell-trl-qwen0.5b.yaml").read_text()
    (tmp_path / "cell.yaml").write_text(cell + "group_size: 8\n")
    (tmp_path / "good.yaml").write_text(cell)
    state = (ROOT / "tests" / "fixtures" / "trl" / "trainer_state.json").read_text().rstrip()
    (tmp_path / "state.json").write_text(state[:-1] + ', "global_step": 1000}')
    verl = (ROOT / "tests" / "fixtures" / "verl" / "metrics-qwen1.5b-r64.jsonl").read_text().splitlines()
    verl[1] = verl[1][:-1] + ', "step": 99}'
    (tmp_path / "metrics.jsonl").write_text("\n".join(verl) + "\n")
    shutil.copy(ROOT / "tests" / "fixtures" / "verl" / "cell-qwen1.5b-r64.yaml", tmp_path / "verl.yaml")
    cfg = '{"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, ' \
          '"intermediate_size": 512, "vocab_size": 1000, "hidden_size": 256}'
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(cfg)
    cases = [(["report", "--estimate", str(tmp_path / "cell.yaml")], "group_size"),
             (["import", "trl", str(tmp_path / "state.json"), "--cell", str(tmp_path / "good.yaml"),
               "--out", str(tmp_path / "i1")], "global_step"),
             (["import", "verl", str(tmp_path / "metrics.jsonl"), "--cell", str(tmp_path / "verl.yaml"),
               "--out", str(tmp_path / "i2")], "step"),
             (["flops", "--config", str(tmp_path / "cfg")], "hidden_size")]
    for argv, key in cases:
        assert race(argv) == 2, argv
        err = capsys.readouterr().err
        assert "duplicate key" in err and repr(key) in err, err


DUP = '{"a": 1, "b": 2, "a": 3}'


def _readers(tmp_path):
    """Every other JSON file the suite reads from disk, with a duplicate key: (reader, file)."""
    from benchmarks.gate import load_baseline
    from suite.analysis.evidence import read_samples
    from suite.analysis.study import read_study_json
    from suite.evaluate.harness import check_adapter
    from suite.record.timing import read_timing
    from suite.train.datasets import read_records
    from suite.train.rewards import is_sequence_classifier

    for name in ("timing.json", "study.json", "s.samples.jsonl", "d.jsonl", "d.json", "adapter_config.json",
                 "config.json", "base.json"):
        (tmp_path / name).write_text(DUP + "\n")
    return [(lambda: read_timing(tmp_path), "timing.json"), (lambda: read_study_json(tmp_path), "study.json"),
            (lambda: read_samples(tmp_path / "s.samples.jsonl", "run r"), "s.samples.jsonl"),
            (lambda: read_records(tmp_path / "d.jsonl"), "d.jsonl"), (lambda: read_records(tmp_path / "d.json"), "d.json"),
            (lambda: check_adapter(tmp_path, tmp_path), "adapter_config.json"),
            (lambda: is_sequence_classifier(tmp_path), "config.json"), (lambda: load_baseline(tmp_path / "base.json"), "base.json")]


def test_duplicate_keys_refused_in_every_json_the_suite_reads(tmp_path):
    """Timing, study, per-sample evaluation logs, data sets, an adapter's or reward model's
    config, a benchmark baseline (and the calibration file, tests/test_utilization.py): each used
    plain json.loads, where the second value wins; now one error naming the file and the key.
    The suite's own caches re-measure what they cannot read: a timing being measured again, the
    site's validation cache (every submission validated again)."""
    from suite.record.timing import read_timing
    from suite.site.leaderboard import _read_cache

    for read, name in _readers(tmp_path):
        with pytest.raises(RaceError) as e:
            read()
        assert name in e.value.message and "duplicate key 'a'" in e.value.message, e.value.message
    assert read_timing(tmp_path, remeasured=True) == {}
    (tmp_path / "cache.json").write_text('{"fingerprint": "f", "findings": {}, "fingerprint": "f"}')
    assert _read_cache(tmp_path / "cache.json", "f", key=b"k") == {}


def test_the_shipped_study_has_no_anchor():
    from suite.analysis.study import load

    assert load(ROOT / "tasks" / "studies" / "decisive.yaml")


# --------------------------------------------------------------------------- the site

def _fallback(on: bool):
    """Force the swap that exists where the kernel has no atomic exchange (a link renamed over
    --out), as on macOS or the BSDs."""
    from suite.site import swap

    if on:
        swap._renameat2 = lambda: None


def _kill_at(n: int, out: Path, version: str, fallback: bool = False) -> int:
    """Build the site `version` in a child process that dies (os._exit, as kill -9: no cleanup)
    at its n-th step: every page write, folder swap, rename, link and removal before and after
    it. Returns the child's exit code: 9 when killed, 0 when the build finished first."""
    import suite.site.render as render
    from suite.site import swap

    pid = os.fork()
    if pid == 0:                                    # pragma: no cover - the child
        count = [0]
        _fallback(fallback)

        def step():
            count[0] += 1
            if count[0] == n:
                os._exit(9)

        def wrapped(orig):
            def f(*a, **k):
                step()
                r = orig(*a, **k)
                step()
                return r
            return f

        for owner, name in ((render, "_write"), (swap, "_exchange"), (render, "remove_leftovers"),
                            (os, "rename"), (os, "replace"), (os, "symlink"), (os, "unlink"), (shutil, "rmtree"),
                            (os, "mkdir")):
            setattr(owner, name, wrapped(getattr(owner, name)))
        try:
            render.build_site([], out, extra_files={"v.txt": version})
        finally:
            os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _version(out: Path) -> str | None:
    return (out / "v.txt").read_text() if (out / "index.html").is_file() and (out / "v.txt").is_file() else None


def _build(out: Path, version: str, fallback: bool) -> None:
    """A whole build in this process (its templates then compiled once for every child)."""
    from suite.site import render, swap

    real = swap._renameat2
    _fallback(fallback)
    try:
        render.build_site([], out, extra_files={"v.txt": version})
    finally:
        swap._renameat2 = real


@pytest.mark.parametrize("fallback", [False, True], ids=["exchange", "link-fallback"])
def test_kill_at_every_point_leaves_the_old_or_the_new_site(tmp_path, fallback):
    """Linux swaps the folders with renameat2 RENAME_EXCHANGE; without it (forced here) --out is
    a link renamed over in one step. Either way a build killed at any of its steps leaves the old
    site or the new one, and the next build removes what the killed ones left."""
    out = tmp_path / "site"
    _build(out, "old", fallback)
    assert out.is_symlink() == fallback
    seen, leftovers, n = [], 0, 1
    while True:
        code = _kill_at(n, out, "new", fallback)
        seen.append(_version(out))
        assert seen[-1] in ("old", "new"), f"killed at step {n}: no site at --out"
        leftovers = max(leftovers, len([p for p in tmp_path.iterdir() if p.name != "site"]) - fallback)
        if code == 0:
            break
        n += 1
    print(f"killed a build at each of its {n - 1} steps: the old or the new site every time")
    assert n > 10 and seen[0] == "old" and seen[-1] == "new" and leftovers >= 1
    _build(out, "again", fallback)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert _version(out) == "again" and names == (["site"] if not fallback else sorted([os.readlink(out), "site"]))


def test_a_real_kill_9_of_a_fallback_build_leaves_a_site(tmp_path):
    """SIGKILL from outside, at random instants of builds that replace a linked --out (the
    fallback forced): the old or the new site every time."""
    import random
    import signal
    import time

    out = tmp_path / "site"
    _build(out, "v0", True)
    rng, versions = random.Random(29), {"v0"}
    for i in range(1, 13):
        pid = os.fork()
        if pid == 0:                                # pragma: no cover - the child
            _fallback(True)
            from suite.site import render

            for j in range(100):
                render.build_site([], out, extra_files={"v.txt": f"v{i}.{j}"})
            os._exit(0)
        versions |= {f"v{i}.{j}" for j in range(100)}
        time.sleep(rng.uniform(0.02, 0.25))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        assert _version(out) in versions, f"kill {i}: no site at --out"
    _build(out, "last", True)
    assert _version(out) == "last" and len(list(tmp_path.iterdir())) == 2    # the link and the site it names


def test_the_next_build_puts_back_a_site_a_killed_two_rename_swap_left(tmp_path, monkeypatch):
    """Where no exchange exists, a real folder at --out (a site built on Linux) becomes a link
    with two renames; a kill between them leaves the old site under a hidden name: the next build
    puts it back before anything else, and --out is a link from then on."""
    from suite.site import render, swap

    out = tmp_path / "site"
    render.build_site([], out, extra_files={"v.txt": "old"})
    assert not out.is_symlink()
    os.rename(out, tmp_path / ".site.old-999999999-abc123")       # what the first rename did; its pid is dead
    (tmp_path / ".site.building-999999999-abc123").mkdir()
    os.symlink(".site.site-999999999-abc123", tmp_path / ".site.link-999999999-abc123")
    removed = swap.remove_leftovers(out)
    assert sorted(p.name for p in removed) == [".site.building-999999999-abc123", ".site.link-999999999-abc123"]
    assert _version(out) == "old" and [p.name for p in tmp_path.iterdir()] == ["site"]
    monkeypatch.setattr(swap, "_renameat2", lambda: None)
    render.build_site([], out, extra_files={"v.txt": "new"})
    assert _version(out) == "new" and out.is_symlink() and len(list(tmp_path.iterdir())) == 2
    render.build_site([], out, extra_files={"v.txt": "newer"})       # link to link: one rename
    assert _version(out) == "newer" and len(list(tmp_path.iterdir())) == 2
    monkeypatch.undo()
    render.build_site([], out, extra_files={"v.txt": "linux"})       # an exchange swaps the link out
    assert _version(out) == "linux" and not out.is_symlink() and [p.name for p in tmp_path.iterdir()] == ["site"]


def test_a_link_at_out_to_anything_else_is_not_replaced(tmp_path):
    from suite.site import render

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    os.symlink("mine", tmp_path / "site")
    with pytest.raises(RaceError, match="not a site built by race"):
        render.build_site([], tmp_path / "site", extra_files={"v.txt": "x"})
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep" and os.readlink(tmp_path / "site") == "mine"


def test_a_forged_cache_entry_lists_nothing(tmp_path, monkeypatch):
    """An entry added to SITE/.race-validation-cache.json for a forged report (update FLOPs
    halved) used to list it on the next build; entries carry an HMAC under a key kept outside the
    site, so the forged one is validated, and refused. The genuine entry is still reused."""
    from suite.site import leaderboard as lb

    monkeypatch.setenv(lb.CACHE_KEY_ENV, str(tmp_path / "key"))
    run, subs, site = tmp_path / "run", tmp_path / "subs", tmp_path / "site"
    run.mkdir()
    subs.mkdir()
    shutil.copy(REPORT, run / REPORT.name)
    shutil.copy(LEDGER, run / LEDGER.name)
    lb.submit(run / REPORT.name, subs)
    assert lb.build(subs, site)["listed"] == 1
    stored = json.loads(next(subs.glob("*.json")).read_text())
    forged = json.loads(json.dumps(stored))
    forged["totals"]["flops"]["update"] //= 2
    forged["run"]["id"] += "-forged"
    (subs / "forged.json").write_text(json.dumps(forged))
    cache_file = site / lb.CACHE_FILE
    cache = json.loads(cache_file.read_text())
    key = f"{lb.content_digest(forged)}:{forged['ledger']['sha256']}"
    cache["findings"][key] = []
    cache["macs"][key] = "0" * 64                   # the forger cannot compute the builder's MAC
    cache_file.write_text(json.dumps(cache))
    calls = []
    real = lb.validate
    monkeypatch.setattr(lb, "validate", lambda doc, *a, **k: calls.append(doc["run"]["id"]) or real(doc, *a, **k))
    summary = lb.build(subs, site)
    assert summary["listed"] == 1 and [n for n, _ in summary["skipped_files"]] == ["forged.json"]
    assert calls == [forged["run"]["id"]]           # the genuine entry's cached verdict was reused
