"""The one dataset loader: the embedded splits and local files in the published Polaris-53K, GSM8K,
MATH-500 and MATH formats (rows written here in those formats: field names and answer layouts as
the publishers' files have them), as JSON Lines, JSON and parquet, the format read from the fields."""

import json

import pytest

from suite.train import datasets
from suite.errors import RaceError


def _jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


GSM8K = [
    {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
                 "How many clips did Natalia sell altogether in April and May?",
     "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
               "altogether in April and May.\n#### 72"},
    {"question": "A shop sells 1,200 pens a day. How many in 2 days?", "answer": "1200*2=<<1200*2=2400>>2400\n#### 2,400"},
]
MATH500 = [
    {"problem": "Convert the point $(0,3)$ in rectangular coordinates to polar coordinates.",
     "solution": "We have that $r = \\sqrt{0^2 + 3^2} = 3.$ ... \\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}.",
     "answer": "\\left( 3, \\frac{\\pi}{2} \\right)", "subject": "Precalculus", "level": 2,
     "unique_id": "test/precalculus/807.json"},
]
POLARIS = [
    {"problem": "Find the sum of all integer bases $b>9$ for which $17_b$ is a divisor of $97_b$.",
     "answer": "70", "difficulty": "3/8"},
    {"problem": "What is $1+1$?", "answer": "2", "difficulty": "8/8"},
]


def test_gsm8k_answer_after_hashes_without_commas_and_solution_without_calculator(tmp_path):
    rows = datasets.load(_jsonl(tmp_path / "test.jsonl", GSM8K), "gsm8k")
    assert [r["answer"] for r in rows] == ["72", "2400"]
    assert rows[0]["question"] == GSM8K[0]["question"]
    assert "<<" not in rows[0]["solution"] and "####" not in rows[0]["solution"]
    assert rows[0]["solution"].startswith("Natalia sold 48/2 = 24 clips")
    assert {r["source"] for r in rows} == {"gsm8k"}


def test_math500_maps_problem_and_keeps_metadata(tmp_path):
    (row,) = datasets.load(_jsonl(tmp_path / "test.jsonl", MATH500), "math500")
    assert row["question"] == MATH500[0]["problem"]
    assert row["answer"] == MATH500[0]["answer"]
    assert row["solution"] == MATH500[0]["solution"]
    assert (row["subject"], row["level"], row["unique_id"]) == ("Precalculus", 2, "test/precalculus/807.json")


def test_polaris_from_parquet_and_json(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(POLARIS), tmp_path / "train.parquet")
    (tmp_path / "train.json").write_text(json.dumps(POLARIS))
    for name in ("train.parquet", "train.json"):
        rows = datasets.load(tmp_path / name, "polaris")
        assert [(r["question"], r["answer"], r["difficulty"], r["solution"]) for r in rows] == [
            (p["problem"], p["answer"], p["difficulty"], None) for p in POLARIS]
    assert len(datasets.load(tmp_path / "train.json", "polaris", limit=1)) == 1


# hendrycks/competition_math (MATH): no answer field; the gold answer is the solution's last \boxed{}.
MATH = [{"problem": "What is $\\frac{1}{2}+\\frac{1}{3}$?", "level": "Level 1", "type": "Prealgebra",
         "solution": "We have $\\frac{3}{6}+\\frac{2}{6}=\\boxed{\\frac{5}{6}}$."}]


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_the_format_is_read_from_the_fields_in_every_file_kind(tmp_path, suffix):
    import pyarrow as pa
    import pyarrow.parquet as pq

    def write(name, records):
        path = tmp_path / f"{name}{suffix}"
        if suffix == ".parquet":
            pq.write_table(pa.Table.from_pylist(records), path)
        elif suffix == ".json":
            path.write_text(json.dumps(records))
        else:
            _jsonl(path, records)
        return path

    got = {name: datasets.load(write(name, recs)) for name, recs in
           (("gsm8k", GSM8K), ("math500", MATH500), ("polaris", POLARIS), ("math", MATH))}
    assert {name: {r["source"] for r in rows} for name, rows in got.items()} == {n: {n} for n in got}
    assert [r["answer"] for r in got["gsm8k"]] == ["72", "2400"]        # the numbers, not the #### lines
    assert [r["answer"] for r in got["polaris"]] == ["70", "2"]
    assert got["math500"][0]["answer"] == MATH500[0]["answer"] and got["math500"][0]["level"] == 2
    assert got["math"][0]["answer"] == "\\frac{5}{6}" and got["math"][0]["solution"] == MATH[0]["solution"]
    assert datasets.load(write("arith", [{"question": "1 + 1?", "answer": "2"}]))[0]["source"] == "arith"


def test_wrong_format_names_the_missing_field_and_the_fields_there(tmp_path):
    path = _jsonl(tmp_path / "x.jsonl", POLARIS)
    with pytest.raises(RaceError) as e:
        datasets.load(path, "gsm8k")
    assert "'question'" in e.value.message and "problem" in e.value.hint
    mixed = _jsonl(tmp_path / "mixed.jsonl", [GSM8K[0], POLARIS[0]])     # one format per file
    with pytest.raises(RaceError, match="record 1 has no field 'question' \\(format gsm8k\\)"):
        datasets.load(mixed)
    with pytest.raises(RaceError, match="record 1: GSM8K answers end with '#### <number>'"):
        datasets.load(_jsonl(tmp_path / "cut.jsonl", [GSM8K[0], {**GSM8K[1], "answer": "2400"}]))
    with pytest.raises(RaceError, match="no \\\\boxed"):
        datasets.load(_jsonl(tmp_path / "unboxed.jsonl", [{**MATH[0], "solution": "5/6"}]))
    with pytest.raises(RaceError, match="cannot tell the data set format .* fields text, label"):
        datasets.load(_jsonl(tmp_path / "other.jsonl", [{"text": "x", "label": 1}]))


def test_missing_file_bad_json_unknown_format(tmp_path):
    with pytest.raises(RaceError, match="not found"):
        datasets.load(tmp_path / "nope.jsonl", "gsm8k")
    (tmp_path / "bad.jsonl").write_text('{"question": 1}\n{oops\n')
    with pytest.raises(RaceError, match="not valid JSON"):
        datasets.load(tmp_path / "bad.jsonl", "gsm8k")
    with pytest.raises(RaceError) as e:
        datasets.load(tmp_path / "bad.jsonl", "mmlu")
    assert "gsm8k" in e.value.hint and "math500" in e.value.hint
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(RaceError, match="has no problems"):
        datasets.load(tmp_path / "empty.jsonl")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(RaceError, match="not a readable parquet file"):
        datasets.load(tmp_path / "bad.parquet")


def test_embedded_splits_and_prompts():
    easy = datasets.load_split("arith-easy-250")
    assert len(easy) == 250 and easy[0]["solution"].endswith(f"\\boxed{{{easy[0]['answer']}}}")
    rows = datasets.with_prompts(datasets.load_split("train", limit=3), system="Be brief.")
    assert rows[0]["prompt"] == [{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": rows[0]["question"]}]
    with pytest.raises(RaceError, match="unknown embedded split"):
        datasets.load_split("gsm8k")
