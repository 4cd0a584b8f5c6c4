"""Engines as data: every engine is one file (tasks/engines/NAME.yaml, schemas/engine-v1.schema.json)
whose profiles are the accounting's EngineProfiles and whose logs are `race import`'s key maps; the
file is checked by its schema, a bad one is one line naming file and field."""

from __future__ import annotations

import pytest

from suite.accounting import ENGINES, GRPOSettings
from suite.accounting.enginefile import (ENGINE_FILES, check_range, read_file, register_file, shipped_folder,
                                         version_in)
from suite.errors import RaceError
from suite.integrations.keymaps import KEY_MAPS

SHIPPED = sorted(p.stem for p in shipped_folder().glob("*.yaml"))


def test_every_shipped_engine_file_is_registered_with_its_profiles_and_logs():
    assert SHIPPED == sorted(ENGINE_FILES)
    assert {"trl", "verl", "nemo-rl", "prime-rl", "slime", "skyrl", "openrlhf", "roll", "areal", "generic"} <= set(SHIPPED)
    owned = [p for name in ENGINE_FILES for p in ENGINE_FILES[name].profiles]
    assert len(owned) == len(set(owned)) and set(owned) <= set(ENGINES)     # each profile one engine's
    for name in SHIPPED:
        rec = ENGINE_FILES[name]
        assert rec.path.endswith(f"{name}.yaml")
        assert rec.source is not None or name == "generic"   # facts read from code say where
        for p in rec.profiles:
            assert ENGINES[p].engine == name
        for log in rec.logs:
            km = KEY_MAPS[log["name"]]
            assert km.engine == name and km.profile == log["profile"] and km.format == log["format"]
    assert ENGINE_FILES["nemo-rl"].logs[1]["name"] == "mlperf"     # MLPerf's GRPO logs are NeMo-RL's


def test_extends_inherits_and_overrides():
    trl, cpu, vllm, nois = (ENGINES[p] for p in ("trl", "trl-cpu", "trl-vllm", "trl-vllm-no-is"))
    assert (cpu.padded, cpu.lm_head_train, trl.lm_head_train) == (True, "all", "completion")
    assert (vllm.padded, vllm.rollout_is_padded, vllm.prefill_per_completion) == (True, False, False)
    s = GRPOSettings(group_size=4, prompts_per_step=2)            # aligned schedule, mu = 1
    assert (trl.old_policy_pass(s), vllm.old_policy_pass(s), nois.old_policy_pass(s)) == (False, True, False)
    s = GRPOSettings(group_size=4, prompts_per_step=2, gradient_accumulation_steps=3, steps_per_generation=2)
    assert trl.old_policy_pass(s) and nois.old_policy_pass(s)    # 3 % (2 x 1) != 0: misaligned


def _write(tmp_path, text):
    p = tmp_path / "acme.yaml"
    p.write_text(text, encoding="utf-8")
    return p


GOOD = """name: acme
description: "Acme's trainer"
source: {repo: acme/trainer, commit: "%s", files: [train.py]}
profiles:
  acme:
    description: "Acme trainer: shared prompt prefill, no padding"
    prefill_per_completion: false
logs: []
""" % ("ab" * 20)


def test_bad_engine_files_are_one_line_naming_file_and_field(tmp_path):
    with pytest.raises(RaceError, match=r"acme.yaml at profiles/acme: Additional properties.*'padding'"):
        read_file(_write(tmp_path, GOOD.replace("prefill_per_completion", "padding")))
    with pytest.raises(RaceError, match=r"acme.yaml at profiles/acme/old_policy: 'sometimes' is not one of"):
        read_file(_write(tmp_path, GOOD.replace("prefill_per_completion: false", "old_policy: sometimes")))
    with pytest.raises(RaceError, match="engine name 'TRL' is already engine 'trl'"):
        register_file(_write(tmp_path, GOOD.replace('description: "Acme', 'aliases: [TRL]\ndescription: "Acme', 1)))
    with pytest.raises(RaceError, match="profile 'trl' is already registered"):
        register_file(_write(tmp_path, GOOD.replace("  acme:\n", "  trl:\n")))
    with pytest.raises(RaceError, match="log 'acme' is priced under 'verl', which is neither a profile of this file"):
        register_file(_write(tmp_path, GOOD.replace("logs: []", "logs:\n  - {name: acme, format: csv, profile: verl, "
                                                                "logger: my logger, step: it, tokens: {prompt: p, "
                                                                "completion: c}}")))
    with pytest.raises(RaceError, match="at logs/0: 'step' is a required property"):
        read_file(_write(tmp_path, GOOD.replace("logs: []", "logs:\n  - {name: acme, format: csv, profile: acme, "
                                                            "logger: my logger}")))
    assert "acme" not in ENGINE_FILES and "acme" not in ENGINES    # nothing half-registered


def test_version_ranges():
    assert check_range(">=0.2,<0.4", "x") and version_in("0.3.1", ">=0.2,<0.4") and not version_in("0.4", ">=0.2,<0.4")
    assert version_in("0.9.1", "==0.9.*") and not version_in("0.10.0", "==0.9.*") and version_in("v1.2rc1", "~=1.1")
    with pytest.raises(RaceError, match="not a PEP 440 range"):
        check_range("newer than 0.2", "x")


def test_the_docs_engine_tables_are_generated_from_the_engine_files():
    from suite.accounting.enginedocs import (ENGINES_BEGIN, ENGINES_END, PROFILES_BEGIN, PROFILES_END,
                                             engines_markdown, profiles_markdown)
    from suite.paths import home

    for page, begin, end, body in (("import.md", ENGINES_BEGIN, ENGINES_END, engines_markdown()),
                                   ("accounting.md", PROFILES_BEGIN, PROFILES_END, profiles_markdown())):
        text = (home() / "docs" / page).read_text(encoding="utf-8")
        assert text.split(begin, 1)[1].split(end, 1)[0].strip() == body.strip(), \
            "run: .venv/bin/python -m suite.accounting.enginedocs"
    assert all(f"| `{p}` |" in profiles_markdown() for p in ENGINES if ENGINES[p].engine is not None)
    assert all(f"| `{e}` |" in engines_markdown() for e in ENGINE_FILES)


def test_a_profile_whose_engine_runs_a_critic_is_refused_by_name_not_dropped(tmp_path):
    """`critic: true` (a PPO critic: values forward and critic update) is work the suite does not
    price: building work for such a profile is refused naming it, never priced without the critic.
    No shipped profile runs one (every registered profile prices); a plugin's file may declare one,
    registered here in a subprocess so that this session's registry stays the shipped one."""
    import subprocess
    import sys

    assert not any(ENGINES[p].critic for p in ENGINES)
    f = _write(tmp_path, GOOD.replace("name: acme", "name: acme-ppo").replace("  acme:\n", "  acme-ppo:\n")
               .replace("prefill_per_completion: false", "critic: true"))
    code = ("import sys; from suite import engine_file; from suite.accounting import ENGINES, GRPOSettings, "
            "work_from_means; from suite.errors import RaceError\n"
            f"engine_file({str(f)!r}); s = GRPOSettings(group_size=1, prompts_per_step=4)\n"
            "assert work_from_means(100, 200, s, 'verl')['update.train.tokens'] == 1200\n"
            "assert ENGINES['acme-ppo'].critic and ENGINES['acme-ppo'].engine == 'acme-ppo'\n"
            "try:\n    work_from_means(100, 200, s, 'acme-ppo')\nexcept RaceError as e:\n    print(e.message)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("engine profile 'acme-ppo' runs a PPO critic"), r.stdout


def test_a_log_entry_reads_renamed_keys_by_version_and_refuses_ambiguous_ones_without_one(tmp_path):
    """An entry's `renames` and `refuse` (engine-v1): keys read as the log's engine version names
    them; a key whose meaning changed is read only with the version given."""
    import json

    from suite.integrations.keymaps import KeyMap, for_version, import_metric_log
    from suite.train.cell import cell_from_dict

    km = KeyMap(name="acme", engine="acme", profile="generic", source={"repo": "a/b", "commit": "ab" * 20,
                "files": ["x.py"]}, logger="acme logger", format="jsonl", step="step",
                tokens={"prompt": "prompt_len", "completion": "gen_tokens"}, versions=">=0.2",
                renames={"<0.3": {"gen_tokens": "gen_len"}}, refuse={"gen_tokens": "counted characters before 0.3"})
    log = tmp_path / "m.jsonl"
    log.write_text("".join(json.dumps({"step": s, "prompt_len": 100, "gen_len": 200}) + "\n" for s in (1, 2)))
    cell = cell_from_dict({"name": "x", "policy": "Qwen2.5-0.5B-Instruct", "reward": "sparse", "group_size": 2,
                           "prompts_per_step": 2, "max_completion_tokens": 1024}, check_paths=False)
    doc = import_metric_log(log, km, cell, tmp_path / "o", engine_version="0.2.5").doc
    assert doc["totals"]["tokens"]["rollout_completion"] == 2 * 4 * 200 and doc["run"]["engine"]["version"] == "0.2.5"
    assert for_version(km, "0.3.1").tokens["completion"] == "gen_tokens"          # the new name from 0.3
    with pytest.raises(RaceError, match=r"key 'gen_tokens' of key map 'acme' is not in the log of acme 0\.3\.1"):
        import_metric_log(log, km, cell, tmp_path / "o2", engine_version="0.3.1")
    with pytest.raises(RaceError, match="key 'gen_tokens' is read only where the engine version is known: counted"):
        import_metric_log(log, km, cell, tmp_path / "o3")
    with pytest.raises(RaceError, match=r"reads logs of acme >=0\.2, not acme 0\.1"):
        for_version(km, "0.1")
