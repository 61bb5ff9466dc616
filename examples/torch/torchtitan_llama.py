"""torchtitan 0.3.0 as a client: its Llama3 debug model built from its config, its own activation checkpointing,
its own torch.compile and its own FSDP2 sharding, 2 ranks over gloo on the CPU, under
`ckptcheck validate --adapter torch:module=examples/torch/torchtitan_llama.py:FACTORY`; each verdict is pinned in
tests/torchtitan.cmake.

What is torchtitan's, unchanged: the model config (`model_registry("debugmodel")`: 6 layers, width 256, 16
heads, vocabulary 2048, its parameter initialisation), `FullAC` and `SelectiveAC` (per op)
`.apply(model)`, `apply_compile` (each TransformerBlock compiled, fullgraph, Inductor), `apply_fsdp_to_decoder`
(the embeddings, each block, then norm + head and the root, `reshard_after_forward` as torchtitan sets it,
gradient division off) with `TrainingConfig`'s default mixed precision (bf16 parameters, fp32 reduction), and
its cross-entropy. This is what `parallelize_llama` does, in its order (checkpointing, compile, FSDP), called
piece by piece because ckptcheck checkpoints only one of the two runs.

What had to change to run on a CPU (torchtitan 0.3.0 trains on GPUs; each stop reproduced without ckptcheck):
- attention: the Llama3 configs use FlexAttention, whose backward PyTorch refuses on the CPU
  (torch/nn/attention/flex_attention.py `_validate_device`: "FlexAttention does not support backward on CPU");
  the `varlen` backend calls `aten::_flash_attention_forward`, which has no CPU kernel; `sdpa` is refused for
  language models by `get_attention_config`. So each layer's `inner_attention` is torchtitan's own
  `ScaledDotProductAttention` (causal), exactly as torchtitan's graph_trainer tests build an SDPA Llama
  (experiments/graph_trainer/common_utils.py); with one document per row the causal mask is the same mask.
- FSDP's gradient reduction: `apply_fsdp_to_decoder` turns FSDP's gradient division off
  (`set_gradient_divide_factor(1.0)`), which makes FSDP2 reduce-scatter with `ReduceOp.PREMUL_SUM`, and gloo
  refuses it in the first backward ("Cannot use ReduceOp.PREMUL_SUM with Gloo"); so `shard` also calls
  `set_force_sum_reduction_for_comms(True)` (what torchtitan's own `enable_fsdp_symm_mem` calls): a plain SUM,
  then a division by the same factor 1.0, the same gradients.
- the mesh: torchtitan's `ParallelDims.build_mesh` builds it on `torchtitan.tools.utils.device_type`, which is
  "cuda" on a machine without an accelerator ("Found no NVIDIA driver"); ckptcheck's CPU mesh is used instead.
- selective per layer: torchtitan 0.3.0 has no such mode any more (its `selective_ac_option="2"`, checkpoint every
  second block, left with the `ActivationCheckpointing` classes); `LayerSelectiveAC` below is that mode rebuilt
  from `FullAC`'s own block wrapper.
- the RoPE cache is sized to the sequence, as torchtitan's Trainer does (`update_from_config`), here without the
  Trainer (it imports torchtitan's data stack: torchdata, datasets, tensorboard, wandb).
No weights and no tokenizer are downloaded: token ids come from the batch generator.
"""

import dataclasses

import torch
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy
from torchtitan.components.loss import cross_entropy_loss
from torchtitan.config import TORCH_DTYPE_MAP, CompileConfig, TrainingConfig
from torchtitan.distributed import ParallelDims
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
from torchtitan.distributed.compile import apply_compile
from torchtitan.distributed.fsdp import apply_fsdp_to_decoder
from torchtitan.models.common.attention import ScaledDotProductAttention
from torchtitan.models.llama3 import model_registry

SEQ_LEN, BATCH, WORLD = 64, 4, 2
VOCAB = model_registry("debugmodel").model.vocab_size


def build():
    """torchtitan's Llama3 debug model from its config, on the CPU, initialised by torchtitan's own init."""
    config = model_registry("debugmodel").model
    for layer in config.layers:
        layer.attention.inner_attention = ScaledDotProductAttention.Config()
        layer.attention.rope = dataclasses.replace(layer.attention.rope, max_seq_len=SEQ_LEN)
    model = config.build()
    model.init_states()
    return model


def batch(generator, batch_size):
    """Token ids, one document per row: inputs and the next-token labels."""
    tokens = torch.randint(0, VOCAB, (batch_size, SEQ_LEN + 1), generator=generator)
    return tokens[:, :-1], tokens[:, 1:]


def loss(model, b):
    inputs, labels = b
    return cross_entropy_loss(model(inputs), labels) / labels.numel()


def shard(model, mesh, mp_policy):
    """torchtitan's FSDP2 of a decoder, then SUM reductions for gloo (module docstring)."""
    apply_fsdp_to_decoder(
        model, mesh, param_dtype=mp_policy.param_dtype, reduce_dtype=mp_policy.reduce_dtype, pp_enabled=False
    )
    for m in model.modules():
        if isinstance(m, FSDPModule):
            m.set_force_sum_reduction_for_comms(True)


def compile_blocks(model):
    """torchtitan's `apply_compile` (CompileConfig(enable=True): Inductor, every TransformerBlock, fullgraph)."""
    parallel_dims = ParallelDims(dp_replicate=1, dp_shard=WORLD, cp=1, tp=1, pp=1, ep=1, world_size=WORLD)
    apply_compile(model, compile_config=CompileConfig(enable=True), parallel_dims=parallel_dims)
    return model


class LayerSelectiveAC(FullAC):
    """torchtitan's former `selective_ac_option="N"`: `FullAC`'s wrapper on every N-th block (N = 2: blocks
    1, 3, 5), the other blocks keep their activations."""

    every = 2

    def apply(self, model):
        layers = model.get_submodule("layers")
        for i, (layer_id, block) in enumerate(list(layers.named_children()), start=1):
            if i % self.every == 0:
                layers.register_module(layer_id, self._wrap_block(block, base_fqn="layers.%s" % layer_id))


def _setup(policy, compiled=False):
    """`policy`: the ActivationCheckpointing object, built as `parallelize_llama` builds it (`config.build()`)."""
    training = TrainingConfig()  # torchtitan's defaults: bf16 parameters, fp32 gradient reduction
    return {
        "model": build(),
        "batch": batch,
        "batch_size": BATCH,
        "loss": loss,
        "checkpoint": policy.apply,
        "optimizer": lambda params: torch.optim.AdamW(params, lr=8e-4),
        "wrap": compile_blocks if compiled else None,
        "distributed": {
            "kind": "fsdp2",
            "world_size": WORLD,
            "shard": shard,
            "mp_policy": MixedPrecisionPolicy(
                param_dtype=TORCH_DTYPE_MAP[training.mixed_precision_param],
                reduce_dtype=TORCH_DTYPE_MAP[training.mixed_precision_reduce],
            ),
        },
    }


def _layer_sac():
    return LayerSelectiveAC(FullAC.Config())


def full(seed):
    """`FullAC`: every block recomputed."""
    return _setup(FullAC.Config().build())


def selective_op(seed):
    """`SelectiveAC` (per op): matmuls and attention saved, every second matmul recomputed."""
    return _setup(SelectiveAC.Config().build())


def selective_layer(seed):
    """Every second block checkpointed (torchtitan's former per-layer selective mode)."""
    return _setup(_layer_sac())


def full_compiled(seed):
    """`FullAC`, then torchtitan's per-block torch.compile (Inductor)."""
    return _setup(FullAC.Config().build(), compiled=True)


def selective_op_compiled(seed):
    """`SelectiveAC` (per op), then torchtitan's per-block torch.compile (Inductor)."""
    return _setup(SelectiveAC.Config().build(), compiled=True)


def selective_layer_compiled(seed):
    """Every second block checkpointed, then torchtitan's per-block torch.compile (Inductor)."""
    return _setup(_layer_sac(), compiled=True)
