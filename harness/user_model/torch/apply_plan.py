"""Applies a placement (harness/engine/COSTS.md, format ckptcheck-placement) to the user's model: each recomputed
segment [first, last] of the chain runs under one non-reentrant torch.utils.checkpoint from its input; stored
segments run as they are.

The chain container's slot `first` becomes a SegmentRunner: it calls blocks first..last, each with the further
arguments the model passes (all tensor arguments, positional and keyword, go to checkpoint positionally so it
keeps them; the rest by closure), chaining a tuple output's first element. Slots first+1..last become
PassThrough modules that give back the segment's output in the structure their block returns, so the model's own
loop (GPT2Model's over self.h, a ResNet stage's nn.Sequential) still runs. The recompute snapshots every buffer
of the segment's modules and restores it afterwards, so BatchNorm's running statistics and its counter move once
per step, as in the plain run.

  apply(model, chain_modules, placement) -> [(segment runner, first block index)]
  load_placement(path) -> the placement dict, checked
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

FORMAT, VERSION = "ckptcheck-placement", 1


class BadPlacement(Exception):
    """The placement file is malformed or does not fit the model (user_model.py: a bad factory, exit 2)."""


def _field(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise BadPlacement("placement.json: %s: %s" % (where, what))


def load_placement(path: str) -> dict[str, Any]:
    """The placement file at `path`, checked field by field; BadPlacement naming the first bad field."""
    try:
        with open(path) as f:
            p = json.load(f)
    except (OSError, ValueError, RecursionError) as e:  # RecursionError: nested past Python's stack
        raise BadPlacement("placement.json: cannot read %s: %s" % (path, str(e)[:160])) from None
    _field(isinstance(p, dict), "top level", "must be an object")
    _field(p.get("format") == FORMAT, "format", 'must be "%s"' % FORMAT)
    _field(p.get("version") == VERSION, "version", "must be %d" % VERSION)
    _field(
        isinstance(p.get("blocks"), list) and p["blocks"] and all(isinstance(b, str) for b in p["blocks"]),
        "blocks",
        "must be a non-empty array of strings",
    )
    _field(isinstance(p.get("segments"), list), "segments", "must be an array")
    for j, s in enumerate(p["segments"]):
        where = "segments[%d]" % j
        _field(isinstance(s, dict), where, "must be an object")
        for key in ("first", "last"):
            v = s.get(key)
            _field(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                where + "." + key,
                "must be a non-negative integer",
            )
        _field(isinstance(s.get("recompute"), bool), where + ".recompute", "must be a bool")
    check_segments(p["segments"], len(p["blocks"]))
    return p


def check_segments(segments: list[dict[str, Any]], length: int) -> None:
    """Segments in order, each first <= last, covering 0..length-1 exactly."""
    nxt = 0
    for j, s in enumerate(segments):
        if s["first"] != nxt or s["last"] < s["first"]:
            raise BadPlacement(
                "placement.json: segments[%d]: [%d, %d] does not continue the cover at block %d"
                % (j, s["first"], s["last"], nxt)
            )
        nxt = s["last"] + 1
    if nxt != length:
        raise BadPlacement("placement.json: segments: cover blocks 0..%d, the chain has %d" % (nxt - 1, length))


class KeepBuffers:
    """Context manager for the recompute: snapshots every buffer of `modules` on entry and puts each back on
    exit (the same tensor object with its values as on entry), also when the recompute stops early by raising.
    Every buffer is copied back: BatchNorm's kernel moves running_mean/var in place without bumping their
    version counter, so the counter cannot tell which moved. The copy goes through .data, which bumps no
    counter either: the buffers autograd saved (BatchNorm's backward takes the running statistics) stay valid."""

    def __init__(self, modules: Sequence[torch.nn.Module]) -> None:
        self.modules = modules

    def __enter__(self) -> KeepBuffers:
        self.saved = []
        for block in self.modules:
            for mod in block.modules():
                for name, buf in mod._buffers.items():
                    if buf is not None:
                        self.saved.append((mod, name, buf, buf.detach().clone()))
        return self

    def __exit__(self, *exc: object) -> bool:
        with torch.no_grad():
            for mod, name, buf, value in self.saved:
                if mod._buffers.get(name) is not buf:
                    mod._buffers[name] = buf
                buf.data.copy_(value)
        self.saved = []
        return False


def buffer_guard_context(modules: Sequence[torch.nn.Module]) -> Callable[[], tuple[Any, KeepBuffers]]:
    """A context_fn for torch.utils.checkpoint: nothing around the forward, KeepBuffers around the recompute."""
    return lambda: (contextlib.nullcontext(), KeepBuffers(modules))


def _restructure(rest: tuple[Any, ...] | None, x: Any) -> Any:
    """x in the structure of a block's output: x itself for a tensor, (x, *rest) for a tuple (rest: the tuple's
    other elements, None for a tensor)."""
    return x if rest is None else (x,) + rest


class _SegmentState:
    """What a recomputed segment's slots share within one forward."""

    def __init__(self) -> None:
        self.output = None  # the segment's output x_{last+1}, until the last slot has passed it on
        self.rest = {}  # block offset -> a tuple output's other elements (not its first: no activation kept)
        self.recording = False  # the forward, not the recompute


class SegmentRunner(torch.nn.Module):
    """Slot `first`: blocks first..last under one non-reentrant checkpoint."""

    def __init__(self, blocks: list[torch.nn.Module], names: list[str], first: int, state: _SegmentState) -> None:
        super().__init__()
        self.segment = torch.nn.ModuleList(blocks)
        self.names = names
        self.first = first
        self.state = state

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The segment's blocks on the first positional argument, under one non-reentrant checkpoint; the output in
        the structure the first block returns."""
        if not args or not isinstance(args[0], torch.Tensor):
            raise TypeError("apply_plan: block %s takes its input as the first positional argument" % self.names[0])
        x, rest = args[0], list(args[1:])
        slots = [("a", i) for i, a in enumerate(rest) if isinstance(a, torch.Tensor)]
        slots += [("k", k) for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
        tensors = [rest[i] if kind == "a" else kwargs[i] for kind, i in slots]
        blocks, names, state = list(self.segment), self.names, self.state

        def run(h: torch.Tensor, *ts: torch.Tensor) -> torch.Tensor:
            a, kw = list(rest), dict(kwargs)
            for (kind, i), t in zip(slots, ts, strict=False):
                if kind == "a":
                    a[i] = t
                else:
                    kw[i] = t
            for j, (block, name) in enumerate(zip(blocks, names, strict=False)):
                out = block(h, *a, **kw)
                if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor):
                    if state.recording:
                        state.rest[j] = tuple(out[1:])
                    h = out[0]
                elif isinstance(out, torch.Tensor):
                    h = out
                else:
                    raise TypeError(
                        "apply_plan: block %s returned %s, expected a tensor or a tuple starting with one"
                        % (name, type(out).__name__)
                    )
            return h

        state.rest, state.recording = {}, True
        try:
            h = checkpoint(
                run, x, *tensors, use_reentrant=False, preserve_rng_state=True, context_fn=buffer_guard_context(blocks)
            )
        finally:
            state.recording = False
        state.output = h if len(blocks) > 1 else None
        return _restructure(state.rest.get(0), h)


class PassThrough(torch.nn.Module):
    """Slot first+j (j >= 1) of a recomputed segment: its block already ran inside the segment's checkpoint."""

    def __init__(self, name: str, offset: int, last: bool, state: _SegmentState) -> None:
        super().__init__()
        self.name = name
        self.offset = offset
        self.last = last
        self.state = state

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The segment's output, in the structure this slot's block returns; RuntimeError when the input is not it."""
        x = args[0] if args else None
        if x is None or x is not self.state.output:
            raise RuntimeError(
                "apply_plan: block %s's input is not its segment's output: the model does not run "
                "its chain one block after another" % self.name
            )
        if self.last:
            self.state.output = None
        return _restructure(self.state.rest.get(self.offset), x)


def _slot(model: torch.nn.Module, name: str) -> tuple[torch.nn.Module, str]:
    """(parent module, attribute) holding the module at path `name`."""
    parent_name, _, attr = name.rpartition(".")
    return (model.get_submodule(parent_name) if parent_name else model), attr


def apply(
    model: torch.nn.Module, chain_modules: Sequence[torch.nn.Module], placement: dict[str, Any]
) -> list[tuple[SegmentRunner, int]]:
    """Rewrites the model's chain for `placement` (checked against the chain's block names, the module paths
    before any transform). Returns [(SegmentRunner, first)] for the recomputed segments."""
    names_of = {id(m): n for n, m in model.named_modules()}
    names = [names_of.get(id(m), "") for m in chain_modules]
    want = placement["blocks"]
    if len(want) != len(names):
        raise BadPlacement("placement names %d blocks, the model's chain has %d" % (len(want), len(names)))
    for i, (w, n) in enumerate(zip(want, names, strict=False)):
        if w != n:
            raise BadPlacement("placement block %d is '%s', the model's chain block %d is '%s'" % (i, w, i, n))
    check_segments(placement["segments"], len(names))
    runners = []
    for s in placement["segments"]:
        if not s["recompute"]:
            continue
        first, last = s["first"], s["last"]
        state = _SegmentState()
        blocks = list(chain_modules[first : last + 1])
        runner = SegmentRunner(blocks, names[first : last + 1], first, state)
        slots = [runner] + [
            PassThrough(names[first + j], j, first + j == last, state) for j in range(1, last - first + 1)
        ]
        for name, module in zip(names[first : last + 1], slots, strict=False):
            parent, attr = _slot(model, name)
            setattr(parent, attr, module)
        runners.append((runner, first))
    return runners
