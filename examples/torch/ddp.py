"""DistributedDataParallel over the gloo backend, 2 ranks launched by torchrun on this machine, around
examples/torch/mlp.py's model with every block checkpointed: reentrant and non-reentrant, find_unused_parameters on
and off. The checkpointed run's gradients after the all-reduce are compared bit for bit with plain DDP's, and every
rank's loss, buffers and generator (each rank trains on its own batches). PyTorch issue 24005: reentrant
checkpointing under DDP can fail with "Expected to mark a variable ready only once" — a finding of that setup, not
a crash of ckptcheck.
Factories for `ckptcheck validate --adapter torch:module=examples/torch/ddp.py:FACTORY`; world_size scales it to
more ranks (each one process), nnodes= and rdzv_endpoint= to more machines (USER_MODEL.md)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlp  # noqa: E402


def _ddp(use_reentrant, find_unused):
    s = mlp._setup(lambda m: mlp._wrap_blocks(m, lambda b: mlp.Checkpointed(b, use_reentrant=use_reentrant)))
    s["distributed"] = {"kind": "ddp", "world_size": 2, "find_unused_parameters": find_unused}
    return s


def reentrant(seed):
    return _ddp(True, False)


def reentrant_find_unused(seed):
    return _ddp(True, True)


def non_reentrant(seed):
    return _ddp(False, False)


def non_reentrant_find_unused(seed):
    return _ddp(False, True)
