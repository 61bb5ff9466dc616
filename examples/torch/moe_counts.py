"""A mixture-of-experts block that counts the tokens routed to each expert in a float32 buffer its forward adds
into, as torchtitan's MoE does for load balancing (`tokens_per_expert`; torchtitan PR 1593: the count doubled under
full activation checkpointing). Every block is checkpointed (non-reentrant): the recompute runs the forward again
and adds the step's counts a second time, 37 -> 74 where plain has 37. ckptcheck compares the buffer with its value
before the step and classes the finding `state-updated-twice`. Factories for
`ckptcheck validate --adapter torch:module=examples/torch/moe_counts.py:FACTORY`, pinned in tests/CMakeLists.txt.

`bias_*`: auxiliary-loss-free load balancing (torchtitan PR 1114): the routing picks each token's expert by its
score plus a per-expert `expert_bias` buffer, and an update moves the bias against the counts (torchtitan's rule,
coefficient 1e-3) and clears them. torchtitan runs the update before the optimizer step; PR 1114 notes that a
forward hook would conflict with activation checkpointing, and torchtitan issue 1117 is the recompute seeing other
routing (a metadata mismatch). `bias_forward_hook` updates in a forward hook on each MoE block, so the recompute
routes with the bias the forward moved; `bias_optimizer_hook` updates in the optimizer's step pre-hook. Pinned in
tests/torch_repro.cmake."""

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
        self.register_buffer("expert_bias", torch.zeros(EXPERTS))  # zero unless a factory's update moves it

    def forward(self, x):
        scores = F.softmax(self.router(x), dim=-1)
        top = (scores + self.expert_bias).argmax(dim=-1)  # the bias steers the choice, not the gate's weight
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


LOAD_BALANCE_COEFF = 1e-3  # torchtitan's default


@torch.no_grad()
def update_bias(moe):
    """torchtitan's update: the bias moves by the coefficient towards under-used experts (sign of mean - count),
    kept at zero mean; the counts start again."""
    counts = moe.tokens_per_expert
    delta = LOAD_BALANCE_COEFF * torch.sign(counts.mean() - counts)
    moe.expert_bias.add_(delta - delta.mean())
    counts.zero_()


def _balanced(hook):
    s = counted_twice(0)
    moes = list(s["model"].blocks)
    if hook == "forward":
        for moe in moes:
            moe.register_forward_hook(lambda m, inputs, output: update_bias(m))
    else:

        def before_step(opt, args, kwargs):
            for moe in moes:
                update_bias(moe)

        def optimizer(params):
            opt = torch.optim.SGD(params, lr=0.01)  # the driver's default optimizer, with the update before its step
            opt.register_step_pre_hook(before_step)
            return opt

        s["optimizer"] = optimizer
    return s


def bias_forward_hook(seed):
    """The bias updated by a forward hook on each MoE block: it runs after the forward and again in the recompute."""
    return _balanced("forward")


def bias_optimizer_hook(seed):
    """The bias updated before the optimizer step (torchtitan's place): once a step, after the backward."""
    return _balanced("optimizer")
