# Your own JAX model (harness/user_model/jax/USER_MODEL.md): `validate --adapter jax:module=PATH.py:FACTORY` on the
# shipped examples (examples/jax/: Flax NNX, Equinox, plain JAX scan) with each verdict pinned, and on broken
# factories (tests/adapters/jax_user_models.py) for exit codes 2 and 3. Included by tests/CMakeLists.txt. One seed
# and few steps: each run compiles the step anew (1-3 s), and a finding adds a second plain run and, when semantic,
# the randomness-off pair.
set(JAX_EXAMPLES ${PROJECT_SOURCE_DIR}/examples/jax)
function(add_jax_user_model_test name)  # add_user_model_test (tests/CMakeLists.txt) with the JAX driver
  add_user_model_test(${name} FRAMEWORK jax ${ARGN})
endfunction()

# Flax NNX transformer LM (examples/jax/nnx_transformer.py): nnx.remat per block with dropout from nnx.Rngs, the
# dots policy, a BatchNorm variant, nnx.scan over stacked blocks; two hand-written remats that break it.
foreach(f remat dots)
  add_jax_user_model_test(jax_user_model_nnx_${f}_holds TIMEOUT 300
                          EXPECT --exit 0 --bitwise holds --memory holds --needs-python-module flax
                          ARGS --adapter jax:module=${JAX_EXAMPLES}/nnx_transformer.py:${f} --seeds 1 --steps 2)
endforeach()
# The BatchNorm variant's recompute differs from the plain step at rounding level (13 ULP) on the machines CI and
# earlier sessions ran, and not at all on an AMD EPYC with AVX-512 (2026-12-07, every run): XLA's CPU code is the
# machine's, so either verdict is correct, and a finding is not.
add_jax_user_model_test(jax_user_model_nnx_batchnorm_rounding TIMEOUT 300
                        EXPECT --exit 0 --bitwise rounding-accepted,holds --memory holds --needs-python-module flax
                        ARGS --adapter jax:module=${JAX_EXAMPLES}/nnx_transformer.py:batchnorm --seeds 1 --steps 2)
add_jax_user_model_test(jax_user_model_nnx_scan_rounding TIMEOUT 300
                        EXPECT --exit 0 --bitwise rounding-accepted --memory holds --needs-python-module flax
                        ARGS --adapter jax:module=${JAX_EXAMPLES}/nnx_transformer.py:scan --seeds 1 --steps 2)
add_jax_user_model_test(jax_user_model_nnx_state_twice TIMEOUT 300
                        EXPECT --exit 1 --bitwise finding --class state-updated-twice
                               --tensor "^buffer blocks\\.0\\.bn\\.mean$" --memory finding --needs-python-module flax
                        ARGS --adapter jax:module=${JAX_EXAMPLES}/nnx_transformer.py:state_twice --seeds 1 --steps 1
                             --no-shrink)
add_jax_user_model_test(jax_user_model_nnx_rng_resplit TIMEOUT 300
                        EXPECT --exit 1 --bitwise finding --class rng-desync --tensor "^grad blocks\\.0\\."
                               --needs-python-module flax
                        ARGS --adapter jax:module=${JAX_EXAMPLES}/nnx_transformer.py:rng_resplit --seeds 1 --steps 1
                             --no-shrink)
add_jax_user_model_test(jax_user_model_nnx_jax_checkpoint_raises TIMEOUT 300
                        EXPECT --exit 1 --bitwise finding --tensor "checkpointed run raised.*TraceContextError"
                               --needs-python-module flax
                        ARGS --adapter jax:module=${JAX_EXAMPLES}/nnx_transformer.py:jax_checkpoint --seeds 1
                             --steps 1 --no-shrink)

# The transformer's runs compile the longest programs (20-60 s a test on 2 idle cores): started first.
set_tests_properties(jax_user_model_nnx_remat_holds jax_user_model_nnx_dots_holds jax_user_model_nnx_batchnorm_rounding
                     jax_user_model_nnx_scan_rounding jax_user_model_nnx_state_twice jax_user_model_nnx_rng_resplit
                     jax_user_model_nnx_jax_checkpoint_raises PROPERTIES COST 50)

# Equinox (examples/jax/eqx_mlp.py): eqx.filter_checkpoint per block, with the dots policy, and left disabled.
add_jax_user_model_test(jax_user_model_eqx_filter_checkpoint_holds TIMEOUT 300
                        EXPECT --exit 0 --bitwise holds --memory holds --needs-python-module equinox
                        ARGS --adapter jax:module=${JAX_EXAMPLES}/eqx_mlp.py:filter_checkpoint --seeds 1 --steps 2)
add_jax_user_model_test(jax_user_model_eqx_policy_dots_rounding TIMEOUT 300
                        EXPECT --exit 0 --bitwise rounding-accepted --memory holds --needs-python-module equinox
                        ARGS --adapter jax:module=${JAX_EXAMPLES}/eqx_mlp.py:policy_dots --seeds 1 --steps 2)
add_jax_user_model_test(jax_user_model_eqx_ineffective_memory TIMEOUT 300
                        EXPECT --exit 1 --bitwise holds --memory finding --needs-python-module equinox
                        ARGS --adapter jax:module=${JAX_EXAMPLES}/eqx_mlp.py:ineffective --seeds 1 --steps 1)

# Plain JAX, scan over stacked layers (examples/jax/scan_mlp.py): four checkpoint policies, √L segments, a remat
# that saves everything, and two broken remats.
foreach(f nothing_saveable dots_saveable save_hidden offload_hidden segments)
  add_jax_user_model_test(jax_user_model_scan_${f}_holds TIMEOUT 300
                          EXPECT --exit 0 --bitwise holds --memory holds --needs-python-module optax
                          ARGS --adapter jax:module=${JAX_EXAMPLES}/scan_mlp.py:${f} --seeds 1 --steps 2)
endforeach()
add_jax_user_model_test(jax_user_model_scan_everything_saveable_memory TIMEOUT 300
                        EXPECT --exit 1 --bitwise holds --memory finding --needs-python-module optax
                        ARGS --adapter jax:module=${JAX_EXAMPLES}/scan_mlp.py:everything_saveable --seeds 1 --steps 1)
add_jax_user_model_test(jax_user_model_scan_key_resplit TIMEOUT 300
                        EXPECT --exit 1 --bitwise finding --class rng-desync --tensor "^grad " --shrunk-batch 1
                               --replay --needs-python-module optax
                        ARGS --adapter jax:module=${JAX_EXAMPLES}/scan_mlp.py:key_resplit --seeds 1 --steps 1
                             --batch-size 2)
add_jax_user_model_test(jax_user_model_scan_stop_gradient TIMEOUT 300
                        EXPECT --exit 1 --bitwise finding --class missing-gradient --tensor "^grad "
                               --needs-python-module optax
                        ARGS --adapter jax:module=${JAX_EXAMPLES}/scan_mlp.py:stop_gradient --seeds 1 --steps 1
                             --no-shrink)

# A pytree model with `state` threaded through the loss (a running mean) under jax.checkpoint, and a remat that
# moves it twice (tests/adapters/jax_user_models.py).
add_jax_user_model_test(jax_user_model_state_holds TIMEOUT 120 EXPECT --exit 0 --bitwise holds --memory holds
                        ARGS --adapter jax:module=${CMAKE_CURRENT_SOURCE_DIR}/adapters/jax_user_models.py:stateful
                             --seeds 1 --steps 2)
add_jax_user_model_test(jax_user_model_state_twice TIMEOUT 120
                        EXPECT --exit 1 --bitwise finding --class state-updated-twice --tensor "^buffer mean$"
                        ARGS --adapter jax:module=${CMAKE_CURRENT_SOURCE_DIR}/adapters/jax_user_models.py:stateful_twice
                             --seeds 1 --steps 1 --no-shrink)

# Bad input: one line, exit 2 (the module or factory breaks the contract, or the plain step cannot be jitted) or
# 3 (a seed's factory raises: the other seed's verdict kept; JAX not importable).
set(JAX_BROKEN ${CMAKE_CURRENT_SOURCE_DIR}/adapters/jax_user_models.py)
foreach(t "nope;has no function 'nope'"
          "returns_a_list;factory 'returns_a_list' returned list, expected a dict"
          "not_a_pytree;the model \\(object\\) has no floating-point array leaves"
          "not_jittable;the model cannot be jitted \\(compiling step 0\\): TracerBoolConversionError")
  list(GET t 0 f)
  list(GET t 1 want)
  add_jax_user_model_test(jax_user_model_bad_${f} TIMEOUT 120 EXPECT --exit 2 --stderr "${want}"
                          ARGS --adapter jax:module=${JAX_BROKEN}:${f})
endforeach()
add_jax_user_model_test(jax_user_model_seed_raises_keeps_others TIMEOUT 300
                        EXPECT --exit 3 --stderr "seed 2: .*no model for seed 2" --seed-status 1:holds
                               --seed-status 2:fault
                        ARGS --adapter jax:module=${JAX_BROKEN}:raises_on_seed_2 --seeds 2 --steps 1)
# A Python whose `import jax` fails (tests/adapters/no_jax/ shadows it): every seed a fault, one line.
add_jax_user_model_test(jax_user_model_without_jax TIMEOUT 120
                        EXPECT --exit 3 --stderr "seed 1: the plain run .*jax is not installed"
                        ARGS --adapter jax:module=${JAX_BROKEN}:raises_on_seed_2 --seeds 1 --steps 1
                        ENV "PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/adapters/no_jax")

# The √L shape of uniform segments on a chain of identical blocks: JAX's saved residuals (one boundary per segment)
# and XLA's compiled temp bytes against `ckptcheck plan`'s peak for the same chain
# (tests/adapters/check_jax_sqrt_chain.py).
add_test(NAME jax_sqrt_chain_segments
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/adapters/check_jax_sqrt_chain.py
                 $<TARGET_FILE:ckptcheck>)
set_tests_properties(jax_sqrt_chain_segments PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                     LABELS "adapters;jax;user-model;framework-bound"
                     ENVIRONMENT "CKPT_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
