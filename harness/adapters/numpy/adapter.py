#!/usr/bin/env python3
"""numpy adapter: an independent re-implementation of ckptcheck's model (reference/blocks.h) in numpy, with its
own segment checkpointing and generator snapshot/restore. It is the template for other adapters
(harness/adapters/PROTOCOL.md) and the control case of `ckptcheck validate`: it must pass every check.

Checkpointing, `scheme=segments` (the default): `segments=K` (default round(sqrt(L))) equal segments of blocks.
The forward keeps only each segment's input and, for the stateful generator, a snapshot of the generator where
the segment starts; backward walks the segments in reverse, recomputes each one's tapes from its input with a
*copy* of the generator restored to that snapshot (so the main generator ends where the plain step leaves it) and
with BatchNorm's running statistics frozen (they move once per step, in the first forward), then runs the
segment's backward. Every block is recomputed once.

`scheme=recursive`: Chen et al.'s O(log L) scheme. The forward keeps only the chain input; backward through
blocks [a, b) from a held x_a advances to the midpoint m without tapes, keeps x_m (and the generator there),
recurses on [m, b), then on [a, m); a single block is recomputed with its tape and back-propagated. A block is
recomputed once per level at which it lies in a left half, plus once with its tape: up to ceil(log2 L) + 1 times.
Both schemes declare their recompute counts (`recompute_counts`), which check 3 of validate holds them to.

Frozen blocks, shared parameters and an input without gradient (cases/SCHEMA.md): a sharing block reads and
accumulates into its owner's arrays, so the contributions add up in the order backward reaches the blocks; frozen
parameters' gradients are computed (their input gradient needs the same backward) but neither reported nor
applied.

Language-model cases (PROTOCOL.md, "Token cases"): x_0 = emb.weight[id] + pos.weight[row mod seq] before the
chain and an LM head after it (LayerNorm, logits = h head.weight^T, cross-entropy over the vocabulary), both
outside every checkpoint segment. The embedding backward scatter-adds g_0's rows with np.add.at (unbuffered, in row
order, so a token used twice adds both rows); a tied head reads and accumulates into emb.weight's arrays, head
first, as backward reaches it first. A frozen embedding skips the stem's backward.

Stochastic depth, RReLU and bf16 compute (PROTOCOL.md; np_stochastic.py, np_env.py): a block's `drop_path` drops
its residual branch per sample (residual-bn after the ReLU, transformer after each branch's dropout, as timm's ViT
block), mlp `rrelu` multiplies negative elements by slopes drawn in [lower, upper], both from the generator below and
restored with it for a recompute; backward uses the saved scales and slopes. `compute` bf16 rounds every matrix
product's operands in a block to bfloat16 and accumulates in float32, in the first forward and every recompute alike.

Mixture of experts (np_moe.py): a moe block's router jitter draws from the generator below like dropout; its
expert_counts and aux_loss buffers move in the first forward only, and each pass's loss adds the aux_loss trackers.

Generators (the case's `rng`): stateful — one numpy Philox generator seeded from the case, advanced by every
dropout in execution order (PyTorch-like); counter — each dropout's mask a pure function of (seed, step, block,
op) through its own Philox key (JAX-like), so recompute needs no snapshot.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import np_moe as moe  # noqa: E402  (numpy/np_moe.py)
import np_stochastic as sto  # noqa: E402,F401  (numpy/np_stochastic.py; tests/adapters reach it as adapter.sto)
import numpy as np  # noqa: E402
from ckpt_adapter import BadRequest, Case, MicroBatch, Output, main  # noqa: E402
from np_blocks import (  # noqa: E402  (numpy/np_blocks.py)
    BLOCKS,
    lm_loss_backward,
    lm_loss_forward,
    loss_backward,
    loss_forward,
    stem_backward,
    stem_forward,
)
from np_env import Array, Arrays, Env, Params, Tape  # noqa: E402  (numpy/np_env.py)
from np_rng import CounterRng, Rng, StatefulRng  # noqa: E402  (numpy/np_rng.py)
from np_schedule import array_bytes, recursive_recompute_counts, segment_bounds  # noqa: E402,F401

# ---------------------------------------------------------------- generators


class NumpyAdapter:
    name = "numpy"
    version = np.__version__

    def capabilities(self) -> dict[str, Any]:
        """What this adapter runs (PROTOCOL.md, "capabilities")."""
        return {
            "blocks": ["mlp", "residual-bn", "transformer", "moe"],
            "activations": ["relu", "gelu", "tanh", "rrelu"],
            "drop_path": True,
            "compute": ["exact", "bf16"],
            "losses": ["cross_entropy", "mse"],
            "dtypes": ["float", "double"],
            "rng": ["stateful", "counter"],
            "dropout": True,
            "modes": ["plain", "checkpoint"],
            "options": {
                "segments": {
                    "values": "int",
                    "default": "sqrt",
                    "doc": "checkpoint segments K (default round(sqrt(L)), capped at L)",
                },
                "scheme": {
                    "values": ["segments", "recursive"],
                    "default": "segments",
                    "doc": "segments: K equal segments, each recomputed once; recursive: Chen et "
                    "al.'s halving, blocks recomputed up to ceil(log2 L) + 1 times",
                },
            },
            "reports_memory": True,
            "reports_forward_calls": True,
            "reports_rng_state": True,
            "params": ["frozen", "shared", "no_input_grad", "micro_batches"],
            "inputs": ["dense", "tokens"],
        }

    def run(self, case: Case, out: Output, mode: str, options: dict[str, str]) -> dict[str, Any]:
        """Train `case` plain or checkpointed, each step's results to `out`; returns the run's report fields."""
        L = len(case.blocks)
        k = int(options.get("segments", max(1, round(math.sqrt(L)))))
        if k < 1:
            raise BadRequest("segments must be >= 1")
        k = min(k, L)
        scheme = options.get("scheme", "segments")
        if scheme not in ("segments", "recursive"):
            raise BadRequest("scheme must be segments or recursive")
        values = {n: v.copy() for n, v in case.params.items()}
        state = {n: v.copy() for n, v in case.state.items()}
        rng = StatefulRng(case.seed) if case.rng == "stateful" else CounterRng(case.seed)
        saved, calls, seconds = [], [], []
        segments = segment_bounds(L, k)
        for step in range(case.steps):
            t0 = time.perf_counter()
            counts = [0] * L
            step_saved = 0
            loss = grads = None
            for m in range(case.micro_batches):
                mb = case.micro_batch(step, m)
                part = {n: np.zeros_like(v) for n, v in values.items()}
                part_loss, part_g, part_saved = self._pass(
                    case, mode, scheme, segments, values, part, state, rng, mb, counts
                )
                step_saved = max(step_saved, part_saved)
                # The micro-batches' sums in order, the first as it is (PROTOCOL.md, "Micro-batches").
                loss = part_loss if m == 0 else loss + part_loss
                grads = part if m == 0 else {n: grads[n] + part[n] for n in grads}
                many = case.micro_batches > 1 and part_g is not None  # a token case reports no input gradient
                if m == 0:
                    g = np.empty((case.rows, case.width), dtype=case.dtype) if many else part_g
                if many:
                    g[mb.rows] = part_g
            saved.append(step_saved)
            compute = time.perf_counter() - t0
            out.step(step, loss, grads, g, state, rng.state_bytes())
            t1 = time.perf_counter()
            lr = case.dtype(case.lr)
            for n in case.trained_param_names:  # frozen parameters keep their values; copies are not used
                values[n] = values[n] - lr * grads[n]
            seconds.append(compute + time.perf_counter() - t1)  # the step, not the writing of its results
            calls.append(counts)
        declared = [0] * L
        if mode == "checkpoint":
            declared = recursive_recompute_counts(L) if scheme == "recursive" else [1] * L
        return {
            "saved_activation_bytes": saved,
            "forward_calls": calls,
            "recomputed_blocks": [i for i in range(L) if declared[i] > 0],
            "recompute_counts": [declared] * case.steps,
            "step_seconds": seconds,
            "segments": k if mode == "checkpoint" and scheme == "segments" else None,
        }

    @staticmethod
    def _pass(
        case: Case,
        mode: str,
        scheme: str,
        segments: list[tuple[int, int]],
        values: Arrays,
        grads: Arrays,
        state: Arrays,
        rng: Rng,
        mb: MicroBatch,
        counts: list[int],
    ) -> tuple[Any, Array | None, int]:
        """One micro-batch's forward and backward (the whole step's without micro-batches), accumulating into
        `grads`; returns its loss, dL/d(its input rows) (None for a token case, whose stem consumes it) and the
        bytes its forward left for the backward. The moe blocks' aux_loss trackers start the pass at zero and end
        in its loss (np_moe.py)."""
        moe.reset_trackers(case, state)
        loss, g, saved = NumpyAdapter._model_pass(case, mode, scheme, segments, values, grads, state, rng, mb, counts)
        return moe.add_trackers(case, state, loss), g, saved

    @staticmethod
    def _model_pass(
        case: Case,
        mode: str,
        scheme: str,
        segments: list[tuple[int, int]],
        values: Arrays,
        grads: Arrays,
        state: Arrays,
        rng: Rng,
        mb: MicroBatch,
        counts: list[int],
    ) -> tuple[Any, Array | None, int]:
        if not case.tokens_input:
            return NumpyAdapter._chain_pass(
                case,
                mode,
                scheme,
                segments,
                values,
                grads,
                state,
                rng,
                mb,
                counts,
                mb.input,
                lambda x: loss_forward(case, x, mb),
                lambda ctx: loss_backward(case, ctx, mb),
            )
        # The stem and the head run outside every checkpoint segment, as the reference's do.
        loss, g, saved = NumpyAdapter._chain_pass(
            case,
            mode,
            scheme,
            segments,
            values,
            grads,
            state,
            rng,
            mb,
            counts,
            stem_forward(values, mb),
            lambda x: lm_loss_forward(case, values, x, mb),
            lambda ctx: lm_loss_backward(case, values, grads, ctx, mb),
        )
        if case.embedding_trains:
            stem_backward(grads, mb, g)
        return loss, None, saved

    @staticmethod
    def _chain_pass(
        case: Case,
        mode: str,
        scheme: str,
        segments: list[tuple[int, int]],
        values: Arrays,
        grads: Arrays,
        state: Arrays,
        rng: Rng,
        mb: MicroBatch,
        counts: list[int],
        x: Array,
        head_forward: Callable[[Array], tuple[Any, Any]],
        head_backward: Callable[[Any], Array],
    ) -> tuple[Any, Array, int]:
        """The chain's forward and backward from x_0 = `x`, with the loss (or LM head) `head_forward` /
        `head_backward`; returns the loss, dL/dx_0 and the saved bytes."""
        L = len(case.blocks)
        prefixes = ["b%d." % i for i in range(L)]
        # A sharing block reads and accumulates into its owner's arrays: each use's contribution is computed,
        # then added (gw += dy.T @ x), in the order backward reaches the uses, as autograd sums them.
        P = [Params(values, grads, prefixes[b.share if b.share is not None else i]) for i, b in enumerate(case.blocks)]

        def fwd(i: int, x: Array, env: Env) -> tuple[Array, Tape]:
            counts[i] += 1
            return BLOCKS[case.blocks[i].kind][0](i, case.blocks[i], P[i], x, env)

        def bwd(i: int, tape: Tape, dy: Array) -> Array:
            return BLOCKS[case.blocks[i].kind][1](i, case.blocks[i], P[i], tape, dy)

        def renv_at(snap: Any) -> Env:
            e = Env(case, rng.restored(snap), mb.key_step, False, counts)
            e.case_state = state
            return e

        env = Env(case, rng, mb.key_step, True, counts)
        env.case_state = state
        if mode == "plain":
            tapes = []
            for i in range(L):
                x, tape = fwd(i, x, env)
                tapes.append(tape)
            loss, lctx = head_forward(x)
            saved = array_bytes((tapes, lctx))
            g = head_backward(lctx)
            for i in reversed(range(L)):
                g = bwd(i, tapes[i], g)
                tapes[i] = None
            return loss, g, saved
        if scheme == "recursive":
            x0, snap0 = x, rng.snapshot()
            for i in range(L):
                x, _ = fwd(i, x, env)
            loss, lctx = head_forward(x)
            held = [0]  # bytes of the boundaries the recursion holds at once, at most

            def back(a: int, b: int, xa: Array, snap: Any, g: Array, depth_bytes: int) -> Array:
                held[0] = max(held[0], depth_bytes)
                renv = renv_at(snap)
                if b - a == 1:
                    _, tape = fwd(a, xa, renv)
                    return bwd(a, tape, g)
                m = (a + b) // 2
                xm = xa
                for i in range(a, m):
                    xm, _ = fwd(i, xm, renv)
                g = back(m, b, xm, renv.rng.snapshot(), g, depth_bytes + array_bytes([xm]))
                return back(a, m, xa, snap, g, depth_bytes)

            g = back(0, L, x0, snap0, head_backward(lctx), array_bytes(([x0], lctx)))
            return loss, g, held[0]
        kept = []  # per segment: its input and the generator where it starts
        for a, b in segments:
            kept.append((x, rng.snapshot()))
            for i in range(a, b):
                x, _ = fwd(i, x, env)
        loss, lctx = head_forward(x)
        saved = array_bytes(([s[0] for s in kept], lctx))
        g = head_backward(lctx)
        for (a, b), (xs, snap) in reversed(list(zip(segments, kept, strict=False))):
            renv = renv_at(snap)
            tapes = []
            for i in range(a, b):
                xs, tape = fwd(i, xs, renv)
                tapes.append(tape)
            for i in reversed(range(a, b)):
                g = bwd(i, tapes[i - a], g)
                tapes[i - a] = None
        return loss, g, saved


if __name__ == "__main__":
    main(NumpyAdapter)
