"""Broken user-model factories for the bad-input and fault tests of `ckptcheck validate --adapter
torch:module=...` (tests/CMakeLists.txt, user_model_* tests). The working setups are in examples/torch/."""

import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch"))
import mlp  # noqa: E402


def returns_wrong_things(seed):
    """Breaks the contract (a tuple, not a dict): bad input, exit 2."""
    return mlp.Net(), None


def raises(seed):
    """Raises at run time: exit 3, one line."""
    raise RuntimeError("factory failed on purpose")


def raises_on_seed_2(seed):
    """Seed 1 works and holds; seed 2 raises: exit 3, and seed 1's result stays in the report."""
    if seed == 2:
        raise RuntimeError("no model for seed 2")
    return mlp.correct(seed)


def nondeterministic(seed):
    """Every run draws noise from the clock, so two plain runs differ: exit 3, never a finding."""
    s = mlp.correct(seed)
    noise = torch.Generator().manual_seed(time.time_ns())

    def loss(m, batch):
        x, y = batch
        return F.cross_entropy(m(x + 1e-3 * torch.randn(x.shape, generator=noise)), y)

    s["loss"] = loss
    return s


def checkpoint_raises(seed):
    """The checkpointing transform breaks training (not the model): a finding of that setup, not a fault."""
    s = mlp.correct(seed)

    def broken(m):
        def forward(*args, **kwargs):
            raise RuntimeError("Expected to mark a variable ready only once (simulated)")

        m.forward = forward

    s["checkpoint"] = broken
    return s


def _ddp_rank1(action):
    """DDP under torchrun (examples/torch/ddp.py's non-reentrant setup) whose rank 1 runs `action` in every
    forward."""
    import ddp
    import torch.distributed as dist

    s = ddp.non_reentrant(0)
    inner = s["loss"]

    def loss(m, batch):
        if dist.get_rank() == 1:
            action()
        return inner(m, batch)

    s["loss"] = loss
    return s


def ddp_rank_dies(seed):
    """Rank 1 exits in the plain run already: exit 3, one line naming the dead rank."""
    return _ddp_rank1(lambda: os._exit(7))


def ddp_rank_hangs(seed):
    """Rank 1 never returns, rank 0 waits in the all-reduce: the run times out (--adapter-timeout), exit 3."""
    return _ddp_rank1(lambda: time.sleep(3600))


class _SplitHead(torch.nn.Module):
    """The head's Linear as two half-width products summed: the same math, rounded differently. Slices of its
    input and of the parameters share their storages, so it saves no more than the Linear it replaces."""

    def __init__(self, linear):
        super().__init__()
        self.linear = linear

    def forward(self, x):
        w, h = self.linear.weight, x.shape[1] // 2
        return (x[:, :h] @ w[:, :h].t() + x[:, h:] @ w[:, h:].t()) + self.linear.bias


def rounding_only(seed):
    """Checkpointed blocks plus a head summed in another order: every difference is rounding-level, which --ulp
    accepts."""
    s = mlp.correct(seed)
    ckpt = s["checkpoint"]

    def transform(m):
        m = ckpt(m) or m
        m.head = _SplitHead(m.head)
        return m

    s["checkpoint"] = transform
    return s


def profiler_draws(seed):
    """The correct MLP whose loss draws one number from the CPU generator while torch's profiler is on, as code that
    samples a diagnostic input when profiled might: the memory pass then changes the run (the later dropout masks
    and the generator state), which the check "the instruments change nothing" must catch and name."""
    s = mlp.correct(seed)
    inner = s["loss"]

    def loss(m, batch):
        if torch.autograd._profiler_enabled():
            torch.rand(1)
        return inner(m, batch)

    s["loss"] = loss
    return s


def transform_raises(seed):
    """The checkpoint transform itself fails (here: an API the model does not have): a fault, exit 3."""
    s = mlp.correct(seed)
    s["checkpoint"] = lambda m: m.gradient_checkpointing_enable()
    return s


def reversed_chain(seed):
    """Names the MLP's blocks as its chain in the wrong order: `ckptcheck profile` refuses it (exit 2, one line
    naming the block whose input is not the previous block's output)."""
    s = mlp.correct(seed)
    s["chain"] = lambda m: list(m.blocks)[::-1]
    return s


def no_chain(seed):
    """A working setup without `chain`: `profile` and `validate --plan` need one (exit 2)."""
    return mlp.correct(seed)


def _loss_times(factor):
    """The correct MLP setup with its loss multiplied by `factor`: every gradient (and the parameters after the
    step) follows it."""

    def make(seed):
        s = mlp.correct(seed)
        inner = s["loss"]
        s["loss"] = lambda m, batch: inner(m, batch) * factor
        return s

    return make


# A non-finite plain run cannot be judged (two NaN runs are equal bit for bit): exit 3, never "holds".
nan_loss = _loss_times(float("nan"))
inf_loss = _loss_times(float("inf"))


def inf_after_step(seed):
    """A finite loss and finite gradients (both scaled by 1e30), and an lr of 1e30 that overflows the parameters:
    the parameters after step 0 are infinite. Exit 3 naming the first non-finite parameter."""
    s = _loss_times(1e30)(seed)
    s["optimizer"] = lambda ps: torch.optim.SGD(ps, lr=1e30)
    return s


def escapes_setsid(seed):
    """Each run forks a grandchild that leaves the run's process group and session (setsid) and sleeps for ten
    minutes; its pid is appended to $CKPT_TEST_PID_FILE. validate must end it with the run (it holds, exit 0), and
    none may be left once validate exits (tests/adapters/check_user_model.py --pids-gone)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            time.sleep(600)
        finally:
            os._exit(0)
    with open(os.environ["CKPT_TEST_PID_FILE"], "a") as f:
        f.write("%d\n" % pid)
    return mlp.correct(seed)


def _fsdp2(**change):
    """examples/torch/fsdp2.py's correct setup with its `distributed` entry changed."""
    import fsdp2

    s = fsdp2.correct(0)
    s["distributed"].update(change)
    return s


def fsdp2_shard_raises(seed):
    """The user's shard fails in every rank, in both runs: a fault (exit 3), the rank's exception in one line."""

    def shard(model, mesh, mp_policy):
        raise ValueError("shard failed on purpose")

    return _fsdp2(shard=shard)


def fsdp2_mesh_mismatch(seed):
    """A mesh of 3 x 2 ranks for a world of 2: bad input (exit 2) before any rank starts."""
    return _fsdp2(mesh=(3, 2))


def fsdp2_too_many_ranks(seed):
    """More ranks than this machine's memory can hold as processes: bad input (exit 2) before any rank starts."""
    return _fsdp2(world_size=100000, mesh=(100000,))


def ddp_legacy_key(seed):
    """The old spelling `ddp`: bad input naming its replacement."""
    import ddp

    s = ddp.non_reentrant(0)
    s["ddp"] = s.pop("distributed")
    return s
