"""The pytest plugin (entry point pytest11, active wherever the package is installed).

    @pytest.mark.ckptcheck(my_module.factory, seeds=1, steps=2)
    def test_checkpointing():
        pass

runs ckptcheck.assert_checkpoint_equivalent(factory, **kwargs) before the test's body, in a folder of its own under
the test's tmp_path (so pytest-xdist workers never share one), and fails the test with ckptcheck's finding as the
assertion message. In a test body, call ckptcheck.assert_checkpoint_equivalent(factory, out=tmp_path) directly.
JUnit output is pytest's own (--junitxml): the message is the failure's text.
"""

from __future__ import annotations

from typing import Any

import pytest

from ._api import assert_checkpoint_equivalent

MARKER = "ckptcheck"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "ckptcheck(factory, framework='torch', seeds=1, steps=2, **options): fail the test unless ckptcheck finds "
        "the factory's checkpointed training equal to its plain training (ckptcheck.assert_checkpoint_equivalent)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A marked test gets a tmp_path even if it does not ask for one: the run's folder goes there.
    for item in items:
        if item.get_closest_marker(MARKER) is not None and isinstance(item, pytest.Function):
            if "tmp_path" not in item.fixturenames:
                item.fixturenames.append("tmp_path")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    __tracebackhide__ = True
    marker = item.get_closest_marker(MARKER)
    if marker is None or not isinstance(item, pytest.Function):
        return
    if len(marker.args) != 1:
        raise pytest.UsageError("@pytest.mark.ckptcheck takes one positional argument, the factory (%s)" % item.nodeid)
    kwargs: dict[str, Any] = dict(marker.kwargs)
    kwargs.setdefault("out", item.funcargs["tmp_path"] / "ckptcheck")
    assert_checkpoint_equivalent(marker.args[0], **kwargs)
