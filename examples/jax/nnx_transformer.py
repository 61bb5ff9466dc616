"""A small Flax NNX transformer language model for `ckptcheck validate --adapter jax:module=...`
(harness/user_model/jax/USER_MODEL.md): token embedding, pre-norm blocks (causal attention, MLP, dropout drawn from
the model's nnx.Rngs), LM head, cross-entropy. Factories:

  remat         nnx.remat on every block's call (the usual NNX setup): holds
  dots          the same with policy=jax.checkpoint_policies.dots_saveable: holds
  batchnorm     a BatchNorm in every block's MLP (statistics are nnx.BatchStat Variables), nnx.remat per block: holds
  scan          the blocks stacked (nnx.vmap at init) and run by nnx.scan, nnx.remat inside the scan: holds
  state_twice   a hand-written "remat" that calls each block a second time on the same input (no dropout, BatchNorm
                in the MLP): the second call moves BatchNorm's statistics again: a finding, state-updated-twice
  rng_resplit   a hand-written remat (jax.custom_vjp) whose backward recomputes the block with the dropout stream
                advanced once more, as a recompute that splits the key again would: the mask is redrawn, a finding
  jax_checkpoint  plain jax.checkpoint around the block instead of nnx.remat: its dropout mutates the nnx.Rngs
                counter inside a JAX transform, which Flax refuses (TraceContextError, the class of flax issue 3997):
                the checkpointed run raises where the plain run trained, a finding
"""

import jax
import jax.numpy as jnp
import optax
from flax import nnx

VOCAB, SEQ, WIDTH, HEADS, LAYERS = 64, 16, 32, 4, 2


class Block(nnx.Module):
    def __init__(self, rngs, dropout=0.1, batchnorm=False):
        self.ln1 = nnx.LayerNorm(WIDTH, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(HEADS, WIDTH, decode=False, rngs=rngs)
        self.ln2 = nnx.LayerNorm(WIDTH, rngs=rngs)
        self.fc1 = nnx.Linear(WIDTH, 4 * WIDTH, rngs=rngs)
        self.bn = nnx.BatchNorm(4 * WIDTH, rngs=rngs) if batchnorm else None
        self.fc2 = nnx.Linear(4 * WIDTH, WIDTH, rngs=rngs)
        self.drop = nnx.Dropout(dropout, rngs=rngs)

    def __call__(self, x):
        mask = nnx.make_causal_mask(jnp.ones(x.shape[:2], jnp.int32))
        x = x + self.drop(self.attn(self.ln1(x), mask=mask))
        h = self.fc1(self.ln2(x))
        if self.bn is not None:
            h = self.bn(h.reshape(-1, h.shape[-1])).reshape(h.shape)
        return x + self.drop(self.fc2(jax.nn.gelu(h)))


class LM(nnx.Module):
    """`remat` is how the blocks run: None (plain), or a function (block, x) -> y that the factory's checkpoint
    sets; it is a static attribute, part of the graph, not of the state."""

    def __init__(self, rngs, batchnorm=False, dropout=0.1):
        self.embed = nnx.Embed(VOCAB, WIDTH, rngs=rngs)
        self.blocks = nnx.List([Block(rngs, dropout, batchnorm) for _ in range(LAYERS)])
        self.ln = nnx.LayerNorm(WIDTH, rngs=rngs)
        self.head = nnx.Linear(WIDTH, VOCAB, rngs=rngs)
        self.remat = None

    def __call__(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x) if self.remat is None else self.remat(block, x)
        return self.head(self.ln(x))


class ScanLM(nnx.Module):
    """The blocks stacked along a leading axis and run by nnx.scan; `remat` wraps the scanned body."""

    def __init__(self, rngs):
        self.embed = nnx.Embed(VOCAB, WIDTH, rngs=rngs)

        @nnx.split_rngs(splits=LAYERS)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make(r):
            return Block(r)

        self.blocks = make(rngs)
        self.ln = nnx.LayerNorm(WIDTH, rngs=rngs)
        self.head = nnx.Linear(WIDTH, VOCAB, rngs=rngs)
        self.remat = False

    def __call__(self, ids):
        def body(x, block):
            return block(x)

        if self.remat:
            body = nnx.remat(body)
        x = nnx.scan(body, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)(self.embed(ids), self.blocks)
        return self.head(self.ln(x))


def lm_loss(model, batch, key):
    logits = model(batch[:, :-1])
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch[:, 1:]).mean()


def tokens(key, batch_size):
    return jax.random.randint(key, (batch_size, SEQ + 1), 0, VOCAB)


def _setup(model, remat):
    def checkpoint(m):
        m.remat = remat

    return {
        "model": model,
        "batch": tokens,
        "loss": lm_loss,
        "checkpoint": checkpoint,
        "optimizer": optax.adam(1e-3),
        "batch_size": 4,
    }


def remat(seed):
    return _setup(LM(nnx.Rngs(seed, dropout=seed + 1)), lambda block, x: nnx.remat(Block.__call__)(block, x))


def dots(seed):
    policy = jax.checkpoint_policies.dots_saveable
    return _setup(
        LM(nnx.Rngs(seed, dropout=seed + 1)), lambda block, x: nnx.remat(Block.__call__, policy=policy)(block, x)
    )


def batchnorm(seed):
    return _setup(
        LM(nnx.Rngs(seed, dropout=seed + 1), batchnorm=True), lambda block, x: nnx.remat(Block.__call__)(block, x)
    )


def scan(seed):
    return _setup(ScanLM(nnx.Rngs(seed, dropout=seed + 1)), True)


def _call_twice(block, x):
    """A remat written by hand that calls the block a second time on the same input to have its recompute ready
    (the output of the second call unused): under NNX every call moves the block's state, so BatchNorm's running
    statistics move twice."""
    y = block(x)
    block(x)
    return y


def state_twice(seed):
    return _setup(LM(nnx.Rngs(seed, dropout=seed + 1), batchnorm=True, dropout=0.0), _call_twice)


def _resplit_remat(block, x):
    """A remat written by hand with jax.custom_vjp: the forward saves only the block's input; the backward
    recomputes the block from a copy whose dropout streams have been advanced once more, as a recompute that
    splits the key again draws another mask."""
    graphdef, state = nnx.split(block)

    def run(state, x, advance):
        b = nnx.merge(graphdef, state)
        if advance:
            for _, m in nnx.iter_graph(b):
                if isinstance(m, nnx.Dropout) and m.rngs is not None:
                    m.rngs()  # one more draw from the stream
        return b(x)

    @jax.custom_vjp
    def f(state, x):
        return run(state, x, False)

    def fwd(state, x):
        return run(state, x, False), (state, x)

    def bwd(res, g):
        state, x = res
        return jax.vjp(lambda s, v: run(s, v, True), state, x)[1](g)

    f.defvjp(fwd, bwd)
    return f(state, x)


def rng_resplit(seed):
    return _setup(LM(nnx.Rngs(seed, dropout=seed + 1)), _resplit_remat)


def jax_checkpoint(seed):
    """Plain jax.checkpoint around an NNX block instead of nnx.remat: the block's dropout advances its nnx.Rngs
    counter, a Variable mutated inside a JAX transform it was not passed to (Flax raises TraceContextError)."""
    return _setup(LM(nnx.Rngs(seed, dropout=seed + 1)), lambda block, x: jax.checkpoint(lambda v: block(v))(x))
