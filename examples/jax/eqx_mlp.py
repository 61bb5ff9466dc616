"""An Equinox model for `ckptcheck validate --adapter jax:module=...` (harness/user_model/jax/USER_MODEL.md): residual
MLP blocks (eqx.nn.LayerNorm, eqx.nn.Linear, eqx.nn.Dropout) and a linear head, each block run through
eqx.filter_checkpoint when the model's static `remat` field says so. The model is an eqx.Module, a pytree: its
floating-point arrays are trained, its static fields and functions are not. Factories:

  filter_checkpoint   every block under eqx.filter_checkpoint: holds
  policy_dots         eqx.filter_checkpoint(block, policy=jax.checkpoint_policies.dots_saveable): holds
  ineffective         a "remat" that returns the block unchanged (a wrapper left disabled): the memory finding
                      "no effect on saved activations"
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

WIDTH, HIDDEN, BLOCKS, DROPOUT = 32, 128, 4, 0.1


class Block(eqx.Module):
    norm: eqx.nn.LayerNorm
    fc1: eqx.nn.Linear
    fc2: eqx.nn.Linear
    drop: eqx.nn.Dropout

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.norm = eqx.nn.LayerNorm(WIDTH)
        self.fc1 = eqx.nn.Linear(WIDTH, HIDDEN, key=k1)
        self.fc2 = eqx.nn.Linear(HIDDEN, WIDTH, key=k2)
        self.drop = eqx.nn.Dropout(DROPOUT)

    def __call__(self, x, key):
        h = self.drop(jax.nn.gelu(self.fc1(self.norm(x))), key=key)
        return x + self.fc2(h)


class Model(eqx.Module):
    blocks: list
    head: eqx.nn.Linear
    remat: object = eqx.field(static=True, default=None)  # None, or how each block is wrapped

    def __call__(self, x, key):
        keys = jax.random.split(key, len(self.blocks))
        for block, k in zip(self.blocks, keys, strict=False):
            run = (lambda b, x, k: b(x, k)) if self.remat is None else self.remat(lambda b, x, k: b(x, k))
            x = run(block, x, k)
        return self.head(x)


def make(seed):
    keys = jax.random.split(jax.random.PRNGKey(seed), BLOCKS + 1)
    return Model([Block(k) for k in keys[:-1]], eqx.nn.Linear(WIDTH, 1, key=keys[-1]))


def loss(model, batch, key):
    x, y = batch
    keys = jax.random.split(key, x.shape[0])
    pred = jax.vmap(model)(x, keys)[:, 0]
    return jnp.mean((pred - y) ** 2)


def batch(key, batch_size):
    kx, ky = jax.random.split(key)
    return jax.random.normal(kx, (batch_size, WIDTH)), jax.random.normal(ky, (batch_size,))


def _setup(seed, remat):
    return {
        "model": make(seed),
        "batch": batch,
        "loss": loss,
        "checkpoint": lambda m: dataclasses.replace(m, remat=remat),
        "optimizer": optax.adamw(1e-3),
        "batch_size": 8,
    }


def filter_checkpoint(seed):
    return _setup(seed, eqx.filter_checkpoint)


def policy_dots(seed):
    return _setup(seed, lambda f: eqx.filter_checkpoint(f, policy=jax.checkpoint_policies.dots_saveable))


def ineffective(seed):
    return _setup(seed, lambda f: f)
