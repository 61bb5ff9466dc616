"""The ckptcheck package's parts that need no CLI run: factories named as module file and function (and refused
when they have no such name), the CLI's environment, and the results read from a validate.json."""

import os
import sys
from pathlib import Path

import pytest

import ckptcheck
from ckptcheck import _cli


def module_level_factory(seed):
    return {}


def test_a_module_level_function_is_its_file_and_name():
    assert ckptcheck.factory_spec(module_level_factory) == "%s:module_level_factory" % os.path.abspath(__file__)


def _make_factory():
    def made(seed):
        return {}

    return made


module_level_closure = _make_factory()


def test_a_closure_a_module_level_name_holds_is_that_name():
    # as examples/jax/scan_mlp.py's `nothing_saveable = _policy("nothing_saveable")`
    assert ckptcheck.factory_spec(module_level_closure).endswith(".py:module_level_closure")


def test_a_path_is_passed_as_given():
    assert ckptcheck.factory_spec("models/net.py:factory") == "models/net.py:factory"
    assert ckptcheck.factory_spec(Path("models/net.py")) == "models/net.py"


def test_a_lambda_is_refused_in_one_line():
    with pytest.raises(
        ckptcheck.FactoryError,
        match="the factory is a lambda that no module-level name holds: .* define it with def at the top level",
    ):
        ckptcheck.factory_spec(lambda seed: {})


def test_a_closure_is_refused_naming_it():
    def inner(seed):
        return {}

    with pytest.raises(
        ckptcheck.FactoryError,
        match=r"test_a_closure_is_refused_naming_it.<locals>.inner is a closure that no module-level name holds",
    ):
        ckptcheck.factory_spec(inner)


def test_a_callable_object_is_refused():
    with pytest.raises(ckptcheck.FactoryError, match="module-level function .* not builtin_function_or_method"):
        ckptcheck.factory_spec(len)


def test_a_rebound_name_is_refused():
    global module_level_factory
    original = module_level_factory
    module_level_factory = lambda seed: {}  # noqa: E731
    try:
        with pytest.raises(ckptcheck.FactoryError, match="is not the function given"):
            ckptcheck.factory_spec(original)
    finally:
        module_level_factory = original


def test_the_environment_names_this_python_and_keeps_what_is_set():
    env = _cli.environment({"PATH": "/bin"})
    assert env["CKPT_PYTHON"] == sys.executable
    assert _cli.environment({"CKPT_PYTHON": "/opt/py"})["CKPT_PYTHON"] == "/opt/py"


def test_a_missing_cli_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("CKPT_BINARY", str(tmp_path / "nowhere"))
    with pytest.raises(ckptcheck.CkptcheckNotFound, match="nowhere: install the package with pip"):
        _cli.binary()


FINDING = {
    "kind": "user-model",
    "adapter": "torch:module=/m/mlp.py:rng_not_preserved",
    "result": "finding",
    "findings": [
        {"check": "bitwise", "seed": 1, "step": 0, "tensor": "grad blocks.0.fc1.weight", "class": "rng-desync"}
    ],
    "seeds": [
        {
            "seed": 1,
            "steps": 1,
            "batch_size": 64,
            "status": "finding",
            "bitwise": "finding",
            "dir": "/w/seed1",
            "first_difference": {
                "step": 0,
                "tensor": "grad blocks.0.fc1.weight",
                "count": 2048,
                "ulp_distance": 31,
                "max_ulp_distance": 900,
                "expected": "0.5",
                "actual": "0.25",
                "first_index": 3,
            },
            "differing_tensors": 9,
            "diagnosis": {"class": "rng-desync", "why": "the generator state differs"},
            "memory": {
                "result": "holds",
                "plain_bytes": 200,
                "checkpoint_bytes": 50,
                "saving": 0.75,
                "profiler": {"activation_saving": 0.7},
            },
            "replay": "ckptcheck validate --adapter torch:module=/m/mlp.py:rng_not_preserved --seed 1 --seeds 1",
        }
    ],
}


def test_a_finding_reads_as_module_ulp_class_and_replay():
    r = ckptcheck.ValidateResult.from_json(FINDING, "SUMMARY TEXT\n", Path("validate.json"))
    assert not r.holds and r.verdict == "finding"
    d = r.first_difference
    assert (d.kind, d.module, d.ulp_distance, d.count) == ("grad", "blocks.0.fc1", 31, 2048)
    assert r.finding_class == "rng-desync" and r.memory.saving == 0.75 and r.memory.holds
    assert r.message().splitlines() == [
        "ckptcheck: torch:module=/m/mlp.py:rng_not_preserved: finding -- grad blocks.0.fc1.weight at step 0, "
        "module 'blocks.0.fc1': 2048 element(s) differ, 31 ulp; class rng-desync",
        "replay: ckptcheck validate --adapter torch:module=/m/mlp.py:rng_not_preserved --seed 1 --seeds 1",
        "",
        "SUMMARY TEXT",
    ]


def test_the_shrunk_case_is_the_one_reported():
    shrunk = dict(FINDING["seeds"][0], batch_size=1, replay="ckptcheck validate ... --batch-size 1")
    r = ckptcheck.ValidateResult.from_json(dict(FINDING, shrunk=shrunk), "", Path("validate.json"))
    assert r.replay == "ckptcheck validate ... --batch-size 1" and r.shrunk.batch_size == 1


def fake_cli(tmp_path, exit_code, report=None, stderr=""):
    """A stand-in for the CLI (CKPT_BINARY): records its arguments, writes `report` as OUT/validate.json."""
    import json

    script = tmp_path / "fake-ckptcheck"
    script.write_text(
        "#!%s\nimport json, sys\nargs = sys.argv[1:]\nopen(%r, 'w').write(json.dumps(args))\n"
        "report = %r\nif report is not None:\n    out = args[args.index('--out') + 1]\n"
        "    open(out + '/validate.json', 'w').write(report)\nprint('SUMMARY')\nsys.stderr.write(%r)\nsys.exit(%d)\n"
        % (sys.executable, str(tmp_path / "args.json"), json.dumps(report) if report else None, stderr, exit_code)
    )
    script.chmod(0o755)
    return script


def test_validate_passes_its_options_and_reads_the_report(monkeypatch, tmp_path):
    import json

    monkeypatch.setenv("CKPT_BINARY", str(fake_cli(tmp_path, 1, FINDING)))
    out = tmp_path / "out"
    out.mkdir()
    r = ckptcheck.validate_torch(module_level_factory, seeds=3, batch_size=4, shrink=False, out=out)
    args = json.loads((tmp_path / "args.json").read_text())
    assert args == [
        "validate",
        "--adapter",
        "torch:module=%s:module_level_factory" % os.path.abspath(__file__),
        "--out",
        str(out),
        "--seeds",
        "3",
        "--steps",
        "2",
        "--batch-size",
        "4",
        "--no-shrink",
    ]
    assert r.verdict == "finding" and r.summary == "SUMMARY\n" and r.report == out / "validate.json"
    with pytest.raises(AssertionError, match="module 'blocks.0.fc1': 2048 element"):
        ckptcheck.assert_checkpoint_equivalent(module_level_factory, framework="jax", out=out)
    assert json.loads((tmp_path / "args.json").read_text())[2].startswith("jax:module=")


def test_bad_input_raises_with_the_cli_line(monkeypatch, tmp_path):
    monkeypatch.setenv("CKPT_BINARY", str(fake_cli(tmp_path, 2, stderr="ckptcheck: error: --steps 0 is not >= 1\n")))
    with pytest.raises(ckptcheck.CkptcheckError, match=r"exit 2: ckptcheck: error: --steps 0 is not >= 1") as e:
        ckptcheck.validate_torch("m.py:f", steps=0, out=tmp_path)
    assert e.value.exit_code == 2
