# Issue 40's run-time half, included at the end of tests/CMakeLists.txt (add_validate_test, add_user_model_test and
# BROKEN are defined there).
#
# A run whose plain run is not finite cannot be judged (harness/compare.h, firstNonFinite): NaN equals NaN bit for
# bit, so two diverged runs would "hold". Exit 3 with one line naming the step, the tensor and the value, for a user
# model whose loss is NaN or infinite or whose parameters overflow after the step (tests/adapters/user_models.py),
# and for a built-in adapter on a case whose lr overflows the parameters (the `run` line is in bad-inputs/MANIFEST).
add_user_model_test(user_model_nan_loss_not_judged TIMEOUT 120 SANITIZE
                    EXPECT --exit 3 --stderr "seed 1: the plain run is not finite: step 0 loss: NaN. a run with non-finite values cannot be judged"
                    ARGS --adapter torch:module=${BROKEN}:nan_loss --seeds 1 --steps 1)
add_user_model_test(user_model_inf_loss_not_judged TIMEOUT 120
                    EXPECT --exit 3 --stderr "seed 1: the plain run is not finite: step 0 loss: \\+inf"
                    ARGS --adapter torch:module=${BROKEN}:inf_loss --seeds 1 --steps 1)
add_user_model_test(user_model_inf_parameters_not_judged TIMEOUT 120
                    EXPECT --exit 3 --stderr "seed 1: the plain run is not finite: step 0 param stem\\.weight: 1024 of 1024 elements are not finite, the first -inf at index 0"
                    ARGS --adapter torch:module=${BROKEN}:inf_after_step --seeds 1 --steps 1)
add_validate_test(validate_numpy_lr_overflow_not_judged TIMEOUT 120
                  ARGS --adapter numpy --case ${CMAKE_CURRENT_SOURCE_DIR}/bad-inputs/cases/lr-overflow.json)
add_validate_test(validate_numpy_timing_lr_overflow_not_judged TIMEOUT 120
                  ARGS --adapter numpy --cases 0 --timing-steps 2
                       --timing-case ${CMAKE_CURRENT_SOURCE_DIR}/bad-inputs/cases/lr-overflow.json)

# A factory's run that forks a grandchild calling setsid() (out of every group kill's reach): ckptcheck, the child
# subreaper of what it starts (harness/validate/runner.h), ends it with the run; none is left once validate exits.
# The same for runProcess, ServeProcess and the fork server in adapters_test (*LeftTheGroupAndSession,
# *LeftItsSession*).
# Two validate runs given one --out: the second is refused at once (exit 2, one line) while the first holds OUT's
# lock (harness/validate/work_dir.h, OutDirLock), so no verdict is read from the other run's files.
foreach(t "user_model_setsid_grandchildren_ended;escaped-children;${BROKEN};FALSE"
          "validate_shared_out_refused;shared-out;${EXAMPLES};TRUE")
  list(GET t 0 name)
  list(GET t 1 mode)
  list(GET t 2 path)
  list(GET t 3 sanitize)
  ckpt_framework_labels(labels "adapters;torch;user-model" ${sanitize})
  add_test(NAME ${name}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/adapters/check_run_isolation.py ${mode}
                   $<TARGET_FILE:ckptcheck> ${path} ${CKPT_VALIDATE_OUT}/${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS "${labels}"
                       ENVIRONMENT "CKPT_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endforeach()
