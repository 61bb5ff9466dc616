"""A tiny ViT from timm (`timm.create_model("vit_tiny_patch16_224", pretrained=False, ...)`, nothing downloaded):
4 blocks of width 64 and 2 heads, patch 8 on 32x32 inputs (16 tokens plus the class token), 10 classes, with
stochastic depth on (drop_path_rate 0.1) and dropout after the projections (proj_drop_rate 0.1), so every
checkpointed block draws random numbers that its recompute must draw again identically. Checkpointing is
timm's own switch, `set_grad_checkpointing(True)`: each block under torch.utils.checkpoint (timm's default,
non-reentrant, preserve_rng_state on), or reentrant with timm's use_reentrant switch.
Factory for `ckptcheck validate --adapter torch:module=examples/torch/timm_vit.py:FACTORY`."""

import timm
import timm.layers
import torch
import torch.nn.functional as F

CLASSES = 10


def _model():
    return timm.create_model(
        "vit_tiny_patch16_224",
        pretrained=False,
        img_size=32,
        patch_size=8,
        embed_dim=64,
        depth=4,
        num_heads=2,
        num_classes=CLASSES,
        drop_path_rate=0.1,
        proj_drop_rate=0.1,
    )


def _setup(checkpoint):
    return {
        "model": _model(),
        "batch": lambda gen, n: (
            torch.randn(n, 3, 32, 32, generator=gen),
            torch.randint(0, CLASSES, (n,), generator=gen),
        ),
        "loss": lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        "optimizer": lambda ps: torch.optim.AdamW(ps, lr=1e-3),
        "checkpoint": checkpoint,
        "batch_size": 4,
    }


def grad_checkpointing(seed):
    return _setup(lambda m: m.set_grad_checkpointing(True))


def _reentrant(m):
    timm.layers.set_reentrant_ckpt(True)
    m.set_grad_checkpointing(True)


def grad_checkpointing_reentrant(seed):
    return _setup(_reentrant)
