#!/usr/bin/env python3
"""JAX adapter: the case's model as pure functions, trained with jax.value_and_grad under jax.jit, each block
optionally under jax.checkpoint (remat) with a policy, so `ckptcheck validate` can report honestly whether JAX's
rematerialised gradients are bitwise equal to its plain ones (harness/adapters/PROTOCOL.md).

Option policy: nothing_saveable (the default of jax.checkpoint), dots_saveable, dots_with_no_batch_dims_saveable,
everything_saveable. Dropout is counter-based, as JAX's generators are: each block's key is
fold_in(fold_in(PRNGKey(seed), step), block), each op's fold_in(key, op); with M micro-batches, micro-batch m of
step s is keyed as step s * M + m. Micro-batches: one value_and_grad per micro-batch (loss / M), gradients added.
BatchNorm's running statistics are a
value the step returns, so a recompute cannot move them twice. x64 is enabled for double cases.
Saved bytes: the residuals jax.checkpoint's saved_residuals lists for the loss, function arguments excluded.
Recomputed blocks: every block, except under everything_saveable (which recomputes nothing); the dots policies
report saves_in_checkpoints, so validate's memory property holds them to "some saving" only (PROTOCOL.md).
Forward calls are not observable under jit and are not reported.
Language-model cases (PROTOCOL.md, "Token cases"): x_0 = jnp.take(emb, ids) + jnp.take(pos, row mod seq), the LM
head (LayerNorm, logits = h W^T, cross-entropy over the vocabulary) after the chain, both outside every
jax.checkpoint; autodiff does the rest. Tied: the head reads params["emb.weight"], the same array used twice, so
its gradient sums both uses (head.weight's own copy is unused and takes no update).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import jax  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")
import jax.numpy as jnp  # noqa: E402
from ckpt_adapter import Block, Case, Output, main  # noqa: E402

try:
    from jax._src.ad_checkpoint import saved_residuals  # private, but the only way to read residual sizes
except ImportError:  # pragma: no cover
    saved_residuals = None

POLICIES = ["nothing_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable", "everything_saveable"]
GELU_BETA = math.sqrt(2.0 / math.pi)
Array = jax.Array
Params = dict[str, jax.Array]  # one block's parameters (or the model's) by name
BlockOut = tuple[jax.Array, tuple[jax.Array, ...]]  # a block's output and its state updates (BatchNorm's statistics)


def dropout(x: Array, p: float, key: Array, node: int) -> Array:
    """Inverted dropout with rate p, its mask drawn from `key` folded with the op's node."""
    if p == 0:
        return x
    dt = x.dtype
    u = jax.random.uniform(jax.random.fold_in(key, node), x.shape, dtype=dt)
    scale = jnp.asarray(1, dt) / (jnp.asarray(1, dt) - jnp.asarray(p, dt))
    return x * (u >= p).astype(dt) * scale


def linear(P: Params, name: str, x: Array) -> Array:
    """x W^T + b of the parameters `name`.weight and `name`.bias."""
    return x @ P[name + ".weight"].T + P[name + ".bias"]


def activation(kind: str, h: Array) -> Array:
    """relu, tanh, else tanh-approximated gelu."""
    if kind == "relu":
        return jnp.maximum(h, 0)
    if kind == "tanh":
        return jnp.tanh(h)
    return 0.5 * h * (1 + jnp.tanh(GELU_BETA * (h + 0.044715 * h * h * h)))


def layernorm(P: Params, name: str, x: Array) -> Array:
    """LayerNorm over the rows (eps 1e-5) with the parameters `name`.weight and `name`.bias."""
    mean = x.mean(axis=1, keepdims=True)
    c = x - mean
    rstd = 1 / jnp.sqrt((c * c).mean(axis=1, keepdims=True) + 1e-5)
    return c * rstd * P[name + ".weight"] + P[name + ".bias"]


def mlp_block(spec: Block, p: float, seq: int, P: Params, x: Array, key: Array) -> BlockOut:
    """y = Dropout(act(x W^T + b)); no state."""
    return dropout(activation(spec.activation, linear(P, "fc", x)), p, key, 2), ()


def bn_block(spec: Block, p: float, seq: int, P: Params, x: Array, key: Array) -> BlockOut:
    """y = x + ReLU(BatchNorm(x W^T + b)) with batch statistics; the batch mean and variance as state updates."""
    h = linear(P, "fc", x)
    n = h.shape[0]
    mean = h.mean(axis=0)
    c = h - mean
    sumsq = (c * c).sum(axis=0)
    xhat = c / jnp.sqrt(sumsq / n + 1e-5)
    y = x + jnp.maximum(xhat * P["bn.weight"] + P["bn.bias"], 0)
    return y, (jax.lax.stop_gradient(mean), jax.lax.stop_gradient(sumsq / (n - 1)))


def transformer_block(spec: Block, p: float, seq: int, P: Params, x: Array, key: Array) -> BlockOut:
    """Pre-LN causal GPT block with dropout after attention's softmax, its projection and the MLP; no state."""
    heads = spec.heads
    rows, c = x.shape
    hd = c // heads
    b = rows // seq
    qkv = linear(P, "qkv", layernorm(P, "ln1", x))
    q, k, v = (qkv[:, j * c : (j + 1) * c].reshape(b, seq, heads, hd).transpose(0, 2, 1, 3) for j in range(3))
    s = (q @ k.transpose(0, 1, 3, 2)) / jnp.sqrt(jnp.asarray(hd, x.dtype))
    future = jnp.triu(jnp.ones((seq, seq), dtype=bool), 1)
    s = jnp.where(future, -jnp.inf, s)
    e = jnp.exp(s - s.max(axis=-1, keepdims=True))
    att = dropout(e / e.sum(axis=-1, keepdims=True), p, key, 2)
    o = (att @ v).transpose(0, 2, 1, 3).reshape(rows, c)
    h = x + dropout(linear(P, "proj", o), p, key, 4)
    f = linear(P, "fc2", activation("gelu", linear(P, "fc1", layernorm(P, "ln2", h))))
    return h + dropout(f, p, key, 10), ()


BLOCKS = {"mlp": mlp_block, "residual-bn": bn_block, "transformer": transformer_block}


def block_fn(case: Case, spec: Block) -> Callable[[Params, Array, Array], BlockOut]:
    """Block `spec` of the case as a function (P, x, key) -> (y, state updates)."""
    return lambda P, x, key: BLOCKS[spec.kind](spec, case.dropout, case.seq, P, x, key)


def make_loss(case: Case, checkpoint: bool, policy: str) -> Callable[..., tuple[Array, Any]]:
    """The case's loss as a function (params, x, keys, labels or target) -> (loss, state updates), every block under
    jax.checkpoint with the named policy when `checkpoint`."""
    names = [
        [n[len("b%d." % i) :] for n in case.param_names if n.startswith("b%d." % i)] for i in range(len(case.blocks))
    ]
    fns = []
    for spec in case.blocks:
        f = block_fn(case, spec)
        if checkpoint:
            f = jax.checkpoint(f, policy=getattr(jax.checkpoint_policies, policy))
        fns.append(f)
    ce = case.loss == "cross_entropy"
    lm = case.tokens_input
    head_weight = "emb.weight" if case.tied else "head.weight"
    positions = jnp.arange(case.rows // case.micro_batches) % case.seq  # a micro-batch holds whole sequences

    def loss_fn(params: Params, x: Array, keys: Array, labels_or_target: Array) -> tuple[Array, Any]:
        aux = []
        if lm:  # x: the micro-batch's token ids
            x = jnp.take(params["emb.weight"], x, axis=0) + jnp.take(params["pos.weight"], positions, axis=0)
        for i, f in enumerate(fns):
            P = {short: params["b%d.%s" % (i, short)] for short in names[i]}
            x, a = f(P, x, keys[i])
            aux.append(a)
        if lm:
            x = layernorm(params, "head.ln", x) @ params[head_weight].T  # the logits over the vocabulary
        if ce:
            mx = jax.lax.stop_gradient(x.max(axis=1, keepdims=True))
            lse = jnp.log(jnp.exp(x - mx).sum(axis=1)) + mx[:, 0]
            picked = jnp.take_along_axis(x, labels_or_target[:, None], axis=1)[:, 0]
            loss = (lse - picked).mean()
        else:
            d = x - labels_or_target
            loss = (d * d).mean()
        if case.micro_batches > 1:  # one micro-batch's share of the step's loss (PROTOCOL.md, "Micro-batches")
            loss = loss / case.micro_batches
        return loss, aux

    return loss_fn


_compiled = {}


def with_no_input_grad(vg: Callable[..., Any]) -> Callable[..., Any]:
    """value_and_grad over the parameters only, answering as the dense case's (parameters, input) pair does."""

    def f(*args: Any) -> Any:
        value, gp = vg(*args)
        return value, (gp, None)

    return f


def compiled_step(case: Case, checkpoint: bool, policy: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(jitted value_and_grad, loss function) of the case's step, compiled once per model shape and options."""
    key = (
        tuple((b.kind, b.activation, b.heads) for b in case.blocks),
        case.rows,
        case.width,
        case.seq,
        case.dtype_name,
        case.loss,
        case.dropout,
        case.micro_batches,
        checkpoint,
        policy,
        case.tokens_input,
        case.vocab,
        case.tied,
    )
    if key not in _compiled:
        loss_fn = make_loss(case, checkpoint, policy)
        # Token ids are integers, which have no gradient: a token case differentiates the parameters only.
        argnums = 0 if case.tokens_input else (0, 1)
        vg = jax.value_and_grad(loss_fn, argnums=argnums, has_aux=True)
        _compiled[key] = (jax.jit(with_no_input_grad(vg) if case.tokens_input else vg), loss_fn)
    return _compiled[key]


class JaxAdapter:
    name = "jax"
    version = jax.__version__

    def capabilities(self) -> dict[str, Any]:
        """What this adapter runs (PROTOCOL.md, "capabilities")."""
        return {
            "blocks": ["mlp", "residual-bn", "transformer"],
            "activations": ["relu", "gelu", "tanh"],
            "losses": ["cross_entropy", "mse"],
            "dtypes": ["float", "double"],
            "rng": ["counter"],
            "dropout": True,
            "modes": ["plain", "checkpoint"],
            "options": {
                "policy": {
                    "values": POLICIES,
                    "default": "nothing_saveable",
                    "doc": "jax.checkpoint_policies.<policy> for every block",
                }
            },
            "reports_memory": saved_residuals is not None,
            "reports_forward_calls": False,
            "reports_rng_state": False,
            "params": ["micro_batches"],
            "inputs": ["dense", "tokens"],
            "jaxlib_version": getattr(jax.lib, "__version__", None) if hasattr(jax, "lib") else None,
        }

    @staticmethod
    def _move_statistics(case: Case, state: dict[str, Any], aux: Any) -> None:
        """BatchNorm's running statistics, moved once per forward pass (per micro-batch) from its batch values."""
        m = case.dtype(0.1)
        for i, b in enumerate(case.blocks):
            if b.kind == "residual-bn":
                mean, var = (np.asarray(a) for a in aux[i])
                pre = "b%d.bn." % i
                state[pre + "running_mean"] = (case.dtype(1) - m) * state[pre + "running_mean"] + m * mean
                state[pre + "running_var"] = (case.dtype(1) - m) * state[pre + "running_var"] + m * var
                state[pre + "num_batches_tracked"] = state[pre + "num_batches_tracked"] + 1

    def run(self, case: Case, out: Output, mode: str, options: dict[str, str]) -> dict[str, Any]:
        """Train `case` plain or with jax.checkpoint on every block, each step's results to `out`; returns the run's
        report fields."""
        policy = options.get("policy", "nothing_saveable")
        checkpoint = mode == "checkpoint"
        recomputes = checkpoint and policy != "everything_saveable"
        step_fn, loss_fn = compiled_step(case, checkpoint, policy)
        params = {n: jnp.asarray(v) for n, v in case.params.items()}
        state = {n: np.array(v) for n, v in case.state.items()}
        x = jnp.asarray(case.tokens if case.tokens_input else case.input)
        lt = jnp.asarray(case.labels) if case.labels is not None else jnp.asarray(case.target)
        base = jax.random.PRNGKey(case.seed)
        lr = case.dtype(case.lr)
        saved, seconds = [], []
        residual_bytes = None
        for step in range(case.steps):
            compute, loss, gp, gx = 0.0, None, None, []
            # Gradient accumulation: one value_and_grad per micro-batch, its loss already divided by M, the
            # gradients added in micro-batch order (PROTOCOL.md, "Micro-batches").
            for mi in range(case.micro_batches):
                mb = case.micro_batch(step, mi)
                keys = jnp.stack(
                    [jax.random.fold_in(jax.random.fold_in(base, mb.key_step), i) for i in range(len(case.blocks))]
                )
                xm, ltm = x[mb.rows], lt[mb.rows]
                if residual_bytes is None and saved_residuals is not None:
                    residual_bytes = 0

                    def loss_of(p: Params, xx: Array, keys: Array = keys, ltm: Array = ltm) -> Array:
                        return loss_fn(p, xx, keys, ltm)[0]

                    for aval, why in saved_residuals(loss_of, params, xm):
                        if "argument" not in why:
                            residual_bytes += int(np.prod(aval.shape)) * np.dtype(aval.dtype).itemsize
                t0 = time.perf_counter()
                (part, aux), (gpm, gxm) = step_fn(params, xm, keys, ltm)
                loss = part if mi == 0 else loss + part
                gp = gpm if mi == 0 else {n: gp[n] + gpm[n] for n in gp}
                jax.block_until_ready((loss, gp, gxm))
                compute += time.perf_counter() - t0
                if gxm is not None:
                    gx.append(np.asarray(gxm))
                self._move_statistics(case, state, aux)
            out.step(
                step,
                np.asarray(loss),
                {n: np.asarray(g) for n, g in gp.items()},
                np.concatenate(gx) if gx else None,
                state,
            )
            t1 = time.perf_counter()
            params = {n: params[n] - lr * gp[n] for n in params}
            jax.block_until_ready(params)
            seconds.append(compute + time.perf_counter() - t1)
            saved.append(residual_bytes)
        return {
            "saved_activation_bytes": saved if residual_bytes is not None else None,
            "forward_calls": None,
            # everything_saveable saves every residual: nothing is recomputed. The dots policies save the
            # matmul outputs inside each checkpoint by design, so only "no effect" is checked against the plan.
            "recomputed_blocks": list(range(len(case.blocks))) if recomputes else [],
            "saves_in_checkpoints": recomputes and policy != "nothing_saveable",
            "step_seconds": seconds,
            "policy": policy if checkpoint else None,
        }


if __name__ == "__main__":
    main(JaxAdapter)
