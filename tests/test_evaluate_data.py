"""The real-data targets: the documented 250-row selections of GSM8K and MATH-500, loaded by
the lm-eval task definitions from local files in the published formats.

tests/fixtures/{gsm8k,math500}_head.jsonl hold rows in the published formats (GSM8K:
question/answer ending "#### n"; MATH-500: problem/solution/answer/subject/level/unique_id),
row 0 being the published row 0. The tests pad them to the published split sizes with
synthetic rows of the same format, so every selected row is known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.answers import is_correct
from suite.evaluate import targets
from suite.errors import RaceError

FIXTURES = Path(__file__).parent / "fixtures"


def _write_gsm8k(folder: Path, n: int = 1319, head: bool = True) -> list[dict]:
    rows = [json.loads(x) for x in (FIXTURES / "gsm8k_head.jsonl").read_text().splitlines()] if head else []
    rows += [{"question": f"Synthetic question {i}: what is {i} thousand?",
              "answer": f"{i} * 1000 = <<{i}*1000={i * 1000}>>{i * 1000}\n#### {i * 1000:,}"} for i in range(len(rows), n)]
    (folder / "gsm8k").mkdir(parents=True, exist_ok=True)
    (folder / "gsm8k" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def _write_math500(folder: Path, n: int = 500) -> list[dict]:
    rows = [json.loads(x) for x in (FIXTURES / "math500_head.jsonl").read_text().splitlines()]
    rows += [{"problem": f"Compute $\\frac{{{i}}}{{2}}$.", "solution": f"It is $\\boxed{{\\frac{{{i}}}{{2}}}}$.",
              "answer": f"\\frac{{{i}}}{{2}}", "subject": "Algebra", "level": 1 + i % 5,
              "unique_id": f"test/synthetic/{i}.json"} for i in range(len(rows), n)]
    (folder / "math500").mkdir(parents=True, exist_ok=True)
    (folder / "math500" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def _lm_eval_docs(name: str, data_dir: Path) -> list[dict]:
    """The documents lm-eval's task definition yields (TaskManager on tasks/lm_eval only)."""
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(targets.lm_eval_tasks_dir()), include_defaults=False,
                          metadata={"data_dir": str(data_dir)})
    task = manager.load([name])["tasks"][name]
    return list(task.eval_docs)


def test_id_lists_follow_the_documented_rule():
    for name, rows in (("gsm8k-250", 1319), ("math500-250", 500)):
        ids = targets.read_ids(name)
        assert ids == targets.select_rows(rows) == sorted(set(ids))
        assert len(ids) == 250 and 0 <= ids[0] and ids[-1] < rows
        text = (targets.lm_eval_tasks_dir() / "ids" / f"{name}.txt").read_text()
        assert f"random.Random({targets.SELECTION_SEED}).sample(range({rows}), 250)" in text  # documented in the file


def test_gsm8k_250_selects_the_documented_rows(tmp_path):
    rows = _write_gsm8k(tmp_path)
    docs = _lm_eval_docs("gsm8k-250", tmp_path)
    ids = targets.read_ids("gsm8k-250")
    assert [d["id"] for d in docs] == [str(i) for i in ids]
    for d, i in zip(docs, ids):
        assert d["question"] == rows[i]["question"]
        assert d["answer"] == {0: "18", 1: "3"}.get(i, str(i * 1000))  # "#### 12,000" -> "12000"
    # Gold answers parse and are right under the same pass@1 rule the metric uses.
    assert all(is_correct(f"\\boxed{{{d['answer']}}}", d["answer"]) for d in docs[:5])


def test_math500_250_selects_the_documented_rows(tmp_path):
    rows = _write_math500(tmp_path)
    docs = _lm_eval_docs("math500-250", tmp_path)
    ids = targets.read_ids("math500-250")
    assert [d["id"] for d in docs] == [rows[i]["unique_id"] for i in ids]
    assert all(d["question"] == rows[i]["problem"] and d["answer"] == rows[i]["answer"] for d, i in zip(docs, ids))
    assert len({d["id"] for d in docs}) == 250


def test_data_dir_from_environment_and_parquet(tmp_path, monkeypatch):
    import datasets

    rows = _write_gsm8k(tmp_path)
    (tmp_path / "gsm8k" / "test.jsonl").unlink()
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "gsm8k" / "test.parquet"))
    monkeypatch.setenv(targets.DATA_DIR_ENV, str(tmp_path))
    docs = targets.target_docs("gsm8k-250")
    assert [d["id"] for d in docs] == [str(i) for i in targets.read_ids("gsm8k-250")]


def test_wrong_files_are_refused(tmp_path, monkeypatch):
    _write_gsm8k(tmp_path, n=1000)
    with pytest.raises(RaceError, match="gsm8k data has 1000 rows"):
        targets.target_docs("gsm8k-250", str(tmp_path))
    _write_gsm8k(tmp_path, head=False)  # right size, but not in the published order
    with pytest.raises(RaceError, match="row 0 question"):
        targets.target_docs("gsm8k-250", str(tmp_path))
    with pytest.raises(RaceError, match="math500 data not found"):
        targets.target_docs("math500-250", str(tmp_path))
    monkeypatch.delenv(targets.DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RaceError, match="needs --data-dir"):
        targets.target_docs("math500-250")


def test_embedded_targets_load_without_data_dir():
    docs = _lm_eval_docs("arith-hard-250", Path("/nonexistent"))
    shipped = [json.loads(x) for x in (targets.lm_eval_tasks_dir().parent / "arith/data/arith-hard-250.jsonl").read_text().splitlines()]
    assert len(docs) == 250 == len(shipped)
    assert [d["question"] for d in docs] == [r["question"] for r in shipped]


def test_the_large_held_out_set_is_fresh_and_loads_through_lm_eval():
    """arith-easy-2000 (the decisive study's target): 2000 distinct problems, none in train or the
    250-problem sets, served by its lm-eval task YAML."""
    data = targets.lm_eval_tasks_dir().parent / "arith" / "data"
    rows = [json.loads(x) for x in (data / "arith-easy-2000.jsonl").read_text().splitlines()]
    questions = [r["question"] for r in rows]
    seen = {json.loads(x)["question"] for f in ("train", "arith-easy-250", "arith-hard-250")
            for x in (data / f"{f}.jsonl").read_text().splitlines()}
    assert len(set(questions)) == 2000 == targets.target("arith-easy-2000").size and not seen & set(questions)
    docs = _lm_eval_docs("arith-easy-2000", Path("/nonexistent"))
    assert [d["question"] for d in docs] == questions
