"""A mixture-of-experts block that counts the tokens routed to each expert in a float32 buffer its forward adds
into, as torchtitan's MoE does for load balancing (`tokens_per_expert`; torchtitan PR 1593: the count doubled under
full activation checkpointing). Every block is checkpointed (non-reentrant): the recompute runs the forward again
and adds the step's counts a second time, 37 -> 74 where plain has 37. ckptcheck compares the buffer with its value
before the step and classes the finding `state-updated-twice`. Factories for
`ckptcheck validate --adapter torch:module=examples/torch/moe_counts.py:FACTORY`, pinned in tests/CMakeLists.txt."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as tc

WIDTH, EXPERTS, CLASSES = 16, 4, 3


class MoE(nn.Module):
    """Top-1 routing to EXPERTS small Linear experts; the count is bookkeeping, outside autograd."""

    def __init__(self):
        super().__init__()
        self.router = nn.Linear(WIDTH, EXPERTS)
        self.experts = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(EXPERTS))
        self.register_buffer("tokens_per_expert", torch.zeros(EXPERTS))

    def forward(self, x):
        scores = F.softmax(self.router(x), dim=-1)
        top = scores.argmax(dim=-1)
        with torch.no_grad():
            self.tokens_per_expert += torch.bincount(top, minlength=EXPERTS).float()
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            chosen = top == e
            out[chosen] = expert(x[chosen]) * scores[chosen, e].unsqueeze(-1)
        return x + out


class Net(nn.Module):
    def __init__(self, checkpointed):
        super().__init__()
        self.stem = nn.Linear(WIDTH, WIDTH)
        self.blocks = nn.ModuleList(MoE() for _ in range(2))
        self.head = nn.Linear(WIDTH, CLASSES)
        self.checkpointed = checkpointed

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = tc.checkpoint(b, x, use_reentrant=False) if self.checkpointed else b(x)
        return self.head(x)


def counted_twice(seed):
    """Full recompute of every MoE block: its token counts are added again in backward."""
    model = Net(checkpointed=False)

    def checkpoint(m):
        m.checkpointed = True

    return {
        "model": model,
        "batch": lambda gen, n: (torch.randn(n, WIDTH, generator=gen), torch.randint(0, CLASSES, (n,), generator=gen)),
        "loss": lambda m, batch: F.cross_entropy(m(batch[0]), batch[1]),
        "checkpoint": checkpoint,
        "batch_size": 64,
    }
