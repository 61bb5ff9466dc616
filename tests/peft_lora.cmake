# PEFT LoRA on a frozen Hugging Face Llama (examples/torch/peft_lora.py, built from a tiny LlamaConfig): each
# setup's verdict pinned (harness/user_model/torch/USER_MODEL.md). Two steps, so the second step's lora_A gradients
# are not zero (lora_B starts at zero, which makes every lora_A gradient of step 0 zero in both runs). Each test is
# 25-35 s on this 2-core machine (six processes, each building the model): labels slow, COST 30. Included from
# tests/CMakeLists.txt (add_user_model_test, EXAMPLES).
function(add_peft_test name module)  # module: the example's path and factory, spelt out for user_model_setups.py
  add_user_model_test(${name} TIMEOUT 300 EXPECT ${ARGN} --needs-python-module peft
                      ARGS --adapter torch:module=${module} --seeds 1 --steps 2 --no-shrink)
  set_property(TEST ${name} APPEND PROPERTY LABELS slow)
  set_tests_properties(${name} PROPERTIES COST 30)
endfunction()

# gradient_checkpointing_enable, reentrant and non-reentrant (transformers 5.24.0 enables the embeddings' output
# grad itself); non-reentrant without input grads; QLoRA (bitsandbytes' 4-bit NF4 on the CPU, then
# prepare_model_for_kbit_training); activated LoRA, whose recompute must see the hook-passed offsets
# (PEFT issue 2826, fixed by PEFT before 0.21.2). All hold and save activation memory.
foreach(f reentrant non_reentrant non_reentrant_without_input_grads)
  add_peft_test(user_model_peft_lora_${f}_holds ${EXAMPLES}/peft_lora.py:${f} --exit 0 --bitwise holds --memory holds)
endforeach()
foreach(f alora_reentrant alora_non_reentrant)
  add_peft_test(user_model_peft_lora_${f}_holds ${EXAMPLES}/peft_lora.py:${f} --exit 0 --bitwise holds --memory holds)
endforeach()
foreach(f qlora_reentrant qlora_non_reentrant)
  add_peft_test(user_model_peft_lora_${f}_holds ${EXAMPLES}/peft_lora.py:${f} --exit 0 --bitwise holds --memory holds
                --needs-python-module bitsandbytes)
endforeach()
# PEFT issue 1142: reentrant checkpointing of the frozen decoder layers, whose input does not require grad once
# disable_input_require_grads() undoes transformers' hook: the loss does not require grad, backward raises, and the
# driver names the first LoRA parameter no gradient reaches.
add_peft_test(user_model_peft_lora_reentrant_without_input_grads
              ${EXAMPLES}/peft_lora.py:reentrant_without_input_grads --exit 1 --bitwise finding
              --tensor "checkpointed run raised.*loss does not require grad.*layers\\.0\\.self_attn\\.q_proj\\.lora_A")
