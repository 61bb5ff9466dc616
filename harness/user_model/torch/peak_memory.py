"""The memory of one training step from PyTorch's own allocator accounting (USER_MODEL.md, "Memory"): a step's
forward and backward under torch.profiler with profile_memory=True, read through the profiler's memory timeline
(export_memory_timeline's raw events: every allocation and free the CPU allocator reported, each with the
category torch.profiler._memory_profiler gave it).

Per step, above what was allocated when the step began (parameters, optimizer state, the batch):
  peak_bytes                the most the step held at once, forward and backward (recomputes included);
  activation_bytes          what the forward left allocated when the backward began: every tensor kept for the
                            backward (saved activations, a checkpoint's saved inputs and generator states,
                            selective checkpointing's cache, a compiled graph's residuals) plus the loss;
  profiler_activation_bytes the peak of the profiler's own ACTIVATION category. Its data-flow categorisation
                            follows eager autograd only: under torch.compile it reads 0 (torch 2.15, CPU), which
                            is why activation_bytes, which needs no categorisation, is the memory property's figure.
  peak_activation_bytes     the measured counterpart of a plan's peak (validate --plan, harness/engine/COSTS.md):
                            the step's peak of every tensor the profiler did not categorise as PARAMETER, GRADIENT
                            or OPTIMIZER_STATE (activations, their gradients, a recompute's tensors, op outputs),
                            leaving out allocations that never became a tensor (the timeline's keys without a
                            TensorKey: an op's internal workspace, e.g. oneDNN's convolution-backward buffer of a
                            weight gradient, 9.4 MB in ResNet-18's layer4, and a checkpoint's saved generator
                            state). The planner models neither parameters, their gradients, optimizer state nor op
                            workspace. None where the timeline cannot be categorised (FSDP2 below).

On a GPU (the model's parameters on a CUDA device) peak_bytes and activation_bytes come from torch.cuda's
allocator (memory_allocated, max_memory_allocated), which counts the device's memory; the CPU timeline would not.

Only ever run in a measuring pass of its own (user_model.py --instruments memory), on the last of the steps that
pass dumps, so the check that the instruments change nothing compares the profiled step with the untouched run's.

Under FSDP2 with checkpointing (torch 2.15, CPU) the timeline's categorisation fails on the checkpointed run
("AssertionError: version mismatch" in _memory_profiler: FSDP2 resizes the unsharded parameters' storages in
place). Its allocation events need no categorisation, so then the same two figures come from the profiler's event
tree directly (`"source": "allocations"`) and profiler_activation_bytes is 0, as under torch.compile."""

import gzip
import json
import os

import torch
from torch.profiler import ProfilerActivity, profile, record_function
from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, Action, Category, TensorKey

FORWARD, BACKWARD = "ckptcheck::forward", "ckptcheck::backward"


class CannotRecord(Exception):
    """The profiler recorded no memory of the step (a build without the memory profiler, another device)."""


def _start_ns(events, name):
    for e in events:
        if e.name == name:
            return e.start_time_ns
        found = _start_ns(e.children, name)
        if found is not None:
            return found
    return None


def measure(forward, work_dir, backward=lambda loss: loss.backward(), device="cpu"):
    """forward(): the step's forward, returning the scalar loss; backward(loss) runs here too. Returns the figures
    of the module docstring and the loss. The raw timeline is left in work_dir (memory_timeline.raw.json.gz).
    On a CUDA device the figures come from torch.cuda's allocator instead (_measure_cuda)."""
    if device.startswith("cuda"):
        return _measure_cuda(forward, backward, device)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        with record_function(FORWARD):
            loss = forward()
        with record_function(BACKWARD):
            backward(loss)
    tree = prof.profiler.kineto_results.experimental_event_tree()
    backward_ns = _start_ns(tree, BACKWARD)
    path = os.path.join(work_dir, "memory_timeline.raw.json.gz")
    try:
        prof.export_memory_timeline(path, device)
    except AssertionError:  # the categorisation's own check; the allocations are still there
        return _from_allocations(tree, backward_ns, device), loss
    with gzip.open(path, "rt") as f:
        raw = json.load(f)  # (time ns, action, signed bytes, category index), in the timeline's order
    created = [e for e in raw if e[1] == Action.CREATE.value]
    if not created or backward_ns is None:
        raise CannotRecord(
            "the profiler recorded no memory of the step on %s (profile_memory=True gave %d "
            "allocation events)" % (device, len(created))
        )
    activation = _CATEGORY_TO_INDEX[Category.ACTIVATION]
    baseline = sum(e[2] for e in raw if e[1] == Action.PREEXISTING.value)
    total, peak, at_backward, act, act_peak = 0, baseline, None, 0, 0
    for t, _action, nbytes, category in raw:
        if at_backward is None and t >= backward_ns:
            at_backward = total
        total += nbytes
        peak = max(peak, total)
        if category == activation:
            act += nbytes
            act_peak = max(act_peak, act)
    if at_backward is None:
        at_backward = total
    return {
        "peak_bytes": peak - baseline,
        "peak_activation_bytes": _peak_without_state(prof.mem_tl, device),
        "activation_bytes": at_backward - baseline,
        "profiler_activation_bytes": act_peak,
        "baseline_bytes": baseline,
        "allocations": len(created),
    }, loss


def _measure_cuda(forward, backward, device):
    """peak_bytes and activation_bytes of a step on a GPU from torch.cuda's caching allocator (what it handed to
    tensors, not what it reserved): the allocated bytes when the step began, when the backward began, and the
    step's maximum (reset when the step began). The profiler's categories are not read here (None, 0)."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    count = torch.cuda.memory_stats(device).get("allocation.all.allocated", 0)
    loss = forward()
    torch.cuda.synchronize(device)
    at_backward = torch.cuda.memory_allocated(device)
    backward(loss)
    torch.cuda.synchronize(device)
    return {
        "peak_bytes": torch.cuda.max_memory_allocated(device) - start,
        "activation_bytes": at_backward - start,
        "profiler_activation_bytes": 0,
        "peak_activation_bytes": None,
        "baseline_bytes": start,
        "allocations": torch.cuda.memory_stats(device).get("allocation.all.allocated", 0) - count,
        "source": "torch.cuda",
    }, loss


STATE = (Category.PARAMETER, Category.GRADIENT, Category.OPTIMIZER_STATE)


def _peak_without_state(mem_tl, device):
    """peak_activation_bytes (module docstring) from the timeline export_memory_timeline just built: its events
    (time, action, (key, version), bytes) and categories, counted as its export counts them (a version bump
    moves the bytes from the old version's category to the new one's), above what was allocated before the step."""
    dev = torch.device(device)

    def counted(key, version):
        return isinstance(key, TensorKey) and mem_tl.categories.get(key, version) not in STATE

    total = base = peak = 0
    for _t, action, (key, version), nbytes in mem_tl.timeline:
        if key.device != dev:
            continue
        if action == Action.INCREMENT_VERSION:
            total += nbytes * (counted(key, version + 1) - counted(key, version))
        elif counted(key, version):
            total += -nbytes if action == Action.DESTROY else nbytes
            base += nbytes if action == Action.PREEXISTING else 0
        peak = max(peak, total)
    return max(peak - base, 0)


def _allocations(events, out):
    for e in events:
        if e.tag == torch._C._profiler._EventType.Allocation:
            out.append((e.start_time_ns, e.extra_fields.alloc_size))
        _allocations(e.children, out)
    return out


def _from_allocations(tree, backward_ns, device):
    """peak_bytes and activation_bytes from the allocator's events in the profiled step, in time order: every
    allocation and free since the step began (what was allocated before it is the baseline, 0 here)."""
    events = sorted(_allocations(tree, []))
    if not events or backward_ns is None:
        raise CannotRecord(
            "the profiler recorded no memory of the step on %s (%d allocation events)" % (device, len(events))
        )
    total, peak, at_backward = 0, 0, None
    for t, nbytes in events:
        if at_backward is None and t >= backward_ns:
            at_backward = total
        total += nbytes
        peak = max(peak, total)
    return {
        "peak_bytes": peak,
        "activation_bytes": total if at_backward is None else at_backward,
        "profiler_activation_bytes": 0,
        "peak_activation_bytes": None,
        "baseline_bytes": 0,
        "allocations": sum(n > 0 for _, n in events),
        "source": "allocations",
    }
