"""harness/adapters/common/ckpt_adapter.py: a case directory's blocks come from its manifest (every default
stated there), shares from the case; option and argument checks are BadRequest."""

import json

import numpy as np
import pytest
from ckpt_adapter import PROTOCOL, BadRequest, Block, Case, _check_options, _parse_run_args, accumulate


def case_dir(tmp_path, blocks, manifest_blocks, **manifest):
    spec = {"batch": 2, "width": 3, "loss": "mse", "blocks": blocks}
    m = {
        "protocol": PROTOCOL,
        "params": [{"name": "b0.fc.weight", "shape": [3, 3], "trains": True}],
        "state": [],
        "input": {"shape": [2, 3], "requires_grad": True},
        "blocks": manifest_blocks,
        "rrelu_range": [0.125, 0.25],
        "compute": "exact",
        "target": {"shape": [2, 3]},
    }
    m.update(manifest)
    (tmp_path / "case.json").write_text(json.dumps(spec))
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    (tmp_path / "params").mkdir(exist_ok=True)
    np.save(tmp_path / "params" / "b0.fc.weight.npy", np.eye(3))
    np.save(tmp_path / "input.npy", np.ones((2, 3)))
    np.save(tmp_path / "target.npy", np.zeros((2, 3)))
    return str(tmp_path)


def test_blocks_from_the_manifest_and_shares_from_the_case(tmp_path):
    mb = [
        {"kind": "mlp", "activation": "rrelu", "drop_path": 0},
        {"kind": "mlp", "activation": "tanh", "drop_path": 0},
        {
            "kind": "moe",
            "experts": 8,
            "top_k": 2,
            "capacity_factor": 0.5,
            "router_jitter": 0.1,
            "aux_loss_coef": 0.02,
            "drop_path": 0.25,
        },
    ]
    c = Case(case_dir(tmp_path, [{"kind": "mlp", "repeat": 2}, {"kind": "moe", "share": "b0"}], mb))
    assert c.blocks == [
        Block("mlp", 0.0, activation="rrelu"),
        Block("mlp", 0.0, activation="tanh"),
        Block("moe", 0.25, share=0, experts=8, top_k=2, capacity_factor=0.5, router_jitter=0.1, aux_loss_coef=0.02),
    ]
    assert (c.rrelu_lower, c.rrelu_upper, c.compute, c.input_grad) == (0.125, 0.25, "exact", True)
    assert c.rows == 2 and c.dtype is np.float64 and c.trained_param_names == ["b0.fc.weight"]
    mb0 = c.micro_batch(step=3, m=0)
    assert mb0.key_step == 3 and mb0.rows == slice(0, 2) and mb0.labels is None


def test_a_manifest_that_disagrees_with_the_case_is_refused(tmp_path):
    with pytest.raises(ValueError):  # two blocks in the case, one in the manifest
        Case(
            case_dir(tmp_path, [{"kind": "mlp", "repeat": 2}], [{"kind": "mlp", "activation": "gelu", "drop_path": 0}])
        )


def test_another_protocol_or_compute_is_refused(tmp_path):
    blocks = [{"kind": "mlp", "activation": "gelu", "drop_path": 0}]
    with pytest.raises(ValueError, match="protocol 2"):
        Case(case_dir(tmp_path, [{"kind": "mlp"}], blocks, protocol=2))
    with pytest.raises(ValueError, match="compute 'fp8'"):
        Case(case_dir(tmp_path, [{"kind": "mlp"}], blocks, compute="fp8"))


def test_options_and_arguments():
    caps = {"options": {"segments": {"values": "int"}, "mode": {"values": ["a", "b"]}}}
    _check_options(caps, {"segments": "-3", "mode": "b"})
    for opts, message in (
        ({"nope": "1"}, "unknown option 'nope' \\(known: mode, segments\\)"),
        ({"segments": "x"}, "must be an integer"),
        ({"mode": "c"}, "must be one of a, b"),
    ):
        with pytest.raises(BadRequest, match=message):
            _check_options(caps, opts)
    a = _parse_run_args(["--case-dir", "C", "--out-dir", "O", "--mode", "plain", "--option", "k=v=w"])
    assert a == {"case_dir": "C", "out_dir": "O", "mode": "plain", "options": {"k": "v=w"}}
    with pytest.raises(BadRequest, match="run needs --mode"):
        _parse_run_args(["--case-dir", "C", "--out-dir", "O"])
    with pytest.raises(BadRequest, match="KEY=VALUE"):
        _parse_run_args(["--option", "kv"])


def test_accumulate_keeps_the_first_part_and_none():
    assert accumulate(None, 2.0, 0) == 2.0 and accumulate(5.0, 2.0, 0) == 2.0
    assert accumulate(5.0, 2.0, 1) == 7.0 and accumulate(5.0, None, 1) == 5.0 and accumulate(None, 2.0, 1) == 2.0
