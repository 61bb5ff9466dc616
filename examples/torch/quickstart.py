"""The README's quick start, verbatim below this docstring: a factory for `ckptcheck validate --adapter
torch:module=examples/torch/quickstart.py`. checkpoint_sequential recomputes BatchNorm in training mode, so its
running statistics move twice (PyTorch issue 96136): a finding, pinned in tests/CMakeLists.txt
(user_model_quickstart_batchnorm_twice). tests/tools/docs_check.py checks the README still shows this file."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint_sequential


class Checkpointed(nn.Module):  # your checkpointing: the layers in 2 segments
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return checkpoint_sequential(self.model, 2, x, use_reentrant=False)


def factory(seed):
    layers = [nn.Sequential(nn.Linear(256, 256), nn.BatchNorm1d(256), nn.ReLU()) for _ in range(4)]
    return {"model": nn.Sequential(*layers, nn.Linear(256, 10)),
            "batch": lambda gen, n: (torch.randn(n, 256, generator=gen), torch.randint(0, 10, (n,), generator=gen)),
            "loss": lambda model, batch: F.cross_entropy(model(batch[0]), batch[1]),
            "checkpoint": Checkpointed, "batch_size": 64}
