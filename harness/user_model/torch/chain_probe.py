"""The factory's chain and what runs where in it (harness/engine/COSTS.md): the helpers of chain_profile.py and of
user_model.py --plan.

- resolve_chain: the blocks `chain(model)` names, as (module path, module) pairs.
- ChainStack: forward pre/post hooks on the blocks keep a stack of the chain blocks running; party() is the
  innermost block's index, or "before" / "after" outside the chain.
- PlanMeter: each saved storage attributed to the first party that packs it (the measured side of COSTS.md
  "Saved bytes of a placement").
- ChainProbe: the profiler's step 0: boundaries x_0..x_L, the blocks' further arguments, the sequential checks,
  and per saved storage the parties that pack it and the aten op that produced it.
- OpRecorder: a TorchDispatchMode recording, per party and aten op, the storages each op produces and its FLOPs
  in forward and (through hooks on the autograd nodes the op created) in backward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

BEFORE, AFTER = "before", "after"
Party = int | str  # a chain block's index, or BEFORE / AFTER the chain

# Matrix products and convolutions: what a `selective` policy keeps (COSTS.md `matmul`).
MATMUL_OPS = {
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "_scaled_mm",
    "matmul",
    "convolution",
    "_convolution",
    "cudnn_convolution",
    "convolution_overrideable",
    "_slow_conv2d_forward",
    "mkldnn_convolution",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_cudnn_attention",
    "_flash_attention_forward",
    "_efficient_attention_forward",
}

# Ops that only allocate: a storage they make is named by the first in-place op that writes it (dropout's noise,
# on the CPU `empty_like(x).bernoulli_(1 - p)`, is the bernoulli's).
_ALLOCATING_OPS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}

# Metadata queries FlopCounterMode leaves alone (they only reach a mode for exotic tensor subclasses).
_META_OPS = {
    "sym_is_contiguous",
    "is_contiguous",
    "is_strides_like_format",
    "is_non_overlapping_and_dense",
    "size",
    "sym_size",
    "stride",
    "sym_stride",
    "storage_offset",
    "sym_storage_offset",
    "numel",
    "sym_numel",
    "dim",
    "layout",
}


class ChainError(Exception):
    """The factory's chain breaks the contract (user_model.py and chain_profile.py report it as a bad factory)."""


class NotSequential(Exception):
    """The model does not run its chain as one block after another (COSTS.md "The chain")."""


def storage_ptr(t: torch.Tensor) -> int:
    """The data pointer of the tensor's storage (what identifies it among the saved tensors)."""
    return t.untyped_storage().data_ptr()


def first_tensor(value: Any) -> torch.Tensor | None:
    """The block's output as the chain sees it: the tensor, or a tuple's first element."""
    if isinstance(value, (tuple, list)) and value:
        value = value[0]
    return value if isinstance(value, torch.Tensor) else None


def further_tensors(args: Sequence[Any], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors a block takes besides its first positional argument (top level only)."""
    return [a for a in list(args[1:]) + list(kwargs.values()) if isinstance(a, torch.Tensor)]


def resolve_chain(setup: dict[str, Any], model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The chain's blocks as (module path, module) pairs, the paths from model.named_modules() as they are now
    (call it before any checkpoint transform renames modules)."""
    chain = setup["chain"](model)
    if isinstance(chain, (torch.nn.ModuleList, torch.nn.Sequential)):
        mods = list(chain)
    elif isinstance(chain, (list, tuple)) and all(isinstance(m, torch.nn.Module) for m in chain):
        mods = list(chain)
    else:
        raise ChainError(
            "'chain' returned %s, expected an nn.ModuleList, an nn.Sequential or a list of modules"
            % type(chain).__name__
        )
    if not mods:
        raise ChainError("'chain' returned no blocks")
    names = {id(m): n for n, m in model.named_modules()}
    out = []
    for i, m in enumerate(mods):
        name = names.get(id(m))
        if not name:
            raise ChainError("'chain' block %d (%s) is not a submodule of the model" % (i, type(m).__name__))
        if any(name == n for n, _ in out):
            raise ChainError("'chain' names block %s twice" % name)
        for n, _ in out:
            if name.startswith(n + ".") or n.startswith(name + "."):
                raise ChainError("'chain' block %s is inside block %s" % tuple(sorted((name, n), key=len)[::-1]))
        out.append((name, m))
    return out


class ChainStack:
    """Which chain block runs now. Hooks on each block (and on `extra` modules standing for a block: the
    placement's segment wrappers) push its index on entry and pop it on exit, also when the forward raised (a
    recompute that stops early). on_enter(i, args, kwargs) and on_exit(i, output) let a probe look at them."""

    def __init__(
        self,
        modules: Sequence[torch.nn.Module],
        extra: Sequence[tuple[torch.nn.Module, int]] = (),
        on_enter: Callable[[int, tuple[Any, ...], dict[str, Any]], Any] | None = None,
        on_exit: Callable[[int, Any], Any] | None = None,
    ) -> None:
        self.stack = []
        self.started = False
        self.calls = [0] * len(modules)
        self.on_enter, self.on_exit = on_enter, on_exit
        self.handles = []
        for i, m in enumerate(modules):
            self._hook(m, i, True)
        for m, i in extra:
            self._hook(m, i, False)

    def _hook(self, module: torch.nn.Module, index: int, is_block: bool) -> None:
        def pre(_module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if is_block:
                self.calls[index] += 1
                if self.on_enter is not None:
                    self.on_enter(index, args, kwargs)
            self.stack.append(index)
            self.started = True

        def post(_module: torch.nn.Module, _args: Any, output: Any) -> None:
            if index in self.stack:
                del self.stack[len(self.stack) - 1 - self.stack[::-1].index(index)]
            if is_block and self.on_exit is not None:
                self.on_exit(index, output)

        self.handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        self.handles.append(module.register_forward_hook(post, always_call=True))

    def party(self) -> Party:
        """The block running now (its index), else BEFORE the first block or AFTER the chain."""
        if self.stack:
            return self.stack[-1]
        return AFTER if self.started else BEFORE

    def remove(self) -> None:
        """Remove the hooks."""
        for h in self.handles:
            h.remove()
        self.handles = []


class PlanMeter:
    """Each storage packed in the forward pass attributed to the first party that packs it (forward order):
    plugged into saved_bytes.SavedBytes as its probe, which already leaves parameters out."""

    def __init__(self, stack: ChainStack) -> None:
        self.stack = stack
        self.first = {}

    def packed(self, ptr: int, nbytes: int) -> None:
        """SavedBytes' report of a counted pack: the storage goes to the party running now, unless it has one."""
        if ptr not in self.first:
            self.first[ptr] = (self.stack.party(), nbytes)

    def summary(self, length: int) -> dict[str, Any]:
        """The saved bytes before the chain, after it and per block of a chain of `length` blocks."""
        by_block, before, after = [0] * length, 0, 0
        for party, nbytes in self.first.values():
            if party == BEFORE:
                before += nbytes
            elif party == AFTER:
                after += nbytes
            else:
                by_block[party] += nbytes
        return {"saved_bytes_before": before, "saved_bytes_after": after, "saved_bytes_by_block": by_block}


class ChainProbe:
    """Step 0 of the profile. Records the boundaries x_0..x_L (block i's first positional input; the last block's
    output), the further tensor arguments (block 0's; every block must take the same storages), and per storage
    packed for backward: its bytes, the parties that pack it (in order), the op that produced it. The checks
    of a sequential chain are collected, not raised inside the user's forward: error() after it."""

    def __init__(self, blocks: Sequence[tuple[str, torch.nn.Module]], param_ptrs: set[int]) -> None:
        self.names = [n for n, _ in blocks]
        self.param_ptrs = param_ptrs
        self.recorder = None
        self.inputs = [None] * len(blocks)  # x_0..x_{L-1}, kept alive so no pointer is reused meanwhile
        self.output = None  # x_L
        self.outputs = [None] * len(blocks)  # each block's output storage pointer
        self.arguments = None  # {ptr: nbytes} of block 0's further tensor arguments
        self.keep = []
        self.saved = {}  # ptr -> {"bytes", "parties", "producer"}
        self.problems = []
        self.stack = ChainStack([m for _, m in blocks], on_enter=self._enter, on_exit=self._exit)

    def _problem(self, text: str) -> None:
        if not self.problems:
            self.problems.append("chain is not sequential: " + text)

    def _enter(self, i: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        name = self.names[i]
        if self.stack.calls[i] > 1:
            return self._problem("block %s runs %d times in one forward pass" % (name, self.stack.calls[i]))
        if self.stack.stack:
            return self._problem("block %s runs inside block %s" % (name, self.names[self.stack.stack[-1]]))
        if i > 0 and self.stack.calls[i - 1] == 0:
            return self._problem("block %s runs before block %s" % (name, self.names[i - 1]))
        if not args or not isinstance(args[0], torch.Tensor):
            return self._problem("block %s's first positional argument is not a tensor" % name)
        x = args[0]
        self.inputs[i] = x
        if i > 0 and storage_ptr(x) != self.outputs[i - 1]:
            return self._problem("block %s's first input is not block %s's output" % (name, self.names[i - 1]))
        further = further_tensors(args, kwargs)
        self.keep.extend(further)
        storages = {
            storage_ptr(t): t.untyped_storage().nbytes() for t in further if storage_ptr(t) not in self.param_ptrs
        }
        if self.arguments is None:
            self.arguments = storages
        elif set(storages) != set(self.arguments):
            self._problem(
                "block %s takes other tensor arguments than block %s (%d storages, %d there)"
                % (name, self.names[0], len(storages), len(self.arguments))
            )

    def _exit(self, i: int, output: Any) -> None:
        y = first_tensor(output)
        if y is None:
            return self._problem(
                "block %s returns %s, not a tensor or a tuple starting with one"
                % (self.names[i], type(output).__name__)
            )
        if self.outputs[i] is None:
            self.outputs[i] = storage_ptr(y)
            if self.inputs[i] is not None and storage_ptr(self.inputs[i]) == self.outputs[i]:
                self._problem("block %s returns its input's storage (it runs in place)" % self.names[i])
            if i == len(self.names) - 1:
                self.output = y

    def packed(self, ptr: int, nbytes: int) -> None:
        """SavedBytes' report of a counted pack: its bytes, every party that packs it, the op that made it."""
        entry = self.saved.get(ptr)
        if entry is None:
            producer = self.recorder.producer.get(ptr) if self.recorder is not None else None
            entry = self.saved[ptr] = {"bytes": nbytes, "parties": [], "producer": producer}
        party = self.stack.party()
        if party not in entry["parties"]:
            entry["parties"].append(party)

    def error(self) -> str | None:
        """The first reason the chain is not sequential, or None."""
        if self.problems:
            return self.problems[0]
        missing = [n for n, c in zip(self.names, self.stack.calls, strict=False) if c == 0]
        if missing:
            return "chain is not sequential: block %s does not run in the forward pass" % missing[0]
        return None

    def boundaries(self) -> list[tuple[int, int]]:
        """[(ptr, nbytes)] of x_0..x_L."""
        ts = self.inputs + [self.output]
        return [(storage_ptr(t), t.untyped_storage().nbytes()) for t in ts]

    def remove(self) -> None:
        """Remove the block hooks and let the kept tensors go."""
        self.stack.remove()


class OpRecorder(TorchDispatchMode):
    """Per party (ChainStack.party at the time) and aten op, in order of first call: FLOPs forward and backward,
    and which op produced each storage (the op whose output storage is none of its inputs': a view or an
    in-place op keeps the producer; a storage an allocating op made is named by its first in-place writer).
    Entered inside a FlopCounterMode (`counter`): an op's FLOPs are what that
    counter adds while the op runs (its formula, or the ops it decomposes into), so the per-op counts add up to
    FlopCounterMode's. Backward FLOPs go to the forward op whose autograd node runs: each node an op's outputs
    got is hooked (pre-hook: it starts; hook: it is done)."""

    def __init__(self, party: Callable[[], Party], counter: Any) -> None:
        super().__init__()
        self.party = party
        self.counter = counter
        self.producer = {}
        self.unwritten = set()  # storages an allocating op made that nothing has written yet
        self.ops = {}  # party -> {op name: [forward flops, backward flops]}
        self.nodes = {}
        self.pending = []
        self.current = None
        self.backward = False
        self.unattributed = 0  # backward FLOPs outside every hooked node

    def entry(self, party: Party, name: str) -> list[int]:
        """The [forward, backward] FLOPs of op `name` under `party`, created at zero."""
        return self.ops.setdefault(party, {}).setdefault(name, [0, 0])

    def resolve(self) -> None:
        """Hooks the autograd nodes of the last op's outputs (set once the op's autograd wrapper returned)."""
        for t, party, name in self.pending:
            node = t.grad_fn
            if node is not None and node not in self.nodes:
                self.nodes[node] = (party, name)
                node.register_prehook(self._node_pre(party, name))
                node.register_hook(self._node_post)
        self.pending = []

    def _node_pre(self, party: Party, name: str) -> Callable[[Any], None]:
        def hook(_grad_outputs: Any) -> None:
            self.current = (party, name)

        return hook

    def _node_post(self, _grad_inputs: Any, _grad_outputs: Any) -> None:
        self.current = None

    def start_backward(self) -> None:
        """The forward is over: resolve its last op, attribute the FLOPs from here on to backward."""
        self.resolve()
        self.backward = True

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        packet = func._overloadpacket
        if packet.__name__ in _META_OPS:
            return NotImplemented
        if not self.backward:
            self.resolve()
        counted = sum(self.counter.flop_counts["Global"].values())
        out = func(*args, **kwargs)  # through the FlopCounterMode outside this mode
        flops = sum(self.counter.flop_counts["Global"].values()) - counted
        name = str(func)
        if self.backward:
            if flops:
                if self.current is not None:
                    self.entry(*self.current)[1] += flops
                else:
                    self.unattributed += flops
            return out
        party = self.party()
        self.entry(party, name)[0] += flops
        flat_in, _ = tree_flatten((args, kwargs))
        in_ptrs = {storage_ptr(a) for a in flat_in if isinstance(a, torch.Tensor) and a.layout == torch.strided}
        flat_out, _ = tree_flatten(out)
        outs = [t for t in flat_out if isinstance(t, torch.Tensor) and t.layout == torch.strided]
        allocating = packet.__name__ in _ALLOCATING_OPS
        for t in outs:
            p = storage_ptr(t)
            if p not in in_ptrs:
                self.producer[p] = name
                if allocating:
                    self.unwritten.add(p)
                else:
                    self.unwritten.discard(p)
            elif p in self.unwritten and func._schema.is_mutable:
                self.producer[p] = name
                self.unwritten.discard(p)
        self.pending = [(t, party, name) for t in outs]
        return out


def is_matmul(op_name: str) -> bool:
    """Whether an aten op name (aten.mm.default) is a matrix product or a convolution (MATMUL_OPS)."""
    parts = op_name.split(".")
    return len(parts) >= 2 and parts[1] in MATMUL_OPS
