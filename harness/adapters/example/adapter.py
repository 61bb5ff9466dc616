#!/usr/bin/env python3
"""The smallest adapter (harness/adapters/PROTOCOL.md): mlp blocks in numpy, store-all or every block checkpointed.

Copy this to connect your framework: `capabilities()` says what it builds, `run()` trains the case and writes each
step through `out`; common/ckpt_adapter.py does the files, argv, serve mode and exit codes. numpy/adapter.py is the
same thing for every block kind, feature and scheme. mode=checkpoint keeps each block's input and the generator's
state there, and recomputes the block from them just before its backward (uniform checkpointing, one block a
segment), so its dropout masks are the first forward's and the run must equal the plain one bit for bit.
"""

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from ckpt_adapter import main  # noqa: E402


def forward(b, x, w, bias, p, rng):
    """One mlp block, Linear -> activation -> Dropout; returns y and the tape its backward needs."""
    h = x @ w.T + bias
    dt = h.dtype.type
    if b.activation == "relu":
        a = np.maximum(h, dt(0))
    elif b.activation == "tanh":
        a = np.tanh(h)
    else:  # GELU, tanh approximation
        a = dt(0.5) * h * (dt(1) + np.tanh(dt(math.sqrt(2 / math.pi)) * (h + dt(0.044715) * h * h * h)))
    mask = (rng.random(a.shape) >= p).astype(a.dtype) / (dt(1) - dt(p)) if p > 0 else None
    return (a if mask is None else a * mask), (x, h, a, mask)


def backward(b, tape, w, dy, gw, gb):
    x, h, a, mask = tape
    da = dy if mask is None else dy * mask
    dt = h.dtype.type
    if b.activation == "relu":
        dh = np.where(a > 0, da, dt(0))
    elif b.activation == "tanh":
        dh = da * (dt(1) - a * a)
    else:
        c, k = dt(math.sqrt(2 / math.pi)), dt(0.044715)
        t = np.tanh(c * (h + k * h * h * h))
        dh = da * (dt(0.5) * (dt(1) + t) + dt(0.5) * h * (dt(1) - t * t) * c * (dt(1) + dt(3) * k * h * h))
    gw += dh.T @ x
    gb += dh.sum(axis=0)
    return dh @ w


class ExampleAdapter:
    name, version = "example", np.__version__

    def capabilities(self):
        return {
            "blocks": ["mlp"],
            "activations": ["relu", "gelu", "tanh"],
            "losses": ["cross_entropy", "mse"],
            "dtypes": ["float", "double"],
            "rng": ["stateful"],
            "dropout": True,
            "modes": ["plain", "checkpoint"],
            "options": {},
            "reports_memory": False,
            "reports_forward_calls": True,
        }

    def run(self, case, out, mode, options):
        L, rng = len(case.blocks), np.random.Generator(np.random.Philox(key=case.seed))
        values = {n: v.copy() for n, v in case.params.items()}
        calls = []
        for step in range(case.steps):
            W = [(values["b%d.fc.weight" % i], values["b%d.fc.bias" % i]) for i in range(L)]
            grads = {n: np.zeros_like(v) for n, v in values.items()}
            count, x, kept = [1] * L, case.input, []  # kept: the tapes (plain) or each block's input and rng state
            for i, b in enumerate(case.blocks):
                state = rng.bit_generator.state
                y, tape = forward(b, x, *W[i], case.dropout, rng)
                kept.append(tape if mode == "plain" else (x, state))
                x = y
            rows = np.arange(case.rows)
            if case.loss == "mse":
                d = x - case.target
                loss, dy = (d * d).sum() / d.size, d * (d.dtype.type(2) / d.dtype.type(d.size))
            else:
                e = np.exp(x - x.max(axis=1, keepdims=True))
                probs = e / e.sum(axis=1, keepdims=True)
                loss = -np.log(probs[rows, case.labels]).sum() / x.dtype.type(case.rows)
                dy = probs.copy()
                dy[rows, case.labels] -= 1
                dy = dy * (dy.dtype.type(1) / dy.dtype.type(case.rows))
            for i in reversed(range(L)):
                if mode == "checkpoint":  # recompute from the kept input with the generator where it was
                    replay = np.random.Generator(np.random.Philox(key=case.seed))
                    replay.bit_generator.state = kept[i][1]
                    kept[i] = forward(case.blocks[i], kept[i][0], *W[i], case.dropout, replay)[1]
                    count[i] += 1
                gw, gb = grads["b%d.fc.weight" % i], grads["b%d.fc.bias" % i]
                dy = backward(case.blocks[i], kept[i], W[i][0], dy, gw, gb)
            out.step(step, loss, grads, dy, case.state)
            calls.append(count)
            for n in case.trained_param_names:
                values[n] -= case.dtype(case.lr) * grads[n]
        return {"forward_calls": calls, "recomputed_blocks": list(range(L)) if mode == "checkpoint" else []}


if __name__ == "__main__":
    main(ExampleAdapter)
