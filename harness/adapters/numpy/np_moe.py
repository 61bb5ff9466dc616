"""The numpy adapter's mixture-of-experts block ("kind": "moe"; the reference's semantics in cases/kinds/moe.cpp).

    h = LayerNorm(x); m = MoE(h); y = x + DropPath(Dropout(m))

MoE(h), h (R, W), E experts, each an mlp Linear(W, 4W) -> GELU (tanh) -> Linear(4W, W):
  router jitter (router_jitter eps > 0): a = h * (T)((1 - eps) + 2 eps u), one uniform u per element of h (row-major)
      from the adapter's generator, the same draw machinery as dropout's masks (a recompute's is the restored one);
      eps 0: a = h and no draw;
  probs = softmax(a Wr^T + br) per row; each token's top_k experts by probability, ties to the smaller index;
  capacity C = min(R, max(1, ceil(cf R k / E))); dispatch rank by rank (first choices of every token, then second
      choices), token by token, an assignment to a full expert dropped;
  expert e runs on its C slots (the un-jittered h of its tokens, zero rows for empty slots); the output row of a
      token is the sum over its kept assignments, expert by expert, of gate (its probability) times the expert's
      output;
  the load-balancing loss aux = E sum_e f_e P_e (f_e: the share of tokens whose top_k holds e, before capacity;
      P_e: the mean probability of e) enters the training loss as coef * aux, coef = aux_loss_coef / M (divided by
      the micro-batches like the main loss): backward adds coef E f_e / R to dL/dprobs[:, e] (f_e a constant).
State (module buffers): `expert_counts` += the tokens each expert took, and the tracker `aux_loss` += coef * aux, on
every training forward and never on a recompute (Env.update_state False); the adapter zeroes the tracker when each
micro-batch's pass starts and adds it into that pass's loss.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from np_env import Array, Env, Params, Tape

if TYPE_CHECKING:
    from ckpt_adapter import Block, Case


def moe_jitter_uniforms(env: Env, shape: tuple[int, ...], key: int) -> Array:
    """One uniform per element of h, row-major, from the adapter's generator (dropout's draw machinery)."""
    return env.rng.uniform(shape, key)


def capacity(rows: int, k: int, experts: int, cf: float) -> int:
    """Tokens per expert: ceil(cf * rows * k / experts), at least 1, at most rows."""
    return min(rows, max(1, math.ceil(((cf * rows) * k) / experts)))


def top_k(probs: Array, k: int) -> Array:
    """Each row's k largest probabilities' experts, the largest first, ties to the smaller index (a stable sort of
    the negated probabilities)."""
    return np.argsort(-probs, axis=1, kind="stable")[:, :k]


def dispatch(choice: Array, experts: int, cap: int) -> list[Array]:
    """Per expert the tokens it takes, in slot order: rank by rank, token by token, up to `cap` each."""
    tokens = [[] for _ in range(experts)]
    for r in range(choice.shape[1]):
        for t in range(choice.shape[0]):
            e = int(choice[t, r])
            if len(tokens[e]) < cap:
                tokens[e].append(t)
    return [np.array(ts, dtype=np.int64) for ts in tokens]


def moe_forward(
    h: Array, spec: Block, P: Params, env: Env, key: int, prefix: str, ops: tuple[Any, ...]
) -> tuple[Array, Tape]:
    """MoE(h) of block `prefix` (its state's names, "b<i>."); `ops`: the adapter's (linear, linear_back, act_fwd,
    act_back). Returns the output and what backward needs. Weights are read (and their gradients written) through
    (out, in) views, whatever shape the manifest gives them."""
    linear, _, act_fwd, _ = ops
    dt = h.dtype.type
    R, W = h.shape
    E, k = int(spec.experts), int(spec.top_k)
    # The aux loss is divided by the micro-batches like the main loss: coefficient aux_loss_coef / M.
    eps, coef, rd = float(spec.router_jitter), float(spec.aux_loss_coef) / env.case.micro_batches, env.rd
    mult = None
    if eps > 0:
        u = moe_jitter_uniforms(env, h.shape, key)
        mult = ((1.0 - eps) + 2.0 * eps * u).astype(h.dtype)
    a = h * mult if mult is not None else h
    logits = linear(a, P["moe.router.weight"].reshape(E, W), P["moe.router.bias"], rd)
    mx = logits.max(axis=1, keepdims=True)
    ex = np.exp(logits - mx)
    probs = ex / ex.sum(axis=1, keepdims=True)
    choice = top_k(probs, k)
    cap = capacity(R, k, E, float(spec.capacity_factor))
    tokens = dispatch(choice, E, cap)
    out = np.zeros_like(h)
    experts = []
    for e in range(E):
        pe, tok = "moe.expert%d." % e, tokens[e]
        X = np.zeros((cap, W), dtype=h.dtype)
        X[: len(tok)] = h[tok]
        Z1 = linear(X, P[pe + "fc1.weight"].reshape(4 * W, W), P[pe + "fc1.bias"], rd)
        A = act_fwd("gelu", Z1)
        Z2 = linear(A, P[pe + "fc2.weight"].reshape(W, 4 * W), P[pe + "fc2.bias"], rd)
        gate = probs[tok, e]
        out[tok] += gate[:, None] * Z2[: len(tok)]  # a token at most once per expert
        experts.append((tok, gate, X, Z1, A, Z2))
    count = np.zeros(E, dtype=np.int64)
    np.add.at(count, choice.reshape(-1), 1)
    f = count.astype(h.dtype) / dt(R * k)
    aux = dt(E) * (f * (probs.sum(axis=0) / dt(R))).sum()
    if env.update_state:  # a training forward, never a recompute
        st = env.case_state
        filled = np.array([len(t) for t in tokens], dtype=np.int64)
        counts = st[prefix + "moe.expert_counts"]
        st[prefix + "moe.expert_counts"] = counts + filled.astype(counts.dtype).reshape(counts.shape)
        st[prefix + "moe.aux_loss"] = st[prefix + "moe.aux_loss"] + dt(coef) * aux
    return out, (h, mult, a, probs, f, coef, experts, rd)


def moe_backward(ctx: Tape, dout: Array, P: Params, G: Any, ops: tuple[Any, ...]) -> Array:
    """dL/dh from dL/dMoE(h) `dout`, the aux loss's part included; accumulates into the gradients G (G(name))."""
    _, linear_back, _, act_back = ops
    h, mult, a, probs, f, coef, experts, rd = ctx
    dt = h.dtype.type
    (R, E), W = probs.shape, h.shape[1]
    dprobs = np.zeros_like(probs)
    dh = np.zeros_like(h)
    for e, (tok, gate, X, Z1, A, Z2) in enumerate(experts):
        pe, n = "moe.expert%d." % e, len(tok)
        dZ2 = np.zeros_like(Z2)
        dZ2[:n] = gate[:, None] * dout[tok]
        dprobs[tok, e] += (dout[tok] * Z2[:n]).sum(axis=1)
        dA = linear_back(
            A,
            P[pe + "fc2.weight"].reshape(W, 4 * W),
            dZ2,
            G(pe + "fc2.weight").reshape(W, 4 * W),
            G(pe + "fc2.bias"),
            rd,
        )
        dZ1 = act_back("gelu", Z1, A, dA)
        dX = linear_back(
            X,
            P[pe + "fc1.weight"].reshape(4 * W, W),
            dZ1,
            G(pe + "fc1.weight").reshape(4 * W, W),
            G(pe + "fc1.bias"),
            rd,
        )
        dh[tok] += dX[:n]
    dprobs += (dt(coef) * dt(E) * f / dt(R))[None, :]  # the load-balancing loss: f_e is a constant
    dlogits = probs * (dprobs - (dprobs * probs).sum(axis=1, keepdims=True))
    da = linear_back(
        a, P["moe.router.weight"].reshape(E, W), dlogits, G("moe.router.weight").reshape(E, W), G("moe.router.bias"), rd
    )
    return dh + (da * mult if mult is not None else da)


def reset_trackers(case: Case, state: dict[str, Array]) -> None:
    """Each moe block's aux_loss tracker to zero: a micro-batch's pass starts."""
    for i, b in enumerate(case.blocks):
        if b.kind == "moe":
            n = "b%d.moe.aux_loss" % i
            state[n] = np.zeros_like(state[n])


def add_trackers(case: Case, state: dict[str, Array], loss: Any) -> Any:
    """The pass's loss: its main loss plus every moe block's tracker, in block order."""
    for i, b in enumerate(case.blocks):
        if b.kind == "moe":
            loss = loss + state["b%d.moe.aux_loss" % i].reshape(())[()]
    return loss
