"""reports/costs_report.load: a plans file is checked field by field; each bad field is one line naming it."""

import copy
import json

import pytest

from reports import costs_report
from reports.report_data import BadInput

GOOD = "tests/data/costs-report/gpt2_plans.json"


def good():
    with open(GOOD) as f:
        return json.load(f)


def test_the_shipped_plans_load():
    p = costs_report.load(GOOD)
    assert p.layers >= 1 and p.policies and p.frontier
    assert [f.budget for f in p.frontier] == sorted(f.budget for f in p.frontier)
    best, exact = p.optimal_at(p.frontier[0].budget)
    assert best is p.frontier[0] and exact
    assert p.optimal_at(p.frontier[0].budget - 1) == (None, False)


def mutate(doc, path, value):
    d = copy.deepcopy(doc)
    target = d
    for k in path[:-1]:
        target = target[k]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return d


@pytest.mark.parametrize(
    "path, value, message",
    [
        (
            ("format",),
            "ckptcheck-chain-costs",
            'format: must be "ckptcheck-costs-plans", not "ckptcheck-chain-costs" '
            r"\(this is a chain-costs file",
        ),
        (("version",), 2, "version: must be 1, not 2"),
        (("version",), True, "version: must be 1, not true"),
        (("layers",), 0, "layers: must be an integer >= 1"),
        (("batch_size",), KeyError, "batch_size: missing"),
        (("store_all_peak_bytes",), -1, "store_all_peak_bytes: must be a non-negative integer"),
        (("budget",), "x", "budget: must be a non-negative integer or null"),
        (("policies",), {}, "policies: must be"),
    ],
)
def test_bad_fields_are_named(tmp_path, path, value, message):
    p = tmp_path / "plans.json"
    p.write_text(json.dumps(mutate(good(), path, value)))
    with pytest.raises(BadInput, match=f"^costs plans '{p}': " + message) as e:
        costs_report.load(str(p))
    assert "\n" not in str(e.value)


def test_not_an_object_and_not_json(tmp_path):
    p = tmp_path / "plans.json"
    p.write_text("[]")
    with pytest.raises(BadInput, match="not a JSON object$"):
        costs_report.load(str(p))
    with pytest.raises(BadInput, match="no such file$"):
        costs_report.load(str(tmp_path / "missing.json"))
    with pytest.raises(BadInput, match="negative"):
        costs_report.load("tests/data/costs-report/bad_negative.json")
