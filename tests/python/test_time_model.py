"""reports/time_model.py: the time model's headline counts every predicted row, and apart the rows that are
predictions (not store-all or full recomputation, the calibration schedules of bench/time_model.h)."""

from reports.report_data import StepRow
from reports.time_model import time_model_headline, time_model_tax


def row(policy, measured, predicted, layers=4):
    e = {
        "layers": layers,
        "peak_activation_bytes": 100,
        "store_all_peak_activation_bytes": 200,
        "forward_evals": layers,
        "flops_forward": 10,
        "flops_recompute": 0,
        "flops_backward": 20,
        "flop_overhead": 0.0,
        "time_overhead": 1.0 + measured,
        "predicted_time_overhead": predicted,
        "label": "c " + policy,
    }
    return StepRow.from_entry("c", policy, e, policy.split(":")[0])


def test_headline_counts_every_row_and_the_predictions_alone():
    rows = [
        row("store-all", 0.01, 0.0),  # within
        row("uniform:k=4", 0.20, 0.10),  # full recomputation (k = layers): a calibration row, outside
        row("uniform:k=2", 0.12, 0.10),  # within
        row("recursive", 0.30, 0.45),  # outside, the worst
    ]
    assert [round(time_model_tax(r), 6) for r in rows] == [0.01, 0.1, 0.02, -0.15]
    line = time_model_headline({"c": rows})
    assert "within ±0.03 on 2 of 4 case × policy runs (1 of 2 without the calibration schedules' own rows)" in line
    assert "worst -0.150 (c, recursive)" in line
    assert "Of the 2 outside" not in line  # no recompute share: no split


def test_headline_is_none_without_predictions():
    r = row("uniform:k=2", 0.1, 0.0)
    r.predicted_time_overhead = None
    assert time_model_headline({"c": [r]}) is None
