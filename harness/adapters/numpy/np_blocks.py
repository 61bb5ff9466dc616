"""The numpy adapter's model (adapter.py runs it): each op's forward, which returns its output and what its backward
needs, and backward; the block kinds (mlp, residual-bn, transformer, moe) built from them, BLOCKS by kind; the
losses, the token stem and the LM head. Every forward draws its randomness through Env, so a recompute under a
restored generator redraws the same masks."""

from __future__ import annotations

import math
from typing import Any

import np_moe as moe
import np_stochastic as sto
import numpy as np
from ckpt_adapter import Block, Case, MicroBatch
from np_env import Array, Arrays, Env, Params, Rounding, Tape, exact

GELU_BETA = math.sqrt(2.0 / math.pi)
GELU_KAPPA = 0.044715


def op_key(step: int, block: int, node: int) -> int:
    """The counter key of one random op: (step + 1, block, node) packed into one integer."""
    return ((step + 1) << 40) | (block << 12) | node


# ---------------------------------------------------------------- ops (forward returns output and what backward needs)
def dropout(x: Array, p: float, env: Env, block: int, node: int) -> tuple[Array, Array | None]:
    """Inverted dropout with rate p: the output and the scaled mask (None when p is 0)."""
    if p == 0:
        return x, None
    dt = x.dtype.type
    u = env.rng.uniform(x.shape, op_key(env.step, block, node))
    mask = (u >= p).astype(x.dtype) * (dt(1) / (dt(1) - dt(p)))
    return x * mask, mask


def linear(x: Array, w: Array, b: Array, rd: Rounding = exact) -> Array:
    """x w^T + b, the operands rounded by `rd`."""
    return rd(x) @ rd(w).T + b


def linear_back(x: Array, w: Array, dy: Array, gw: Array, gb: Array, rd: Rounding = exact) -> Array:
    """`rd`: the forward's operand rounding (bf16 compute rounds x and w again, never dy)."""
    gw += dy.T @ rd(x)
    gb += dy.sum(axis=0)
    return dy @ rd(w)


def act_fwd(kind: str, h: Array) -> Array:
    """The activation `kind` (relu, tanh; else tanh-approximated gelu) of h."""
    dt = h.dtype.type
    if kind == "relu":
        return np.maximum(h, dt(0))
    if kind == "tanh":
        return np.tanh(h)
    return dt(0.5) * h * (dt(1) + np.tanh(dt(GELU_BETA) * (h + dt(GELU_KAPPA) * h * h * h)))


def act_back(kind: str, h: Array, y: Array, dy: Array) -> Array:
    """dL/dh of act_fwd(kind, h) = y, from dL/dy."""
    dt = h.dtype.type
    if kind == "relu":
        return np.where(y > 0, dy, dt(0))
    if kind == "tanh":
        return dy * (dt(1) - y * y)
    t = np.tanh(dt(GELU_BETA) * (h + dt(GELU_KAPPA) * h * h * h))
    return dy * (
        dt(0.5) * (dt(1) + t) + dt(0.5) * h * (dt(1) - t * t) * dt(GELU_BETA) * (dt(1) + dt(3 * GELU_KAPPA) * h * h)
    )


def layernorm(x: Array, g: Array, b: Array) -> tuple[Array, Tape]:
    """LayerNorm over the rows (eps 1e-5): the output and (xhat, rstd) for backward."""
    dt = x.dtype.type
    mean = x.mean(axis=1, keepdims=True)
    c = x - mean
    rstd = dt(1) / np.sqrt((c * c).mean(axis=1, keepdims=True) + dt(1e-5))
    xhat = c * rstd
    return xhat * g + b, (xhat, rstd)


def layernorm_back(ctx: Tape, g: Array, dy: Array, gg: Array, gb: Array) -> Array:
    """dL/dx from dL/dy, accumulating the weight's and bias's gradients into gg and gb."""
    xhat, rstd = ctx
    gg += (dy * xhat).sum(axis=0)
    gb += dy.sum(axis=0)
    dn = dy * g
    return rstd * (dn - dn.mean(axis=1, keepdims=True) - xhat * (dn * xhat).mean(axis=1, keepdims=True))


# ---------------------------------------------------------------- blocks
def mlp_forward(i: int, spec: Block, P: Params, x: Array, env: Env) -> tuple[Array, Tape]:
    """y = Dropout(act(x W^T + b)), RReLU's slopes drawn under rrelu; nodes fc 0, act 1, drop 2."""
    h = linear(x, P["fc.weight"], P["fc.bias"], env.rd)
    if spec.activation == "rrelu":  # training-mode RReLU: its slopes drawn, then saved for backward
        a, noise = sto.rrelu(h, env.case.rrelu_lower, env.case.rrelu_upper, env, op_key(env.step, i, 1))
    else:
        a, noise = act_fwd(spec.activation, h), None
    y, mask = dropout(a, env.case.dropout, env, i, 2)
    return y, (x, h, a, noise, mask, env.rd)


def mlp_backward(i: int, spec: Block, P: Params, tape: Tape, dy: Array) -> Array:
    """dL/dx of mlp_forward, its parameters' gradients accumulated."""
    x, h, a, noise, mask, rd = tape
    da = dy * mask if mask is not None else dy
    dh = da * noise if noise is not None else act_back(spec.activation, h, a, da)
    return linear_back(x, P["fc.weight"], dh, P.grad("fc.weight"), P.grad("fc.bias"), rd)


def bn_forward(i: int, spec: Block, P: Params, x: Array, env: Env) -> tuple[Array, Tape]:
    """y = x + DropPath(ReLU(BatchNorm(x W^T + b))) with batch statistics; the running statistics move only in
    the first forward (env.update_state); drop_path node 3."""
    dt = x.dtype.type
    n = x.shape[0]
    h = linear(x, P["fc.weight"], P["fc.bias"], env.rd)
    mean = h.sum(axis=0) * (dt(1) / dt(n))
    c = h - mean
    sumsq = (c * c).sum(axis=0)
    rstd = dt(1) / np.sqrt(sumsq * (dt(1) / dt(n)) + dt(1e-5))
    xhat = c * rstd
    r = np.maximum(xhat * P["bn.weight"] + P["bn.bias"], dt(0))
    if env.update_state:
        st, pre, m = env.case_state, "b%d.bn." % i, dt(0.1)
        st[pre + "running_mean"] = (dt(1) - m) * st[pre + "running_mean"] + m * mean
        st[pre + "running_var"] = (dt(1) - m) * st[pre + "running_var"] + m * (sumsq * (dt(1) / dt(n - 1)))
        st[pre + "num_batches_tracked"] = st[pre + "num_batches_tracked"] + 1
    d, scale = sto.drop_path(r, spec.drop_path, env.case.seq, env, op_key(env.step, i, 3))
    return x + d, (x, xhat, rstd, r, scale, env.rd)


def bn_backward(i: int, spec: Block, P: Params, tape: Tape, dy: Array) -> Array:
    """dL/dx of bn_forward, its parameters' gradients accumulated."""
    x, xhat, rstd, r, scale, rd = tape
    dbn = np.where(r > 0, sto.drop_path_back(scale, dy), dy.dtype.type(0))
    P.grad("bn.weight")[...] += (dbn * xhat).sum(axis=0)
    P.grad("bn.bias")[...] += dbn.sum(axis=0)
    dn = dbn * P["bn.weight"]
    dh = rstd * (dn - dn.mean(axis=0) - xhat * (dn * xhat).mean(axis=0))
    return dy + linear_back(x, P["fc.weight"], dh, P.grad("fc.weight"), P.grad("fc.bias"), rd)


def attention(qkv: Array, heads: int, seq: int, p: float, env: Env, i: int) -> tuple[Array, Tape]:
    """Causal multi-head attention of packed q|k|v rows, dropout p on its probabilities: output and tape."""
    rd = env.rd
    dt = qkv.dtype.type
    rows, c3 = qkv.shape
    c = c3 // 3
    hd = c // heads
    b = rows // seq

    def split(k: int) -> Array:
        return qkv[:, k * c : (k + 1) * c].reshape(b, seq, heads, hd).transpose(0, 2, 1, 3)

    q, k, v = split(0), split(1), split(2)
    s = (rd(q) @ rd(k).transpose(0, 1, 3, 2)) * (dt(1) / np.sqrt(dt(hd)))
    future = np.triu(np.ones((seq, seq), dtype=bool), 1)
    s = np.where(future, -np.inf, s)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    kept, mask = dropout(probs, p, env, i, 2)
    out = (rd(kept) @ rd(v)).transpose(0, 2, 1, 3).reshape(rows, c)
    return out, (q, k, v, probs, kept, mask, rd)


def attention_back(ctx: Tape, dout: Array, heads: int, seq: int) -> Array:
    """dL/d(qkv) of attention from dL/d(output)."""
    q, k, v, probs, kept, mask, rd = ctx
    dt = q.dtype.type
    b, _, _, hd = q.shape
    c = heads * hd
    g = dout.reshape(b, seq, heads, hd).transpose(0, 2, 1, 3)
    dv = rd(kept).transpose(0, 1, 3, 2) @ g
    dp = g @ rd(v).transpose(0, 1, 3, 2)
    if mask is not None:
        dp = dp * mask
    ds = probs * (dp - (dp * probs).sum(axis=-1, keepdims=True)) * (dt(1) / np.sqrt(dt(hd)))
    dq = ds @ rd(k)
    dk = ds.transpose(0, 1, 3, 2) @ rd(q)

    def merge(t: Array) -> Array:
        return t.transpose(0, 2, 1, 3).reshape(b * seq, c)

    return np.concatenate([merge(dq), merge(dk), merge(dv)], axis=1)


def transformer_forward(i: int, spec: Block, P: Params, x: Array, env: Env) -> tuple[Array, Tape]:
    """Pre-LN GPT block: h = x + DropPath(Dropout(proj(attention(LN1 x)))), y = h + DropPath(Dropout(MLP(LN2 h)))
    with a gelu MLP; dropout nodes 2 (attention), 4 and 10, drop_path nodes 5 and 12."""
    case, p, dp, rd = env.case, env.case.dropout, spec.drop_path, env.rd
    a1, ln1 = layernorm(x, P["ln1.weight"], P["ln1.bias"])
    qkv = linear(a1, P["qkv.weight"], P["qkv.bias"], rd)
    att, actx = attention(qkv, spec.heads, case.seq, p, env, i)
    pr = linear(att, P["proj.weight"], P["proj.bias"], rd)
    d1, m1 = dropout(pr, p, env, i, 4)
    d1, s1 = sto.drop_path(d1, dp, case.seq, env, op_key(env.step, i, 5))  # timm: after the branch's dropout
    h = x + d1
    a2, ln2 = layernorm(h, P["ln2.weight"], P["ln2.bias"])
    f1 = linear(a2, P["fc1.weight"], P["fc1.bias"], rd)
    gl = act_fwd("gelu", f1)
    f2 = linear(gl, P["fc2.weight"], P["fc2.bias"], rd)
    d2, m2 = dropout(f2, p, env, i, 10)
    d2, s2 = sto.drop_path(d2, dp, case.seq, env, op_key(env.step, i, 12))
    return h + d2, (x, ln1, a1, actx, att, m1, h, ln2, a2, f1, gl, m2, s1, s2, rd)


def transformer_backward(i: int, spec: Block, P: Params, tape: Tape, dy: Array) -> Array:
    """dL/dx of transformer_forward, its parameters' gradients accumulated."""
    x, ln1, a1, actx, att, m1, h, ln2, a2, f1, gl, m2, s1, s2, rd = tape
    seq = actx[0].shape[2]
    df2 = sto.drop_path_back(s2, dy)
    df2 = df2 * m2 if m2 is not None else df2
    dgl = linear_back(gl, P["fc2.weight"], df2, P.grad("fc2.weight"), P.grad("fc2.bias"), rd)
    df1 = act_back("gelu", f1, gl, dgl)
    da2 = linear_back(a2, P["fc1.weight"], df1, P.grad("fc1.weight"), P.grad("fc1.bias"), rd)
    dh = dy + layernorm_back(ln2, P["ln2.weight"], da2, P.grad("ln2.weight"), P.grad("ln2.bias"))
    dpr = sto.drop_path_back(s1, dh)
    dpr = dpr * m1 if m1 is not None else dpr
    datt = linear_back(att, P["proj.weight"], dpr, P.grad("proj.weight"), P.grad("proj.bias"), rd)
    dqkv = attention_back(actx, datt, spec.heads, seq)
    da1 = linear_back(a1, P["qkv.weight"], dqkv, P.grad("qkv.weight"), P.grad("qkv.bias"), rd)
    return dh + layernorm_back(ln1, P["ln1.weight"], da1, P.grad("ln1.weight"), P.grad("ln1.bias"))


def moe_block_forward(i: int, spec: Block, P: Params, x: Array, env: Env) -> tuple[Array, Tape]:
    """y = x + DropPath(Dropout(MoE(LayerNorm x))) (np_moe.py); nodes ln 0, moe 1, drop 2, drop_path 3."""
    hn, ln = layernorm(x, P["ln.weight"], P["ln.bias"])
    m, mctx = moe.moe_forward(hn, spec, P, env, op_key(env.step, i, 1), "b%d." % i, MOE_OPS)
    d, mask = dropout(m, env.case.dropout, env, i, 2)
    d, scale = sto.drop_path(d, spec.drop_path, env.case.seq, env, op_key(env.step, i, 3))
    return x + d, (ln, mctx, mask, scale)


def moe_block_backward(i: int, spec: Block, P: Params, tape: Tape, dy: Array) -> Array:
    """dL/dx of moe_block_forward, its parameters' gradients accumulated."""
    ln, mctx, mask, scale = tape
    dm = sto.drop_path_back(scale, dy)
    dm = dm * mask if mask is not None else dm
    dh = moe.moe_backward(mctx, dm, P, P.grad, MOE_OPS)
    return dy + layernorm_back(ln, P["ln.weight"], dh, P.grad("ln.weight"), P.grad("ln.bias"))


MOE_OPS = (linear, linear_back, act_fwd, act_back)
BLOCKS = {
    "mlp": (mlp_forward, mlp_backward),
    "residual-bn": (bn_forward, bn_backward),
    "transformer": (transformer_forward, transformer_backward),
    "moe": (moe_block_forward, moe_block_backward),
}


# ---------------------------------------------------------------- loss
# `mb`: the micro-batch (cases/micro_batches.h): its rows' labels or target, and M, by which its loss is divided
# (the backward of loss / M scales the gradient by 1/M).
def loss_forward(case: Case, x: Array, mb: MicroBatch) -> tuple[Any, Array]:
    """The micro-batch's loss (mse or cross-entropy, divided by M) and what loss_backward needs."""
    dt = x.dtype.type
    n = x.shape[0]
    if case.loss == "mse":
        d = x - mb.target
        loss, ctx = (d * d).sum() / dt(d.size), d
    else:
        mx = x.max(axis=1, keepdims=True)
        e = np.exp(x - mx)
        s = e.sum(axis=1, keepdims=True)
        rows = np.arange(n)
        per_row = np.log(s[:, 0]) - (x[rows, mb.labels] - mx[:, 0])
        loss, ctx = per_row.sum() / dt(n), e / s
    return (loss / dt(mb.count) if mb.count > 1 else loss), ctx


def loss_backward(case: Case, ctx: Array, mb: MicroBatch) -> Array:
    """dL/dx of loss_forward."""
    if case.loss == "mse":
        d = ctx
        g = d * (d.dtype.type(2) / d.dtype.type(d.size))
    else:
        probs = ctx
        n = probs.shape[0]
        g = probs.copy()
        g[np.arange(n), mb.labels] -= 1
        g = g * (g.dtype.type(1) / g.dtype.type(n))
    return g * (g.dtype.type(1) / g.dtype.type(mb.count)) if mb.count > 1 else g


# ---------------------------------------------------------------- language-model stem and head
def head_weight(case: Case) -> str:
    """The LM head's weight: the token embedding's arrays when tied (a shared parameter, as a sharing block's)."""
    return "emb.weight" if case.tied else "head.weight"


def stem_forward(values: Arrays, mb: MicroBatch) -> Array:
    """x_0 of a token case: token embedding rows plus position embedding rows."""
    return values["emb.weight"][mb.tokens] + values["pos.weight"][mb.positions]


def stem_backward(grads: Arrays, mb: MicroBatch, g: Array) -> None:
    """Scatter-add dL/dx_0 into the embeddings' gradients, row by row."""
    np.add.at(grads["emb.weight"], mb.tokens, g)
    np.add.at(grads["pos.weight"], mb.positions, g)


def lm_loss_forward(case: Case, values: Arrays, x: Array, mb: MicroBatch) -> tuple[Any, Tape]:
    """The LM head's loss: LayerNorm, logits against the head weight, cross-entropy; and its tape."""
    h, ln = layernorm(x, values["head.ln.weight"], values["head.ln.bias"])
    loss, probs = loss_forward(case, h @ values[head_weight(case)].T, mb)  # cross-entropy over the vocabulary
    return loss, (h, ln, probs)


def lm_loss_backward(case: Case, values: Arrays, grads: Arrays, ctx: Tape, mb: MicroBatch) -> Array:
    """dL/dx of lm_loss_forward, the head's gradients accumulated."""
    h, ln, probs = ctx
    dlogits = loss_backward(case, probs, mb)
    w = head_weight(case)
    grads[w] += dlogits.T @ h  # computed for a frozen tied weight too; neither reported nor applied then
    return layernorm_back(
        ln, values["head.ln.weight"], dlogits @ values[w], grads["head.ln.weight"], grads["head.ln.bias"]
    )
