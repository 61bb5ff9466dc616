"""reports/baseline.py: a time overhead is a regression only beyond both runs' spread; exact counters are exact;
a baseline that is not a runs file is one line of bad input."""

import json

import pytest

from reports import baseline
from reports.report_data import BadInput


def run(time, reps, **exact):
    r = {
        "case": "tiny",
        "policy": "sqrt",
        "peak_activation_bytes": 100,
        "forward_evals": 6,
        "flops_forward": 10,
        "flops_recompute": 5,
        "flops_backward": 20,
        "time_overhead": time,
        "time_overhead_repetitions": reps,
    }
    r.update(exact)
    return r


def test_slower_only_beyond_twice_the_larger_spread():
    old = run(0.20, [0.19, 0.20, 0.21])  # spread 0.02
    wide = run(0.26, [0.20, 0.26, 0.30])  # spread 0.10: +0.06 is within 2 x 0.10
    assert not baseline.Change(old, wide, same_cpu=True).time_slower
    tight = run(0.26, [0.25, 0.26, 0.27])  # spread 0.02: +0.06 is beyond 2 x 0.02
    c = baseline.Change(old, tight, same_cpu=True)
    assert c.time_slower and c.changed and not c.time_faster
    assert c.regressions == ["time overhead +20.0% -> +26.0% (+6.0 points; spreads 2.0 and 2.0 points)"]
    faster = baseline.Change(tight, old, same_cpu=True)
    assert faster.time_faster and faster.changed and faster.regressions == []


def test_time_not_judged_on_another_cpu_or_too_few_repetitions():
    old, new = run(0.20, [0.20, 0.20, 0.20]), run(0.90, [0.90, 0.90, 0.90])
    assert not baseline.Change(old, new, same_cpu=False).time_judged
    few = run(0.90, [0.90, 0.90])
    c = baseline.Change(old, few, same_cpu=True)
    assert len(few["time_overhead_repetitions"]) < baseline.MIN_REPETITIONS
    assert not c.time_judged and not c.time_slower and not c.changed


def test_exact_counters_regress_on_any_increase_and_change_on_any_decrease():
    old = run(0.2, [0.2] * 3)
    more = baseline.Change(old, run(0.2, [0.2] * 3, peak_activation_bytes=101), same_cpu=True)
    assert len(more.regressions) == 1 and more.regressions[0].startswith("peak activation ")
    less = baseline.Change(old, run(0.2, [0.2] * 3, forward_evals=5), same_cpu=True)
    assert less.changed and less.regressions == []


def write_runs(tmp_path, doc):
    (tmp_path / baseline.FILE).write_text(json.dumps(doc))
    return str(tmp_path)


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"format": "other", "version": 1, "runs": []}, 'not a "ckptcheck-runs" file \\(format "other"\\)'),
        ({"format": "ckptcheck-runs", "version": 2, "runs": []}, "version 2, this report reads version 1"),
        ({"format": "ckptcheck-runs", "version": True, "runs": []}, "version true"),
        ({"format": "ckptcheck-runs", "version": 1, "runs": {}}, "'runs' must be a list"),
        ({"format": "ckptcheck-runs", "version": 1, "runs": [{"case": "tiny"}]}, "runs\\[0\\]: needs a string case"),
        (
            {"format": "ckptcheck-runs", "version": 1, "runs": [dict(run(0.1, [0.1]), forward_evals=-1)]},
            "runs\\[0\\].forward_evals: must be a non-negative integer",
        ),
        (
            {
                "format": "ckptcheck-runs",
                "version": 1,
                "runs": [dict(run(0.1, [0.1]), time_overhead_repetitions=[True])],
            },
            "time_overhead_repetitions a list of numbers",
        ),
        ({"format": "ckptcheck-runs", "version": 1, "runs": [], "context": []}, "'context' must be an object"),
    ],
)
def test_load_refuses_bad_baselines_in_one_line(tmp_path, doc, message):
    with pytest.raises(BadInput, match=message) as e:
        baseline.load(write_runs(tmp_path, doc))
    assert "\n" not in str(e.value) and str(e.value).startswith("baseline '")


def test_load_names_a_directory_without_runs_json(tmp_path):
    with pytest.raises(BadInput, match="no runs.json"):
        baseline.load(str(tmp_path))
    doc = baseline.load(write_runs(tmp_path, {"format": "ckptcheck-runs", "version": 1, "runs": [run(0.1, [0.1])]}))
    assert doc["path"].endswith("runs.json") and len(doc["runs"]) == 1
