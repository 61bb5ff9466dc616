"""torchvision's ResNet-18, built by its constructor (`torchvision.models.resnet18(weights=None)`, nothing
downloaded), 10 classes, on 32x32 inputs so a step takes a fraction of a second. The residual stages run under
torch.utils.checkpoint.checkpoint_sequential: the recompute runs BatchNorm in training mode a second time, so
each checkpointed BatchNorm's running statistics (and its counter) move twice per step.
Factory for `ckptcheck validate --adapter torch:module=examples/torch/resnet.py:FACTORY`."""
import types

import torch
import torch.nn.functional as F
import torchvision
from torch.utils.checkpoint import checkpoint_sequential

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
        "batch": lambda gen, n: (torch.randn(n, 3, 32, 32, generator=gen),
                                 torch.randint(0, CLASSES, (n,), generator=gen)),
        "loss": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=5e-4),
        "checkpoint": _enable,
        "batch_size": 8,
    }
