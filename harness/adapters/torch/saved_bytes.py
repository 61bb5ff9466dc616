"""The activation bytes a forward saves for backward, as the torch adapters measure them (PROTOCOL.md, "Saved
bytes"): the distinct storages packed by torch.autograd.graph.saved_tensors_hooks, parameters excluded. The case
adapter (case_model.py) and the user-model driver (harness/user_model/torch/user_model.py, with a probe per block)
share it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


class SavedBytes:
    """Distinct storages packed for backward during one forward, parameters excluded. `probe`, if given, is told
    of every counted pack (harness/user_model/torch/chain_probe.py attributes them to blocks)."""

    def __init__(self, params: Iterable[torch.Tensor], probe: Any = None) -> None:
        self.param_ptrs = {p.untyped_storage().data_ptr() for p in params}
        self.seen = {}
        self.probe = probe

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        """saved_tensors_hooks' pack: count t's storage once (not a parameter's), tell the probe, keep t."""
        s = t.untyped_storage()
        if s.data_ptr() not in self.param_ptrs:
            self.seen[s.data_ptr()] = s.nbytes()
            if self.probe is not None:
                self.probe.packed(s.data_ptr(), s.nbytes())
        return t

    @staticmethod
    def unpack(t: torch.Tensor) -> torch.Tensor:
        """saved_tensors_hooks' unpack: t as packed."""
        return t

    def total(self) -> int:
        """Bytes of the distinct storages packed so far."""
        return sum(self.seen.values())
