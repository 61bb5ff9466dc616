# Distributed factories under torchrun (harness/user_model/torch/USER_MODEL.md, "Sharded and data-parallel models"):
# FSDP2 (examples/torch/fsdp2.py) and DDP (examples/torch/ddp.py) over gloo on the CPU, each rank a process torchrun
# starts, with their verdicts pinned, a two-node run on the loopback address, and the bad input of a distributed
# setup. Each validate run starts torchrun and W fresh interpreters (no fork server there): 15-25 s a run on 2
# shared cores, six runs a holding seed, so each test is one seed and one or two steps of the small MLP; the wall
# time each costs here is noted on it. Included from tests/CMakeLists.txt (add_user_model_test, EXAMPLES, BROKEN).
function(add_distributed_test name cost)
  add_user_model_test(${name} ${ARGN})
  set_property(TEST ${name} APPEND PROPERTY LABELS distributed)
  set_tests_properties(${name} PROPERTIES COST ${cost})
endfunction()

# FSDP2: the user's checkpoint, then the user's shard (fully_shard per block, then the root), in both runs.
# Memory per rank: every rank's checkpointed activation bytes below its plain ones (--ranks).
foreach(f correct correct_4_ranks)
  set(w 2)
  if(f STREQUAL "correct_4_ranks")
    set(w 4)
  endif()
  add_distributed_test(user_model_fsdp2_${f}_holds 150 TIMEOUT 600 EXPECT --exit 0 --bitwise holds --memory holds
                       --ranks ${w} ARGS --adapter torch:module=${EXAMPLES}/fsdp2.py:${f} --seeds 1 --steps 1)
endforeach()
add_distributed_test(user_model_fsdp2_rng_not_preserved 150 TIMEOUT 600
                     EXPECT --exit 1 --bitwise finding --class rng-desync --tensor "^grad stem\\.weight \\(rank 0.s shard\\)$" --memory holds
                     ARGS --adapter torch:module=${EXAMPLES}/fsdp2.py:rng_not_preserved --seeds 1 --steps 1 --no-shrink)
add_distributed_test(user_model_fsdp2_mixed_precision_bf16_holds 150 TIMEOUT 600
                     EXPECT --exit 0 --bitwise holds --memory holds
                     ARGS --adapter torch:module=${EXAMPLES}/fsdp2.py:mixed_precision_bf16 --seeds 1 --steps 1)
# Two torchrun "nodes" on 127.0.0.1, one rank each: node 1 joins node 0's rendezvous for every run validate makes.
add_test(NAME user_model_fsdp2_two_nodes_holds
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/adapters/check_two_nodes.py --ranks-per-node 1
                 --exit 0 --bitwise holds --memory holds --ranks 2 --needs-python-module torch
                 -- $<TARGET_FILE:ckptcheck> validate
                 --adapter torch:module=${EXAMPLES}/fsdp2.py:correct,nnodes=2,rdzv_endpoint=127.0.0.1:{port}
                 --seeds 1 --steps 1 --out ${CKPT_VALIDATE_OUT}/user_model_fsdp2_two_nodes_holds)
set_tests_properties(user_model_fsdp2_two_nodes_holds PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 COST 150
                     LABELS "adapters;torch;user-model;framework-bound;distributed"
                     ENVIRONMENT "CKPT_SOURCE_DIR=${PROJECT_SOURCE_DIR}")

# DDP: reentrant checkpointing with find_unused_parameters raises in the checkpointed run only (issue 24005).
foreach(f reentrant non_reentrant non_reentrant_find_unused)
  add_distributed_test(user_model_ddp_${f}_holds 150 TIMEOUT 600 EXPECT --exit 0 --bitwise holds --memory holds
                       ARGS --adapter torch:module=${EXAMPLES}/ddp.py:${f} --seeds 1 --steps 2)
endforeach()
add_distributed_test(user_model_ddp_reentrant_find_unused 60 TIMEOUT 600
                     EXPECT --exit 1 --bitwise finding --tensor "checkpointed run raised.*mark a variable ready only once"
                     ARGS --adapter torch:module=${EXAMPLES}/ddp.py:reentrant_find_unused --seeds 1 --steps 1 --no-shrink)

# A rank that dies or hangs: a fault, exit 3, with each rank's log kept under the run's ranks/log/.
add_distributed_test(user_model_ddp_rank_dies 30 TIMEOUT 300
                     EXPECT --exit 3 --stderr "seed 1: the plain run raised \\(torchrun\\): rank 1 died \\(exit code 7\\), its log: "
                     ARGS --adapter torch:module=${BROKEN}:ddp_rank_dies --seeds 1 --steps 1)
add_distributed_test(user_model_ddp_rank_hangs 60 TIMEOUT 300
                     EXPECT --exit 3 --stderr "seed 1: the plain run timed out after 60 s"
                     ARGS --adapter torch:module=${BROKEN}:ddp_rank_hangs --seeds 1 --steps 1 --adapter-timeout 60)
# Bad input of a distributed setup: one line each, exit 2 for the setup, 3 for what this machine cannot do.
add_distributed_test(user_model_fsdp2_shard_raises 30 TIMEOUT 300
                     EXPECT --exit 3 --stderr "seed 1: the plain run raised \\(shard\\): rank [01]: ValueError: shard failed on purpose"
                     ARGS --adapter torch:module=${BROKEN}:fsdp2_shard_raises --seeds 1 --steps 1)
foreach(t "fsdp2_mesh_mismatch;'distributed.mesh' \\(3, 2\\) has 6 ranks, world_size is 2"
          "fsdp2_too_many_ranks;100000 ranks on this machine need about .* GiB is available"
          "ddp_legacy_key;'ddp' is now 'distributed'")
  list(GET t 0 f)
  list(GET t 1 want)
  add_distributed_test(user_model_${f} 5 TIMEOUT 120 EXPECT --exit 2 --stderr "${want}"
                       ARGS --adapter torch:module=${BROKEN}:${f} --seeds 1 --steps 1)
endforeach()
add_distributed_test(user_model_torchrun_missing 5 TIMEOUT 120
                     EXPECT --exit 3 --stderr "seed 1: the plain run \\(torchrun\\): torchrun '/nonexistent/torchrun' \\(CKPT_TORCHRUN\\) was not found"
                     ARGS --adapter torch:module=${EXAMPLES}/fsdp2.py:correct --seeds 1 --steps 1
                     ENV CKPT_TORCHRUN=/nonexistent/torchrun)
add_test(NAME user_model_rendezvous_cannot_bind
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/adapters/check_two_nodes.py --occupied
                 --exit 3 --stderr "seed 1: the plain run \\(torchrun\\): torchrun could not start the ranks .*(EADDRINUSE|in use)"
                 --needs-python-module torch
                 -- $<TARGET_FILE:ckptcheck> validate
                 --adapter torch:module=${EXAMPLES}/fsdp2.py:correct,rdzv_endpoint=127.0.0.1:{port}
                 --seeds 1 --steps 1 --out ${CKPT_VALIDATE_OUT}/user_model_rendezvous_cannot_bind)
set_tests_properties(user_model_rendezvous_cannot_bind PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 COST 20
                     LABELS "adapters;torch;user-model;framework-bound;distributed"
                     ENVIRONMENT "CKPT_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
add_user_model_test(user_model_bad_rdzv_endpoint TIMEOUT 60 EXPECT --exit 2
                    --stderr "adapter option 'rdzv_endpoint=127.0.0.1': expected HOST:PORT"
                    ARGS --adapter torch:module=${EXAMPLES}/fsdp2.py:correct,rdzv_endpoint=127.0.0.1 --seeds 1)
add_user_model_test(user_model_nnodes_without_endpoint TIMEOUT 60 EXPECT --exit 2
                    --stderr "adapter option 'nnodes=2' needs rdzv_endpoint=HOST:PORT"
                    ARGS --adapter torch:module=${EXAMPLES}/fsdp2.py:correct,nnodes=2 --seeds 1)
