"""reports/plan_checks.py: a plan-loop.json is read into typed rows, each bad field one line naming it; the cells
mark a predicted/measured mismatch."""

import json

import pytest

from reports.plan_checks import PlanCheckRow, cells, load
from reports.report_data import BadInput

ROW = {
    "budget_label": "min",
    "budget": 1000,
    "policy": "revolve:slots=2",
    "predicted_saved_bytes": 5000,
    "measured_saved_bytes": 5000,
    "plain_saved_bytes": 9000,
    "predicted_time_overhead": 0.21,
    "measured_time_overhead": None,
}


def write(tmp_path, rows, **top):
    doc = {"format": "ckptcheck-plan-loop", "version": 1, "adapter": "torch:module=m.py:f", "rows": rows, **top}
    p = tmp_path / "plan-loop.json"
    p.write_text(json.dumps(doc))
    return str(p)


def test_rows_load_typed(tmp_path):
    adapter, rows = load(write(tmp_path, [ROW, {**ROW, "measured_saved_bytes": 5100, "plain_saved_bytes": None}]))
    assert adapter == "torch:module=m.py:f"
    assert rows[0] == PlanCheckRow("min", 1000, "revolve:slots=2", 5000, 5000, 9000, 0.21, None)
    c = cells(rows)
    assert c[0][5] == "yes" and c[1][5] == "**NO**"
    assert c[0][7] == "+21.0%" and c[0][8] == "—"
    assert c[1][6] == "—"  # no plain bytes measured
    assert c[0][9] == "—" and c[0][10] == "—"  # a plan loop written before the peak was checked


def test_peak_cells(tmp_path):
    _, rows = load(write(tmp_path, [{**ROW, "predicted_peak_bytes": 8000, "measured_peak_bytes": 9240}]))
    assert (rows[0].predicted_peak_bytes, rows[0].measured_peak_bytes) == (8000, 9240)
    assert cells(rows)[0][9:] == ["8000", "9240 (+15.5%)"]
    with pytest.raises(BadInput, match=r"rows\[0\]\.measured_peak_bytes: must be a non-negative integer or null"):
        load(write(tmp_path, [{**ROW, "measured_peak_bytes": -1}]))


def test_measured_time_shows_the_pairs_middle_half(tmp_path):
    row = {**ROW, "measured_time_overhead": 0.197, "measured_time_overhead_middle_half": [0.12, 0.305]}
    _, rows = load(write(tmp_path, [row, {**ROW, "measured_time_overhead": 0.05}]))
    assert rows[0].measured_time_overhead_middle_half == (0.12, 0.305)
    assert cells(rows)[0][8] == "+19.7% (middle half +12.0% to +30.5%)"
    assert cells(rows)[1][8] == "+5.0%"  # a loop written before the spread was recorded
    with pytest.raises(BadInput, match=r"rows\[0\]\.measured_time_overhead_middle_half: must be two numbers or null"):
        load(write(tmp_path, [{**row, "measured_time_overhead_middle_half": [0.1]}]))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"budget": -1}, r"rows\[0\]\.budget: must be a non-negative integer"),
        ({"measured_saved_bytes": True}, r"rows\[0\]\.measured_saved_bytes: must be a non-negative integer"),
        ({"policy": 3}, r"rows\[0\]\.policy: must be a string"),
        ({"predicted_time_overhead": "fast"}, r"rows\[0\]\.predicted_time_overhead: must be a number or null"),
    ],
)
def test_bad_row_field_is_named(tmp_path, change, message):
    with pytest.raises(BadInput, match=r"plan loop '.*': " + message):
        load(write(tmp_path, [{**ROW, **change}]))


def test_bad_file(tmp_path):
    with pytest.raises(BadInput, match="format/version must be"):
        load(write(tmp_path, [ROW], version=2))
    with pytest.raises(BadInput, match="needs an adapter and a non-empty rows array"):
        load(write(tmp_path, []))
