"""Plain JAX, the LLM pattern: identical residual MLP blocks, their parameters stacked along a leading axis, run by
jax.lax.scan over layers, each block's body under jax.checkpoint with a policy; dropout keyed per step and layer
(`validate --adapter jax:module=...`, harness/user_model/jax/USER_MODEL.md). The model is a dict of arrays and the
remat choice (a static leaf the loss reads). Factories:

  nothing_saveable   jax.checkpoint's default policy: holds
  dots_saveable      matrix products saved, the rest recomputed: holds
  save_hidden        save_only_these_names("hidden"), the hidden layer named with checkpoint_name: holds
  offload_hidden     save_and_offload_only_these_names: "hidden" offloaded to host memory (on the CPU backend host and
                     device memory are one), the rest recomputed
  everything_saveable  a remat that saves everything, so recomputes nothing: the memory finding "no effect"
  key_resplit        a remat written with jax.custom_vjp whose backward recomputes the block with the dropout key
                     split once more: the mask is redrawn, a finding (rng-desync, by the randomness-off re-run)
  stop_gradient      jax.checkpoint around a body that stops the gradient of the parameters it is given (as a
                     "frozen while recomputing" wrapper would): no block parameter gets a gradient, a finding
                     (missing-gradient)
  segments           the parameters stored in groups of GROUP blocks, each group one jax.checkpoint around a scan
                     of its blocks (√L segments for LAYERS = GROUP²): holds
"""

import jax
import jax.numpy as jnp
import optax
from jax.ad_checkpoint import checkpoint_name

LAYERS, WIDTH, HIDDEN, DROPOUT, GROUP = 8, 32, 128, 0.1, 4


def init(seed, layers=LAYERS):
    k = jax.random.split(jax.random.PRNGKey(seed), 4)
    return {
        "w1": jax.random.normal(k[0], (layers, WIDTH, HIDDEN)) / jnp.sqrt(WIDTH),
        "b1": jnp.zeros((layers, HIDDEN)),
        "w2": jax.random.normal(k[1], (layers, HIDDEN, WIDTH)) / jnp.sqrt(HIDDEN),
        "b2": jnp.zeros((layers, WIDTH)),
        "head": jax.random.normal(k[2], (WIDTH, 1)) / jnp.sqrt(WIDTH),
    }


def block(p, x, key):
    """One residual MLP block; dropout on the hidden layer unless `key` is None (dropout off)."""
    h = checkpoint_name(jax.nn.gelu(x @ p["w1"] + p["b1"]), "hidden")
    if key is not None:
        keep = jax.random.bernoulli(key, 1.0 - DROPOUT, h.shape)
        h = jnp.where(keep, h / (1.0 - DROPOUT), 0.0)
    return x + h @ p["w2"] + p["b2"]


def layer_params(model):
    return {k: model[k] for k in ("w1", "b1", "w2", "b2")}


def run_blocks(body, x, params, keys):
    return jax.lax.scan(lambda h, q: (body(q[0], h, q[1]), None), x, (params, keys))[0]


def forward(model, x, key):
    remat = model["remat"]
    keys = jax.random.split(key, LAYERS) if model["dropout"] else None
    if model["grouped"]:  # parameters stored as (groups, GROUP, ...): a scan over groups of a scan over blocks
        group = lambda h, pk: run_blocks(block, h, *pk)  # noqa: E731
        if remat == "segments":
            group = jax.checkpoint(group)  # one checkpoint per group of GROUP blocks
        keys = None if keys is None else keys.reshape((LAYERS // GROUP, GROUP) + keys.shape[1:])
        x, _ = jax.lax.scan(lambda h, pk: (group(h, pk), None), x, (layer_params(model), keys))
        return x @ model["head"]
    body = block if remat is None else remat
    return run_blocks(body, x, layer_params(model), keys) @ model["head"]


def loss(model, batch, key):
    x, y = batch
    return jnp.mean((forward(model, x, key)[:, 0] - y) ** 2)


def batch(key, batch_size):
    kx, ky = jax.random.split(key)
    return jax.random.normal(kx, (batch_size, WIDTH)), jax.random.normal(ky, (batch_size,))


def _setup(seed, remat, grouped=False):
    params = init(seed)
    if grouped:
        params.update({k: v.reshape((LAYERS // GROUP, GROUP) + v.shape[1:]) for k, v in layer_params(params).items()})
    model = dict(params, remat=None, dropout=True, grouped=grouped)  # the static leaves: how the blocks run
    return {
        "model": model,
        "batch": batch,
        "loss": loss,
        "checkpoint": lambda m: dict(m, remat=remat),
        "optimizer": optax.adam(1e-3),
        "batch_size": 8,
        "deterministic": lambda m: dict(m, dropout=False),
    }  # dropout off, for the diagnosis's re-run


def _policy(name, *args):
    return lambda seed: _setup(
        seed,
        jax.checkpoint(
            block,
            policy=getattr(jax.checkpoint_policies, name)(*args) if args else getattr(jax.checkpoint_policies, name),
        ),
    )


nothing_saveable = _policy("nothing_saveable")
dots_saveable = _policy("dots_saveable")
save_hidden = _policy("save_only_these_names", "hidden")
everything_saveable = _policy("everything_saveable")


def offload_hidden(seed):
    """save_and_offload_only_these_names: the named hidden layer offloaded to host memory, the rest recomputed."""
    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[],
        names_which_can_be_offloaded=["hidden"],
        offload_src="device",
        offload_dst="pinned_host",
    )
    return _setup(seed, jax.checkpoint(block, policy=policy))


def _resplit_block():
    """A remat by hand: the forward keeps only the block's input, the backward recomputes the block, but with
    the key split once more, as a recompute that derives its key anew from a different split would."""

    @jax.custom_vjp
    def f(p, x, key):
        return block(p, x, key)

    def fwd(p, x, key):
        return block(p, x, key), (p, x, key)

    def bwd(res, g):
        p, x, key = res
        again = None if key is None else jax.random.split(key)[0]
        _, pull = jax.vjp(lambda p, x: block(p, x, again), p, x)
        gp, gx = pull(g)
        return gp, gx, None

    f.defvjp(fwd, bwd)
    return f


def key_resplit(seed):
    return _setup(seed, _resplit_block())


def stop_gradient(seed):
    return _setup(seed, jax.checkpoint(lambda p, x, key: block(jax.lax.stop_gradient(p), x, key)))


def segments(seed):
    return _setup(seed, "segments", grouped=True)
