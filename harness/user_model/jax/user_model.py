#!/usr/bin/env python3
"""Trains the user's own JAX model (Flax NNX, Equinox, plain JAX), plain or with the user's own remat, and dumps
every array that must be bitwise equal between the two, in the torch driver's format (.npy files and index.json,
harness/user_model/torch/user_model.py), so `ckptcheck validate --adapter jax:module=PATH.py:FACTORY` compares and
diagnoses them with the same C++ (harness/user_model/jax/USER_MODEL.md).

  user_model.py --module PATH --factory NAME --seed S --steps N --mode plain|checkpoint --out DIR
                [--batch-size B] [--zero-batch] [--randomness-off]

Per step, in comparison order: the loss; every parameter's gradient; every non-parameter state leaf after the
step (BatchNorm statistics and any nnx.Variable as "buffer", nnx.Rngs counters and keys as "rng"); every parameter
after the optimizer's update. index.json also holds step 0's saved residual bytes (what remat decides) and, after
the dumped steps, XLA's compiled memory analysis of the step (what the compiler kept), measured in passes of
their own (residuals.py). --randomness-off: every dropout off (diagnosis only: a semantic difference that vanishes
then came from the random draws).

Exit codes as the torch driver's: 0 done; 2 the module, the factory or the model breaks the contract (error.json
says which, one line); 4 the user's code raised (the phase says where).
"""

import os
import sys
import time
import traceback

# One thread, the CPU backend: two plain runs must repeat bit for bit, and the machine is shared.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import jax
    import numpy as np
except ImportError as e:  # one line for the harness (a fault, exit 3 there): nothing can run without them
    sys.exit(
        "%s: %s is not installed in %s (ci/setup-python installs the frameworks)"
        % (os.path.basename(__file__), e.name, sys.executable)
    )

jax.config.update("jax_platforms", "cpu")
# XLA's compiles are most of a run's time (the step, and every eager op of the factory and the batch maker), and
# both runs of every seed compile the same programs: a persistent cache serves them after the first. A compiled
# program is a function of its HLO and flags, so the cache changes no bit; CKPT_JAX_CACHE=0 turns it off.
_CACHE = os.environ.get("CKPT_JAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "ckptcheck", "jax-cache"))
if _CACHE != "0":
    jax.config.update("jax_compilation_cache_dir", _CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
import model_state  # noqa: E402
import residuals  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import user_dump  # noqa: E402
from user_dump import BadFactory, load_factory, one_line  # noqa: E402  (the drivers' shared contract)

EXIT_BAD_FACTORY = 2
EXIT_RAISED = 4
DEFAULT_BATCH = 4
REQUIRED = ("model", "batch", "loss", "checkpoint")
OPTIONAL = ("optimizer", "batch_size", "state", "deterministic")


def check_setup(setup, factory_name):
    where = "factory '%s'" % factory_name
    if not isinstance(setup, dict):
        raise BadFactory("%s returned %s, expected a dict with %s" % (where, type(setup).__name__, ", ".join(REQUIRED)))
    for key in REQUIRED:
        if key not in setup:
            raise BadFactory("%s: the returned dict has no '%s'" % (where, key))
    for key in ("batch", "loss", "checkpoint"):
        if not callable(setup[key]):
            raise BadFactory("%s: '%s' must be callable" % (where, key))
    if setup.get("deterministic") is not None and not callable(setup["deterministic"]):
        raise BadFactory("%s: 'deterministic' must be callable" % where)
    opt = setup.get("optimizer")
    if opt is not None and not (hasattr(opt, "init") and hasattr(opt, "update")):
        raise BadFactory(
            "%s: 'optimizer' is %s, expected an optax.GradientTransformation" % (where, type(opt).__name__)
        )
    unknown = set(setup) - set(REQUIRED) - set(OPTIONAL)
    if unknown:
        raise BadFactory("%s: unknown key(s) %s" % (where, ", ".join(sorted(unknown))))


def as_numpy(value, entry):
    """An array as the dump holds it (user_dump.Dump): typed keys as key data, bf16/fp16 as float32 and narrow
    integers (nnx.Rngs' uint32 counters and keys) as int64, each exact."""
    a = np.asarray(model_state.as_numpy(value))
    if a.dtype.name in ("bfloat16", "float16"):
        entry["converted_from"] = a.dtype.name
        return a.astype(np.float32)
    if a.dtype.kind in "iu" and a.dtype.name not in ("int32", "int64", "uint8"):
        entry["converted_from"] = a.dtype.name
        return a.astype(np.int64)
    return a


class Dump(user_dump.Dump):
    def __init__(self, out):
        super().__init__(out, as_numpy)

    def state(self, step, m, rest):
        if rest is not None:
            for name, kind, v in model_state.named_leaves(rest, m.rest_kinds):
                self.tensor(step, kind, name, v)


def zero_floats(batch):
    """The batch with every floating leaf zeroed (labels and token ids kept), and how many were."""
    count = [0]

    def z(x):
        if model_state.is_param_leaf(x):
            count[0] += 1
            return jax.numpy.zeros_like(x)
        return x

    return jax.tree_util.tree_map(z, batch), count[0]


def make_step(m, setup, opt):
    """The jitted training step: value_and_grad of the loss over the parameters, the state the forward moved, the
    optimizer's update. The same function in both runs; only the model inside differs by the user's remat."""
    import optax

    loss_fn, stateful = setup["loss"], setup.get("state") is not None

    def objective(params, rest, batch, key):
        model = m.build(params, rest)
        if stateful:
            out = loss_fn(model, rest, batch, key)
            if not (isinstance(out, tuple) and len(out) == 2):
                raise model_state.BadModel("with 'state', 'loss' must return (loss, new_state)")
            value, rest = out
        else:
            value = loss_fn(model, batch, key)
            if isinstance(m, model_state.NnxModel):
                rest = m.state_after(model, rest)
        if not hasattr(value, "shape") or value.shape != ():
            raise model_state.BadModel("'loss' returned %s, expected a scalar array" % type(value).__name__)
        return value, rest

    def step(params, rest, opt_state, batch, key):
        (value, rest), grads = jax.value_and_grad(objective, has_aux=True)(params, rest, batch, key)
        updates, opt_state = opt.update(grads, opt_state, params)
        return value, grads, rest, optax.apply_updates(params, updates), opt_state

    return objective, jax.jit(step)


def keys(seed, step):
    """The step's batch key and loss key (dropout of plain-JAX and Equinox models): the same in both runs."""
    base = jax.random.fold_in(jax.random.PRNGKey(seed), step)
    return jax.random.fold_in(base, 0), jax.random.fold_in(base, 1)


def prepare(setup, args, meta):
    """The model of this run: the factory's, with dropout off (--randomness-off), the user's remat (checkpoint
    mode), split into parameters and state. Names come from the model before the remat transform."""
    model = setup["model"]
    if args.randomness_off:
        model = model_state.randomness_off(model, setup.get("deterministic"))
    state = setup.get("state")
    plain = model_state.wrap(model, state)
    if args.mode != "checkpoint":
        return plain
    meta["phase"] = "checkpoint transform"
    transformed = setup["checkpoint"](model)
    model = transformed if transformed is not None else model
    return model_state.wrap(model, state, names_from=plain)


def train(setup, args, dump, meta):
    import optax

    m = prepare(setup, args, meta)
    opt = setup.get("optimizer") or optax.sgd(0.01)
    params, rest = m.params, m.rest
    dump.state(-1, m, rest)
    meta["momenta"] = m.momenta
    batch_size = args.batch_size or int(setup.get("batch_size", DEFAULT_BATCH))
    meta["batch_size"] = batch_size
    meta["phase"] = "optimizer init"
    opt_state = opt.init(params)
    objective, step_fn = make_step(m, setup, opt)
    seconds, first, compiled = [], None, None
    for step in range(args.steps):
        meta["phase"] = "step %d" % step
        kb, kl = keys(args.seed, step)
        batch = setup["batch"](kb, batch_size)
        if args.zero_batch:
            batch, n = zero_floats(batch)
            meta["zeroed_tensors"] = meta.get("zeroed_tensors", 0) + n
        if compiled is None:  # compiled once, ahead of time: the same executable runs the steps and is measured
            meta["phase"] = "compiling step %d" % step
            first = (params, rest, batch, kl)
            compiled = step_fn.lower(params, rest, opt_state, batch, kl).compile()
            meta["phase"] = "step %d" % step
        t0 = time.perf_counter()
        value, grads, rest, params, opt_state = jax.block_until_ready(compiled(params, rest, opt_state, batch, kl))
        seconds.append(time.perf_counter() - t0)
        dump.tensor(step, "loss", "loss", value)
        for name, _, g in model_state.named_leaves(grads):
            dump.tensor(step, "grad", name, g)
        dump.state(step, m, rest)
        for name, _, p in model_state.named_leaves(params):
            dump.tensor(step, "param", name, p)
    meta["step_seconds"] = seconds
    if first is not None:  # measured after the dumped steps, in passes of their own (nothing runs the model here)
        meta["phase"] = "memory measure"
        meta.update(residuals.measure(objective, compiled, first))


def main(argv=None):
    ap = user_dump.run_arguments(__doc__.split("\n\n")[0])
    ap.add_argument("--randomness-off", action="store_true", help="every dropout off (diagnosis only)")
    args = ap.parse_args(argv)
    dump = Dump(args.out)
    meta = {
        "mode": args.mode,
        "seed": args.seed,
        "steps": args.steps,
        "framework": "jax",
        "jax": jax.__version__,
        "phase": "import",
    }
    code = 0
    try:
        factory = load_factory(args.module, args.factory)
        meta["phase"] = "factory"
        setup = factory(args.seed)
        check_setup(setup, args.factory)
        train(setup, args, dump, meta)
        meta["phase"] = "done"
    except (BadFactory, model_state.BadModel) as e:
        meta["error"] = {"kind": "bad_factory", "message": one_line(e)}
        code = EXIT_BAD_FACTORY
    except jax.errors.JAXTypeError as e:
        # A tracer where Python wanted a value: no jitted step can be built. In the plain run that is the model's
        # fault (bad input); in the checkpointed run only, the remat's (a finding: "the checkpointed run raised").
        first = "%s: %s" % (type(e).__name__, str(e).split("\n")[0])
        if args.mode == "plain":
            meta["error"] = {
                "kind": "bad_factory",
                "message": one_line("the model cannot be jitted (%s): %s" % (meta["phase"], first)),
            }
            code = EXIT_BAD_FACTORY
        else:
            traceback.print_exc()
            meta["error"] = {"kind": "raised", "message": one_line(first)}
            code = EXIT_RAISED
    except Exception as e:  # the user's code raised: the harness decides whether that is a finding
        traceback.print_exc()
        meta["error"] = {"kind": "raised", "message": one_line("%s: %s" % (type(e).__name__, e))}
        code = EXIT_RAISED
    user_dump.write_index(args.out, meta, dump.tensors)
    return code


if __name__ == "__main__":
    sys.exit(main())
