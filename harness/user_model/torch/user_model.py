#!/usr/bin/env python3
"""Trains the user's own PyTorch model, plain or with the user's own checkpointing, and dumps every tensor that
must be bitwise equal between the two (harness/user_model/torch/USER_MODEL.md). `ckptcheck validate --adapter
torch:module=PATH.py:FACTORY` runs this once per mode and seed and compares the dumps in C++.

  user_model.py --module PATH --factory NAME --seed S --steps N --mode plain|checkpoint --out DIR
                [--batch-size B] [--zero-batch] [--plan PLACEMENT.json]

--plan (with --mode checkpoint): instead of the factory's `checkpoint`, the placement (harness/engine/COSTS.md)
is applied to the factory's `chain` (apply_plan.py), and index.json's "plan" holds what step 0 measured of it:
saved_bytes, saved_bytes_before, saved_bytes_after, saved_bytes_by_block (each storage charged to the first
party that packs it), forward_calls (each chain block's calls in step 0, recomputes included); with
--timing-pairs N, timing: {"plain": [...], "checkpoint": [...]}, N steps or more (up to TIMING_MAX_FACTOR times N
or TIMING_MAX_SECONDS of wall time, until the median ratio is known to TIMING_PRECISION) of a plain copy of the
model and as many of the checkpointed one, alternating, after the dumped steps (side_by_side).

Exit codes: 0 done; 2 the module or the factory is unusable (missing, not a function, returns the wrong
things: error.json says which); 4 the factory or the training raised (error.json holds the one-line message and
the phase, so the harness can tell "the checkpointed run raised" — a finding — from a broken model); 5 this
machine cannot run what was asked: torch.compile failed (a backend not installed, a model it cannot compile — never
a silent fallback to eager) or the profiler recorded no memory (a fault, not a finding, in either run).

--instruments NAME[,NAME]: a measuring pass (instruments.py); without it the run carries nothing of ckptcheck's.
The memory pass profiles the last dumped step (index.json's memory.step): with --steps 1 under torch.compile that
step is the first call, compilation included (memory.first_call); with two or more (validate's default) it is not.
"""

import contextlib
import copy
import gc
import math
import os
import statistics
import sys
import time
import traceback

# Deterministic cuBLAS on a GPU: read when CUDA starts, so set before torch can start it (use_deterministic_algorithms
# below refuses cuBLAS matrix products without it). A user's own setting is kept.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
# saved_bytes.py, the saved-tensor counter this driver shares with the torch case adapter
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "adapters", "torch"))
import apply_plan  # noqa: E402
import chain_probe  # noqa: E402
import distributed  # noqa: E402
import instruments  # noqa: E402
import peak_memory  # noqa: E402
import placement  # noqa: E402
import user_dump  # noqa: E402
from saved_bytes import SavedBytes  # noqa: E402
from user_dump import BadFactory, load_factory, one_line  # noqa: E402,F401  (the drivers' shared contract)

# One thread and deterministic kernels: two plain runs must repeat bit for bit, or no comparison means anything.
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

EXIT_BAD_FACTORY = 2
EXIT_RAISED = 4
EXIT_INFRA = 5
DEFAULT_BATCH = 4
TIMING_WARMUP_PAIRS = 2
# The side-by-side timing goes on past --timing-pairs until the median ratio's standard error is at most
# TIMING_PRECISION, or it has timed TIMING_MAX_FACTOR times as many pairs, or the timing has run for
# TIMING_MAX_SECONDS of wall time. One pair's ratio spreads widely on a shared machine: ResNet-18's middle half ran
# from +19% to +33% over 96 pairs, so 48 left the median about 2 points to chance, and two validations of one
# placement measured +22.1% and +25.8% (2026-12-07). The cap is on wall time, the full collections between steps
# (collector_between_steps) included, because they, not the steps, are most of it on a small model: the MLP's
# 192 pairs timed 2.2-2.5 s of steps in 75 s, and GPT-2's smallest placement 155 pairs, 60 s of steps, in 119 s
# (2026-12-07, idle machine). A cap on the steps' time alone let one validation take two minutes.
TIMING_PRECISION = 0.01
TIMING_MAX_FACTOR = 4
TIMING_MAX_SECONDS = 60.0


def check_setup(setup, factory_name, require_chain=False):
    """The factory returns a dict; checks each entry's type so a mistake is one clear line, not a traceback.
    `chain` (optional; required by the profiler and --plan): chain(model) gives the chain's blocks in order."""
    where = "factory '%s'" % factory_name
    if not isinstance(setup, dict):
        raise BadFactory(
            "%s returned %s, expected a dict with model, batch, loss, checkpoint" % (where, type(setup).__name__)
        )
    for key in ("model", "batch", "loss", "checkpoint"):
        if key not in setup:
            raise BadFactory("%s: the returned dict has no '%s'" % (where, key))
    if not isinstance(setup["model"], torch.nn.Module):
        raise BadFactory("%s: 'model' is %s, expected a torch.nn.Module" % (where, type(setup["model"]).__name__))
    for key in ("batch", "loss", "checkpoint"):
        if not callable(setup[key]):
            raise BadFactory("%s: '%s' must be callable" % (where, key))
    if require_chain and setup.get("chain") is None:
        raise BadFactory("%s: the returned dict has no 'chain' (chain(model): the chain's blocks in order)" % where)
    for key in ("optimizer", "wrap", "chain"):
        if setup.get(key) is not None and not callable(setup[key]):
            raise BadFactory("%s: '%s' must be callable" % (where, key))
    if "ddp" in setup:
        raise BadFactory(
            "%s: 'ddp' is now 'distributed': {'kind': 'ddp', 'world_size': W, ...} (USER_MODEL.md)" % where
        )
    if setup.get("distributed") is not None:
        distributed.check_spec(setup["distributed"], where, BadFactory)
    unknown = set(setup) - {
        "model",
        "batch",
        "loss",
        "checkpoint",
        "optimizer",
        "batch_size",
        "wrap",
        "distributed",
        "chain",
    }
    if unknown:
        raise BadFactory("%s: unknown key(s) %s" % (where, ", ".join(sorted(unknown))))


class _Probes:
    """Several SavedBytes probes at once."""

    def __init__(self, *probes):
        self.probes = [p for p in probes if p is not None]

    def packed(self, ptr, nbytes):
        for p in self.probes:
            p.packed(ptr, nbytes)


def apply_placement(setup, model, path):
    """--plan: the placement applied to the factory's chain. Returns the chain modules and the segment runners."""
    if setup.get("chain") is None:
        raise BadFactory("--plan needs the factory's 'chain' (chain(model): the chain's blocks in order)")
    try:
        blocks = chain_probe.resolve_chain(setup, model)
        plan = apply_plan.load_placement(path)
        modules = [m for _, m in blocks]
        return modules, apply_plan.apply(model, modules, plan)
    except (chain_probe.ChainError, apply_plan.BadPlacement) as e:
        raise BadFactory(str(e)) from None


def as_numpy(value, entry):
    """A tensor as the dump holds it (user_dump.Dump)."""
    a = value
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu()
        if a.dtype in (torch.bfloat16, torch.float16):
            a = a.float()  # exact: every bf16/fp16 value is a float32 value
            entry["converted_from"] = str(value.dtype).replace("torch.", "")
        elif a.is_complex():  # e.g. a RoPE cache (torchtitan's Llama): its real and imaginary parts, bits kept
            a = torch.view_as_real(a.resolve_conj())
            entry["converted_from"] = str(value.dtype).replace("torch.", "")
        a = a.numpy()
    return a


class Dump(user_dump.Dump):
    """Writes tensors as .npy and lists them, in comparison order, in index.json."""

    def __init__(self, out):
        super().__init__(out, as_numpy)


def zero_floats(batch):
    """The batch with every floating tensor zeroed (labels and token ids kept): the simplest values a finding
    can be shrunk to."""
    if isinstance(batch, torch.Tensor):
        return torch.zeros_like(batch) if batch.is_floating_point() else batch
    if isinstance(batch, (tuple, list)):
        return type(batch)(zero_floats(b) for b in batch)
    if isinstance(batch, dict):
        return {k: zero_floats(v) for k, v in batch.items()}
    return batch


def count_floats(batch):
    if isinstance(batch, torch.Tensor):
        return int(batch.is_floating_point())
    if isinstance(batch, (tuple, list)):
        return sum(count_floats(b) for b in batch)
    if isinstance(batch, dict):
        return sum(count_floats(v) for v in batch.values())
    return 0


def backward(loss, params):
    """loss.backward(), naming the parameters no gradient can reach when the loss does not require grad (PEFT issue
    1142: reentrant checkpointing of frozen layers around LoRA adapters, the layers' input not requiring grad, cuts
    the graph; PyTorch's own message, "element 0 of tensors does not require grad", names no module)."""
    trainable = [n for n, p in params.items() if p.requires_grad]
    if not loss.requires_grad and trainable:
        raise RuntimeError(
            "the loss does not require grad, so none of the %d trainable parameters gets a gradient "
            "(first: %s): the forward's graph does not reach them" % (len(trainable), trainable[0])
        )
    loss.backward()


def momenta(model):
    """Each BatchNorm-like running buffer's momentum, for the 'state updated twice' diagnosis."""
    m = {}
    for name, mod in model.named_modules():
        mom = getattr(mod, "momentum", None)
        if isinstance(mom, float) and hasattr(mod, "running_mean"):
            for b in ("running_mean", "running_var"):
                m[(name + "." if name else "") + b] = mom
    return m


@contextlib.contextmanager
def collector_between_steps():
    """For timed steps: Python's cyclic garbage collector off, and the `settle` this yields (a full collection) to
    run before each step, outside its timing. Left on, the collector runs in whichever step crosses its allocation
    threshold and adds its pause to that step alone; on ResNet-18 a copy of the model timed against itself then
    spread 6-8 points in the middle half of 24 pairs, 2-5 with the collector between steps. A full collection
    (about 100 ms with torch loaded) walks every Python object, so each timed step starts from the same cold
    caches whichever model ran before it. In the one plan loop run that collected only the youngest generation
    (no such walk; 2026-12-07), ResNet-18's half budget measured 4.0 points over its prediction and the MLP 3.6;
    with full collections ResNet-18's half budget missed by 0.1-3.1 points over seven runs and the MLP by 1.5-5.0
    over four, so the choice rests on the equal starting state more than on those figures."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield gc.collect
    finally:
        if was:
            gc.enable()


def twin_pairs(model, twin):
    """(model's tensor, its deep copy's) for every parameter and buffer: deepcopy keeps their order."""
    return list(zip(model.parameters(), twin.parameters(), strict=True)) + list(
        zip(model.buffers(), twin.buffers(), strict=True)
    )


def give_state(pairs, source_opt, target_opt):
    """Before the side-by-side timing: each (model's tensor, twin's tensor) of `pairs` gets the model's values,
    and the twin's optimizer the model's state for it. The values a step computes on move its time: on
    ResNet-18, a twin left at the factory's weights against the model after its dumped steps measured -7% to +8%
    over 24 pairs, where the same code should measure 0; given the model's state, -1% to +1% in one process,
    -1% to +7% in another. Training on the same batches, a correct placement keeps both bitwise alike."""
    for mine, theirs in pairs:
        with torch.no_grad():
            theirs.copy_(mine)
        if mine in source_opt.state:
            state = source_opt.state[mine]
            target_opt.state[theirs] = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in state.items()}


def timed_step(loss, opt, settle):
    """One training step (`loss()`, its backward, the optimizer's step) in CPU time of the thread, after `settle`
    (collector_between_steps) and the gradients' reset, both untimed: the one timed step of the side-by-side timing
    here and of the profile's calibration (chain_profile.py), so the prediction and its check time alike."""
    opt.zero_grad(set_to_none=True)
    settle()
    t0 = time.thread_time()  # CPU time: load-proof
    loss().backward()
    opt.step()
    return time.thread_time() - t0


def median_standard_error(ratios):
    """The standard error of the median of `ratios` (at least two), its spread read from their middle half as a
    normal one's (interquartile range / 1.349): robust to the few steps a pause fell in."""
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return 1.2533 * (q3 - q1) / 1.349 / math.sqrt(len(ratios))


def timed_enough(times, pairs, wall_seconds):
    """At least `pairs` pairs, then until the median ratio is known to TIMING_PRECISION or a cap; `wall_seconds`
    is how long the timing has run."""
    n = len(times["plain"])
    if n < max(pairs, 2):
        return False
    if n >= TIMING_MAX_FACTOR * pairs or wall_seconds >= TIMING_MAX_SECONDS:
        return True
    ratios = [c / p - 1.0 for p, c in zip(times["plain"], times["checkpoint"], strict=True) if p > 0]
    return len(ratios) >= 2 and median_standard_error(ratios) <= TIMING_PRECISION


def side_by_side(setup, pairs, plain, checkpointed, batch_size):
    """--plan: the plain twin and the checkpointed model timed step for step in one process, which goes first
    alternating, so whatever else loads the machine falls on both alike. `plain` and `checkpointed` are (model,
    optimizer); returns each one's step seconds: `pairs` of them or more (timed_enough). Runs after every dumped
    step, so it changes nothing compared."""
    times = {"plain": [], "checkpoint": []}
    start = time.monotonic()
    with collector_between_steps() as settle:
        k = -TIMING_WARMUP_PAIRS  # the warm-up pairs (the allocator, kernel caches) not recorded
        while not timed_enough(times, pairs, time.monotonic() - start):
            batch = setup["batch"](torch.Generator().manual_seed(1000003 * 7919 + k), batch_size)
            order = [("plain",) + plain, ("checkpoint",) + checkpointed]
            for name, runner, opt in order if k % 2 == 0 else order[::-1]:
                t = timed_step(lambda runner=runner, batch=batch: setup["loss"](runner, batch), opt, settle)
                if k >= 0:
                    times[name].append(t)
            k += 1
    return times


def named_slots(model, slots):
    """name -> (module, attribute) of every parameter (slots "_parameters") or buffer ("_buffers"), named as
    `named_parameters()` names them (a shared one once). Read through the module, so a name still finds its
    tensor after fully_shard has put a sharded one in its place, and after a checkpoint wrapper renamed the path."""
    out, seen = {}, set()
    for prefix, mod in model.named_modules():
        for attr, t in getattr(mod, slots).items():
            if t is not None and id(t) not in seen:
                seen.add(id(t))
                out[(prefix + "." if prefix else "") + attr] = (mod, attr)
    return out


def current(slots, attr):
    return {n: getattr(m, attr)[a] for n, (m, a) in slots.items()}


def per_rank_dump(dump, step, kind, named, spec):
    """Tensors each rank has its own of (loss, buffers, generator): as they are, or, distributed, every rank's
    gathered to rank 0 as NAME@rankR."""
    if spec is None:
        for n, v in named.items():
            dump.tensor(step, kind, n, v)
        return
    every = distributed.per_rank({n: (v.detach().cpu().clone() if v is not None else None) for n, v in named.items()})
    for r, values in enumerate(every or []):
        for n, v in values.items():
            dump.tensor(step, kind, "%s@rank%d" % (n, r), v)


def train(setup, args, dump, meta, rank=0, world=1):
    model = setup["model"]
    spec = setup.get("distributed")
    param_slots, buffer_slots = named_slots(model, "_parameters"), named_slots(model, "_buffers")
    modules = list(model.named_modules())  # before the transform renames any
    # A compared run carries no instrument; a measuring pass the ones it names (instruments.py).
    probe = instruments.MaskProbe(model) if "masks" in args.instruments else None
    make_opt = setup.get("optimizer") or (lambda ps: torch.optim.SGD(ps, lr=0.01))
    meta["momenta"] = momenta(model)
    if spec is not None:
        meta["momenta"] = {"%s@rank%d" % (n, r): m for n, m in meta["momenta"].items() for r in range(world)}
    per_rank_dump(dump, -1, "buffer", current(buffer_slots, "_buffers"), spec)
    runner = model
    chain_modules = plan_runners = None
    twin = None
    if args.plan and args.mode == "checkpoint":
        meta["phase"] = "checkpoint transform"
        if args.timing_pairs > 0:  # the plain model, for the side-by-side timing after the dumped steps
            twin = copy.deepcopy(model)
            twin_opt = make_opt(twin.parameters())
            twin_of = twin_pairs(model, twin)  # before the placement moves any module
        chain_modules, plan_runners = apply_placement(setup, model, args.plan)
    elif args.mode == "checkpoint":
        meta["phase"] = "checkpoint transform"
        transformed = setup["checkpoint"](model)
        runner = transformed if transformed is not None else model
        if not isinstance(runner, torch.nn.Module) and not callable(runner):
            raise BadFactory("'checkpoint' returned %s, expected the model (or None)" % type(runner).__name__)
    if setup.get("wrap") is not None:
        meta["phase"] = "wrap"
        runner = setup["wrap"](runner)  # both runs: e.g. torch.compile, so plain and checkpointed compile alike
    if spec is not None:
        meta["phase"] = "shard" if spec["kind"] == "fsdp2" else "ddp"
        runner = distributed.parallelize(spec, runner, rank, world)  # both runs, after the checkpoint (torchtitan)
    params = current(param_slots, "_parameters")  # fully_shard put sharded parameters in the modules
    device = device_of(params)
    if spec is not None:
        meta["shards"] = distributed.shard_rows(params)
    opt = make_opt(model.parameters())  # after sharding, as FSDP2 requires
    batch_size = args.batch_size or int(setup.get("batch_size", DEFAULT_BATCH))
    meta["batch_size"] = batch_size
    torch.manual_seed(args.seed)  # the same generator state at step 0 whatever the transform drew
    model.train()
    seconds, saved = [], None
    # The memory pass profiles the last dumped step, so the comparison with the untouched run covers what the
    # profiler might change; with two steps or more a compiled model has compiled in the steps before it.
    profiled_step = args.steps - 1 if "memory" in args.instruments else None
    compiled = setup.get("wrap") is not None or placement.traced(runner)
    for step in range(args.steps):
        meta["phase"] = "step %d" % step
        gen = torch.Generator().manual_seed((args.seed * 1000003 + step) * world + rank)  # each rank its own data
        batch = setup["batch"](gen, batch_size)
        if args.zero_batch:
            meta["zeroed_tensors"] = meta.get("zeroed_tensors", 0) + count_floats(batch)
            batch = zero_floats(batch)
        opt.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        where = plan_meter = None

        def forward(batch=batch):  # bound now: the closure runs within this iteration only
            out = setup["loss"](runner, batch)
            if not isinstance(out, torch.Tensor) or out.numel() != 1:
                raise BadFactory("'loss' returned %s, expected a scalar tensor" % type(out).__name__)
            return out

        if step == profiled_step:  # the memory pass: this dumped step's forward and backward under the profiler
            meta["phase"] = "step %d (profiled)" % step
            memory, loss = peak_memory.measure(forward, dump.out, lambda out: backward(out, params), device=device)
            meta["memory"] = dict(memory, step=step, first_call=step == 0 and compiled)
        elif step == 0 and "saved" in args.instruments:
            # Module hooks would see FSDP's unsharded parameters and DDP's buckets: no placement bound there.
            eager = not placement.traced(runner) and setup.get("wrap") is None and spec is None
            if eager:
                where = placement.PlacementProbe(modules, {p.untyped_storage().data_ptr() for p in model.parameters()})
            if chain_modules is not None and eager:
                plan_meter = chain_probe.PlanMeter(chain_probe.ChainStack(chain_modules, extra=plan_runners))
            meter = SavedBytes([local(p) for p in model.parameters()], _Probes(where, plan_meter))
            with torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack):
                loss = forward()
            saved = meter.total()
            backward(loss, params)
        else:
            loss = forward()
            backward(loss, params)
        if where is not None:  # after backward: the recomputes have run
            where.remove()
            meta["placement"] = where.meta()
        if plan_meter is not None:
            plan_meter.stack.remove()
            meta["plan"] = dict(
                saved_bytes=saved, **plan_meter.summary(len(chain_modules)), forward_calls=list(plan_meter.stack.calls)
            )
        elif step == 0 and chain_modules is not None:
            meta["plan"] = None  # under torch.compile or `wrap` the hooks would run at trace time: not measured
        grads = {n: (p.grad.clone() if p.grad is not None else None) for n, p in params.items()}
        opt.step()
        seconds.append(time.perf_counter() - t0)
        per_rank_dump(dump, step, "loss", {"loss": loss.detach().reshape(())}, spec)
        for n, g in grads.items():
            dump.tensor(step, "grad", n, distributed.full(g))  # whole, from every rank's shard
        per_rank_dump(dump, step, "buffer", current(buffer_slots, "_buffers"), spec)
        for n, p in params.items():
            dump.tensor(step, "param", n, distributed.full(p))
        per_rank_dump(dump, step, "rng", generators(device), spec)
        for n, mask in sorted(probe.masks.items() if probe else []):
            dump.tensor(step, "mask", n, mask)
        if probe:
            probe.masks.clear()
    meta.update({"saved_activation_bytes": saved, "step_seconds": seconds})
    if twin is not None and meta.get("plan"):
        meta["phase"] = "side-by-side timing"
        if spec is None:  # sharded, the model's tensors are other objects now (the twin is not sharded)
            give_state(twin_of, opt, twin_opt)
        meta["plan"]["timing"] = side_by_side(setup, args.timing_pairs, (twin, twin_opt), (runner, opt), batch_size)


def generators(device):
    """Every generator the model may draw from, by device: the CPU's, and with the model on a GPU every CUDA
    device's (dropout draws there). Decided by the model's device, the same in both runs: whether CUDA has
    started is not (on a GPU machine Dynamo starts it to save its generator state, in a compiled run only)."""
    states = {"cpu": torch.get_rng_state()}
    if device.startswith("cuda"):
        for i in range(torch.cuda.device_count()):
            states["cuda:%d" % i] = torch.cuda.get_rng_state(i)
    return states


def device_of(params):
    """The device the memory pass measures: the parameters' (a model on the GPU: torch.cuda's allocator)."""
    for p in params.values():
        if p is not None and p.device.type == "cuda":
            return str(p.device)
    return "cpu"


def local(p):
    """A parameter's own storage: a DTensor's local shard."""
    return p.to_local() if hasattr(p, "to_local") else p


def compile_failure(e):
    """torch.compile could not compile the model (Dynamo's or a backend's own exception): this machine's
    limit, not the checkpointing's doing."""
    dynamo = sys.modules.get("torch._dynamo.exc")
    return dynamo is not None and isinstance(e, dynamo.TorchDynamoException)


class RankDump(Dump):
    """A rank other than 0: it takes part in every gather, and writes nothing (its profile files excepted)."""

    def tensor(self, step, kind, name, value):
        pass


def failure(e, meta):
    """The exit code and meta's error for an exception of the user's code or of this machine."""
    if isinstance(e, BadFactory):
        meta["error"] = {"kind": "bad_factory", "message": one_line(e)}
        return EXIT_BAD_FACTORY
    if isinstance(e, (peak_memory.CannotRecord, distributed.LaunchError)):
        meta["error"] = {"kind": "infrastructure", "message": one_line(e)}
        return EXIT_INFRA
    traceback.print_exc()  # the user's code raised: the harness decides whether that is a finding
    if compile_failure(e):
        meta["error"] = {
            "kind": "infrastructure",
            "message": one_line("torch.compile failed: %s: %s" % (type(e).__name__, e)),
        }
        return EXIT_INFRA
    meta["error"] = {"kind": "raised", "message": one_line("%s: %s" % (type(e).__name__, e))}
    return EXIT_RAISED


def build(args, meta):
    factory = load_factory(args.module, args.factory)
    meta["phase"] = "factory"
    torch.manual_seed(args.seed)  # the model's initial weights: the same in both modes (and on every rank)
    setup = factory(args.seed)
    check_setup(setup, args.factory)
    return setup


def rank_run(args, rank, world):
    """One rank of a distributed run (distributed.rank_main): the whole training on this rank's batches."""
    dump = Dump(args.out) if rank == 0 else RankDump(os.path.join(args.out, "ranks", "rank%d" % rank))
    meta = {"phase": "import"}
    code = 0
    try:
        train(build(args, meta), args, dump, meta, rank, world)
        meta["phase"] = "done"
    except Exception as e:
        code = failure(e, meta)
    meta["tensors"] = dump.tensors
    return meta, code


EXIT_CODE_OF = {"bad_factory": EXIT_BAD_FACTORY, "infrastructure": EXIT_INFRA, "raised": EXIT_RAISED}


def arguments():
    ap = user_dump.run_arguments(__doc__.split("\n\n")[0])
    ap.add_argument("--plan", default=None, help="a placement.json applied instead of the factory's checkpoint")
    ap.add_argument(
        "--instruments", default="", help="a measuring pass: comma-separated instruments.NAMES (none: a compared run)"
    )
    ap.add_argument(
        "--timing-pairs",
        type=int,
        default=0,
        help="with --plan: plain and checkpointed steps timed side by side after the dumped steps",
    )
    ap.add_argument("--nnodes", type=int, default=1, help="a distributed factory's ranks span this many machines")
    ap.add_argument("--rdzv-endpoint", default="", help="HOST:PORT of node 0's rendezvous (with --nnodes)")
    return ap


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--join"]:  # a rank of another node: rank 0 sends the run's arguments
        return distributed.rank_main(None, rank_run)
    worker = argv[:1] == ["--rank-worker"]
    ap = arguments()
    args = ap.parse_args(argv[1:] if worker else argv)
    args.argv = argv[1:] if worker else argv
    try:
        args.instruments = instruments.parse(args.instruments)
    except ValueError as e:
        ap.error(str(e))
    if "memory" in args.instruments and len(args.instruments) > 1:
        ap.error("--instruments memory profiles alone (another instrument's hooks would be in its figures)")
    if worker:
        return distributed.rank_main(args, rank_run)
    dump = Dump(args.out)
    meta = {"mode": args.mode, "seed": args.seed, "steps": args.steps, "torch": torch.__version__, "phase": "import"}
    code = 0
    try:
        setup = build(args, meta)
        if args.plan and args.mode != "checkpoint":
            raise BadFactory("--plan applies to --mode checkpoint only")
        if args.plan and setup.get("distributed") is not None:
            raise BadFactory("--plan does not apply to a distributed factory")
        if setup.get("distributed") is not None:
            meta["phase"] = "torchrun"
            where = "factory '%s'" % args.factory
            rank0 = distributed.launch(args, setup["distributed"], os.path.abspath(__file__), meta, where, BadFactory)
            dump.tensors = rank0.pop("tensors", [])
            for k in ("rank", "time"):
                rank0.pop(k, None)
            meta.update(rank0)
            if "error" in rank0:
                code = EXIT_CODE_OF.get(rank0["error"].get("kind"), EXIT_RAISED)
        else:
            train(setup, args, dump, meta)
        if not code:
            meta["phase"] = "done"
    except Exception as e:
        code = failure(e, meta)
    user_dump.write_index(args.out, meta, dump.tensors)
    return code


if __name__ == "__main__":
    sys.exit(main())
