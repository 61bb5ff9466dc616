"""ckptcheck from Python: validate a model's gradient checkpointing, plan it, and assert it in a test.

    import ckptcheck
    r = ckptcheck.validate_torch(my_module.factory, seeds=2, steps=2)
    r.verdict, r.first_difference, r.finding_class, r.memory, r.replay

Each call runs the installed `ckptcheck` CLI (docs/python.md says why not bindings) and returns its report as a
typed result. The pytest plugin (ckptcheck.pytest_plugin, registered on install) adds the `ckptcheck` marker.
"""

from ._api import (
    CkptcheckError,
    ValidateOptions,
    assert_checkpoint_equivalent,
    plan,
    profile_torch,
    validate,
    validate_jax,
    validate_torch,
)
from ._cli import CkptcheckNotFound
from ._factory import FactoryError, factory_spec
from ._results import Difference, Memory, PlanResult, SeedResult, ValidateResult

__all__ = [
    "CkptcheckError",
    "CkptcheckNotFound",
    "Difference",
    "FactoryError",
    "Memory",
    "PlanResult",
    "SeedResult",
    "ValidateResult",
    "assert_checkpoint_equivalent",
    "factory_spec",
    "plan",
    "profile_torch",
    "ValidateOptions",
    "validate",
    "validate_jax",
    "validate_torch",
]
