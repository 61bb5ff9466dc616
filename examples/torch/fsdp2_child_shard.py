"""PyTorch issue 187437 as a factory: the composable `checkpoint(parent)` (torch.distributed._composable) of a block
whose child alone is sharded (`fully_shard(block.fc1)`, no root), the block forwarded twice before one backward
(`(m(x) * m(x)).sum()`). The report: the second recompute finds the child's parameters resharded by the first
one's post-backward and fails, "aten.mm.default got mixed torch.Tensor and DTensor". Two ranks over gloo on the
CPU, launched by torchrun. Factories for `ckptcheck validate --adapter
torch:module=examples/torch/fsdp2_child_shard.py:FACTORY`, pinned in tests/torch_repro.cmake."""

import torch
import torch.nn as nn
from torch.distributed._composable import checkpoint as composable_checkpoint
from torch.distributed.fsdp import fully_shard

WIDTH = 8  # the report's block


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, WIDTH)
        self.fc2 = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def shard_child(model, mesh, mp_policy):
    """The report's sharding: the child fc1 only; fc2 stays a plain parameter on every rank."""
    fully_shard(model.fc1, mesh=mesh, mp_policy=mp_policy)


def forwarded_twice(seed):
    """checkpoint(block), fully_shard(block.fc1), loss (m(x) * m(x)).sum(): the block runs twice per step."""
    return {
        "model": Block(),
        "batch": lambda gen, n: torch.randn(n, WIDTH, generator=gen),
        "loss": lambda m, x: (m(x) * m(x)).sum(),
        "checkpoint": composable_checkpoint,
        "distributed": {"kind": "fsdp2", "world_size": 2, "shard": shard_child},
        "batch_size": 64,
    }
