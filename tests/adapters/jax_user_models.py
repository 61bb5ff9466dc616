"""Broken JAX factories for the bad-input tests of `validate --adapter jax:module=...` (tests/CMakeLists.txt,
harness/adapters/jax/USER_MODEL.md): each breaks the contract one way, and must get one line and exit 2 or 3."""
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
    return {"model": {"w": jax.random.normal(jax.random.PRNGKey(seed), (4, 8)), "remat": False}, "batch": _batch,
            "loss": _small, "checkpoint": lambda m: dict(m, remat=True)}
