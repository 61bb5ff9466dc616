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

Stochastic depth, RReLU and bf16 compute (PROTOCOL.md; np_stochastic.py): a block's `drop_path` drops its residual
branch per sample (residual-bn after the ReLU, transformer after each branch's dropout, as timm's ViT block), mlp
`rrelu` multiplies negative elements by slopes drawn in [lower, upper], both from the generator below and restored
with it for a recompute; backward uses the saved scales and slopes. `compute` bf16 rounds every matrix product's
operands in a block to bfloat16 and accumulates in float32, in the first forward and every recompute alike.

Mixture of experts (np_moe.py): a moe block's router jitter draws from the generator below like dropout; its
expert_counts and aux_loss buffers move in the first forward only, and each pass's loss adds the aux_loss trackers.

Generators (the case's `rng`): stateful — one numpy Philox generator seeded from the case, advanced by every
dropout in execution order (PyTorch-like); counter — each dropout's mask a pure function of (seed, step, block,
op) through its own Philox key (JAX-like), so recompute needs no snapshot.
"""
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import np_moe as moe  # noqa: E402  (numpy/np_moe.py)
import np_stochastic as sto  # noqa: E402  (numpy/np_stochastic.py)
import numpy as np  # noqa: E402
from ckpt_adapter import BadRequest, main  # noqa: E402
from np_schedule import array_bytes, recursive_recompute_counts, segment_bounds  # noqa: E402,F401

GELU_BETA = math.sqrt(2.0 / math.pi)
GELU_KAPPA = 0.044715


# ---------------------------------------------------------------- generators
class StatefulRng:
    """One Philox stream, advanced by every random op in execution order."""

    def __init__(self, seed=None, state=None):
        self.bits = np.random.Philox(key=seed if seed is not None else 0)
        if state is not None:
            self.bits.state = state
        self.gen = np.random.Generator(self.bits)

    def uniform(self, shape, op_key):
        return self.gen.random(shape)

    def snapshot(self):
        return self.bits.state  # a fresh dict of copies

    def restored(self, snapshot):
        return StatefulRng(state=snapshot)

    def state_bytes(self):
        s = self.bits.state
        words = np.concatenate([s["state"]["counter"], s["state"]["key"], s["buffer"],
                                np.array([s["buffer_pos"], s["has_uint32"], s["uinteger"]], dtype=np.uint64)])
        return words.astype("<u8").tobytes()


class CounterRng:
    """Masks as a pure function of (seed, op key); nothing to snapshot."""

    def __init__(self, seed):
        self.seed = seed

    def uniform(self, shape, op_key):
        return np.random.Generator(np.random.Philox(key=(self.seed << 64) | op_key)).random(shape)

    def snapshot(self):
        return None

    def restored(self, snapshot):
        return self

    def state_bytes(self):
        return None


def op_key(step, block, node):
    return ((step + 1) << 40) | (block << 12) | node


# ---------------------------------------------------------------- ops (forward returns output and what backward needs)
class Env:
    def __init__(self, case, rng, step, update_state, calls):
        self.case = case
        self.rng = rng
        self.step = step
        self.update_state = update_state
        self.calls = calls
        self.rd = sto.rounding(case, update_state)  # matmul operands: bf16-rounded under compute bf16


def dropout(x, p, env, block, node):
    if p == 0:
        return x, None
    dt = x.dtype.type
    u = env.rng.uniform(x.shape, op_key(env.step, block, node))
    mask = (u >= p).astype(x.dtype) * (dt(1) / (dt(1) - dt(p)))
    return x * mask, mask


def linear(x, w, b, rd=sto.exact):
    return rd(x) @ rd(w).T + b


def linear_back(x, w, dy, gw, gb, rd=sto.exact):
    """`rd`: the forward's operand rounding (bf16 compute rounds x and w again, never dy)."""
    gw += dy.T @ rd(x)
    gb += dy.sum(axis=0)
    return dy @ rd(w)


def act_fwd(kind, h):
    dt = h.dtype.type
    if kind == "relu":
        return np.maximum(h, dt(0))
    if kind == "tanh":
        return np.tanh(h)
    return dt(0.5) * h * (dt(1) + np.tanh(dt(GELU_BETA) * (h + dt(GELU_KAPPA) * h * h * h)))


def act_back(kind, h, y, dy):
    dt = h.dtype.type
    if kind == "relu":
        return np.where(y > 0, dy, dt(0))
    if kind == "tanh":
        return dy * (dt(1) - y * y)
    t = np.tanh(dt(GELU_BETA) * (h + dt(GELU_KAPPA) * h * h * h))
    return dy * (dt(0.5) * (dt(1) + t)
                 + dt(0.5) * h * (dt(1) - t * t) * dt(GELU_BETA) * (dt(1) + dt(3 * GELU_KAPPA) * h * h))


def layernorm(x, g, b):
    dt = x.dtype.type
    mean = x.mean(axis=1, keepdims=True)
    c = x - mean
    rstd = dt(1) / np.sqrt((c * c).mean(axis=1, keepdims=True) + dt(1e-5))
    xhat = c * rstd
    return xhat * g + b, (xhat, rstd)


def layernorm_back(ctx, g, dy, gg, gb):
    xhat, rstd = ctx
    gg += (dy * xhat).sum(axis=0)
    gb += dy.sum(axis=0)
    dn = dy * g
    return rstd * (dn - dn.mean(axis=1, keepdims=True) - xhat * (dn * xhat).mean(axis=1, keepdims=True))


class Params:
    def __init__(self, values, grads, prefix):
        self.v, self.g, self.p = values, grads, prefix

    def __getitem__(self, name):
        return self.v[self.p + name]

    def grad(self, name):
        return self.g[self.p + name]


# ---------------------------------------------------------------- blocks
def mlp_forward(i, spec, P, x, env):
    h = linear(x, P["fc.weight"], P["fc.bias"], env.rd)
    if spec.activation == "rrelu":  # training-mode RReLU: its slopes drawn, then saved for backward
        a, noise = sto.rrelu(h, env.case.rrelu_lower, env.case.rrelu_upper, env, op_key(env.step, i, 1))
    else:
        a, noise = act_fwd(spec.activation, h), None
    y, mask = dropout(a, env.case.dropout, env, i, 2)
    return y, (x, h, a, noise, mask, env.rd)


def mlp_backward(i, spec, P, tape, dy):
    x, h, a, noise, mask, rd = tape
    da = dy * mask if mask is not None else dy
    dh = da * noise if noise is not None else act_back(spec.activation, h, a, da)
    return linear_back(x, P["fc.weight"], dh, P.grad("fc.weight"), P.grad("fc.bias"), rd)


def bn_forward(i, spec, P, x, env):
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


def bn_backward(i, spec, P, tape, dy):
    x, xhat, rstd, r, scale, rd = tape
    dbn = np.where(r > 0, sto.drop_path_back(scale, dy), dy.dtype.type(0))
    P.grad("bn.weight")[...] += (dbn * xhat).sum(axis=0)
    P.grad("bn.bias")[...] += dbn.sum(axis=0)
    dn = dbn * P["bn.weight"]
    dh = rstd * (dn - dn.mean(axis=0) - xhat * (dn * xhat).mean(axis=0))
    return dy + linear_back(x, P["fc.weight"], dh, P.grad("fc.weight"), P.grad("fc.bias"), rd)


def attention(qkv, heads, seq, p, env, i):
    rd = env.rd
    dt = qkv.dtype.type
    rows, c3 = qkv.shape
    c = c3 // 3
    hd = c // heads
    b = rows // seq

    def split(k):
        return qkv[:, k * c:(k + 1) * c].reshape(b, seq, heads, hd).transpose(0, 2, 1, 3)

    q, k, v = split(0), split(1), split(2)
    s = (rd(q) @ rd(k).transpose(0, 1, 3, 2)) * (dt(1) / np.sqrt(dt(hd)))
    future = np.triu(np.ones((seq, seq), dtype=bool), 1)
    s = np.where(future, -np.inf, s)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    kept, mask = dropout(probs, p, env, i, 2)
    out = (rd(kept) @ rd(v)).transpose(0, 2, 1, 3).reshape(rows, c)
    return out, (q, k, v, probs, kept, mask, rd)


def attention_back(ctx, dout, heads, seq):
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

    def merge(t):
        return t.transpose(0, 2, 1, 3).reshape(b * seq, c)

    return np.concatenate([merge(dq), merge(dk), merge(dv)], axis=1)


def transformer_forward(i, spec, P, x, env):
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


def transformer_backward(i, spec, P, tape, dy):
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


def moe_block_forward(i, spec, P, x, env):
    """y = x + DropPath(Dropout(MoE(LayerNorm x))) (np_moe.py); nodes ln 0, moe 1, drop 2, drop_path 3."""
    hn, ln = layernorm(x, P["ln.weight"], P["ln.bias"])
    m, mctx = moe.moe_forward(hn, spec, P, env, op_key(env.step, i, 1), "b%d." % i, MOE_OPS)
    d, mask = dropout(m, env.case.dropout, env, i, 2)
    d, scale = sto.drop_path(d, spec.drop_path, env.case.seq, env, op_key(env.step, i, 3))
    return x + d, (ln, mctx, mask, scale)


def moe_block_backward(i, spec, P, tape, dy):
    ln, mctx, mask, scale = tape
    dm = sto.drop_path_back(scale, dy)
    dm = dm * mask if mask is not None else dm
    dh = moe.moe_backward(mctx, dm, P, P.grad, MOE_OPS)
    return dy + layernorm_back(ln, P["ln.weight"], dh, P.grad("ln.weight"), P.grad("ln.bias"))


MOE_OPS = (linear, linear_back, act_fwd, act_back)
BLOCKS = {"mlp": (mlp_forward, mlp_backward), "residual-bn": (bn_forward, bn_backward),
          "transformer": (transformer_forward, transformer_backward), "moe": (moe_block_forward, moe_block_backward)}


# ---------------------------------------------------------------- loss
# `mb`: the micro-batch (cases/micro_batches.h): its rows' labels or target, and M, by which its loss is divided
# (the backward of loss / M scales the gradient by 1/M).
def loss_forward(case, x, mb):
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


def loss_backward(case, ctx, mb):
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
def head_weight(case):
    """The LM head's weight: the token embedding's arrays when tied (a shared parameter, as a sharing block's)."""
    return "emb.weight" if case.tied else "head.weight"


def stem_forward(values, mb):
    return values["emb.weight"][mb.tokens] + values["pos.weight"][mb.positions]


def stem_backward(grads, mb, g):
    np.add.at(grads["emb.weight"], mb.tokens, g)
    np.add.at(grads["pos.weight"], mb.positions, g)


def lm_loss_forward(case, values, x, mb):
    h, ln = layernorm(x, values["head.ln.weight"], values["head.ln.bias"])
    loss, probs = loss_forward(case, h @ values[head_weight(case)].T, mb)  # cross-entropy over the vocabulary
    return loss, (h, ln, probs)


def lm_loss_backward(case, values, grads, ctx, mb):
    h, ln, probs = ctx
    dlogits = loss_backward(case, probs, mb)
    w = head_weight(case)
    grads[w] += dlogits.T @ h  # computed for a frozen tied weight too; neither reported nor applied then
    return layernorm_back(ln, values["head.ln.weight"], dlogits @ values[w], grads["head.ln.weight"],
                          grads["head.ln.bias"])


class NumpyAdapter:
    name = "numpy"
    version = np.__version__

    def capabilities(self):
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
            "options": {"segments": {"values": "int", "default": "sqrt",
                                     "doc": "checkpoint segments K (default round(sqrt(L)), capped at L)"},
                        "scheme": {"values": ["segments", "recursive"], "default": "segments",
                                   "doc": "segments: K equal segments, each recomputed once; recursive: Chen et "
                                          "al.'s halving, blocks recomputed up to ceil(log2 L) + 1 times"}},
            "reports_memory": True,
            "reports_forward_calls": True,
            "reports_rng_state": True,
            "params": ["frozen", "shared", "no_input_grad", "micro_batches"],
            "inputs": ["dense", "tokens"],
        }

    def run(self, case, out, mode, options):
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
                part_loss, part_g, part_saved = self._pass(case, mode, scheme, segments, values, part, state, rng,
                                                           mb, counts)
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
        return {"saved_activation_bytes": saved, "forward_calls": calls,
                "recomputed_blocks": [i for i in range(L) if declared[i] > 0],
                "recompute_counts": [declared] * case.steps,
                "step_seconds": seconds,
                "segments": k if mode == "checkpoint" and scheme == "segments" else None}

    @staticmethod
    def _pass(case, mode, scheme, segments, values, grads, state, rng, mb, counts):
        """One micro-batch's forward and backward (the whole step's without micro-batches), accumulating into
        `grads`; returns its loss, dL/d(its input rows) (None for a token case, whose stem consumes it) and the
        bytes its forward left for the backward. The moe blocks' aux_loss trackers start the pass at zero and end
        in its loss (np_moe.py)."""
        moe.reset_trackers(case, state)
        loss, g, saved = NumpyAdapter._model_pass(case, mode, scheme, segments, values, grads, state, rng, mb,
                                                  counts)
        return moe.add_trackers(case, state, loss), g, saved

    @staticmethod
    def _model_pass(case, mode, scheme, segments, values, grads, state, rng, mb, counts):
        if not case.tokens_input:
            return NumpyAdapter._chain_pass(case, mode, scheme, segments, values, grads, state, rng, mb, counts,
                                            mb.input, lambda x: loss_forward(case, x, mb),
                                            lambda ctx: loss_backward(case, ctx, mb))
        # The stem and the head run outside every checkpoint segment, as the reference's do.
        loss, g, saved = NumpyAdapter._chain_pass(
            case, mode, scheme, segments, values, grads, state, rng, mb, counts, stem_forward(values, mb),
            lambda x: lm_loss_forward(case, values, x, mb),
            lambda ctx: lm_loss_backward(case, values, grads, ctx, mb))
        if case.embedding_trains:
            stem_backward(grads, mb, g)
        return loss, None, saved

    @staticmethod
    def _chain_pass(case, mode, scheme, segments, values, grads, state, rng, mb, counts, x, head_forward,
                    head_backward):
        """The chain's forward and backward from x_0 = `x`, with the loss (or LM head) `head_forward` /
        `head_backward`; returns the loss, dL/dx_0 and the saved bytes."""
        L = len(case.blocks)
        prefixes = ["b%d." % i for i in range(L)]
        # A sharing block reads and accumulates into its owner's arrays: each use's contribution is computed,
        # then added (gw += dy.T @ x), in the order backward reaches the uses, as autograd sums them.
        P = [Params(values, grads, prefixes[b.share if b.share is not None else i])
             for i, b in enumerate(case.blocks)]

        def fwd(i, x, env):
            counts[i] += 1
            return BLOCKS[case.blocks[i].kind][0](i, case.blocks[i], P[i], x, env)

        def bwd(i, tape, dy):
            return BLOCKS[case.blocks[i].kind][1](i, case.blocks[i], P[i], tape, dy)

        def renv_at(snap):
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

            def back(a, b, xa, snap, g, depth_bytes):
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
        for (a, b) in segments:
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
