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
The last three keep the generator's own draws as they are, so every other random op is unaffected (the mutants of
the same names in harness/mutants/ do the same to ckptcheck's engine).
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "harness", "adapters", "numpy"))
import adapter as npad  # noqa: E402  (harness/adapters/numpy/adapter.py)
import numpy as np  # noqa: E402
from ckpt_adapter import main  # noqa: E402

FAULT = sys.argv.pop(1)


class Faulty(npad.NumpyAdapter):
    def run(self, case, out, mode, options):
        if FAULT == "crash" and mode == "checkpoint":
            raise RuntimeError("deliberate crash")
        if FAULT == "hang" and mode == "checkpoint":
            time.sleep(3600)
        if FAULT == "float64":
            step = out.step

            def step64(s, loss, grads, input_grad, state, rng_state=None):
                step(s, loss, {n: np.asarray(g, dtype=np.float64) for n, g in grads.items()}, input_grad, state,
                     rng_state)

            out.step = step64
        return super().run(case, out, mode, options)


if FAULT == "double-bn":
    real_env = npad.Env

    class Env(real_env):
        def __init__(self, case, rng, step, update_state, calls):
            super().__init__(case, rng, step, True, calls)

    npad.Env = Env
elif FAULT == "fresh-rng":
    npad.StatefulRng.restored = lambda self, snapshot: npad.StatefulRng(seed=int(snapshot["state"]["counter"][0]) + 12345)
elif FAULT == "wrong-gelu":
    npad.GELU_KAPPA = 0.05
elif FAULT in ("drop-path-redrawn", "rrelu-slopes-regenerated"):
    side = np.random.Generator(np.random.Philox(key=987654321))
    name = "drop_path_uniforms" if FAULT == "drop-path-redrawn" else "rrelu_uniforms"
    real_draw = getattr(npad.sto, name)

    def redrawn(env, shape, key):
        u = real_draw(env, shape, key)  # the generator advances as usual
        return u if env.update_state else side.random(u.shape)  # a recompute: other numbers

    setattr(npad.sto, name, redrawn)
elif FAULT == "bf16-recompute-in-float":
    real_rounding = npad.sto.rounding
    npad.sto.rounding = lambda case, update_state: real_rounding(case, True) if update_state else npad.sto.exact

if __name__ == "__main__":
    main(Faulty)
