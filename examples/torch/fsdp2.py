"""FSDP2 (`torch.distributed.fsdp.fully_shard`) over gloo on the CPU, ranks launched by torchrun, around
examples/torch/mlp.py's model (stem, four residual blocks with dropout, a 5-class head whose rows do not divide
evenly among the ranks: FSDP2 pads its shards). ckptcheck applies the factory's `checkpoint`, then its `shard`
(fully_shard per block, then the root, as torchtitan writes it), in both runs, and compares per step every rank's
loss, buffers and generator, and the gradients and parameters gathered whole from their shards.
Factories for `ckptcheck validate --adapter torch:module=examples/torch/fsdp2.py:FACTORY`; each verdict is pinned in
tests/torch_distributed.cmake (`autocast_bf16`, PyTorch issue 148831: tests/torch_repro.cmake)."""

import functools
import os
import sys

import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing,
    checkpoint_wrapper,
)
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlp  # noqa: E402


def shard(model, mesh, mp_policy):
    """The user's sharding, as in torchtitan: each block its own FSDP unit, then the root (stem and head)."""
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=mp_policy)
    fully_shard(model, mesh=mesh, mp_policy=mp_policy)


def _fsdp2(checkpoint, world_size=2, mp_policy=None, loss_context=None):
    s = mlp._setup(checkpoint, loss_context=loss_context)
    # mlp.py's 64 rows per rank: the profiler's activation figure under FSDP2 may or may not hold one block's
    # unsharded parameters (all-gathered for the backward, 16768 B in float32, 8384 B in bf16) depending on when
    # the all-gather lands against the backward's start; 64 rows keep that well inside --min-saving's margin.
    s["distributed"] = {"kind": "fsdp2", "world_size": world_size, "shard": shard}
    if mp_policy is not None:
        s["distributed"]["mp_policy"] = mp_policy
    return s


def _non_reentrant_wrapper(m, **kwargs):
    wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT, **kwargs)
    return apply_activation_checkpointing(m, checkpoint_wrapper_fn=wrapper, check_fn=lambda s: isinstance(s, mlp.Block))


def correct(seed):
    """apply_activation_checkpointing with non-reentrant checkpoint_wrapper on every block, 2 ranks."""
    return _fsdp2(_non_reentrant_wrapper)


def correct_4_ranks(seed):
    """The same on 4 ranks (the head's 5 rows shard as 2, 2, 1, 0)."""
    return _fsdp2(_non_reentrant_wrapper, world_size=4)


def rng_not_preserved(seed):
    """preserve_rng_state=False: each rank's recompute draws new dropout masks."""
    return _fsdp2(functools.partial(_non_reentrant_wrapper, preserve_rng_state=False))


def mixed_precision_bf16(seed):
    """MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32): the blocks compute in bf16 from the
    unsharded bf16 parameters, in the forward and in the recompute (PyTorch issue 159359 reports the recompute
    skipping the cast)."""
    return _fsdp2(
        _non_reentrant_wrapper, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    )


def autocast_bf16(seed):
    """CPU autocast to bfloat16 around the loss (both runs), FSDP2 with the default MixedPrecisionPolicy, each
    sharded block a checkpoint_wrapper whose forward checkpoints the block (PyTorch issue 148831 reports fully_shard
    losing the autocast context in the recompute: other dtypes, a metadata mismatch)."""
    return _fsdp2(_non_reentrant_wrapper, loss_context=lambda: torch.autocast("cpu", dtype=torch.bfloat16))
