"""torchvision's ResNet-18, built by its constructor (`torchvision.models.resnet18(weights=None)`, nothing
downloaded), 10 classes, on 32x32 inputs so a step takes a fraction of a second. The residual stages run under
torch.utils.checkpoint.checkpoint_sequential: the recompute runs BatchNorm in training mode a second time, so
each checkpointed BatchNorm's running statistics (and its counter) move twice per step.
Factory for `ckptcheck validate --adapter torch:module=examples/torch/resnet.py:FACTORY`; `plan` names its chain,
the eight BasicBlocks, for `ckptcheck profile` and `validate --plan`, and checkpoints each stage correctly."""

import contextlib
import types

import torch
import torch.nn.functional as F
import torchvision
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

CLASSES = 10


def _checkpointed_forward(self, x):
    # torchvision's ResNet._forward_impl with the four stages under checkpoint_sequential; two segments, so
    # layer1 and layer2 are checkpointed (checkpoint_sequential runs its last segment without checkpointing).
    x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
    stages = torch.nn.Sequential(self.layer1, self.layer2, self.layer3, self.layer4)
    x = checkpoint_sequential(stages, 2, x, use_reentrant=False)
    return self.fc(torch.flatten(self.avgpool(x), 1))


def _enable(model):
    # Bound on the instance, not a wrapper module, so parameter and buffer names stay torchvision's own
    # (layer1.0.bn1.running_mean), which is how the finding names the tensor.
    model.forward = types.MethodType(_checkpointed_forward, model)


def checkpoint_sequential_stages(seed):
    return {
        "model": torchvision.models.resnet18(weights=None, num_classes=CLASSES),
        "batch": lambda gen, n: (
            torch.randn(n, 3, 32, 32, generator=gen),
            torch.randint(0, CLASSES, (n,), generator=gen),
        ),
        "loss": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=5e-4),
        "checkpoint": _enable,
        "batch_size": 8,
    }


class _KeepBuffers:
    """The recompute's context: every buffer of the stage snapshotted on entry and put back on exit, so the
    recomputed BatchNorms leave their running statistics and counters as the forward pass left them. All are
    copied back (BatchNorm moves its running statistics without bumping their version counter), through .data
    so no counter moves (autograd saved the running statistics for BatchNorm's backward)."""

    def __init__(self, module):
        self.module = module

    def __enter__(self):
        self.saved = [(b, b.detach().clone()) for b in self.module.buffers()]

    def __exit__(self, *exc):
        with torch.no_grad():
            for b, value in self.saved:
                b.data.copy_(value)
        return False


def _stage_checkpointed_forward(self, x):
    # torchvision's ResNet._forward_impl, each stage under one non-reentrant checkpoint whose recompute keeps
    # the BatchNorm buffers (compare _checkpointed_forward above, which moves them twice).
    x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
    for stage in (self.layer1, self.layer2, self.layer3, self.layer4):
        x = checkpoint(
            stage, x, use_reentrant=False, context_fn=lambda s=stage: (contextlib.nullcontext(), _KeepBuffers(s))
        )
    return self.fc(torch.flatten(self.avgpool(x), 1))


def plan(seed):
    """ResNet-18 for `ckptcheck profile` and `validate --plan`: the chain is the eight BasicBlocks in order
    (layer1[0], layer1[1], ..., layer4[1]); `checkpoint` runs each stage under a checkpoint that keeps BatchNorm's
    running statistics, so it holds bitwise."""
    setup = checkpoint_sequential_stages(seed)
    setup["checkpoint"] = lambda m: setattr(m, "forward", types.MethodType(_stage_checkpointed_forward, m))
    setup["chain"] = lambda m: [blk for stage in (m.layer1, m.layer2, m.layer3, m.layer4) for blk in stage]
    return setup
