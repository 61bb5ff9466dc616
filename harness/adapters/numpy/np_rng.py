"""The numpy adapter's generators (the case's `rng`, PROTOCOL.md): stateful, one numpy Philox generator seeded from the
case and advanced by every draw in execution order (PyTorch-like); counter, each draw a pure function of (seed,
step, block, op) through its own Philox key (JAX-like), so a recompute needs no snapshot."""

from __future__ import annotations

from typing import Any

import numpy as np

Array = np.ndarray


class StatefulRng:
    """One Philox stream, advanced by every random op in execution order."""

    def __init__(self, seed: int | None = None, state: dict[str, Any] | None = None) -> None:
        self.bits = np.random.Philox(key=seed if seed is not None else 0)
        if state is not None:
            self.bits.state = state
        self.gen = np.random.Generator(self.bits)

    def uniform(self, shape: tuple[int, ...], op_key: int) -> Array:
        """The next uniforms in [0, 1) of `shape` (op_key unused: the stream's order decides)."""
        return self.gen.random(shape)

    def snapshot(self) -> dict[str, Any]:
        """The generator's state, to restore a copy from for a recompute."""
        return self.bits.state  # a fresh dict of copies

    def restored(self, snapshot: dict[str, Any]) -> StatefulRng:
        """A new generator at `snapshot` (this one is left where it is)."""
        return StatefulRng(state=snapshot)

    def state_bytes(self) -> bytes:
        """The state as bytes, little-endian words, for the reported generator state."""
        s = self.bits.state
        words = np.concatenate(
            [
                s["state"]["counter"],
                s["state"]["key"],
                s["buffer"],
                np.array([s["buffer_pos"], s["has_uint32"], s["uinteger"]], dtype=np.uint64),
            ]
        )
        return words.astype("<u8").tobytes()


class CounterRng:
    """Masks as a pure function of (seed, op key); nothing to snapshot."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def uniform(self, shape: tuple[int, ...], op_key: int) -> Array:
        """Uniforms in [0, 1) of `shape` from the Philox key (seed, op_key)."""
        return np.random.Generator(np.random.Philox(key=(self.seed << 64) | op_key)).random(shape)

    def snapshot(self) -> None:
        """Nothing: a counter generator has no state."""
        return None

    def restored(self, snapshot: None) -> CounterRng:
        """This generator (it has no state to restore)."""
        return self

    def state_bytes(self) -> None:
        """None: no generator state to report."""
        return None


Rng = StatefulRng | CounterRng
