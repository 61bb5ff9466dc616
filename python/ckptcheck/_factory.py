"""A factory given as a function object becomes the `PATH.py:NAME` the CLI takes.

The CLI runs the factory in processes of its own (the plain and checkpointed runs, each measuring pass), which
import the factory's module file and look the factory up by name. So a factory must be a module-level `def`: a
lambda, a closure or a method has no name there, and is refused here with one line saying so.
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
    name, qualname = factory.__name__, factory.__qualname__
    if name == "<lambda>":
        raise FactoryError(
            "the factory is a lambda: ckptcheck imports the factory by name from its module file in processes of "
            "its own, so define it with def at the top level of a module"
        )
    if qualname != name:
        raise FactoryError(
            "the factory %s is defined inside a function or class (a closure or method): ckptcheck imports the "
            "factory by name from its module file in processes of its own, so define it at the top level of a module"
            % qualname
        )
    path = inspect.getsourcefile(factory)
    if path is None or not path.endswith(".py") or not os.path.isfile(path):
        raise FactoryError("the factory %s has no module file (.py) that ckptcheck could import" % name)
    module = sys.modules.get(factory.__module__)
    if module is not None and getattr(module, name, None) is not factory:
        raise FactoryError(
            "%s.%s is not the function given (rebound or decorated after its def): pass 'file.py:name' instead"
            % (factory.__module__, name)
        )
    return "%s:%s" % (os.path.abspath(path), name)
