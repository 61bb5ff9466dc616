# torchtitan 0.3.0 as a client (examples/torch/torchtitan_llama.py): its Llama3 debug model, its activation
# checkpointing modes applied by its own functions, with and without its per-block torch.compile, under its own
# FSDP2 sharding on 2 ranks (torchrun, gloo, CPU). Verdicts in harness/user_model/torch/USER_MODEL.md ("torchtitan").
# One seed, two steps (the memory pass profiles step 1: AdamW's state and the compiled blocks exist by then) of
# batch 4 x 64 tokens per rank; each validate run is torchrun and 2 ranks building the 6.2M-parameter model, six
# runs a holding seed. Included from tests/CMakeLists.txt (add_user_model_test, EXAMPLES).
function(add_torchtitan_test name module cost)  # module: path and factory, spelt out for user_model_setups.py
  add_user_model_test(${name} TIMEOUT 1800 EXPECT --exit 0 --bitwise holds --memory holds --ranks 2
                      --needs-python-module torchtitan
                      ARGS --adapter torch:module=${module} --seeds 1 --steps 2 ${ARGN})
  set_property(TEST ${name} APPEND PROPERTY LABELS "distributed;slow")
  set_tests_properties(${name} PROPERTIES COST ${cost})
endfunction()

# FullAC, SelectiveAC per op, every second block (torchtitan's former per-layer mode): all hold, and the
# checkpointed run leaves 81%, 58% and 40% less activation memory on each rank. Measured here on 2 cores shared
# with other work: 65-74 s each alone at load 2-3, 212-291 s alone at load 12-18, 295-588 s under ctest -j2.
foreach(f full selective_op selective_layer)
  add_torchtitan_test(user_model_torchtitan_${f}_holds ${EXAMPLES}/torchtitan_llama.py:${f} 240)
endforeach()
# torchtitan's apply_compile (Inductor, each block fullgraph) over FullAC: holds. Each of the six runs compiles the
# blocks on both ranks: 597 s here with Inductor's cache cold (load 11), 88-258 s with it warm (load 2-10). One
# compiled mode only: the compiled per-op and per-layer modes are measured in USER_MODEL.md, not run in CI.
# A compiled run's memory pass (Inductor, then the profiler) took more than validate's 300 s per run at load 14.
add_torchtitan_test(user_model_torchtitan_full_compiled_holds ${EXAMPLES}/torchtitan_llama.py:full_compiled 600
                    --adapter-timeout 900)
