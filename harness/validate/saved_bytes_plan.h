// Check 3's memory property against the plan: what ckptcheck's planner (harness/engine/plan.h) predicts a case
// keeps for backward with and without checkpointing the blocks an adapter declares recomputed, and whether the
// adapter's reported saved activation bytes show a reduction consistent with that prediction.
//
// The planned bytes are the live activation bytes at the end of the forward (after the last forward, before the
// loss, the loss's context added to both) of two schedules over the case: every block taped
// (store-all), and every declared block checkpointed on
// its own (run without tape, its input held, recomputed with tape before its backward). Checkpointing each block
// on its own keeps the most of any segmenting of those blocks, so it bounds checkpoint_sequential and coarser
// segments from above. The adapter's bytes (PROTOCOL.md, saved_activation_bytes of the first step) are measured
// in the framework's own terms — its ops save other tensors than ckptcheck's (a bool dropout mask, a LayerNorm's
// statistics) — so the plan is compared as a ratio: the checkpointed run may keep
//     plain bytes x (planned checkpointed / planned store-all) x (1 + kSavedBytesAllowance)
// and one that keeps as much as the plain run, where that bound is below it, is the finding "checkpointing had
// no effect on saved activations".
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cases/case_spec.h"
#include "harness/validate/adapter.h"
#include "harness/engine/schedule.h"

namespace ckpt {

// How far above the planned ratio a checkpointed run's saved bytes may lie: twice the planned fraction. PyTorch's
// ReLU and Tanh save their output, which is the next block's input, where ckptcheck's save their input, so a
// chain of them saves about half of what the plan counts without checkpointing and as much with it: measured
// ratio / planned ratio reached 1.45 over 80 random torch cases (PROTOCOL.md, "The memory property").
inline constexpr double kSavedBytesAllowance = 1.0;

struct SavedBytesPlan {
  int64_t storeAll = 0;      // planned live bytes at the end of the forward, every block taped
  int64_t checkpointed = 0;  // ... with the declared blocks checkpointed one by one
  double ratio() const {
    return storeAll > 0 ? static_cast<double>(checkpointed) / static_cast<double>(storeAll) : 1.0;
  }
};

// The schedule that checkpoints each block with recomputed[i] on its own and tapes the others (all false:
// store-all); it passes validateSchedule.
Schedule perBlockCheckpointSchedule(const std::vector<bool>& recomputed);
SavedBytesPlan planSavedBytes(const CaseSpec& spec, const std::vector<int>& recomputedBlocks);

// The violation, one line, or nullopt: above plain x planned ratio x (1 + allowance), "no effect" when not
// below plain at all. Nothing is required where that bound is not below plain. `partial`: the adapter keeps some
// tensors inside its checkpoints by design (a selective policy): then only "no effect" is a violation.
std::optional<std::string> savedBytesViolation(int64_t plainBytes, int64_t checkpointBytes, const SavedBytesPlan& plan,
                                               bool partial);

}  // namespace ckpt
