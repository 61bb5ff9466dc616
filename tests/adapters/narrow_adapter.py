#!/usr/bin/env python3
"""The numpy adapter (harness/adapters/numpy/adapter.py) with one narrow bug, or one narrow restriction, for the
tests of what `ckptcheck validate` reaches with default settings:
  narrow_adapter.py VARIANT <protocol arguments...>

Narrow bugs: the checkpointed run's gradients are wrong, by one ULP of one element of the last block's first
gradient, but only under a condition that a thin random search never meets. Each must be reported (exit 1).
  smoke-only      only on validate's fixed first case (3 blocks: mlp, residual-bn, transformer; width 8, seed 3)
  small-dropout   only when 0 < dropout < 0.15 (a bug in a code path for small probabilities)
  odd-width       only when the width is odd (a vectorised kernel's remainder loop)
  third-segment   only in blocks from the third checkpoint segment on (an off-by-one in segment bookkeeping)
  odd-batch       only when the batch is odd and at least 3
  lr-not-default  only when the learning rate is not 0.05, in the second step (an optimizer-state bug)
A narrow restriction of a correct adapter, which must hold (exit 0):
  float-only      advertises float only, so validate's check 2 runs in float
  dense-only      advertises no "inputs" (an adapter older than token cases): validate must send it no token
                  case, and refuses a token case file with exit 2
  exact-only      advertises neither drop_path, nor rrelu, nor bf16 compute (an adapter older than them):
                  validate must send it no such case, and refuses a case file that needs one with exit 2
Every variant advertises the blocks the numpy adapter did before "moe" (an adapter older than it), so the tests
above draw the cases they drew then: validate must send it no moe block (not even in its fixed first case), and
refuses a case file with one with exit 2.
"""

import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "harness", "adapters", "numpy"))
import adapter as npad  # noqa: E402  (harness/adapters/numpy/adapter.py)
import numpy as np  # noqa: E402
from ckpt_adapter import main  # noqa: E402

VARIANT = sys.argv.pop(1)


def third_segment_block(case, options):
    """The first block of the third segment under the adapter's segmenting, or None with fewer segments."""
    L = len(case.blocks)
    k = min(int(options.get("segments", max(1, round(math.sqrt(L))))), L)
    bounds = npad.segment_bounds(L, k)
    return bounds[2][0] if k >= 3 else None


def fires(case, options, step):
    """Whether this variant's bug applies to this case and step; the block whose gradient it changes."""
    last = len(case.blocks) - 1
    if VARIANT == "smoke-only":
        kinds = [b.kind for b in case.blocks]
        return last if kinds == ["mlp", "residual-bn", "transformer"] and case.width == 8 and case.seed == 3 else None
    if VARIANT == "small-dropout":
        return last if 0 < case.dropout < 0.15 else None
    if VARIANT == "odd-width":
        return last if case.width % 2 == 1 else None
    if VARIANT == "third-segment":
        return third_segment_block(case, options)
    if VARIANT == "odd-batch":
        return last if case.batch >= 3 and case.batch % 2 == 1 else None
    if VARIANT == "lr-not-default":
        return last if case.lr != 0.05 and step >= 1 else None
    return None


class Narrow(npad.NumpyAdapter):
    def capabilities(self):
        caps = super().capabilities()
        caps["blocks"] = [b for b in caps["blocks"] if b != "moe"]
        if VARIANT == "float-only":
            caps["dtypes"] = ["float"]
        if VARIANT == "dense-only":
            del caps["inputs"]
        if VARIANT == "exact-only":
            del caps["drop_path"], caps["compute"]
            caps["activations"] = [a for a in caps["activations"] if a != "rrelu"]
        return caps

    def run(self, case, out, mode, options):
        if any(b.kind == "moe" for b in case.blocks):
            raise RuntimeError("narrow adapter (no moe in its capabilities) was sent a moe block")
        if VARIANT == "dense-only" and case.tokens_input:
            raise RuntimeError("dense-only adapter was sent a token case")
        if VARIANT == "exact-only" and (
            any(b.drop_path > 0 or b.activation == "rrelu" for b in case.blocks) or case.compute != "exact"
        ):
            raise RuntimeError("exact-only adapter was sent a case with drop_path, rrelu or bf16 compute")
        return self._run(case, out, mode, options)

    def _run(self, case, out, mode, options):
        if mode == "checkpoint":
            real_step = out.step

            def step(s, loss, grads, input_grad, state, rng_state=None):
                block = fires(case, options, s)
                if block is not None:
                    name = next(n for n in case.param_names if n.startswith("b%d." % block))
                    g = np.array(grads[name], copy=True)
                    flat = g.reshape(-1)
                    flat[0] = np.nextafter(flat[0], np.inf, dtype=flat.dtype)
                    grads = dict(grads, **{name: g})
                real_step(s, loss, grads, input_grad, state, rng_state)

            out.step = step
        return super().run(case, out, mode, options)


if __name__ == "__main__":
    if VARIANT not in (
        "smoke-only",
        "small-dropout",
        "odd-width",
        "third-segment",
        "odd-batch",
        "lr-not-default",
        "float-only",
        "dense-only",
        "exact-only",
    ):
        sys.exit("narrow_adapter.py: unknown variant %r" % VARIANT)
    main(Narrow)
