"""reports/report_data.py: benchmark names, folding repetitions, and load_json's one-line BadInput messages."""

import json
import os

import pytest

from reports.report_data import MAX_JSON_BYTES, BadInput, Bench, base_name, load_json


@pytest.mark.parametrize(
    "name, base",
    [
        ("BM_Step/tiny/uniform:k=2/manual_time", "BM_Step/tiny/uniform:k=2"),
        ("BM_Step/tiny/sqrt/repeats:7/manual_time_median", "BM_Step/tiny/sqrt"),
        ("BM_Step/tiny/sqrt/min_time:0.5s/iterations:3", "BM_Step/tiny/sqrt"),
        ("BM_Plan/optimal/threads:2/real_time_stddev", "BM_Plan/optimal"),
        ("BM_Step/mlp-deep/revolve:slots=4", "BM_Step/mlp-deep/revolve:slots=4"),  # no suffix: unchanged
    ],
)
def test_base_name_drops_google_benchmark_suffixes(name, base):
    assert base_name(name) == base


def write(tmp_path, doc, name="bench.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def test_bench_folds_repetitions_into_medians(tmp_path):
    reps = [
        {"name": "BM_Step/tiny/sqrt/repeats:3/manual_time", "run_type": "iteration", "time_overhead": t, "layers": 4}
        for t in (1.30, 1.10, 1.20)
    ]
    aggs = [
        {
            "name": "BM_Step/tiny/sqrt/repeats:3/manual_time_q1",
            "run_name": "BM_Step/tiny/sqrt/repeats:3/manual_time",
            "run_type": "aggregate",
            "aggregate_name": "q1",
            "time_overhead": 1.15,
        },
        {
            "name": "BM_Step/tiny/sqrt/repeats:3/manual_time_mean",
            "run_type": "aggregate",
            "aggregate_name": "mean",
            "time_overhead": 99.0,
        },
    ]
    b = Bench()
    b.add_file(write(tmp_path, {"context": {"cpu": "x"}, "benchmarks": reps + aggs}))
    assert b.order == ["BM_Step/tiny/sqrt"]
    run = b.runs["BM_Step/tiny/sqrt"]
    assert run["time_overhead"] == pytest.approx(1.20)  # the median, not the mean aggregate
    assert run["repetitions_folded"] == 3
    assert run["time_overhead_repetitions"] == [1.30, 1.10, 1.20]
    assert run["time_overhead_q1"] == 1.15 and "time_overhead_q3" not in run
    assert b.family("BM_Step") == [("tiny", "sqrt", run)]
    assert b.context == {"cpu": "x"}


def test_bench_keeps_errors_apart_and_first_context_wins(tmp_path):
    b = Bench()
    b.add_file(
        write(
            tmp_path,
            {
                "context": {"cpu": "a"},
                "benchmarks": [{"name": "BM_Step/tiny/bad", "error_occurred": True, "error_message": "refused"}],
            },
            "one.json",
        )
    )
    b.add_file(write(tmp_path, {"context": {"cpu": "b", "ckpt_mode": "release"}, "benchmarks": []}, "two.json"))
    assert b.errors == [("BM_Step/tiny/bad", "refused")]
    assert b.runs == {}
    assert b.context == {"cpu": "a", "ckpt_mode": "release"}


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"context": {}}, "no 'benchmarks' list"),
        ([1, 2], "no 'benchmarks' list"),
        ({"benchmarks": [{"run_type": "iteration"}]}, "benchmarks[0] has no name"),
    ],
)
def test_bench_refuses_what_is_not_google_benchmark_json(tmp_path, doc, message):
    with pytest.raises(BadInput, match=message.replace("[", r"\[").replace("]", r"\]")):
        Bench().add_file(write(tmp_path, doc))


def test_bench_policy_family_needs_the_context_entry(tmp_path):
    b = Bench()
    b.add_file(write(tmp_path, {"context": {"policy_family:sqrt": "segments"}, "benchmarks": []}))
    assert b.policy_family("sqrt") == "segments"
    with pytest.raises(BadInput, match="no 'policy_family:revolve' in its context"):
        b.policy_family("revolve")


def test_load_json_messages_name_the_file_and_what_is_wrong(tmp_path):
    missing = str(tmp_path / "nope.json")
    with pytest.raises(BadInput) as e:
        load_json(missing, "benchmark JSON")
    assert str(e.value) == f"benchmark JSON '{missing}': no such file"
    with pytest.raises(BadInput, match="is a directory$"):
        load_json(str(tmp_path), "verify JSON")
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": \xff}')
    with pytest.raises(BadInput, match="not UTF-8 text$"):
        load_json(str(bad), "x")
    bad.write_text('{"a": 1,\n "b": }')
    with pytest.raises(BadInput, match=r"not JSON \(Expecting value at line 2\)$"):
        load_json(str(bad), "x")
    bad.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(BadInput, match="nested too deeply$"):
        load_json(str(bad), "x")
    assert load_json(write(tmp_path, {"ok": [1]}), "x") == {"ok": [1]}


def test_load_json_refuses_past_the_size_limit(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:  # a sparse file: the size without the disk
        f.truncate(MAX_JSON_BYTES + 1)
    with pytest.raises(BadInput, match=f"more than {MAX_JSON_BYTES >> 20} MiB$"):
        load_json(str(big), "x")
    assert os.path.getsize(big) == MAX_JSON_BYTES + 1
