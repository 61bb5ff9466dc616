"""A user's test file, as docs/python.md shows it: one ckptcheck test per checkpointing setup of examples/torch/mlp.py.
tests/wheel/wheel_install_test.py runs it with pytest in a fresh venv where the package was pip-installed; the first
test must pass, the second fail with ckptcheck's finding as its message."""

import os
import sys

import pytest

import ckptcheck

sys.path.insert(0, os.environ["CKPT_EXAMPLES"])
from mlp import correct, rng_not_preserved  # noqa: E402


@pytest.mark.ckptcheck(correct, seeds=1, steps=2)
def test_correct_checkpointing():
    pass


def test_rng_not_preserved(tmp_path):
    ckptcheck.assert_checkpoint_equivalent(rng_not_preserved, seeds=1, steps=1, out=tmp_path)
