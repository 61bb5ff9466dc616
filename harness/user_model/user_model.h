// `ckptcheck validate --adapter torch:module=PATH.py:FACTORY`: the user's own PyTorch model with the user's own
// checkpointing (harness/user_model/torch/USER_MODEL.md). For each of N seeds it trains the model plain and
// checkpointed for the given steps (optimizer step included) and checks two properties:
//   bitwise   the loss of every step, every parameter's gradient, every buffer, the parameters after the step
//             and the CPU generator's state are bit for bit those of the plain run          -> finding (exit 1)
//   memory    the checkpointed run's saved activation bytes are at most (1 - min-saving) of the plain run's
//             ("checkpointing had no effect on saved activations" when not below at all)    -> finding (exit 1)
// A bitwise finding is diagnosed (harness/diagnose.h) and shrunk: batch size, then steps, then seed. A plain
// run that does not repeat itself is exit 3, never a finding; a bad module or factory is exit 2, one line.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "harness/diagnose.h"  // kRoundingLevelUlp

namespace ckpt {

// The default of --min-saving: a checkpointing setup must cut at least this fraction of the saved activation
// bytes. Deliberately loose: the part of a model outside the checkpoints (embeddings, the loss) still saves
// its activations, so the attainable saving depends on the model; a setup that saves nothing is always caught.
inline constexpr double kDefaultMinSaving = 0.1;

struct UserModelOptions {
  std::string adapter;               // "torch:module=PATH.py:FACTORY"
  std::vector<std::string> options;  // --option words (module= may come this way)
  int seeds = 2;                     // seeds firstSeed, firstSeed+1, ...
  int firstSeed = 1;
  int steps = 2;
  int batchSize = 0;       // 0: the factory's batch_size
  bool zeroBatch = false;  // floating batch tensors zeroed (what shrinking the batch's values tries)
  double minSaving = kDefaultMinSaving;
  uint64_t ulp = 0;       // accept differences within this many ULP (rounding-level), reported as such
  bool ulpGiven = false;  // --ulp was given (else a JAX model gets kJaxDefaultUlp, user_model_jax.h)
  bool shrink = true;
  std::string outDir = "validate-out";
  bool json = false;
  double timeoutSeconds = 300;
  // --plan: a placement of `ckptcheck plan --costs` (harness/engine/COSTS.md) applied instead of the factory's
  // checkpoint, and checked against the planner's prediction (harness/user_model/plan_check.h).
  std::string planPath;
};

// Prints the summary (or the JSON report) to `out`, a one-line error to `err`; writes OUT/validate.json and
// OUT/validate.md. Returns 0 holds, 1 finding, 2 bad input, 3 fault (2 and 3 win over 1: nothing else is sure).
int runUserModelValidate(const UserModelOptions& o, std::ostream& out, std::ostream& err);

}  // namespace ckpt
