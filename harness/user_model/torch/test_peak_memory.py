#!/usr/bin/env python3
"""Self-test of the memory measure (peak_memory.py) on eager models built here, where the answer is known.
Exit 0 when every check holds, 1 otherwise (one line per failure).

  - a plain MLP: the bytes the forward leaves for the backward (profiler) equal the saved-tensor-hook bytes
    (harness/adapters/torch/saved_bytes.py) minus the batch (allocated before the step, so not the step's) plus the
    4-byte loss;
  - the same MLP with every block under non-reentrant checkpoint: the same identity plus, per region, the CPU
    generator state the checkpoint keeps to replay dropout (torch.get_rng_state(): 5056 bytes), which no
    saved-tensor hook sees; with preserve_rng_state=False the identity holds without it;
  - a selective policy that saves every op keeps as much as the plain run (no saving);
  - `uniform` on a chain of 16 identical blocks (each keeps one input-sized tensor): checkpointing segments of
    s blocks, the step's peak is lowest at s = 4 = sqrt(16) and rises on either side (L/s kept inputs plus one
    segment of s recomputed), and what the forward leaves falls as L/s.
"""

import functools
import os
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as tc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# saved_bytes.py, the saved-tensor counter this driver shares with the torch case adapter
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "adapters", "torch"))
import peak_memory  # noqa: E402
from saved_bytes import SavedBytes  # noqa: E402

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
RNG_STATE = torch.get_rng_state().numel()  # bytes (uint8)
FAILURES = []


def expect(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc1, self.fc2, self.drop = nn.Linear(width, 2 * width), nn.Linear(2 * width, width), nn.Dropout(0.2)

    def forward(self, x):
        return x + self.drop(self.fc2(F.gelu(self.fc1(x))))


def mlp_forward(model, x, y, checkpoint=None):
    h = x
    for b in model:
        h = b(h) if checkpoint is None else tc.checkpoint(b, h, use_reentrant=False, **checkpoint)
    return F.cross_entropy(h, y)


def measured(forward, params):
    """(profiler figures, saved-tensor bytes) of one step: the profiler's pass and the hooks' pass apart."""
    with tempfile.TemporaryDirectory() as work:
        warm = forward()  # the allocator and autograd warmed up, as the driver's last step of two or more is
        warm.backward()
        prof, _ = peak_memory.measure(forward, work)
    meter = SavedBytes(params)
    with torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack):
        loss = forward()
    loss.backward()
    return prof, meter.total()


def check_identities():
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(64) for _ in range(3)])
    x, y = torch.randn(32, 64), torch.randint(0, 64, (32,))
    batch = x.nbytes + y.nbytes
    for name, kw, extra in (
        ("plain", None, 0),
        ("checkpointed", {}, 3 * RNG_STATE),
        ("checkpointed, preserve_rng_state=False", {"preserve_rng_state": False}, 0),
    ):
        prof, saved = measured(lambda kw=kw: mlp_forward(model, x, y, kw), model.parameters())
        want = saved - batch + 4 + extra
        expect(
            prof["activation_bytes"] == want,
            "%s MLP: profiler %d bytes left for the backward = saved-tensor hooks %d - batch %d + loss 4 + "
            "generator states %d (= %d)" % (name, prof["activation_bytes"], saved, batch, extra, want),
        )
        if kw is None:
            expect(
                prof["profiler_activation_bytes"] > 0,
                "plain MLP: the profiler's ACTIVATION category is "
                "filled on eager (%d bytes)" % prof["profiler_activation_bytes"],
            )


def check_save_everything():
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    torch.manual_seed(0)
    model = nn.Sequential(*[Block(64) for _ in range(3)])
    x, y = torch.randn(32, 64), torch.randint(0, 64, (32,))
    # Every op's output saved; dropout fills a saved empty tensor in place, which the cache must be told to allow.
    save_all = functools.partial(
        create_selective_checkpoint_contexts,
        lambda ctx, op, *a, **k: CheckpointPolicy.MUST_SAVE,
        allow_cache_entry_mutation=True,
    )
    plain, _ = measured(lambda: mlp_forward(model, x, y), model.parameters())
    sac, hooks = measured(lambda: mlp_forward(model, x, y, {"context_fn": save_all}), model.parameters())
    expect(
        sac["activation_bytes"] >= plain["activation_bytes"],
        "save-everything selective policy: %d bytes left for the backward, plain %d (no saving; the saved-tensor "
        "hooks see %d, blind to the policy's cache)" % (sac["activation_bytes"], plain["activation_bytes"], hooks),
    )


class Scale(nn.Module):
    """y = x * w: keeps exactly its input (w is a parameter), so every block costs one input of memory."""

    def __init__(self, width):
        super().__init__()
        self.w = nn.Parameter(torch.full((width,), 1.01))

    def forward(self, x):
        return x * self.w


def check_sqrt_shape(blocks=16, width=4096):
    torch.manual_seed(0)
    chain = nn.Sequential(*[Scale(width) for _ in range(blocks)])
    x = torch.randn(8, width, requires_grad=True)

    def forward(segment):
        h = x
        for start in range(0, blocks, segment):
            seg = chain[start : start + segment]
            h = tc.checkpoint(seg, h, use_reentrant=False, preserve_rng_state=False) if segment < blocks + 1 else seg(h)
        return h.sum()

    peaks, left = {}, {}
    for s in (1, 2, 4, 8, 16):
        prof, _ = measured(lambda s=s: forward(s), chain.parameters())
        peaks[s], left[s] = prof["peak_bytes"], prof["activation_bytes"]
    unit = x.nbytes
    print(
        "     uniform over %d blocks, segment s: step peak / left for backward, in inputs of %d bytes: %s"
        % (blocks, unit, ", ".join("s=%d %.2f / %.2f" % (s, peaks[s] / unit, left[s] / unit) for s in peaks))
    )
    best = min(peaks, key=peaks.get)
    expect(best == 4, "uniform: the step's peak is lowest at s = 4 = sqrt(16) (lowest at s = %d)" % best)
    expect(
        peaks[1] > peaks[2] > peaks[4] and peaks[4] < peaks[8] < peaks[16],
        "uniform: the peak falls towards sqrt(L) and rises after it",
    )
    expect(
        all(left[a] > left[b] for a, b in ((1, 2), (2, 4), (4, 8), (8, 16))),
        "uniform: what the forward leaves falls as L/s",
    )


def main():
    check_identities()
    check_save_everything()
    check_sqrt_shape()
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
