"""The compiled zoo: checkpointing under torch.compile as users write it, for `ckptcheck validate --adapter
torch:module=examples/torch/compiled.py:FACTORY`. Both runs are compiled alike (the factory's `wrap`), so the
comparison is "compiled with checkpointing" against "compiled without". Each factory's verdict is pinned in
tests/CMakeLists.txt (user_model_compiled_* tests) and listed in harness/user_model/torch/USER_MODEL.md.

The model is the size of a test, not of a workload: three residual blocks of width 64 with dropout, batch 32, so
that a block's activations outweigh the 5056 bytes of generator state each checkpoint region keeps."""

import functools

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as tc

WIDTH, CLASSES, BLOCKS = 64, 5, 3


class Block(nn.Module):
    """A residual MLP block with dropout. `checkpoint`: None (plain), or the keyword arguments of the
    non-reentrant torch.utils.checkpoint the block calls around itself; `side_effect`: a print or an .item() the
    user wrote inside the checkpointed function (a graph break there)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, 2 * WIDTH)
        self.fc2 = nn.Linear(2 * WIDTH, WIDTH)
        self.drop = nn.Dropout(0.2)
        self.checkpoint = None
        self.side_effect = None

    def inner(self, x):
        h = F.gelu(self.fc1(x))
        if self.side_effect == "print":
            print("hidden", tuple(h.shape))
        elif self.side_effect == "item":
            self.last_norm = h.norm().item()  # a Python float: the graph must break to produce it
        return x + self.drop(self.fc2(h))

    def forward(self, x):
        if self.checkpoint is None:
            return self.inner(x)
        return tc.checkpoint(self.inner, x, use_reentrant=False, **self.checkpoint)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(WIDTH, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def _setup(checkpoint_kwargs=None, backend="inductor", side_effect=None, checkpoint=None):
    """Both runs compiled with `backend`; the checkpointed one's blocks call checkpoint with `checkpoint_kwargs`
    (or `checkpoint(model)` does what it does)."""
    model = Net()
    for b in model.blocks:
        b.side_effect = side_effect

    def apply(m):
        if checkpoint is not None:
            return checkpoint(m)
        for b in m.blocks:
            b.checkpoint = dict(checkpoint_kwargs or {})
        return m

    return {
        "model": model,
        "batch": lambda gen, n: (torch.randn(n, WIDTH, generator=gen), torch.randint(0, CLASSES, (n,), generator=gen)),
        "loss": lambda m, batch: F.cross_entropy(m(batch[0]), batch[1]),
        "optimizer": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
        "checkpoint": apply,
        "wrap": lambda m: torch.compile(m, backend=backend),
        "batch_size": 32,
    }


def inductor(seed):
    """torch.compile (Inductor, the CPU C++ backend) of blocks that call non-reentrant checkpoint, with dropout."""
    return _setup()


def eager_backend(seed):
    """The same with backend="eager" (PyTorch issue 160773)."""
    return _setup(backend="eager")


def aot_eager(seed):
    """The same with backend="aot_eager" (PyTorch issue 160773)."""
    return _setup(backend="aot_eager")


def _policy(save):
    from torch.utils.checkpoint import CheckpointPolicy

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if save(op) else CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def _sac(save):
    # allow_cache_entry_mutation: eager dropout fills a saved empty tensor in place (a policy that saves it errs
    # without it); under Inductor the policy sees the compiled graph's ops instead.
    return {
        "context_fn": functools.partial(
            tc.create_selective_checkpoint_contexts, _policy(save), allow_cache_entry_mutation=True
        )
    }


def sac_matmuls(seed):
    """Selective activation checkpointing under Inductor: the matmuls' outputs saved (MUST_SAVE), the rest
    recomputed."""
    mm = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}
    return _setup(_sac(lambda op: op in mm))


def sac_save_everything(seed):
    """A selective policy that saves every op: checkpointing in name only, a memory finding."""
    return _setup(_sac(lambda op: True))


def _budget(fraction):
    def apply(m):
        # The partitioner's knob (torch._functorch.config): recompute until the saved activations fit this
        # fraction; no explicit checkpoint. Set here, it applies to the checkpointed run only (a process each).
        import torch._functorch.config as fconfig

        fconfig.activation_memory_budget = fraction
        return m

    return apply


def memory_budget_01(seed):
    """Inductor with activation_memory_budget = 0.1: the min-cut partitioner recomputes to fit a tenth."""
    return _setup(checkpoint=_budget(0.1))


def memory_budget_05(seed):
    """Inductor with activation_memory_budget = 0.5."""
    return _setup(checkpoint=_budget(0.5))


def graph_break_print(seed):
    """A print the user left inside the checkpointed function, compiled with aot_eager."""
    return _setup(backend="aot_eager", side_effect="print")


def graph_break_item(seed):
    """An .item() inside the checkpointed function, compiled with aot_eager."""
    return _setup(backend="aot_eager", side_effect="item")


def uncompilable(seed):
    """A backend that does not exist: torch.compile cannot run, a fault (exit 3), never an eager fallback."""
    return _setup(backend="no_such_backend")


def gpt2_inductor(seed):
    """Hugging Face GPT-2 from a config (no download), gradient_checkpointing_enable() (non-reentrant), both
    runs compiled with Inductor."""
    from transformers import GPT2Config, GPT2LMHeadModel

    vocab, seq = 96, 16
    config = GPT2Config(
        vocab_size=vocab,
        n_positions=seq,
        n_embd=32,
        n_layer=2,
        n_head=2,
        resid_pdrop=0.1,
        embd_pdrop=0.1,
        attn_pdrop=0.1,
        bos_token_id=0,
        eos_token_id=0,
        use_cache=False,
    )
    model = GPT2LMHeadModel(config)
    return {
        "model": model,
        "batch": lambda gen, n: torch.randint(0, vocab, (n, seq), generator=gen),
        "loss": lambda m, ids: m(input_ids=ids, labels=ids).loss,
        "optimizer": lambda ps: torch.optim.AdamW(ps, lr=1e-3),
        "checkpoint": lambda m: m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False}),
        "wrap": lambda m: torch.compile(m),
        "batch_size": 4,
    }
