"""Broken JAX factories for the bad-input tests of `validate --adapter jax:module=...` (tests/CMakeLists.txt,
harness/user_model/jax/USER_MODEL.md): each breaks the contract one way, and must get one line and exit 2 or 3."""

import jax
import jax.numpy as jnp


def _batch(key, batch_size):
    return jax.random.normal(key, (batch_size, 4))


def returns_a_list(seed):
    return [jnp.ones(3)]


def not_a_pytree(seed):
    """The model is an object JAX cannot flatten: no array leaves to train."""
    return {"model": object(), "batch": _batch, "loss": lambda m, b, k: jnp.sum(b), "checkpoint": lambda m: m}


def not_jittable(seed):
    """Python control flow on a traced value: jax.jit cannot trace the step."""

    def loss(m, b, k):
        y = b @ m["w"]
        if y.sum() > 0:  # a tracer has no truth value
            return jnp.sum(y)
        return -jnp.sum(y)

    return {"model": {"w": jnp.ones((4, 2))}, "batch": _batch, "loss": loss, "checkpoint": lambda m: m}


def _small(m, b, k):
    def f(w, b):
        return jnp.tanh(jnp.tanh(b @ w) @ w.T)

    return jnp.mean((jax.checkpoint(f) if m["remat"] else f)(m["w"], b) ** 2)


def raises_on_seed_2(seed):
    """Seed 1 holds (a jax.checkpoint around the whole function); seed 2's factory raises."""
    if seed == 2:
        raise RuntimeError("no model for seed 2")
    return {
        "model": {"w": jax.random.normal(jax.random.PRNGKey(seed), (4, 8)), "remat": False},
        "batch": _batch,
        "loss": _small,
        "checkpoint": lambda m: dict(m, remat=True),
    }


def _running_mean_loss(model, state, batch, key):
    """A layer that keeps a running mean of its input (momentum 0.1) in the factory's `state`; `model["twice"]`
    (the broken remat) moves it a second time inside the rematerialised function."""

    def layer(w, x, mean):
        new = 0.9 * mean + 0.1 * jnp.mean(x, axis=0)
        if model["twice"]:
            new = 0.9 * new + 0.1 * jnp.mean(x, axis=0)
        return jnp.tanh((x - jax.lax.stop_gradient(mean)) @ w), new

    f = jax.checkpoint(layer) if model["remat"] else layer
    y, mean = f(model["w"], batch, state["mean"])
    return jnp.mean(y**2), {"mean": mean}


def _stateful(seed, twice):
    return {
        "model": {"w": jax.random.normal(jax.random.PRNGKey(seed), (4, 8)), "remat": False, "twice": False},
        "state": {"mean": jnp.zeros(4)},
        "batch": _batch,
        "loss": _running_mean_loss,
        "checkpoint": lambda m: dict(m, remat=True, twice=twice),
    }


def stateful(seed):
    """A pytree model with state threaded through the loss, under jax.checkpoint: holds."""
    return _stateful(seed, False)


def stateful_twice(seed):
    """The same, with the remat moving the running mean twice: state-updated-twice."""
    return _stateful(seed, True)
