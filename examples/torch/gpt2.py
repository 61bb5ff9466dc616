"""Hugging Face GPT-2 built from a small GPT2Config (no download), dropout on, with the library's own
`gradient_checkpointing_enable()`: reentrant and non-reentrant, and with frozen input embeddings (transformers
issue 21381: reentrant checkpointing of blocks whose input does not require grad gives their parameters no
gradient). Factories for `ckptcheck validate --adapter torch:module=examples/torch/gpt2.py:FACTORY`; `plan` (six
layers, width 256, 64 tokens) also names its chain, the GPT2Blocks, for `ckptcheck profile` and `validate --plan`."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB, SEQ = 96, 16


def _gpt2(use_reentrant, freeze_embeddings=False, input_grads=True, n_layer=2, n_embd=32, n_head=2, seq=SEQ):
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=seq,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        resid_pdrop=0.1,
        embd_pdrop=0.1,
        attn_pdrop=0.1,
        bos_token_id=0,
        eos_token_id=0,
    )
    config._attn_implementation = "eager"  # attention dropout as an nn.Dropout module: its masks are probed
    model = GPT2LMHeadModel(config)
    if freeze_embeddings:
        # Word embeddings are tied to lm_head, so both stay frozen; the blocks and ln_f still train.
        model.transformer.wte.weight.requires_grad_(False)
        model.transformer.wpe.weight.requires_grad_(False)

    def checkpoint(m):
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": use_reentrant})
        if not input_grads:
            # The pinned transformers (5.24.0) makes the embeddings' output require grad when checkpointing is
            # enabled (enable_input_require_grads), which avoids issue 21381; undoing it shows the issue again.
            m.disable_input_require_grads()

    return {
        "model": model,
        "batch": lambda gen, n: torch.randint(0, VOCAB, (n, seq), generator=gen),
        "loss": lambda m, ids: m(input_ids=ids, labels=ids).loss,
        "optimizer": lambda ps: torch.optim.AdamW([p for p in ps if p.requires_grad], lr=1e-3),
        "checkpoint": checkpoint,
        "batch_size": 4,
    }


def reentrant(seed):
    return _gpt2(use_reentrant=True)


def non_reentrant(seed):
    return _gpt2(use_reentrant=False)


def frozen_embeddings_reentrant(seed):
    return _gpt2(use_reentrant=True, freeze_embeddings=True)


def frozen_embeddings_reentrant_without_input_grads(seed):
    return _gpt2(use_reentrant=True, freeze_embeddings=True, input_grads=False)


def frozen_embeddings_non_reentrant(seed):
    return _gpt2(use_reentrant=False, freeze_embeddings=True)


def plan(seed):
    """Six GPT2Blocks at width 256 over 64 tokens (a step of about a tenth of a second here, so the blocks' own
    compute, not the per-call cost of checkpoint, is what a recompute adds) for `ckptcheck profile` and
    `validate --plan`: the chain is transformer.h (each block takes the hidden states first and returns them; the
    causal mask and position ids are the further arguments every block gets). No KV cache in training:
    config.use_cache off, so a placement's recompute never appends to a cache. `checkpoint` is the library's own,
    non-reentrant."""
    setup = _gpt2(use_reentrant=False, n_layer=6, n_embd=256, n_head=4, seq=64)
    setup["model"].config.use_cache = False
    setup["chain"] = lambda m: m.transformer.h
    return setup
