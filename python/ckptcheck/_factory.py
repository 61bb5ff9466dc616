"""A factory given as a function object becomes the `PATH.py:NAME` the CLI takes.

The CLI runs the factory in processes of its own (the plain and checkpointed runs, each measuring pass), which
import the factory's module file and look the factory up by name. So a factory must be a function a module-level
name holds (a `def` at the top level, or a closure a module-level assignment made): a lambda, a closure or a
method that no such name holds is refused here with one line saying so.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any, Callable, Union

Factory = Union[Callable[..., Any], str, "os.PathLike[str]"]


class FactoryError(ValueError):
    """The factory cannot be named as a module file and a function in it."""


def factory_spec(factory: Factory) -> str:
    """`PATH.py:NAME` for a module-level function; a string or path is taken as the CLI takes it (PATH.py[:NAME])."""
    if isinstance(factory, (str, os.PathLike)):
        return os.fspath(factory)
    if not inspect.isfunction(factory):
        raise FactoryError(
            "a factory is a module-level function (def) or 'file.py:name', not %s" % type(factory).__name__
        )
    name = _module_level_name(factory)
    if name is None:
        if factory.__name__ == "<lambda>":
            raise FactoryError(
                "the factory is a lambda that no module-level name holds: ckptcheck imports the factory by name from "
                "its module file in processes of its own, so define it with def at the top level of a module"
            )
        if "<locals>" in factory.__qualname__:
            raise FactoryError(
                "the factory %s is a closure that no module-level name holds: ckptcheck imports the factory by name "
                "from its module file in processes of its own, so define it at the top level of a module"
                % factory.__qualname__
            )
        raise FactoryError(
            "%s.%s is not the function given (a method, or rebound or decorated after its def): pass 'file.py:name'"
            % (factory.__module__, factory.__qualname__)
        )
    path = inspect.getsourcefile(factory)
    if path is None or not path.endswith(".py") or not os.path.isfile(path):
        raise FactoryError("the factory %s has no module file (.py) that ckptcheck could import" % name)
    return "%s:%s" % (os.path.abspath(path), name)


def _module_level_name(factory: Callable[..., Any]) -> str | None:
    """The name its module binds the factory to: its own name, else any (a closure a module-level call returned,
    e.g. `nothing_saveable = _policy("nothing_saveable")`); None when no module-level name holds it."""
    module = sys.modules.get(factory.__module__)
    if module is None:
        return None
    if getattr(module, factory.__name__, None) is factory:
        return factory.__name__
    return next((k for k, v in vars(module).items() if v is factory and not k.startswith("__")), None)
