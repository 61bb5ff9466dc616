"""What every block of the numpy adapter reads besides its input (np_blocks.py, np_moe.py, np_stochastic.py): the
array aliases, Env (the case, the generator, the step, whether state moves, the operand rounding) and a block's
Params. It imports no other module of the adapter, so the block modules name these types without importing each
other.

bf16 compute (PROTOCOL.md, "Stochastic depth, RReLU, bf16"; the reference's roundToBf16 in reference/op.h) rounds
the operands of every matrix product in a block to bfloat16 (round to nearest even, on the float32 bits) and
accumulates in float32, as the reference does; the backward rounds the forward's operands again (never the
incoming gradient), so it differentiates the function the forward computed. Env.rd is that rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ckpt_adapter import Case
    from np_rng import Rng

Array = np.ndarray
Arrays = dict[str, np.ndarray]  # parameters, gradients or state by name
Tape = tuple[Any, ...]  # what a forward keeps for its backward
Rounding = Callable[[Array], Array]  # a matrix product's operand rounding (exact or to_bf16)


def to_bf16(a: Array) -> Array:
    """float32 -> the nearest bfloat16 value (ties to even), kept as float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = (u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)
    return r.astype(np.uint32).view(np.float32).reshape(np.shape(a))


def exact(a: Array) -> Array:
    """The operand as it is (compute exact)."""
    return a


def rounding(case: Case, update_state: bool) -> Rounding:
    """The operand rounding of a forward (first or recompute) of this case. `update_state` is False for a
    recompute, which a broken scheme may run otherwise (tests/adapters/faulty_adapter.py)."""
    return to_bf16 if case.compute == "bf16" else exact


class Env:
    """What a block's forward reads besides its input: the case, the generator, the step, whether state moves."""

    def __init__(self, case: Case, rng: Rng, step: int, update_state: bool, calls: list[int]) -> None:
        self.case = case
        self.rng = rng
        self.step = step
        self.update_state = update_state
        self.calls = calls
        self.rd = rounding(case, update_state)  # matmul operands: bf16-rounded under compute bf16
        self.case_state: Arrays | None = None  # the case's state (BatchNorm, MoE buffers), set by the pass


class Params:
    """One block's view of the parameters and gradients: its prefix (its owner's, for a sharing block) added."""

    def __init__(self, values: Arrays, grads: Arrays, prefix: str) -> None:
        self.v, self.g, self.p = values, grads, prefix

    def __getitem__(self, name: str) -> Array:
        """The block's parameter `name`."""
        return self.v[self.p + name]

    def grad(self, name: str) -> Array:
        """The gradient array of the block's parameter `name`, accumulated into in place."""
        return self.g[self.p + name]
