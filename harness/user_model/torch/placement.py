"""Where a checkpointing setup recomputes, and what the plain run saves where: the evidence for the bound
"the checkpointed run saves at most what its checkpoint placement implies" (USER_MODEL.md).

During step 0 every named module counts its forward calls (recomputes included) and keeps a stack of the
modules running, so each tensor packed for backward is recorded with the modules it was saved under, and each
module's first inputs are recorded. ckptcheck then takes the modules the checkpointed run calls more often than
the plain run (the recomputed ones) and bounds the checkpointed run's saved bytes by what the plain run saves
outside them plus their inputs. Not installed under torch.compile, whose tracing would run the hooks at other
times."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch


class PlacementProbe:
    """Step 0's forward calls per named module, the modules each packed tensor was saved under, and each module's
    first inputs (storage pointer, bytes; parameters excluded)."""

    def __init__(self, named_modules: Iterable[tuple[str, torch.nn.Module]], param_ptrs: set[int]) -> None:
        """named_modules: the model's (name, module) pairs as they were before the checkpoint transform, whose
        wrappers would rename them."""
        self.param_ptrs = param_ptrs
        self.calls = {}
        self.stack = []
        self.inputs = {}
        self.packs = {}  # (storage pointer, modules on the stack) -> bytes
        self.keep = []  # the recorded inputs, alive until the probe goes, so no pointer is reused meanwhile
        self.handles = []
        for name, m in named_modules:
            if name:  # the root's inputs are the batch, never recomputed alone
                self.handles.append(m.register_forward_pre_hook(self._pre(name), with_kwargs=True))
                self.handles.append(m.register_forward_hook(self._post(name), always_call=True))

    def _pre(self, name: str) -> Callable[..., None]:
        def hook(_module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            self.calls[name] = self.calls.get(name, 0) + 1
            self.stack.append(name)
            if name not in self.inputs:
                ts = [t for t in list(args) + list(kwargs.values()) if isinstance(t, torch.Tensor)]
                self.keep.extend(ts)
                storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in ts}
                self.inputs[name] = [[p, b] for p, b in storages.items() if p not in self.param_ptrs]

        return hook

    def _post(self, name: str) -> Callable[..., None]:
        def hook(_module: torch.nn.Module, _args: Any, _output: Any) -> None:  # always_call: also when the forward
            # raised (a stopped recompute)
            if name in self.stack:
                del self.stack[len(self.stack) - 1 - self.stack[::-1].index(name)]

        return hook

    def packed(self, ptr: int, nbytes: int) -> None:
        """SavedBytes' report of a counted pack: recorded with the modules running now."""
        self.packs[(ptr, tuple(self.stack))] = nbytes

    def remove(self) -> None:
        """Remove the hooks and let the recorded inputs go."""
        for h in self.handles:
            h.remove()
        self.keep = []

    def meta(self) -> dict[str, Any]:
        """The evidence for the run's report: forward calls, module inputs, pack events with their module stacks."""
        return {
            "forward_calls": self.calls,
            "module_inputs": self.inputs,
            "pack_events": [[p, b, list(stack)] for (p, stack), b in self.packs.items()],
        }


def traced(runner: Any) -> bool:
    """True when the model runs under torch.compile (hooks would run at trace time)."""
    return isinstance(runner, torch.nn.Module) and hasattr(runner, "_orig_mod")
