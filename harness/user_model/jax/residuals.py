"""What a JAX training step keeps for its backward pass, two ways (harness/user_model/jax/USER_MODEL.md, "Memory"):

- saved residuals: what JAX's autodiff saves from the forward for the backward (the list print_saved_residuals
  prints), in bytes, each residual with its source; the function's own arguments (parameters, batch, state) are
  left out, as they live anyway. This is what remat decides, and what --min-saving holds.
- compiled memory: XLA's memory analysis of the compiled step (temp, argument, output bytes), which is what the
  compiler kept: on the CPU backend a straight-line remat may be merged back by the compiler, so its temp bytes
  need not drop while the saved residuals do.

Both are traces and a compile, never a run of the model: the caller measures after its dumped steps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

try:
    from jax._src.ad_checkpoint import saved_residuals  # private: the only way to read residual sizes
except ImportError:  # pragma: no cover
    saved_residuals = None

TOP_SOURCES = 8


def residual_bytes(fn: Callable[..., Any], args: Sequence[Any]) -> tuple[int | None, list[tuple[int, str]]]:
    """(total bytes, [(bytes, source)] largest first) of what fn's backward reads, arguments excluded."""
    if saved_residuals is None:
        return None, []
    by_source = {}
    for aval, why in saved_residuals(lambda *a: fn(*a)[0], *args):
        if "argument" in why:
            continue
        nbytes = int(np.prod(aval.shape, dtype=np.int64)) * np.dtype(aval.dtype).itemsize
        key = " ".join(why.split())
        by_source[key] = by_source.get(key, 0) + nbytes
    ranked = sorted(((b, s) for s, b in by_source.items()), key=lambda t: (-t[0], t[1]))
    return sum(by_source.values()), ranked


HLO_OPS = ("dot", "convolution", "reduce", "fusion", "while", "rng-bit-generator")


def hlo_op_counts(text: str) -> dict[str, int]:
    """How many instructions of each kind the optimised HLO holds: a remat the compiler merged back has as many
    matrix products as the plain program; one that survived has more."""
    counts = {op: 0 for op in HLO_OPS}
    for line in text.splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][\w\-]*)\(", line)
        if m and m.group(1) in counts:
            counts[m.group(1)] += 1
    return counts


def compiled_figures(compiled: Any) -> dict[str, Any] | None:
    """XLA's memory analysis of a compiled program (temp, argument, output, alias bytes) and its HLO op counts."""
    stats = compiled.memory_analysis()
    if stats is None:
        return None
    out = {k: int(getattr(stats, k + "_size_in_bytes", 0)) for k in ("temp", "argument", "output", "alias")}
    out["hlo_ops"] = hlo_op_counts(compiled.as_text() or "")
    return out


def compiled_memory(step_fn: Any, args: Sequence[Any]) -> dict[str, Any] | None:
    """compiled_figures of the jitted `step_fn` lowered and compiled at these arguments."""
    return compiled_figures(step_fn.lower(*args).compile())


def measure(objective: Callable[..., Any], compiled: Any, objective_args: Sequence[Any]) -> dict[str, Any]:
    """The saved residuals of `objective` at these arguments and the compiled step's figures."""
    total, ranked = residual_bytes(objective, objective_args)
    return {
        "saved_activation_bytes": total,
        "saved_residuals": [{"bytes": b, "source": s} for b, s in ranked[:TOP_SOURCES]],
        "saved_residual_count": len(ranked),
        "compiled_memory": compiled_figures(compiled),
    }
