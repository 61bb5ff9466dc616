"""PEFT LoRA fine-tuning of a frozen Hugging Face Llama built from a tiny LlamaConfig (no download): `peft`'s
`get_peft_model` puts LoRA adapters (rank 4, lora_dropout 0.1, so every recompute must redraw the same masks) on
the attention projections q_proj and v_proj of each decoder layer; the base model stays frozen, only the adapters
train. Checkpointing is the library's own `gradient_checkpointing_enable`, reentrant and non-reentrant, with and
without the input embeddings' output requiring grad (`enable_input_require_grads`; PEFT issue 1142: reentrant
checkpointing of layers whose input does not require grad gives their LoRA parameters no gradient).

The pinned transformers (5.24.0) calls `enable_input_require_grads()` inside `gradient_checkpointing_enable()`
for any model that takes input_ids, so "without input grads" undoes it with `disable_input_require_grads()`, as a
user of an older version (or of a trainer that skips it) would have it.

`qlora_*`: the QLoRA recipe on CPU. The Llama is saved to a temporary folder and loaded back by
`from_pretrained` with bitsandbytes' 4-bit NF4 quantization (`BitsAndBytesConfig`, float32 compute; bitsandbytes
0.50.2 runs it on the CPU), every q/k/v/o and MLP projection a `bnb.nn.Linear4bit`; then
`prepare_model_for_kbit_training` (it freezes the base and casts what is not quantized to float32) and the LoRA
adapters. `prepare_model_for_kbit_training(use_gradient_checkpointing=True)` would enable checkpointing on the
model itself; here that is the checkpointed run's transform alone, `gradient_checkpointing_enable` as above, so the
plain run is the same recipe without it.

`alora_*`: activated LoRA (`alora_invocation_tokens`), whose adapters read per-call offsets that a forward hook
passes in (PEFT issue 2826: the recompute of a checkpointed layer ran without them).

`fsdp2_non_reentrant`: the same LoRA fine-tuning on 2 ranks under FSDP2 (torchrun, gloo on the CPU): each
decoder layer `fully_shard`, then the root, as torchtitan writes it; frozen base and LoRA parameters share each
layer's FSDP unit. Pinned in tests/torch_repro.cmake.

Factories for `ckptcheck validate --adapter torch:module=examples/torch/peft_lora.py:FACTORY`."""

import tempfile

import torch
from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
from torch.distributed.fsdp import fully_shard
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

VOCAB, SEQ = 96, 16
INVOCATION = 5  # the token that activates aLoRA's adapters; every batch carries it at position SEQ // 2


def _llama():
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=SEQ,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        use_cache=False,
    )
    config._attn_implementation = "eager"
    return LlamaForCausalLM(config)


def _batch(gen, n):
    ids = torch.randint(INVOCATION + 1, VOCAB, (n, SEQ), generator=gen)
    ids[:, SEQ // 2] = INVOCATION
    return ids


def _quantized_llama():
    """The Llama loaded in 4 bits (NF4) from a folder it was just saved to: how a QLoRA user gets a quantized model,
    without a download."""
    quantization = BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32
    )
    with tempfile.TemporaryDirectory() as folder:
        _llama().save_pretrained(folder)
        model = LlamaForCausalLM.from_pretrained(folder, quantization_config=quantization, device_map="cpu")
    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)


def _lora(use_reentrant, input_grads=True, qlora=False, alora=False):
    model = _quantized_llama() if qlora else _llama()
    extra = {"alora_invocation_tokens": [INVOCATION]} if alora else {}
    model = get_peft_model(
        model,
        LoraConfig(
            r=4, lora_alpha=8, lora_dropout=0.1, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM", **extra
        ),
    )

    def checkpoint(m):
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": use_reentrant})
        if not input_grads:
            m.disable_input_require_grads()

    return {
        "model": model,
        "batch": _batch,
        "loss": lambda m, ids: m(input_ids=ids, labels=ids).loss,
        "optimizer": lambda ps: torch.optim.AdamW([p for p in ps if p.requires_grad], lr=1e-3),
        "checkpoint": checkpoint,
        "batch_size": 4,
    }


def reentrant(seed):
    return _lora(use_reentrant=True)


def non_reentrant(seed):
    return _lora(use_reentrant=False)


def reentrant_without_input_grads(seed):
    return _lora(use_reentrant=True, input_grads=False)


def non_reentrant_without_input_grads(seed):
    return _lora(use_reentrant=False, input_grads=False)


def qlora_reentrant(seed):
    return _lora(use_reentrant=True, qlora=True)


def qlora_non_reentrant(seed):
    return _lora(use_reentrant=False, qlora=True)


def alora_reentrant(seed):
    return _lora(use_reentrant=True, alora=True)


def alora_non_reentrant(seed):
    return _lora(use_reentrant=False, alora=True)


def shard_layers(model, mesh, mp_policy):
    """fully_shard each decoder layer (its frozen projections and their LoRA adapters together), then the root."""
    for layer in model.base_model.model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp_policy)
    fully_shard(model, mesh=mesh, mp_policy=mp_policy)


def fsdp2_non_reentrant(seed):
    s = _lora(use_reentrant=False)
    s["distributed"] = {"kind": "fsdp2", "world_size": 2, "shard": shard_layers}
    return s
