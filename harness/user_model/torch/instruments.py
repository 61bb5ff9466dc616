"""ckptcheck's instruments on a user model (USER_MODEL.md, "The compared runs are yours"). The plain and
checkpointed runs whose tensors are compared carry none of them; each instrument runs in a measuring pass of its
own (a process of its own: `user_model.py --instruments NAME`), which trains the same model with the same seeds
and dumps the same tensors, so ckptcheck can check that the instrument changed nothing before it trusts what the
instrument measured:

  masks   MaskProbe: a forward hook on every dropout-like module, recording its output's zero pattern (the
          rng-desync diagnosis' evidence). Under torch.compile a hook that writes to Python state is a side effect
          Dynamo cannot keep inside a checkpoint region: it breaks the graph, and the region runs eagerly.
  saved   saved-tensor hooks for step 0's saved activation bytes, with the module-level placement probe
          (placement.py) and, under --plan, the per-block plan meter (chain_probe.py).
  memory  torch.profiler with profile_memory=True on the last dumped step (peak_memory.py), so the comparison
          with the untouched run covers the profiled step; alone in its pass.
"""

import torch

NAMES = ("masks", "saved", "memory")


def parse(text):
    """'masks,saved' -> {'masks', 'saved'}; '' -> set() (a compared run). Raises ValueError for an unknown name."""
    chosen = {n for n in (text or "").split(",") if n}
    unknown = chosen - set(NAMES)
    if unknown:
        raise ValueError("unknown instrument(s) %s (known: %s)" % (", ".join(sorted(unknown)), ", ".join(NAMES)))
    return chosen


class MaskProbe:
    """The zero pattern of every dropout-like module's output, as of its last call in a step (the recompute's
    when a checkpoint recomputes it). Evidence for the RNG-desync diagnosis only; never compared for equality."""

    def __init__(self, model):
        self.masks = {}
        self.handles = []
        for name, m in model.named_modules():
            kind = type(m).__name__
            if "Dropout" in kind or "DropPath" in kind:
                self.handles.append(m.register_forward_hook(self._hook(name)))

    def _hook(self, name):
        def hook(_module, _inputs, output):
            if isinstance(output, torch.Tensor):
                self.masks[name] = (output.detach() == 0).cpu().numpy()

        return hook
