#!/usr/bin/env python3
"""The numpy adapter with one deliberate fault, for the tests of `ckptcheck validate`'s own checks:
  faulty_adapter.py FAULT <protocol arguments...>
FAULT:
  double-bn   recompute moves BatchNorm's running statistics again (PyTorch's issue 96136)  -> finding
  fresh-rng   recompute draws new dropout masks instead of restoring the generator           -> finding
  wrong-gelu  GELU with kappa 0.05 instead of 0.044715: an unfaithful translation            -> adapter fault
  crash       the checkpointed run raises                                                    -> adapter fault
  hang        the checkpointed run never ends (the harness must kill it)                     -> adapter fault
  float64     gradients written as float64 whatever the case's dtype                         -> adapter fault
  drop-path-redrawn         a recompute's drop_path draws from a side stream (a hand-written stochastic depth
                            on Python's `random`, which checkpointing does not restore)  -> finding
  rrelu-slopes-regenerated  a recompute's RReLU slopes come from a side stream           -> finding
  bf16-recompute-in-float   compute bf16: a recompute's matrix products run in float     -> finding
  moe-jitter-redrawn        a recompute's router jitter comes from a side stream        -> finding (rng-desync)
  moe-counts-twice          a recompute moves a moe block's expert_counts and aux_loss tracker again (a module
                            that updates its buffers in forward, unguarded)          -> finding (state-updated-twice)
  moe-aux-grad-dropped      a recomputed moe block's backward leaves out the load-balancing loss's gradient (an
                            aux loss recorded only in the first forward, as under reentrant checkpoint) -> finding
The last six keep the generator's own draws as they are, so every other random op is unaffected (the mutants of
the same names in harness/mutants/ do the same to ckptcheck's engine).
Only the moe variants advertise the "moe" block kind: the others advertise the blocks the numpy adapter did before
it, so their tests draw the cases they drew then.
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "harness", "adapters", "numpy"))
import adapter as npad  # noqa: E402  (harness/adapters/numpy/adapter.py)
import np_blocks as npad_blocks  # noqa: E402  (harness/adapters/numpy/np_blocks.py)
import np_env as npad_env  # noqa: E402  (harness/adapters/numpy/np_env.py: Env and the operand rounding)
import numpy as np  # noqa: E402
from ckpt_adapter import main  # noqa: E402

FAULT = sys.argv.pop(1)


class Faulty(npad.NumpyAdapter):
    def capabilities(self):
        caps = super().capabilities()
        if not FAULT.startswith("moe-"):
            caps["blocks"] = [b for b in caps["blocks"] if b != "moe"]
        return caps

    def run(self, case, out, mode, options):
        if FAULT == "crash" and mode == "checkpoint":
            raise RuntimeError("deliberate crash")
        if FAULT == "hang" and mode == "checkpoint":
            time.sleep(3600)
        if FAULT == "float64":
            step = out.step

            def step64(s, loss, grads, input_grad, state, rng_state=None):
                step(
                    s,
                    loss,
                    {n: np.asarray(g, dtype=np.float64) for n, g in grads.items()},
                    input_grad,
                    state,
                    rng_state,
                )

            out.step = step64
        return super().run(case, out, mode, options)


if FAULT == "double-bn":
    real_env = npad.Env

    class Env(real_env):
        def __init__(self, case, rng, step, update_state, calls):
            super().__init__(case, rng, step, True, calls)

    npad.Env = Env
elif FAULT == "fresh-rng":
    npad.StatefulRng.restored = lambda self, snapshot: npad.StatefulRng(
        seed=int(snapshot["state"]["counter"][0]) + 12345
    )
elif FAULT == "wrong-gelu":
    npad_blocks.GELU_KAPPA = 0.05  # the ops read it where they are defined
elif FAULT in ("drop-path-redrawn", "rrelu-slopes-regenerated"):
    side = np.random.Generator(np.random.Philox(key=987654321))
    name = "drop_path_uniforms" if FAULT == "drop-path-redrawn" else "rrelu_uniforms"
    real_draw = getattr(npad.sto, name)

    def redrawn(env, shape, key):
        u = real_draw(env, shape, key)  # the generator advances as usual
        return u if env.update_state else side.random(u.shape)  # a recompute: other numbers

    setattr(npad.sto, name, redrawn)
elif FAULT == "moe-jitter-redrawn":
    side = np.random.Generator(np.random.Philox(key=987654321))
    real_jitter = npad.moe.moe_jitter_uniforms

    def redrawn_jitter(env, shape, key):
        u = real_jitter(env, shape, key)
        return u if env.update_state else side.random(u.shape)

    npad.moe.moe_jitter_uniforms = redrawn_jitter
elif FAULT == "moe-counts-twice":
    real_moe_forward = npad.moe.moe_forward

    def moe_forward_twice(h, spec, P, env, key, prefix, ops):
        if env.update_state:
            return real_moe_forward(h, spec, P, env, key, prefix, ops)
        env.update_state = True  # the recompute's buffer updates, unguarded
        try:
            return real_moe_forward(h, spec, P, env, key, prefix, ops)
        finally:
            env.update_state = False

    npad.moe.moe_forward = moe_forward_twice
elif FAULT == "moe-aux-grad-dropped":
    real_moe_forward = npad.moe.moe_forward

    def moe_forward_no_aux(h, spec, P, env, key, prefix, ops):
        out, ctx = real_moe_forward(h, spec, P, env, key, prefix, ops)
        if not env.update_state:  # a recompute: its tape without the aux loss's coefficient
            ctx = ctx[:5] + (0.0,) + ctx[6:]
        return out, ctx

    npad.moe.moe_forward = moe_forward_no_aux
elif FAULT == "bf16-recompute-in-float":
    real_rounding = npad_env.rounding
    npad_env.rounding = lambda case, update_state: real_rounding(case, True) if update_state else npad_env.exact

if __name__ == "__main__":
    main(Faulty)
