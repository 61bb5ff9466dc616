// The two generator models a case can ask for (reference/rng.h implements them). Here, below cases/ and
// reference/, because the case format names them and the generator runs them.
#pragma once

namespace ckpt {

enum class RngModel { kCounter, kStateful };
inline const char* rngModelName(RngModel m) { return m == RngModel::kCounter ? "counter" : "stateful"; }

}  // namespace ckpt
