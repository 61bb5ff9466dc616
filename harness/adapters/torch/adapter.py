#!/usr/bin/env python3
"""PyTorch adapter: the case's model built from torch modules, trained plain or under torch.utils.checkpoint, so
`ckptcheck validate` can check PyTorch's checkpointing against PyTorch's own plain run
(harness/adapters/PROTOCOL.md).

Model: nn.Linear, nn.GELU(approximate="tanh"), nn.ReLU, nn.Tanh, nn.LayerNorm, nn.BatchNorm1d, nn.Dropout and
causal attention written with torch ops (dropout on the probabilities by F.dropout), weights loaded from the
case. Dropout draws from torch's own global generator, seeded from the case: that generator is what
checkpointing must preserve, so its state after every step is reported (rng_state.npy).

Checkpoint modes (option mode):
  checkpoint   every block under torch.utils.checkpoint.checkpoint (use_reentrant, preserve_rng_state)
  sequential   torch.utils.checkpoint.checkpoint_sequential over the blocks with `segments` segments (default
               round(sqrt(L))); as PyTorch does, the last segment runs without checkpointing
  selective    every block under non-reentrant checkpoint with create_selective_checkpoint_contexts: matmul
               outputs saved, everything else recomputed (torch >= 2.4; an older torch refuses it per run, exit 2)
Saved bytes: tensors packed by torch.autograd.graph.saved_tensors_hooks during the first step's forward, each
storage once, parameters excluded, measured in a forked pass of its own (case_measure.py): the compared run carries
no hook, and the pass's bytes count only if it trained bit for bit as the compared run did.
mode=selective reports saves_in_checkpoints: it keeps the matmul outputs inside each checkpoint by design.
Deterministic algorithms and one thread, so plain runs repeat bit for bit.
Frozen blocks: requires_grad_(False) on their parameters. Shared parameters: the owner's Parameter assigned to
the sharing block's module. An input without gradient: the input tensor does not require grad (the setting in
which reentrant checkpoint loses the parameter gradients of a checkpointed region, transformers issue 21381).
Micro-batches: the training loop of gradient accumulation, (loss_fn(model(x_m), y_m) / M).backward() per
micro-batch into the same .grad, one optimiser step after the last.
Language-model cases (PROTOCOL.md, "Token cases"): nn.Embedding(vocab, width) for the tokens plus
nn.Embedding(seq, width) for the positions before the chain, nn.LayerNorm and nn.Linear(width, vocab, bias=False)
with F.cross_entropy after it, both outside every checkpoint (the chain's blocks are wrapped exactly as in a dense
case). Tied: head.weight = emb.weight by assignment, as GPT-2 ties them. A frozen embedding: requires_grad_(False) on
both embeddings, so x_0 requires no gradient (reentrant checkpoint's missing-gradient setting again).
Stochastic depth, RReLU, bf16 (PROTOCOL.md): a block's drop_path is timm's DropPath (one Bernoulli draw per sample
from the global generator, kept samples scaled by 1/(1-p)) on the residual branch, after the branch's dropout;
mlp "rrelu" is nn.RReLU(lower, upper); compute "bf16" runs the chain's forward under
torch.autocast("cpu", dtype=torch.bfloat16) with float master weights, the loss (and an LM head) in float.
Mixture of experts (MoE below): router jitter from torch's generator (as dropout), the expert_counts and aux_loss
buffers updated in forward, coef * aux recorded on the side and added to each pass's loss (coef = aux_loss_coef / M).
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, HERE)
from ckpt_adapter import Case, Output, main  # noqa: E402


class TorchAdapter:
    name = "torch"
    # From the installed distribution's metadata: `capabilities` answers without importing torch (two seconds).
    version = importlib.metadata.version("torch").split("+")[0]

    def capabilities(self) -> dict[str, Any]:
        """What this adapter runs (PROTOCOL.md, "capabilities"); the options' values depend on the torch installed."""
        modes = ["checkpoint", "sequential", "selective"]
        return {
            "blocks": ["mlp", "residual-bn", "transformer", "moe"],
            "activations": ["relu", "gelu", "tanh", "rrelu"],
            "drop_path": True,
            "compute": ["exact", "bf16"],
            "losses": ["cross_entropy", "mse"],
            "dtypes": ["float", "double"],
            "rng": ["stateful"],
            "dropout": True,
            "modes": ["plain", "checkpoint"],
            "options": {
                "use_reentrant": {"values": ["0", "1"], "default": "0", "doc": "torch.utils.checkpoint use_reentrant"},
                "preserve_rng_state": {
                    "values": ["0", "1"],
                    "default": "1",
                    "doc": "torch.utils.checkpoint preserve_rng_state",
                },
                "mode": {
                    "values": modes,
                    "default": "checkpoint",
                    "doc": "checkpoint: every block; sequential: checkpoint_sequential; selective: SAC, matmuls saved",
                },
                "segments": {"values": "int", "default": "sqrt", "doc": "segments of mode=sequential"},
                "moe_state": {
                    "values": ["unguarded", "guarded"],
                    "default": "unguarded",
                    "doc": "moe buffers: moved on every training forward, or only outside backward",
                },
                "moe_aux": {
                    "values": ["side", "attach"],
                    "default": "side",
                    "doc": "moe aux loss: recorded during forward and added to the loss, or its gradient "
                    "attached to the output (Megatron's MoEAuxLossAutoScaler)",
                },
            },
            "reports_memory": True,
            "reports_forward_calls": True,
            "reports_rng_state": True,
            "params": ["frozen", "shared", "no_input_grad", "micro_batches"],
            "inputs": ["dense", "tokens"],
            "torch_full_version": importlib.metadata.version("torch"),
        }

    def run(self, case: Case, out: Output, mode: str, options: dict[str, str]) -> dict[str, Any]:
        """Train `case` plain or checkpointed (case_model.run), measured in passes of its own (case_measure.py)."""
        import case_measure  # the compared run without the saved-tensor hooks, then a forked measuring pass
        import case_model  # torch and the model: imported on the first run only (see `version`)

        return case_measure.run(case_model.run, case, out, mode, options)


if __name__ == "__main__":
    main(TorchAdapter)
