// What `validate --adapter jax:module=...` judges differently from a torch user model
// (harness/user_model/jax/USER_MODEL.md, "What remat may change"): XLA compiles a rematerialised function anew and
// may reorder its arithmetic, so a JAX run is held to a measured tolerance by default, on the step's gradients
// relative to each tensor's scale. "bitwise" still means bitwise: a seed within the tolerance is reported
// rounding-accepted, never holds.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "harness/diagnose.h"

namespace ckpt {

// The default --ulp of a JAX user model: differences within this many ULP of their tensor's largest magnitude
// are rounding-level and accepted. Measured on jax 0.10.2's CPU backend over the shipped examples
// (examples/jax/, 3 seeds x 3 steps each, USER_MODEL.md's table): where plain and remat differ, the loss, the
// gradients and the state stay within 13 ULP of their scale; every deliberately broken remat differs by more than
// 10^4. 64, the project's rounding level (kRoundingLevelUlp), leaves room for larger models' longer sums.
inline constexpr uint64_t kJaxDefaultUlp = kRoundingLevelUlp;

// The gradients judged, the parameters after the update not: when some gradient of the first differing step
// differs and every difference but the parameters' is within `ulp` ULP of its tensor's scale, the step is
// rounding-level. An optimizer such as Adam turns a last-bit change of a gradient that is nearly zero into a full
// step of the learning rate, so parameters after the update are no measure of the gradients' agreement; they are
// the same function of the same previous parameters and those gradients in both runs. nullopt otherwise.
std::optional<Diagnosis> gradientsWithinScale(const std::vector<TensorEvidence>& differing, uint64_t ulp);

}  // namespace ckpt
