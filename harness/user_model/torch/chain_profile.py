#!/usr/bin/env python3
"""Profiles the user's own PyTorch model, trained plain, and writes its chain costs (harness/engine/COSTS.md,
format ckptcheck-chain-costs). `ckptcheck profile --adapter torch:module=PATH.py:FACTORY --out costs.json` runs

  chain_profile.py --module PATH --factory NAME --out FILE [--batch-size B] [--steps N] [--seed S]
                   [--label SPEC]

--label: the adapter spec as the user gave it, written as the costs' `model` (default torch:module=PATH:NAME).

The factory is loaded as user_model.py loads it and must name its `chain`. Step 0 runs under saved-tensor hooks,
a dispatch mode and FlopCounterMode: saved storages per block (the innermost chain block running), boundaries,
shared storages, FLOPs per op; steps 1..N-1 run with timing hooks only (per block forward and backward seconds,
the medians); then max(1, N-1) steps without any hook give step_seconds; then the model and three copies of it
(every block recomputed; the even blocks; the odd blocks) train side by side under the timing hooks, beside a
fourth plain copy without them (the denominator), which gives each block's recompute_seconds and
recompute_end_seconds (recompute_seconds()). Every time is CPU time of the thread (torch runs one thread here,
backward included): on a machine shared with other work, wall time charges an op for whatever the scheduler ran
meanwhile. Same determinism as user_model.py.

Exit codes: 0 written; 2 bad arguments, a bad factory or a chain that is not sequential ("profile: ..." on
stderr, one line); 3 the classified bytes do not add up to what the plain run saves (a profiler bug); 4 the
user's code raised (one line; CKPTCHECK_PROFILE_TRACEBACK=1 adds the traceback). What the user's code itself
writes to stderr (library warnings) comes before that line.

Not named profile.py: this directory is on sys.path of every adapter script, and a profile.py there shadows
Python's own `profile` module, which cProfile imports (torch._dynamo imports cProfile; `import torch` fails).
"""

import argparse
import copy
import json
import os
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# saved_bytes.py, the saved-tensor counter this driver shares with the torch case adapter
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "adapters", "torch"))
import apply_plan  # noqa: E402
import chain_probe as cp  # noqa: E402
import torch  # noqa: E402
import user_model  # noqa: E402  (one thread, deterministic algorithms)
from saved_bytes import SavedBytes  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

EXIT_OK, EXIT_BAD, EXIT_INCONSISTENT, EXIT_RAISED = 0, 2, 3, 4
FORMAT, VERSION = "ckptcheck-chain-costs", 1
# recompute_seconds: rounds of a step of the model and of each recomputed copy, at least this many and until the
# timed steps add up to CALIBRATION_SECONDS of CPU time. A count alone left a small model's figures to chance: the
# MLP example (a 4 ms step) moved 0.02 of the step per block between two profiles of 16 rounds. Each step is
# preceded by a full garbage collection, untimed (user_model.collector_between_steps), about 0.1 s.
CALIBRATION_PAIRS = 16
CALIBRATION_SECONDS = 1.0


class Refused(Exception):
    """Bad arguments, a bad factory or a chain that is not sequential: exit 2."""


class Inconsistent(Exception):
    """The classification does not add up: exit 3."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Refused(message)


def parse(argv):
    ap = _Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", required=True)
    ap.add_argument("--factory", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch-size", type=int, default=0)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--label", default=None, help="the costs' model field (default torch:module=PATH:FACTORY)")
    args = ap.parse_args(argv)
    if args.steps < 2:
        raise Refused("--steps must be at least 2 (step 0 is profiled, later steps are timed)")
    if args.batch_size < 0:
        raise Refused("--batch-size must be positive")
    return args


def make_batch(setup, args, step, batch_size):
    gen = torch.Generator().manual_seed(args.seed * 1000003 + step)  # as user_model.py (one rank)
    return setup["batch"](gen, batch_size)


def compute_loss(setup, model, batch):
    loss = setup["loss"](model, batch)
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise user_model.BadFactory("'loss' returned %s, expected a scalar tensor" % type(loss).__name__)
    return loss


def _sum_flops(counts, name):
    return sum(counts.get(name, {}).values())


def profile_step(setup, model, opt, batch, blocks):
    """Step 0, plain, under every probe. Returns the probe, the recorder, the SavedBytes meter and
    FlopCounterMode's per-module counts at the end of forward and at the end of backward."""
    param_ptrs = {cp.storage_ptr(p) for p in model.parameters()}
    probe = cp.ChainProbe(blocks, param_ptrs)
    counter = FlopCounterMode(display=False)
    recorder = cp.OpRecorder(probe.stack.party, counter)
    probe.recorder = recorder
    meter = SavedBytes(model.parameters(), probe)
    opt.zero_grad(set_to_none=True)
    try:
        with counter:
            with recorder:
                with torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack):
                    loss = compute_loss(setup, model, batch)
                problem = probe.error()
                if problem:
                    raise cp.NotSequential(problem)
                forward_counts = {k: dict(v) for k, v in counter.get_flop_counts().items()}
                recorder.start_backward()
                loss.backward()
        total_counts = counter.get_flop_counts()
    finally:
        probe.remove()
    opt.step()
    return probe, recorder, meter, forward_counts, total_counts


class Timer:
    """Timing hooks only: forward pre/post hooks on the blocks; tensor hooks on the boundaries x_0..x_L, whose
    gradient is complete when the block after them has run its backward. A block's forward is its first in the
    step; on a recomputed block the recompute runs in its backward interval (it starts when the gradient of its
    output is complete)."""

    def __init__(self, modules, settle):
        self.n = len(modules)
        self.settle = settle  # run before each step, untimed (user_model.collector_between_steps)
        self.handles = []
        for i, m in enumerate(modules):
            self.handles.append(m.register_forward_pre_hook(self._pre(i), with_kwargs=True))
            self.handles.append(m.register_forward_hook(self._post(i)))
        self.reset()

    def reset(self):
        self.pre, self.post = [None] * self.n, [None] * self.n
        self.grad = [None] * (self.n + 1)

    def _mark(self, k):
        def hook(_grad):
            if self.grad[k] is None:
                self.grad[k] = time.thread_time()

        return hook

    def _pre(self, i):
        def hook(_m, args, _kwargs):
            if self.pre[i] is not None:  # a recompute in backward: the block's first forward counts
                return
            self.pre[i] = time.thread_time()
            if i == 0 and args and isinstance(args[0], torch.Tensor) and args[0].requires_grad:
                args[0].register_hook(self._mark(0))

        return hook

    def _post(self, i):
        def hook(_m, _args, output):
            if self.post[i] is not None:
                return
            self.post[i] = time.thread_time()
            y = cp.first_tensor(output)
            if y is not None and y.requires_grad:
                y.register_hook(self._mark(i + 1))

        return hook

    def step(self, setup, model, opt, batch):
        """One training step; returns {"blocks": [(fwd, bwd)], "before": (fwd, bwd), "after": (fwd, bwd),
        "step": the whole step, optimizer included}."""
        self.reset()
        opt.zero_grad(set_to_none=True)
        self.settle()
        t0 = time.thread_time()
        loss = compute_loss(setup, model, batch)
        t1 = time.thread_time()
        loss.backward()
        t2 = time.thread_time()
        opt.step()
        t3 = time.thread_time()
        if None in self.pre or None in self.post:
            raise cp.NotSequential("chain is not sequential: a block did not run in a timed step")
        grad = list(self.grad)
        grad[self.n] = grad[self.n] if grad[self.n] is not None else t1
        for k in range(self.n - 1, -1, -1):  # a boundary without gradient: no time of its own
            grad[k] = grad[k] if grad[k] is not None else grad[k + 1]
        pos = lambda s: max(0.0, s)  # noqa: E731
        return {
            "blocks": [(pos(self.post[i] - self.pre[i]), pos(grad[i] - grad[i + 1])) for i in range(self.n)],
            "before": (pos(self.pre[0] - t0), pos(t2 - grad[0])),
            "after": (pos(t1 - self.post[-1]), pos(grad[self.n] - t1)),
            "step": t3 - t0,
        }

    def remove(self):
        for h in self.handles:
            h.remove()


def _median_times(samples):
    med = lambda xs: float(statistics.median(xs))  # noqa: E731
    n = len(samples[0]["blocks"])
    blocks = [(med([s["blocks"][i][0] for s in samples]), med([s["blocks"][i][1] for s in samples])) for i in range(n)]
    part = {p: (med([s[p][0] for s in samples]), med([s[p][1] for s in samples])) for p in ("before", "after")}
    return blocks, part


class BareStep:
    """A step with no hook, timed whole: the calibration's denominator. The Timer's hooks are Python calls at
    every block; on the MLP example (4 ms steps) they lengthened the plain step by 5% on an idle machine (300
    pairs) and 8-9% beside a build (200 pairs; 2026-12-07), and `validate --plan` times both models without them."""

    def __init__(self, settle):
        self.settle = settle

    def step(self, setup, model, opt, batch):
        return {"step": user_model.timed_step(lambda: compute_loss(setup, model, batch), opt, self.settle)}

    def remove(self):
        pass


def _recomputed_copy(setup, model, make_opt, recompute, settle):
    """(copy, its optimizer, a Timer on its blocks): a copy of the model with block i its own recomputed segment
    where recompute[i], stored otherwise (apply_plan.py, as `validate --plan` applies a placement)."""
    twin = copy.deepcopy(model)
    blocks = [m for _, m in cp.resolve_chain(setup, twin)]
    names_of = {id(m): n for n, m in twin.named_modules()}
    apply_plan.apply(
        twin,
        blocks,
        {
            "blocks": [names_of[id(m)] for m in blocks],
            "segments": [{"first": i, "last": i, "recompute": r} for i, r in enumerate(recompute)],
        },
    )
    return twin, make_opt(twin.parameters()), Timer(blocks, settle)


def recompute_seconds(setup, model, make_opt, args, batch_size, step_seconds, settle):
    """What recomputing each block adds to the step, measured per block in two contexts: (recompute_seconds,
    recompute_end_seconds), the block's successor recomputed too, or stored. The model and three copies train a
    step each in turn under the Timer, and a fourth copy without it (BareStep; which goes first rotates),
    CALIBRATION_PAIRS rounds or more after a warm-up round (until the timed steps make CALIBRATION_SECONDS):
    a copy with every block its own recomputed segment (apply_plan.py, as `validate --plan` applies a placement),
    one with the even blocks recomputed and one with the odd blocks (the rest stored). Per round, a block's cost
    in a copy is its forward plus backward interval (the recompute included) less the model's; the copy's whole
    step less the model's, less every block's cost, is what checkpointing adds outside any block's interval
    (checkpoint's own entry and exit, the parts before and after the chain), shared evenly by the copy's
    recomputed blocks. recompute_seconds[i] is block i's cost in the every-block copy; recompute_end_seconds[i]
    its cost in the alternating copy that recomputes it, plus its stored successor's (what the recompute does to
    the backward after it). Medians over the rounds, as a fraction of the bare copy's median step, times
    step_seconds: the step the prediction divides by, so a machine that ran faster or slower during these rounds
    moves no prediction.

    Per block, because recomputing a block does not cost its forward: in three runs ResNet-18's last two blocks
    added 0.67-0.98 of their forward time, their recompute warming the weights their backward then reads, and its
    first four blocks 1.1-1.9 times theirs. Two contexts, because a recompute right after a stored block's
    backward costs more than one after another recompute: on ResNet-18 with only its first four blocks recomputed,
    the fourth's interval grew from 2.1% of the step (every block recomputed) to 2.8-3.0%; on the MLP with its
    first three, the third's from 15% to 20% (2026-12-07). Negative where recomputing a block costs less than it
    saves; a placement's prediction never counts a block's recompute below zero."""
    n = len(cp.resolve_chain(setup, model))
    masks = [[True] * n] + [[i % 2 == p for i in range(n)] for p in range(min(2, n))]  # one block: no odd copy
    plain = (model, make_opt(model.parameters()), Timer([m for _, m in cp.resolve_chain(setup, model)], settle))
    bare = copy.deepcopy(model)
    runs = [plain] + [_recomputed_copy(setup, model, make_opt, mask, settle) for mask in masks]
    runs.append((bare, make_opt(bare.parameters()), BareStep(settle)))
    rounds, k, timed = [], -1, 0.0
    try:
        while k < CALIBRATION_PAIRS or timed < CALIBRATION_SECONDS:
            batch = make_batch(setup, args, 2 * args.steps + k, batch_size)
            took = {}
            for j in range(len(runs)):
                m, o, timer = runs[(j + k) % len(runs)]
                took[id(m)] = timer.step(setup, m, o, batch)
            if k >= 0:
                rounds.append([took[id(r[0])] for r in runs])
                timed += sum(t["step"] for t in took.values())
            k += 1
    finally:
        for r in runs:
            r[2].remove()
    med = statistics.median

    def costs(c, mask):
        """Per block runs[c] recomputes (mask): its cost plus its stored successor's, plus its share of the rest."""
        recomputed = [i for i in range(n) if mask[i]]
        per_round = []
        for r in rounds:
            d = [sum(r[c]["blocks"][i]) - sum(r[0]["blocks"][i]) for i in range(n)] + [0.0]  # d[n]: after the chain
            rest = r[c]["step"] - r[0]["step"] - sum(d)
            stored_next = [0.0 if i + 1 < n and mask[i + 1] else d[i + 1] for i in range(n)]
            per_round.append({i: d[i] + stored_next[i] + rest / len(recomputed) for i in recomputed})
        return {i: med([x[i] for x in per_round]) for i in recomputed}

    plain_step = med([r[-1]["step"] for r in rounds])  # the bare copy's: no hook in the step we divide by
    scale = step_seconds / plain_step if plain_step > 0 else 1.0
    cont, end = costs(1, masks[0]), {}
    for c, mask in enumerate(masks[1:], start=2):
        end.update(costs(c, mask))
    return [(cont[i] * scale, end[i] * scale) for i in range(n)]


def classify(probe, recorder, meter, blocks):
    """The costs' byte and FLOP fields from step 0 (COSTS.md), and the check that they add up."""
    L = len(blocks)
    bounds = probe.boundaries()
    bptr = {}
    for k, (p, _) in enumerate(bounds):
        if p in bptr:
            raise cp.NotSequential(
                "chain is not sequential: x_%d and x_%d are one storage (block %s runs in place)"
                % (bptr[p], k, blocks[k - 1][0])
            )
        bptr[p] = k
    arguments = probe.arguments or {}
    for p in arguments:
        if p in bptr:
            raise cp.NotSequential("chain is not sequential: x_%d is also a further argument of the blocks" % bptr[p])

    def party_name(p):
        return p if p in (cp.BEFORE, cp.AFTER) else "block " + blocks[p][0]

    flags = {"in": [False] * L, "out": [False] * L, "chain_in": False, "chain_out": False}
    outside_saved = {cp.BEFORE: 0, cp.AFTER: 0}
    op_saved = [{} for _ in range(L)]
    shared, saved_boundaries, saved_args = [], set(), set()
    for ptr, e in probe.saved.items():
        n, parties = e["bytes"], e["parties"]
        if n == 0:
            continue
        if ptr in bptr:
            k = bptr[ptr]
            allowed = {k - 1, k} | ({cp.BEFORE} if k == 0 else set()) | ({cp.AFTER} if k == L else set())
            for p in parties:
                if p not in allowed:
                    raise cp.NotSequential(
                        "chain is not sequential: %s saves x_%d, a boundary it does not touch" % (party_name(p), k)
                    )
                if p == cp.BEFORE:
                    flags["chain_in"] = True
                elif p == cp.AFTER:
                    flags["chain_out"] = True
                elif p == k:
                    flags["in"][k] = True
                else:
                    flags["out"][k - 1] = True
            saved_boundaries.add(k)
        elif ptr in arguments or len(parties) > 1:
            shared.append(
                {
                    "bytes": n,
                    "saved_by": sorted(p for p in parties if isinstance(p, int)),
                    "before": cp.BEFORE in parties,
                    "after": cp.AFTER in parties,
                    "argument": ptr in arguments,
                }
            )
            if ptr in arguments:
                saved_args.add(ptr)
        elif parties[0] in (cp.BEFORE, cp.AFTER):
            outside_saved[parties[0]] += n
        else:
            name = e["producer"] or "external"  # produced by no op of the step: a buffer, the batch
            op_saved[parties[0]][name] = op_saved[parties[0]].get(name, 0) + n
    for ptr, n in arguments.items():
        if ptr not in saved_args and n > 0:  # a further argument nobody saves: a checkpoint would keep it
            shared.append({"bytes": n, "saved_by": [], "before": False, "after": False, "argument": True})

    out_blocks = []
    for i, (name, _) in enumerate(blocks):
        rec = recorder.ops.get(i, {})
        names = list(rec) + [n for n in op_saved[i] if n not in rec]
        ops = []
        for op in names:
            fwd, bwd = rec.get(op, (0, 0))
            sb = op_saved[i].get(op, 0)
            if sb or fwd or bwd:
                ops.append(
                    {
                        "op": op,
                        "saved_bytes": sb,
                        "forward_flops": int(fwd),
                        "backward_flops": int(bwd),
                        "matmul": cp.is_matmul(op),
                    }
                )
        out_blocks.append(
            {
                "name": name,
                "saves_input": flags["in"][i],
                "saves_output": flags["out"][i],
                "ops": ops,
                "forward_flops": sum(o["forward_flops"] for o in ops),
                "backward_flops": sum(o["backward_flops"] for o in ops),
            }
        )
    outside = {}
    for part in (cp.BEFORE, cp.AFTER):
        rec = recorder.ops.get(part, {})
        outside[part] = {
            "saved_bytes": outside_saved[part],
            "forward_flops": int(sum(v[0] for v in rec.values())),
            "backward_flops": int(sum(v[1] for v in rec.values())),
        }
    outside[cp.BEFORE]["saves_chain_input"] = flags["chain_in"]
    outside[cp.AFTER]["saves_chain_output"] = flags["chain_out"]

    total = (
        outside_saved[cp.BEFORE]
        + outside_saved[cp.AFTER]
        + sum(sum(d.values()) for d in op_saved)
        + sum(bounds[k][1] for k in saved_boundaries)
        + sum(s["bytes"] for s in shared if s["saved_by"] or s["before"] or s["after"])
    )
    if total != meter.total():
        raise Inconsistent(
            "classified saved bytes %d (outside, ops, boundaries, shared) != %d saved by the plain "
            "run" % (total, meter.total())
        )
    return [b for _, b in bounds], out_blocks, outside, shared


def check_flops(recorder, out_blocks, outside, forward_counts, total_counts):
    """The per-op attribution against FlopCounterMode's own totals ("Global"; the counts at the end of forward
    split forward from backward): they must agree, or exit 3. Its per-module rows are not used: get_flop_counts()
    puts a module's forward and backward FLOPs under one name, and its ModuleTracker keeps a block "in backward"
    until every input's gradient is done, so blocks that share an argument needing a gradient get the later
    blocks' backward FLOPs too."""
    fwd_global = _sum_flops(forward_counts, "Global")
    bwd_global = _sum_flops(total_counts, "Global") - fwd_global
    fwd = sum(b["forward_flops"] for b in out_blocks) + sum(p["forward_flops"] for p in outside.values())
    bwd = sum(b["backward_flops"] for b in out_blocks) + sum(p["backward_flops"] for p in outside.values())
    if fwd != fwd_global or bwd + recorder.unattributed != bwd_global:
        raise Inconsistent(
            "per-op FLOPs forward %d backward %d (+%d unattributed) != FlopCounterMode's %d / %d"
            % (fwd, bwd, recorder.unattributed, fwd_global, bwd_global)
        )
    if recorder.unattributed:
        print(
            "profile: warning: %d backward FLOPs ran outside every recorded autograd node (not in any block)"
            % recorder.unattributed,
            file=sys.stderr,
        )


def run(args):
    factory = user_model.load_factory(args.module, args.factory)
    torch.manual_seed(args.seed)
    setup = factory(args.seed)
    user_model.check_setup(setup, args.factory, require_chain=True)
    for key in ("wrap", "ddp"):
        if setup.get(key) is not None:
            raise Refused(
                "factory '%s' has '%s': the profile runs the model eagerly in one process" % (args.factory, key)
            )
    model = setup["model"]
    blocks = cp.resolve_chain(setup, model)
    make_opt = setup.get("optimizer") or (lambda ps: torch.optim.SGD(ps, lr=0.01))
    opt = make_opt(model.parameters())
    batch_size = args.batch_size or int(setup.get("batch_size", user_model.DEFAULT_BATCH))
    torch.manual_seed(args.seed)
    model.train()

    probe, recorder, meter, fwd_counts, total_counts = profile_step(
        setup, model, opt, make_batch(setup, args, 0, batch_size), blocks
    )
    bounds, out_blocks, outside, shared = classify(probe, recorder, meter, blocks)
    check_flops(recorder, out_blocks, outside, fwd_counts, total_counts)
    del probe, recorder

    with user_model.collector_between_steps() as settle:
        timer = Timer([m for _, m in blocks], settle)
        try:
            samples = [
                timer.step(setup, model, opt, make_batch(setup, args, step, batch_size))
                for step in range(1, args.steps)
            ]
        finally:
            timer.remove()
        plain = []
        for step in range(args.steps, args.steps + max(1, args.steps - 1)):
            batch = make_batch(setup, args, step, batch_size)
            plain.append(user_model.timed_step(lambda batch=batch: compute_loss(setup, model, batch), opt, settle))
        step_seconds = float(statistics.median(plain))
        recompute = recompute_seconds(setup, model, make_opt, args, batch_size, step_seconds, settle)
    block_times, part_times = _median_times(samples)
    for b, (f, g) in zip(out_blocks, block_times, strict=False):
        b["forward_seconds"], b["backward_seconds"] = f, g
    for b, (r, e) in zip(out_blocks, recompute, strict=True):
        b["recompute_seconds"], b["recompute_end_seconds"] = r, e
    for part in (cp.BEFORE, cp.AFTER):
        outside[part]["forward_seconds"], outside[part]["backward_seconds"] = part_times[part]
    label = args.label or "torch:module=%s:%s" % (args.module, args.factory)
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": label,
        "framework": "torch " + torch.__version__.split("+")[0],
        "batch_size": batch_size,
        "step_seconds": step_seconds,
        "boundary_bytes": bounds,
        "blocks": out_blocks,
        "outside": {"before": outside[cp.BEFORE], "after": outside[cp.AFTER]},
        "shared": shared,
    }


def write_atomically(path, obj):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main(argv=None):
    """Returns the exit code; the one-line reason goes to stderr."""
    try:
        args = parse(argv)
        costs = run(args)
        write_atomically(args.out, costs)
        return EXIT_OK
    except (Refused, user_model.BadFactory, cp.ChainError, cp.NotSequential) as e:
        print("profile: %s" % user_model.one_line(e), file=sys.stderr)
        return EXIT_BAD
    except Inconsistent as e:
        print("profile: inconsistent: %s" % user_model.one_line(e), file=sys.stderr)
        return EXIT_INCONSISTENT
    except Exception as e:  # the user's code raised (the import, the factory, chain, batch, loss, training)
        if os.environ.get("CKPTCHECK_PROFILE_TRACEBACK"):
            traceback.print_exc()
        print("profile: raised: %s" % user_model.one_line("%s: %s" % (type(e).__name__, e)), file=sys.stderr)
        return EXIT_RAISED


if __name__ == "__main__":
    sys.exit(main())
