#!/usr/bin/env python3
"""Trains the user's own PyTorch model, plain or with the user's own checkpointing, and dumps every tensor that
must be bitwise equal between the two (harness/adapters/torch/USER_MODEL.md). `ckptcheck validate --adapter
torch:module=PATH.py:FACTORY` runs this once per mode and seed and compares the dumps in C++.

  user_model.py --module PATH --factory NAME --seed S --steps N --mode plain|checkpoint --out DIR
                [--batch-size B] [--zero-batch] [--plan PLACEMENT.json]

--plan (with --mode checkpoint): instead of the factory's `checkpoint`, the placement (harness/engine/COSTS.md)
is applied to the factory's `chain` (apply_plan.py), and index.json's "plan" holds what step 0 measured of it:
saved_bytes, saved_bytes_before, saved_bytes_after, saved_bytes_by_block (each storage charged to the first
party that packs it), forward_calls (each chain block's calls in step 0, recomputes included); with
--timing-pairs N, timing: {"plain": [...], "checkpoint": [...]}, N steps of a plain copy of the model and N of the
checkpointed one, alternating, after the dumped steps (side_by_side).

Exit codes: 0 done; 2 the module or the factory is unusable (missing, not a function, returns the wrong
things: error.json says which); 4 the factory or the training raised (error.json holds the one-line message and
the phase, so the harness can tell "the checkpointed run raised" — a finding — from a broken model); 5 this
machine cannot run what was asked: torch.compile failed (a backend not installed, a model it cannot compile — never
a silent fallback to eager) or the profiler recorded no memory (a fault, not a finding, in either run).

--instruments NAME[,NAME]: a measuring pass (instruments.py); without it the run carries nothing of ckptcheck's.
The memory pass profiles the last dumped step (index.json's memory.step): with --steps 1 under torch.compile that
step is the first call, compilation included (memory.first_call); with two or more (validate's default) it is not.
"""
import copy
import json
import os
import re
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import user_dump  # noqa: E402
from user_dump import BadFactory, load_factory, one_line  # noqa: E402,F401  (the drivers' shared contract)
import placement  # noqa: E402
import apply_plan  # noqa: E402
import chain_probe  # noqa: E402
from saved_bytes import SavedBytes  # noqa: E402
import instruments  # noqa: E402
import peak_memory  # noqa: E402

# One thread and deterministic kernels: two plain runs must repeat bit for bit, or no comparison means anything.
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

EXIT_BAD_FACTORY = 2
EXIT_RAISED = 4
EXIT_INFRA = 5
DEFAULT_BATCH = 4
TIMING_WARMUP_PAIRS = 2


class RankRaised(Exception):
    """A DDP rank raised; the message is that rank's exception, already 'Type: message'."""


def check_setup(setup, factory_name, require_chain=False):
    """The factory returns a dict; checks each entry's type so a mistake is one clear line, not a traceback.
    `chain` (optional; required by the profiler and --plan): chain(model) gives the chain's blocks in order."""
    where = "factory '%s'" % factory_name
    if not isinstance(setup, dict):
        raise BadFactory("%s returned %s, expected a dict with model, batch, loss, checkpoint"
                         % (where, type(setup).__name__))
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
    ddp = setup.get("ddp")
    if ddp is not None and (not isinstance(ddp, dict) or int(ddp.get("world_size", 2)) < 1
                            or set(ddp) - {"world_size", "find_unused_parameters", "static_graph"}):
        raise BadFactory("%s: 'ddp' must be a dict of world_size, find_unused_parameters, static_graph" % where)
    unknown = set(setup) - {"model", "batch", "loss", "checkpoint", "optimizer", "batch_size", "wrap", "ddp",
                            "chain"}
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
        raise RuntimeError("the loss does not require grad, so none of the %d trainable parameters gets a gradient "
                           "(first: %s): the forward's graph does not reach them" % (len(trainable), trainable[0]))
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


def side_by_side(setup, pairs, plain, checkpointed, batch_size):
    """--plan: the plain twin and the checkpointed model timed step for step in one process, which goes first
    alternating, so whatever else loads the machine falls on both alike. `plain` and `checkpointed` are (model,
    optimizer); returns each one's step seconds. Runs after every dumped step, so it changes nothing compared."""
    times = {"plain": [], "checkpoint": []}
    for k in range(-TIMING_WARMUP_PAIRS, pairs):  # the warm-up pairs (the allocator, kernel caches) not recorded
        batch = setup["batch"](torch.Generator().manual_seed(1000003 * 7919 + k), batch_size)
        order = [("plain",) + plain, ("checkpoint",) + checkpointed]
        for name, runner, opt in (order if k % 2 == 0 else order[::-1]):
            opt.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            setup["loss"](runner, batch).backward()
            opt.step()
            if k >= 0:
                times[name].append(time.perf_counter() - t0)
    return times


def train(setup, args, dump, meta, rank=0, world=1):
    model = setup["model"]
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    modules = list(model.named_modules())  # before the transform renames any
    # A compared run carries no instrument; a measuring pass the ones it names (instruments.py).
    probe = instruments.MaskProbe(model) if "masks" in args.instruments else None
    make_opt = setup.get("optimizer") or (lambda ps: torch.optim.SGD(ps, lr=0.01))
    opt = make_opt(model.parameters())
    meta["momenta"] = momenta(model)
    for name, b in buffers.items():
        dump.tensor(-1, "buffer", name, b)
    runner = model
    chain_modules = plan_runners = None
    twin = None
    if args.plan and args.mode == "checkpoint":
        meta["phase"] = "checkpoint transform"
        if args.timing_pairs > 0:  # the plain model, for the side-by-side timing after the dumped steps
            twin = copy.deepcopy(model)
            twin_opt = make_opt(twin.parameters())
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
    if setup.get("ddp") is not None:
        ddp = setup["ddp"]
        runner = torch.nn.parallel.DistributedDataParallel(
            runner, find_unused_parameters=bool(ddp.get("find_unused_parameters", False)),
            static_graph=bool(ddp.get("static_graph", False)))
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

        def forward():
            out = setup["loss"](runner, batch)
            if not isinstance(out, torch.Tensor) or out.numel() != 1:
                raise BadFactory("'loss' returned %s, expected a scalar tensor" % type(out).__name__)
            return out

        if step == profiled_step:  # the memory pass: this dumped step's forward and backward under the profiler
            meta["phase"] = "step %d (profiled)" % step
            memory, loss = peak_memory.measure(forward, dump.out, lambda out: backward(out, params))
            meta["memory"] = dict(memory, step=step, first_call=step == 0 and compiled)
        elif step == 0 and "saved" in args.instruments:
            eager = not placement.traced(runner) and setup.get("wrap") is None
            if eager:
                where = placement.PlacementProbe(modules, {p.untyped_storage().data_ptr() for p in model.parameters()})
            if chain_modules is not None and eager:
                plan_meter = chain_probe.PlanMeter(chain_probe.ChainStack(chain_modules, extra=plan_runners))
            meter = SavedBytes(model.parameters(), _Probes(where, plan_meter))
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
            meta["plan"] = dict(saved_bytes=saved, **plan_meter.summary(len(chain_modules)),
                                forward_calls=list(plan_meter.stack.calls))
        elif step == 0 and chain_modules is not None:
            meta["plan"] = None  # under torch.compile or `wrap` the hooks would run at trace time: not measured
        grads = {n: (p.grad.clone() if p.grad is not None else None) for n, p in params.items()}
        opt.step()
        seconds.append(time.perf_counter() - t0)
        dump.tensor(step, "loss", "loss", loss.reshape(()))
        for n, g in grads.items():
            dump.tensor(step, "grad", n, g)
        for n, b in buffers.items():
            dump.tensor(step, "buffer", n, b)
        for n, p in params.items():
            dump.tensor(step, "param", n, p)
        dump.tensor(step, "rng", "cpu", torch.get_rng_state())
        for n, mask in sorted(probe.masks.items() if probe else []):
            dump.tensor(step, "mask", n, mask)
        if probe:
            probe.masks.clear()
    meta.update({"saved_activation_bytes": saved, "step_seconds": seconds})
    if twin is not None and meta.get("plan"):
        meta["phase"] = "side-by-side timing"
        meta["plan"]["timing"] = side_by_side(setup, args.timing_pairs, (twin, twin_opt), (runner, opt), batch_size)


def compile_failure(e):
    """torch.compile could not compile the model (Dynamo's or a backend's own exception): this machine's
    limit, not the checkpointing's doing."""
    dynamo = sys.modules.get("torch._dynamo.exc")
    return dynamo is not None and isinstance(e, dynamo.TorchDynamoException)


def ddp_worker(rank, args, factory, world, rendezvous):
    """One rank of a DistributedDataParallel run over gloo: the whole training, on this rank's batches. Rank 0
    dumps (gradients after the all-reduce are the same on every rank); each rank's meta goes to rank<r>.json."""
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + rendezvous, rank=rank, world_size=world)
    try:
        torch.manual_seed(args.seed)
        setup = factory(args.seed)
        dump = Dump(args.out if rank == 0 else os.path.join(args.out, "rank%d" % rank))
        meta = {}
        train(setup, args, dump, meta, rank, world)
        meta["tensors"] = dump.tensors
        with open(os.path.join(args.out, "rank%d.json" % rank), "w") as f:
            json.dump(meta, f)
    finally:
        dist.destroy_process_group()


def run_ddp(args, factory, ddp, meta):
    """Forks world_size ranks; a rank that raises ends them all (torch.multiprocessing), and its exception,
    reduced to its last line, is the run's. More ranks: world_size; each is a process on this machine."""
    import torch.multiprocessing as mp
    world = int(ddp.get("world_size", 2))
    rendezvous = os.path.join(os.path.abspath(args.out), "rendezvous")
    meta["world_size"] = world
    try:
        mp.start_processes(ddp_worker, args=(args, factory, world, rendezvous), nprocs=world, join=True,
                           start_method="fork")
    except mp.ProcessRaisedException as e:
        # The rank's formatted traceback: keep its final exception, from the last "SomeError: ..." line on.
        lines = [line for line in str(e).splitlines() if line.strip()]
        starts = [i for i, line in enumerate(lines) if re.match(r"^[\w.]+(Error|Exception): ", line)]
        text = " ".join(lines[starts[-1]:]) if starts else (lines[-1] if lines else "a DDP rank raised")
        raise RankRaised("rank %d: %s" % (e.error_index, text)) from None
    except mp.ProcessExitedException as e:
        raise RankRaised("a DDP rank died: %s" % one_line(e)) from None
    with open(os.path.join(args.out, "rank0.json")) as f:
        rank0 = json.load(f)
    meta.update(rank0)


def main(argv=None):
    ap = user_dump.run_arguments(__doc__.split("\n\n")[0])
    ap.add_argument("--plan", default=None, help="a placement.json applied instead of the factory's checkpoint")
    ap.add_argument("--instruments", default="",
                    help="a measuring pass: comma-separated instruments.NAMES (none: a compared run)")
    ap.add_argument("--timing-pairs", type=int, default=0,
                    help="with --plan: plain and checkpointed steps timed side by side after the dumped steps")
    args = ap.parse_args(argv)
    try:
        args.instruments = instruments.parse(args.instruments)
    except ValueError as e:
        ap.error(str(e))
    if "memory" in args.instruments and len(args.instruments) > 1:
        ap.error("--instruments memory profiles alone (another instrument's hooks would be in its figures)")
    dump = Dump(args.out)
    meta = {"mode": args.mode, "seed": args.seed, "steps": args.steps, "torch": torch.__version__,
            "phase": "import"}
    code = 0
    try:
        factory = load_factory(args.module, args.factory)
        meta["phase"] = "factory"
        torch.manual_seed(args.seed)  # the model's initial weights: the same in both modes
        setup = factory(args.seed)
        check_setup(setup, args.factory)
        if args.plan and args.mode != "checkpoint":
            raise BadFactory("--plan applies to --mode checkpoint only")
        if args.plan and setup.get("ddp") is not None:
            raise BadFactory("--plan does not apply to a DDP factory")
        if setup.get("ddp") is not None:
            meta["phase"] = "ddp"
            run_ddp(args, factory, setup["ddp"], meta)
            dump.tensors = meta.pop("tensors")
        else:
            train(setup, args, dump, meta)
        meta["phase"] = "done"
    except BadFactory as e:
        meta["error"] = {"kind": "bad_factory", "message": one_line(e)}
        code = EXIT_BAD_FACTORY
    except peak_memory.CannotRecord as e:
        meta["error"] = {"kind": "infrastructure", "message": one_line(e)}
        code = EXIT_INFRA
    except Exception as e:  # the user's code raised: the harness decides whether that is a finding
        traceback.print_exc()
        if compile_failure(e):
            meta["error"] = {"kind": "infrastructure",
                             "message": one_line("torch.compile failed: %s: %s" % (type(e).__name__, e))}
            code = EXIT_INFRA
        else:
            text = str(e) if isinstance(e, RankRaised) else "%s: %s" % (type(e).__name__, e)
            meta["error"] = {"kind": "raised", "message": one_line(text)}
            code = EXIT_RAISED
    user_dump.write_index(args.out, meta, dump.tensors)
    return code


if __name__ == "__main__":
    sys.exit(main())
