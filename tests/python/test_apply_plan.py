"""harness/user_model/torch/apply_plan.py: a placement file is checked field by field (one line naming the field) and
its segments must cover the chain in order."""

import json

import pytest

pytest.importorskip("torch")
from apply_plan import BadPlacement, check_segments, load_placement  # noqa: E402


def seg(first, last, recompute=True):
    return {"first": first, "last": last, "recompute": recompute}


def test_segments_cover_in_order():
    check_segments([seg(0, 1), seg(2, 2, False), seg(3, 4)], 5)
    with pytest.raises(BadPlacement, match=r"segments\[1\]: \[3, 4\] does not continue the cover at block 2"):
        check_segments([seg(0, 1), seg(3, 4)], 5)
    with pytest.raises(BadPlacement, match=r"segments\[0\]: \[2, 1\]"):
        check_segments([seg(2, 1)], 3)
    with pytest.raises(BadPlacement, match=r"cover blocks 0\.\.3, the chain has 5"):
        check_segments([seg(0, 3)], 5)


def write(tmp_path, doc):
    p = tmp_path / "placement.json"
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(p)


GOOD = {
    "format": "ckptcheck-placement",
    "version": 1,
    "blocks": ["h.0", "h.1", "h.2"],
    "segments": [seg(0, 1), seg(2, 2, False)],
}


def test_good_placement_loads(tmp_path):
    assert load_placement(write(tmp_path, GOOD)) == GOOD


@pytest.mark.parametrize(
    "change, message",
    [
        ({"format": "ckptcheck-plans"}, 'format: must be "ckptcheck-placement"'),
        ({"version": 2}, "version: must be 1"),
        ({"blocks": []}, "blocks: must be a non-empty array of strings"),
        ({"blocks": ["a", 3]}, "blocks: must be a non-empty array of strings"),
        ({"segments": {}}, "segments: must be an array"),
        ({"segments": [3]}, r"segments\[0\]: must be an object"),
        ({"segments": [{"first": -1, "last": 2, "recompute": True}]}, r"segments\[0\]\.first: must be a non-negative"),
        ({"segments": [{"first": 0, "last": True, "recompute": True}]}, r"segments\[0\]\.last: must be a non-negative"),
        ({"segments": [{"first": 0, "last": 2, "recompute": 1}]}, r"segments\[0\]\.recompute: must be a bool"),
        ({"segments": [seg(0, 1)]}, "cover blocks 0..1, the chain has 3"),
    ],
)
def test_bad_field_is_named(tmp_path, change, message):
    with pytest.raises(BadPlacement, match="placement.json: .*" + message):
        load_placement(write(tmp_path, {**GOOD, **change}))


def test_unreadable_files(tmp_path):
    with pytest.raises(BadPlacement, match="cannot read"):
        load_placement(str(tmp_path / "missing.json"))
    with pytest.raises(BadPlacement, match="cannot read"):
        load_placement(write(tmp_path, "{ not json"))
    with pytest.raises(BadPlacement, match="top level: must be an object"):
        load_placement(write(tmp_path, "[1]"))
    with pytest.raises(BadPlacement, match="cannot read"):
        load_placement(write(tmp_path, "[" * 100000))
