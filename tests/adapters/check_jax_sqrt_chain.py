#!/usr/bin/env python3
"""The √L shape of uniform segments, in JAX and in ckptcheck's planner (harness/user_model/jax/USER_MODEL.md,
"Memory"): a chain of L identical blocks of the planner's `mlp` kind (Linear(W, W), ReLU; no dropout), run by
`jax.lax.scan` over k segments, each one `jax.checkpoint` around a scan of its L/k blocks, for every k dividing L.

  check_jax_sqrt_chain.py CKPTCHECK

Checks, with the figures the JAX driver reports (harness/user_model/jax/residuals.py):
- saved residuals: the k segments keep exactly one boundary each: bytes(k) - bytes(1) = (k - 1) * B * W * 4;
- compiled temp bytes (XLA's memory analysis of the jitted gradient): falls from k = 1, rises again at k = L, is
  lowest at a k where `ckptcheck plan --case CHAIN --policy uniform:k=K` predicts its lowest peak (k boundaries
  plus one segment's tapes), and stays within 0.9-1.5 times that peak (XLA's temp also holds the segment's
  weight gradients and its loops' buffers: measured 1.01-1.35).
Exit 0 holds, 1 a violated check (each printed), 77 when JAX is missing and CKPT_SKIP_FRAMEWORK_TESTS=1.
"""

import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_validate import adapter_python, fail, require_python_modules  # noqa: E402

L, W, B = 16, 64, 512

MEASURE = r"""
import json, math, os, sys
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
sys.path.insert(0, sys.argv[1])
import jax, jax.numpy as jnp
import residuals
L, W, B = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def block(p, h):  # the planner's mlp kind with activation relu: Linear(W, W) then ReLU
    return jnp.maximum(h @ p[0].T + p[1], 0)

def loss(params, x):  # params stored as (k, L/k, ...): no reshape of a weight inside the loss
    seg = jax.checkpoint(lambda h, p: jax.lax.scan(lambda h, q: (block(q, h), None), h, p)[0])
    return jnp.mean(jax.lax.scan(lambda h, p: (seg(h, p), None), x, params)[0] ** 2), None

key = jax.random.PRNGKey(0)
x = jax.random.normal(key, (B, W))
out = {}
for k in [d for d in range(1, L + 1) if L % d == 0]:
    params = (jax.random.normal(key, (k, L // k, W, W)) / 8, jnp.zeros((k, L // k, W)))
    saved, _ = residuals.residual_bytes(loss, (params, x))
    temp = residuals.compiled_memory(jax.jit(jax.grad(lambda p, x: loss(p, x)[0])), (params, x))["temp"]
    out[k] = {"saved": saved, "temp": temp}
print(json.dumps(out))
"""


def planner_peak(ckptcheck, case_path, k):
    r = subprocess.run(
        [ckptcheck, "plan", "--case", case_path, "--policy", "uniform:k=%d" % k, "--json"],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        fail("ckptcheck plan uniform:k=%d exited %d: %s" % (k, r.returncode, r.stderr.strip()))
    return json.loads(r.stdout)["peak_activation_bytes"]


def main():
    if len(sys.argv) != 2:
        fail("usage: check_jax_sqrt_chain.py CKPTCHECK")
    require_python_modules(["jax"])
    jax_dir = os.path.join(HERE, "..", "..", "harness", "user_model", "jax")
    r = subprocess.run(
        [adapter_python(), "-c", MEASURE, jax_dir, str(L), str(W), str(B)], capture_output=True, text=True
    )
    if r.returncode != 0:
        fail("the JAX measurement failed:\n" + r.stderr)
    jax_figures = {int(k): v for k, v in json.loads(r.stdout.splitlines()[-1]).items()}
    ks = sorted(jax_figures)
    with tempfile.TemporaryDirectory() as tmp:
        case_path = os.path.join(tmp, "chain.json")
        with open(case_path, "w") as f:
            json.dump(
                {
                    "name": "sqrt-chain",
                    "dtype": "float",
                    "batch": B,
                    "width": W,
                    "loss": "mse",
                    "seed": 1,
                    "dropout": 0.0,
                    "lr": 0.01,
                    "steps": 1,
                    "blocks": [{"kind": "mlp", "activation": "relu", "repeat": L}],
                },
                f,
            )
        plan = {k: planner_peak(sys.argv[1], case_path, k) for k in ks}
    print("L=%d blocks, width %d, batch %d; sqrt(L) = %.1f" % (L, W, B, math.sqrt(L)))
    print("%4s %14s %18s %22s" % ("k", "saved (B)", "XLA temp (B)", "planner peak (B)"))
    for k in ks:
        print("%4d %14d %18d %22d" % (k, jax_figures[k]["saved"], jax_figures[k]["temp"], plan[k]))
    bad = []
    boundary = B * W * 4
    for k in ks:
        extra = jax_figures[k]["saved"] - jax_figures[1]["saved"]
        if extra != (k - 1) * boundary:
            bad.append(
                "k=%d: saved residuals %d B above k=1's, expected %d (one %d B boundary per segment)"
                % (k, extra, (k - 1) * boundary, boundary)
            )
    temps = {k: jax_figures[k]["temp"] for k in ks}
    best = min(ks, key=lambda k: temps[k])
    lowest = min(plan.values())
    planned_best = [k for k in ks if plan[k] == lowest]
    if best not in planned_best:
        bad.append("XLA's temp bytes are lowest at k=%d, the planner's peak at k in %s" % (best, planned_best))
    if not (temps[1] > temps[best] < temps[L]):
        bad.append("XLA's temp bytes have no interior minimum over k (%s)" % temps)
    for k in ks:  # measured 1.01-1.35 on jax 0.10.2's CPU backend
        if not 0.9 <= temps[k] / plan[k] <= 1.5:
            bad.append(
                "k=%d: XLA's temp bytes are %.2f times the planner's peak (0.9-1.5 expected)" % (k, temps[k] / plan[k])
            )
    for b in bad:
        print("FAIL: " + b)
    if bad:
        sys.exit(1)
    print(
        "holds: saved residuals grow by one boundary per segment; XLA's temp bytes and the planner's peak are "
        "both lowest at k=%d of L=%d" % (best, L)
    )


if __name__ == "__main__":
    main()
