# Public checkpointing bugs written as small factories (issue 39 §3-§4; harness/user_model/torch/USER_MODEL.md: the
# pinned tables, "Sharded and data-parallel models"), each verdict pinned as measured on torch 2.15.0 on the CPU: a
# report that does not reproduce on this version is pinned as measured, with why on the test. One seed and one or
# two steps of tiny models; the distributed ones start torchrun and two fresh interpreters a run, six runs a holding
# seed. COST: the test's seconds on a 2-core machine shared with other builds. Included from tests/CMakeLists.txt
# (add_user_model_test, EXAMPLES; add_distributed_test from tests/torch_distributed.cmake).

# PEFT LoRA on a frozen Llama (examples/torch/peft_lora.py) on 2 ranks under FSDP2: each decoder layer
# fully_shard, then the root, non-reentrant gradient_checkpointing_enable. Two steps (lora_B starts at zero): 245 s
# alone here, 378 s under ctest -j2 at load 19 (each run imports transformers and peft in three processes).
add_distributed_test(user_model_peft_lora_fsdp2_non_reentrant_holds 250 TIMEOUT 600
                     EXPECT --exit 0 --bitwise holds --memory holds --ranks 2 --needs-python-module peft
                     ARGS --adapter torch:module=${EXAMPLES}/peft_lora.py:fsdp2_non_reentrant --seeds 1 --steps 2)

# PyTorch issue 148831 (fully_shard loses autocast in the recompute): CPU autocast bf16 around the loss, FSDP2
# with a non-reentrant checkpoint_wrapper per block. Does not reproduce on 2.15 (the report's script runs too),
# most likely as FSDP2's pre-forward during the backward casts the recompute's inputs as the forward did (159359's
# fix); pinned holds. 171 s alone, 231 s under ctest -j2 at load 19.
add_distributed_test(user_model_fsdp2_autocast_bf16_holds 150 TIMEOUT 600
                     EXPECT --exit 0 --bitwise holds --memory holds --ranks 2
                     ARGS --adapter torch:module=${EXAMPLES}/fsdp2.py:autocast_bf16 --seeds 1 --steps 1)

# PyTorch issue 187437 (checkpoint of a parent whose child alone is fully_shard, forwarded twice per step: "mixed
# torch.Tensor and DTensor" in the second recompute): does not reproduce on 2.15, whose FSDP2 pre-forward in
# PRE_BACKWARD all-gathers again the parameters an earlier post-backward resharded (PyTorch PR 171779); the
# gradients are bit for bit the plain run's. The memory finding is real, and the report's: checkpointing its 8-wide
# block keeps more than it drops (each of the two regions also keeps the CPU generator state, 5056 B, to replay
# random ops). 106 s alone, 180 s under ctest -j2 at load 19.
add_distributed_test(user_model_fsdp2_child_shard_forwarded_twice 100 TIMEOUT 600
                     EXPECT --exit 1 --bitwise holds --memory finding
                     ARGS --adapter torch:module=${EXAMPLES}/fsdp2_child_shard.py:forwarded_twice --seeds 1 --steps 1
                          --no-shrink)

# torchtitan issue 1117 / PR 1114: an MoE expert bias moved by a forward hook. The hook runs after the forward,
# moves the bias by 1e-3 and clears the counts, so the recompute routes with the moved bias. Seed 1: no token
# changes expert, but non-reentrant checkpoint's early stop ends the recompute before the hook, so the
# recompute's counts stay in the buffer (a finding, semantic: only buffers differ). Seed 2: a token changes
# expert and the recompute raises 1117's own CheckpointError (an expert's input 13 rows, recomputed 14). The same
# update before the optimizer step (torchtitan's place) holds. Single process, 16-50 s each.
add_user_model_test(user_model_moe_bias_forward_hook TIMEOUT 300
                    EXPECT --exit 1 --bitwise finding --class semantic
                           --tensor "^buffer blocks\\.0\\.tokens_per_expert$" --memory holds
                    ARGS --adapter torch:module=${EXAMPLES}/moe_counts.py:bias_forward_hook --seeds 1 --steps 1
                         --no-shrink)
add_user_model_test(user_model_moe_bias_forward_hook_rerouted TIMEOUT 300
                    EXPECT --exit 1 --bitwise finding
                           --tensor "checkpointed run raised.*CheckpointError.*different metadata.*13, 16.*14, 16"
                    ARGS --adapter torch:module=${EXAMPLES}/moe_counts.py:bias_forward_hook --seed 2 --seeds 1
                         --steps 1 --no-shrink)
add_user_model_test(user_model_moe_bias_optimizer_hook_holds TIMEOUT 300
                    EXPECT --exit 0 --bitwise holds --memory holds
                    ARGS --adapter torch:module=${EXAMPLES}/moe_counts.py:bias_optimizer_hook --seeds 1 --steps 1)
set_tests_properties(user_model_moe_bias_forward_hook user_model_moe_bias_forward_hook_rerouted
                     user_model_moe_bias_optimizer_hook_holds PROPERTIES COST 20)
