# Checkpointing under torch.compile (harness/user_model/torch/USER_MODEL.md, "The compiled zoo"): each factory of
# examples/torch/compiled.py with its verdict pinned, measured with untouched compared runs and the profiler's
# memory pass. Inductor compiles C++ on this machine's compiler: each run is seconds to a minute on 2 shared cores,
# so these carry the labels slow and compiled (ctest -LE slow leaves them out), one seed, and print their wall time.
# Two steps: the memory pass profiles the last dumped step, which is then a compiled step, not the first call that
# compiles (--profiled-step 1; a second step costs under a second a run once compiled). Included from
# tests/CMakeLists.txt (add_user_model_test, EXAMPLES, CKPT_VALIDATE_OUT).
function(add_compiled_test name factory)
  add_user_model_test(${name} TIMEOUT 900 EXPECT ${ARGN} --profiled-step 1
                      ARGS --adapter torch:module=${EXAMPLES}/compiled.py:${factory} --seeds 1 --steps 2 --no-shrink)
  set_property(TEST ${name} APPEND PROPERTY LABELS slow compiled)
  set_tests_properties(${name} PROPERTIES COST 200)
endfunction()

# Inductor keeps dropout's masks through the recompute (its RNG ops are functionalised); the eager and aot_eager
# backends as PyTorch issue 160773 describes them: eager redraws, aot_eager (on 2.15) does not.
add_compiled_test(user_model_compiled_inductor_holds inductor --exit 0 --bitwise holds --memory holds --changed none)
add_compiled_test(user_model_compiled_eager_backend_rng eager_backend --exit 1 --bitwise finding --class rng-desync
                  --tensor "^grad " --memory holds --changed masks:checkpoint)
add_compiled_test(user_model_compiled_aot_eager_holds aot_eager --exit 0 --bitwise holds --memory holds --changed none)
# Selective activation checkpointing under Inductor: matmuls saved holds and saves; a policy that saves every op
# saves nothing (a memory finding the saved-tensor hooks could not see).
add_compiled_test(user_model_compiled_sac_matmuls_holds sac_matmuls --exit 0 --bitwise holds --memory holds
                  --changed none)
add_compiled_test(user_model_compiled_sac_save_everything_memory sac_save_everything --exit 1 --bitwise holds
                  --memory finding --changed none)
# The partitioner's activation_memory_budget under Inductor: it saves memory, and its recompute redraws dropout.
foreach(b 01 05)
  add_compiled_test(user_model_compiled_memory_budget_${b}_rng memory_budget_${b} --exit 1 --bitwise finding
                    --class rng-desync --tensor "^grad " --memory holds --changed none)
endforeach()
# A print and an .item() inside the checkpointed function: Dynamo breaks the graph there; both still hold.
foreach(f graph_break_print graph_break_item)
  add_compiled_test(user_model_compiled_${f}_holds ${f} --exit 0 --bitwise holds --memory holds --changed none)
endforeach()
# Hugging Face GPT-2 (from a config) with gradient_checkpointing_enable(), both runs compiled by Inductor.
add_compiled_test(user_model_compiled_gpt2_inductor gpt2_inductor --exit 0 --bitwise holds --memory holds --changed none
                  --needs-python-module transformers)
# A backend that does not exist: one line, exit 3, no eager fallback.
add_user_model_test(user_model_compiled_backend_missing TIMEOUT 300
                    EXPECT --exit 3 --stderr "seed 1: the plain run \\(wrap\\): torch.compile failed: InvalidBackend"
                    ARGS --adapter torch:module=${EXAMPLES}/compiled.py:uncompilable --seeds 1 --steps 1)

# The memory measure on eager models where the answer is known (harness/user_model/torch/test_peak_memory.py): the
# profiler's bytes against the saved-tensor hooks' to the byte, a save-everything policy, uniform's sqrt(L) shape.
add_test(NAME peak_memory_measure
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/adapters/run_torch_script.py
                 ${PROJECT_SOURCE_DIR}/harness/user_model/torch/test_peak_memory.py)
set_tests_properties(peak_memory_measure PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                     LABELS "adapters;torch;framework-bound")

# The compiled zoo on a GPU (examples/torch/compiled_cuda.py: compiled.py's factories with the model on cuda,
# Inductor's Triton kernels): the CPU and every CUDA generator compared after each step (--generators), cuBLAS and
# the algorithms deterministic (the driver), the memory pass's figures from torch.cuda. Without a CUDA device each
# skips ("no CUDA device: GPU test skipped"); CKPT_REQUIRE_GPU=1 makes that a failure. The verdicts are the CPU
# zoo's, pinned by the mechanism (the eager backend's recompute redraws on any device; a save-everything policy
# saves nothing anywhere): not yet run on a GPU, the first session with one confirms or corrects them.
function(add_compiled_cuda_test name factory)
  add_user_model_test(${name} TIMEOUT 900 EXPECT ${ARGN} --profiled-step 1 --needs-cuda --generators cpu,cuda:0
                      ARGS --adapter torch:module=${EXAMPLES}/compiled_cuda.py:${factory} --seeds 1 --steps 2
                           --no-shrink)
  set_property(TEST ${name} APPEND PROPERTY LABELS slow compiled gpu)
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT "CUDA_VISIBLE_DEVICES=0")
endfunction()
add_compiled_cuda_test(user_model_compiled_cuda_inductor_holds inductor --exit 0 --bitwise holds --memory holds
                       --changed none)
add_compiled_cuda_test(user_model_compiled_cuda_aot_eager_holds aot_eager --exit 0 --bitwise holds --memory holds
                       --changed none)
add_compiled_cuda_test(user_model_compiled_cuda_eager_backend_rng eager_backend --exit 1 --bitwise finding
                       --class rng-desync --tensor "^grad " --memory holds --changed masks:checkpoint)
add_compiled_cuda_test(user_model_compiled_cuda_sac_save_everything_memory sac_save_everything --exit 1
                       --bitwise holds --memory finding --changed none)
