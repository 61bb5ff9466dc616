"""ResNet-18 with torchvision's module layout and names (conv1, bn1, layer1.0.bn1, ..., fc), narrow (base width
8) and on 32x32 inputs so a step takes milliseconds. Written out here because no torchvision release matches the
pinned torch 2.15.0. The residual stages run under torch.utils.checkpoint.checkpoint_sequential, as in PyTorch
issue 96136: the recompute runs BatchNorm in training mode again, so its running statistics move twice.
Factory for `ckptcheck validate --adapter torch:module=examples/torch/resnet.py:FACTORY`."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint_sequential

CLASSES = 10


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths = [width, 2 * width, 4 * width, 8 * width]
        cin = width
        for i, w in enumerate(widths):
            stride = 1 if i == 0 else 2
            setattr(self, "layer%d" % (i + 1), nn.Sequential(BasicBlock(cin, w, stride), BasicBlock(w, w, 1)))
            cin = w
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, CLASSES)
        self.segments = 0  # > 0: the four stages under checkpoint_sequential with this many segments

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        stages = nn.Sequential(self.layer1, self.layer2, self.layer3, self.layer4)
        if self.segments:
            x = checkpoint_sequential(stages, self.segments, x, use_reentrant=False)
        else:
            x = stages(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _enable(m):
    m.segments = 2  # layer1 and layer2 checkpointed; checkpoint_sequential runs its last segment plainly


def checkpoint_sequential_stages(seed):
    return {
        "model": ResNet18(),
        "batch": lambda gen, n: (torch.randn(n, 3, 32, 32, generator=gen),
                                 torch.randint(0, CLASSES, (n,), generator=gen)),
        "loss": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=5e-4),
        "checkpoint": _enable,
        "batch_size": 8,
    }
