// diagnose() (harness/diagnose.h) for two runs recorded as StepResults — ckptcheck's own engine under `verify`,
// an adapter's protocol output under `validate` — so their findings get the same classes as a user model's.
// One call at the place a finding is made: diagnoseSteps(plain, checkpointed, initialState, ulp).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "harness/diagnose.h"
#include "reference/step.h"

namespace ckpt {

// The state entry under which `validate` puts an adapter's generator state (harness/validate/case_dir.h's
// kRngStateName): evidence of kind kRng, not a running statistic.
inline constexpr const char* kAdapterRngStateName = "rng_state";

// The class of the first step at which `other` differs from `plain` bitwise (nullopt when none does). Evidence:
// that step's differing loss, gradients, input gradient, buffers (each with its value before the step: the
// previous plain step's, or `initialState` at step 0 — empty: unknown) and the generator (seed, offset, or an
// adapter's state bytes).
// Running statistics use `momentum` (reference/blocks.h's BatchNorm: 0.1) and move `passes` times a step (the
// case's micro-batches); names ending in num_batches_tracked are counters.
template <class T>
std::optional<Diagnosis> diagnoseSteps(const std::vector<StepResult<T>>& plain, const std::vector<StepResult<T>>& other,
                                       const std::vector<NamedMat<T>>& initialState, uint64_t roundingUlp,
                                       int64_t passes = 1, double momentum = 0.1);

extern template std::optional<Diagnosis> diagnoseSteps(const std::vector<StepResult<float>>&,
                                                       const std::vector<StepResult<float>>&,
                                                       const std::vector<NamedMat<float>>&, uint64_t, int64_t, double);
extern template std::optional<Diagnosis> diagnoseSteps(const std::vector<StepResult<double>>&,
                                                       const std::vector<StepResult<double>>&,
                                                       const std::vector<NamedMat<double>>&, uint64_t, int64_t, double);

}  // namespace ckpt
