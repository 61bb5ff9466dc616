"""The numpy adapter's stochastic depth and RReLU (PROTOCOL.md, "Stochastic depth, RReLU, bf16"; the reference's
semantics in reference/ops/drop_path.h and rrelu.h; bf16 compute is the operand rounding of np_env.py).

Both random ops draw from the adapter's own generator (`env.rng`: the stateful stream in execution order, or a
counter-based draw keyed by the op), so their numbers need not match ckptcheck's; what checkpointing must keep is
that a recompute draws the same numbers as the first forward, which the restored generator gives. Backward uses
what the forward saved: the per-sample scales of drop_path, the per-element slopes of RReLU.
"""

from __future__ import annotations

import numpy as np
from np_env import Array, Env


def drop_path_uniforms(env: Env, samples: int, key: int) -> Array:
    """One uniform per sample from the adapter's generator (a recompute's is the restored one)."""
    return env.rng.uniform((samples,), key)


def drop_path(x: Array, p: float, seq: int, env: Env, key: int) -> tuple[Array, Array | None]:
    """timm's DropPath on x viewed as (samples, seq, width): sample s kept iff u_s > p (as the reference), scaled by
    1/(1-p).
    Returns the output and the per-sample scales (samples, 1, 1) backward needs (None when p == 0)."""
    if p == 0:
        return x, None
    dt = x.dtype.type
    samples = x.shape[0] // seq
    u = drop_path_uniforms(env, samples, key)
    scale = ((u > p).astype(x.dtype) * (dt(1) / (dt(1) - dt(p)))).reshape(samples, 1, 1)
    return (x.reshape(samples, seq, -1) * scale).reshape(x.shape), scale


def drop_path_back(scale: Array | None, dy: Array) -> Array:
    """dL/dx of drop_path: dy times the saved per-sample scale (dy as it is when nothing was dropped)."""
    if scale is None:
        return dy
    return (dy.reshape(scale.shape[0], -1, dy.shape[1]) * scale).reshape(dy.shape)


def rrelu_uniforms(env: Env, shape: tuple[int, ...], key: int) -> Array:
    """One uniform per element, whatever its sign (as the reference draws)."""
    return env.rng.uniform(shape, key)


def rrelu(h: Array, lower: float, upper: float, env: Env, key: int) -> tuple[Array, Array]:
    """Training-mode RReLU: a negative element times a slope uniform in [lower, upper]; returns the output and
    the noise (slope where h <= 0, else 1) backward multiplies by."""
    dt = h.dtype.type
    u = rrelu_uniforms(env, h.shape, key)
    slope = (lower + (upper - lower) * u).astype(h.dtype)
    noise = np.where(h <= dt(0), slope, dt(1))
    return h * noise, noise
