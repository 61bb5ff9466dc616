"""The user's JAX model as the driver trains it (harness/user_model/jax/USER_MODEL.md): what is differentiated (the
parameters), what moves as state (BatchNorm statistics, nnx.Rngs counters and keys, any other nnx.Variable, an
Equinox State), and the pytree path that names each leaf in the dumps ("blocks.layers.0.mlp.linear1.kernel").

Two kinds of model:
- a Flax NNX module: nnx.split(model, nnx.Param, ...) gives the parameters and the rest of its state; the rest is
  read back from the module after the loss ran, so every Variable the forward moved is dumped;
- any other pytree (plain JAX parameters, an Equinox module): its floating-point array leaves are the parameters,
  every other leaf is static. With the factory's `state` (Equinox's eqx.nn.State, a plain dict of statistics), the
  loss takes and returns it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

RNG_VARIABLES = ("RngCount", "RngKey")


class BadModel(Exception):
    """The factory's model is no pytree we can train (the message is one line for the user)."""


def _part(k: Any) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def path_name(path: tuple[Any, ...]) -> str:
    """A pytree path as the dumps name it: parts joined by '.', an NNX Variable's trailing `.value` dropped."""
    parts = [_part(k) for k in path]
    if parts and parts[-1] == "value" and type(path[-1]).__name__ == "GetAttrKey":
        parts.pop()
    return ".".join(parts) or "(root)"


def loaded(name: str) -> Any:
    """A framework the user's file imported, or None: Flax and Equinox are optional, and never imported here (an
    NNX module or an Equinox layer exists only if the user's code imported its package)."""
    return sys.modules.get(name)


def is_nnx(model: Any) -> bool:
    """Whether the model is a Flax NNX module (False when flax.nnx was never imported)."""
    nnx = loaded("flax.nnx")
    return nnx is not None and isinstance(model, nnx.Module)


def is_param_leaf(x: Any) -> bool:
    """Whether a pytree leaf is a parameter: a floating-point (or complex) array."""
    return isinstance(x, (jax.Array, np.ndarray)) and jnp.issubdtype(x.dtype, jnp.inexact)


def as_numpy(x: Any) -> np.ndarray:
    """A leaf as the dumps hold it: typed PRNG keys as their key data, everything else as is."""
    if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    return np.asarray(x)


class NnxModel:
    """An NNX module split into graph definition, parameters and the rest of its state."""

    def __init__(self, model: Any) -> None:
        self.nnx = nnx = loaded("flax.nnx")
        self.graphdef, self.params, self.rest = nnx.split(model, nnx.Param, ...)
        kinds = {path_name(p): type(v).__name__ for p, v in nnx.to_flat_state(self.rest)}
        self.rest_kinds = {n: ("rng" if k in RNG_VARIABLES else "buffer") for n, k in kinds.items()}
        self.momenta = {}
        for path, m in nnx.iter_graph(model):
            if isinstance(m, nnx.BatchNorm):  # Flax's momentum keeps the old value: torch's momentum is 1 - it
                for b in ("mean", "var"):
                    self.momenta[".".join(str(p) for p in path + (b,))] = 1.0 - float(m.momentum)

    def build(self, params: Any, rest: Any) -> Any:
        """The module rebuilt from its graph definition, these parameters and this state."""
        # copy=True: Variables made at this trace level, so the forward may move them under jax.grad (flax 0.11.2
        # made copy=False the default, which raises TraceContextError there: flax issue 5050).
        return self.nnx.merge(self.graphdef, params, rest, copy=True)

    def state_after(self, model: Any, rest: Any) -> Any:
        """The module's non-parameter state after the loss ran on it (the forward moved it in place)."""
        return self.nnx.split(model, self.nnx.Param, ...)[2]


class PytreeModel:
    """A pytree whose floating-point array leaves are the parameters; `state` (optional) is passed through the
    loss, which returns it updated."""

    def __init__(self, model: Any, state: Any, names_from: PytreeModel | None = None) -> None:
        leaves, self.treedef = jax.tree_util.tree_flatten_with_path(model)
        if not leaves:
            raise BadModel("the model has no leaves: expected a pytree of arrays (or an nnx.Module)")
        self.static = [None if is_param_leaf(x) else x for _, x in leaves]
        names = [path_name(p) for p, _ in leaves]
        if names_from is not None and len(names_from.static) == len(leaves):
            names = names_from.names  # the transform rewrapped the model: keep the plain model's names
        self.names = names
        self.params = {n: x for n, (_, x) in zip(names, leaves, strict=False) if is_param_leaf(x)}
        if not self.params:
            raise BadModel(
                "the model (%s) has no floating-point array leaves to train: expected an nnx.Module or a "
                "pytree of arrays" % type(model).__name__
            )
        self.rest = state
        self.rest_kinds = {}
        if state is not None:
            for p, x in jax.tree_util.tree_flatten_with_path(state)[0]:
                is_key = isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)
                self.rest_kinds[path_name(p)] = "rng" if is_key else "buffer"
        self.momenta = {}

    def build(self, params: dict[str, Any], rest: Any) -> Any:
        """The pytree rebuilt: these parameters at the parameter leaves, the static leaves as they were."""
        leaves = [params[n] if s is None else s for n, s in zip(self.names, self.static, strict=False)]
        return jax.tree_util.tree_unflatten(self.treedef, leaves)


def randomness_off(model: Any, hook: Callable[[Any], Any] | None) -> Any:
    """The model with its dropout off, for the randomness-off twin of a run (diagnosis only, never compared with the
    user's runs): every nnx.Dropout deterministic, every eqx.nn.Dropout in inference mode, then the factory's own
    `deterministic(model)` when it gives one (plain JAX, where only the user knows where dropout is)."""
    if is_nnx(model):
        nnx = loaded("flax.nnx")
        for _, m in nnx.iter_graph(model):
            if isinstance(m, nnx.Dropout):
                m.deterministic = True
    else:
        eqx = loaded("equinox")
        if eqx is not None:
            drop = lambda m: isinstance(m, eqx.nn.Dropout)  # noqa: E731
            model = jax.tree_util.tree_map(
                lambda m: eqx.nn.Dropout(m.p, inference=True) if drop(m) else m, model, is_leaf=drop
            )
    if hook is not None:
        model = hook(model)
    return model


def wrap(model: Any, state: Any, names_from: PytreeModel | None = None) -> NnxModel | PytreeModel:
    """The model as the driver trains it (NnxModel or PytreeModel); BadModel when it is neither."""
    if is_nnx(model):
        if state is not None:
            raise BadModel("'state' is for pytree models; an nnx.Module keeps its state in its Variables")
        return NnxModel(model)
    try:
        return PytreeModel(model, state, names_from)
    except (TypeError, ValueError) as e:
        raise BadModel("the model is not a pytree: %s" % e) from None


def named_leaves(tree: Any, kinds: dict[str, str] | None = None) -> list[tuple[str, str, np.ndarray]]:
    """(name, kind, numpy value) of every leaf, in flatten order; `kinds` maps a name to its dump kind."""
    out = []
    for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]:
        n = path_name(p)
        out.append((n, (kinds or {}).get(n, "buffer"), as_numpy(x)))
    return out
