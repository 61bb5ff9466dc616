"""A small MLP with dropout (stem, four residual blocks, head) under several checkpointing setups, correct and
broken, for `ckptcheck validate --adapter torch:module=examples/torch/mlp.py:FACTORY`. Each factory's verdict
is pinned in tests/CMakeLists.txt (user_model_* tests)."""

import functools

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as tc
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing,
    checkpoint_wrapper,
)

WIDTH, CLASSES = 32, 5


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, 2 * WIDTH)
        self.fc2 = nn.Linear(2 * WIDTH, WIDTH)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        return x + self.drop(self.fc2(F.gelu(self.fc1(x))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(WIDTH, WIDTH)  # so the blocks' input requires grad even under reentrant checkpoint
        self.blocks = nn.ModuleList(Block() for _ in range(4))
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class Checkpointed(nn.Module):
    """torch.utils.checkpoint around one block, with the given keyword arguments."""

    def __init__(self, inner, **kwargs):
        super().__init__()
        self.inner = inner
        self.kwargs = kwargs

    def forward(self, x):
        return tc.checkpoint(self.inner, x, **self.kwargs)


class Ineffective(nn.Module):
    """Looks like a checkpoint wrapper, calls the module directly: right gradients, nothing saved."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


class CheckpointedLogging(nn.Module):
    """Checkpoints the block, but also keeps a statistic of its hidden layer for logging, computed with grad
    enabled: the statistic's graph keeps fc1's output saved until the next step, outside the checkpoint. The
    gradients are right; the memory is what checkpointing was meant to free."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.hidden_norm = None

    def forward(self, x):
        self.hidden_norm = self.inner.fc1(x).norm()  # the bug: no torch.no_grad() / .detach()
        return tc.checkpoint(self.inner, x, use_reentrant=False)


def _setup(checkpoint, loss_context=None):
    model = Net()

    def loss(m, batch):
        x, y = batch
        if loss_context is None:
            return F.cross_entropy(m(x), y)
        with loss_context():
            return F.cross_entropy(m(x), y)

    return {
        "model": model,
        "batch": lambda gen, n: (torch.randn(n, WIDTH, generator=gen), torch.randint(0, CLASSES, (n,), generator=gen)),
        "loss": loss,
        "optimizer": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
        "checkpoint": checkpoint,
        # 64 rows: each checkpoint region keeps the CPU generator state (5056 bytes) to replay dropout, which at
        # 8 rows outweighed a block's own activations; the profiler's memory figure counts it (USER_MODEL.md).
        "batch_size": 64,
    }


def _wrap_blocks(model, make):
    for i, b in enumerate(model.blocks):
        model.blocks[i] = make(b)
    return model


def correct(seed):
    """torch's own apply_activation_checkpointing with non-reentrant checkpoint_wrapper on every block."""
    wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    return _setup(
        lambda m: apply_activation_checkpointing(
            m, checkpoint_wrapper_fn=wrapper, check_fn=lambda s: isinstance(s, Block)
        )
    )


def reentrant(seed):
    return _setup(lambda m: _wrap_blocks(m, lambda b: Checkpointed(b, use_reentrant=True)))


def ineffective(seed):
    return _setup(lambda m: _wrap_blocks(m, Ineffective))


def logging_leak(seed):
    """Saves less than plain, but more than its checkpoint placement implies: the placement bound catches it."""
    return _setup(lambda m: _wrap_blocks(m, CheckpointedLogging))


def rng_not_preserved(seed):
    """preserve_rng_state=False: the recompute draws new dropout masks."""
    return _setup(lambda m: _wrap_blocks(m, lambda b: Checkpointed(b, use_reentrant=False, preserve_rng_state=False)))


def autocast_bf16(seed):
    """CPU autocast to bfloat16 around a model whose blocks are checkpointed (non-reentrant), in both runs."""
    return _setup(
        lambda m: _wrap_blocks(m, lambda b: Checkpointed(b, use_reentrant=False)),
        loss_context=lambda: torch.autocast("cpu", dtype=torch.bfloat16),
    )


def compiled_aot_eager(seed):
    """torch.compile(backend="aot_eager") of the checkpointed model, against the eager plain model."""
    return _setup(
        lambda m: torch.compile(_wrap_blocks(m, lambda b: Checkpointed(b, use_reentrant=False)), backend="aot_eager")
    )


def compiled_eager_backend(seed):
    """torch.compile(backend="eager") of the checkpointed model (PyTorch issue 160773): a finding, the region's
    recompute redraws dropout. A forward hook on the dropout modules (ckptcheck's old mask probe) made it hold: its
    side effect broke the graph and the region ran as eager checkpoint (USER_MODEL.md)."""
    return _setup(
        lambda m: torch.compile(_wrap_blocks(m, lambda b: Checkpointed(b, use_reentrant=False)), backend="eager")
    )


def _memory_budget(m):
    # The memory-budget knob of torch._functorch.config: the partitioner recomputes activations to fit a tenth
    # of the saved bytes; no explicit checkpoint at all. Set here, it applies to the checkpointed run only.
    import torch._functorch.config as fconfig

    fconfig.activation_memory_budget = 0.1


def compiled_memory_budget(seed):
    """Both runs compiled alike (aot_eager_decomp_partition uses the min-cut partitioner on the CPU, as inductor
    does); the checkpointed one with the activation memory budget lowered."""
    s = _setup(_memory_budget)
    s["wrap"] = lambda m: torch.compile(m, backend="aot_eager_decomp_partition")
    return s


class HiddenKeepingBlock(Block):
    """Keeps its hidden layer on the module for logging, with its graph (the bug: no .detach()). In a recomputed
    segment the forward's hidden layer is then not freed until the recompute replaces it, so every recomputed
    block still waiting for its backward holds one: PyTorch packs none of it (the saved bytes are as planned), but
    the step's peak holds it."""

    def forward(self, x):
        self.hidden = F.gelu(self.fc1(x))
        return x + self.drop(self.fc2(self.hidden))


def plan(seed):
    """The MLP for `ckptcheck profile` and `validate --plan`: the chain is the four residual blocks; `checkpoint`
    is correct's (checked by the same property elsewhere). Batch 512, so a block's activations (128 KB each of
    fc1's and gelu's outputs) outweigh the generator state every checkpoint keeps (5056 bytes)."""
    s = correct(seed)
    s["chain"] = lambda m: m.blocks
    s["batch_size"] = 512
    return s


def plan_hidden_kept(seed):
    """`plan` with blocks that keep their hidden layer (HiddenKeepingBlock): a placement's saved bytes hold as
    planned; its peak does not."""
    s = plan(seed)
    for i in range(len(s["model"].blocks)):
        keeping = HiddenKeepingBlock()
        keeping.load_state_dict(s["model"].blocks[i].state_dict())
        s["model"].blocks[i] = keeping
    return s
