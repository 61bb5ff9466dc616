// Check 3's memory property against the plan (saved_bytes_plan.h).
#include "harness/validate/saved_bytes_plan.h"

#include <cmath>
#include <sstream>

#include "cases/lm_case.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/plan.h"

namespace ckpt {

Schedule perBlockCheckpointSchedule(const std::vector<bool>& recomputed) {
  const int n = static_cast<int>(recomputed.size());
  Schedule s;
  s.policy = "per-block checkpoint";
  s.layers = n;
  auto add = [&](InstrKind k, int i, bool tape) { s.instrs.push_back({k, i, tape}); };
  for (int i = 0; i < n; ++i) {
    const bool rc = recomputed[static_cast<size_t>(i)];
    add(InstrKind::kForward, i, !rc);
    if (!rc) add(InstrKind::kFree, i, false);  // the tape shares x_i; a checkpointed block holds it instead
  }
  add(InstrKind::kLoss, 0, false);
  for (int i = n - 1; i >= 0; --i) {
    if (recomputed[static_cast<size_t>(i)]) {
      add(InstrKind::kForward, i, true);    // the recompute, from the held x_i
      add(InstrKind::kFree, i, false);      // now shared by the tape
      add(InstrKind::kFree, i + 1, false);  // rebuilt, but the backward needs g_{i+1}, not x_{i+1}
    }
    add(InstrKind::kBackward, i, false);
  }
  return s;
}

namespace {

// Live bytes after the last instruction before the loss: what the forward left for the backward.
int64_t endOfForward(const Schedule& s, const ChainCost& cost) {
  const Plan p = planSchedule(s, cost);
  for (size_t k = 0; k < s.instrs.size(); ++k)
    if (s.instrs[k].kind == InstrKind::kLoss) return k > 0 ? p.liveAfter[k - 1] : 0;
  return 0;
}

}  // namespace

SavedBytesPlan planSavedBytes(const CaseSpec& spec, const std::vector<int>& recomputedBlocks) {
  const ChainCost cost = caseChainCost(spec);
  std::vector<bool> none(static_cast<size_t>(cost.layers()), false), rec = none;
  for (int i : recomputedBlocks)
    if (i >= 0 && i < cost.layers()) rec[static_cast<size_t>(i)] = true;
  // The loss keeps its context and its data outside every checkpoint in both runs, and an adapter counts them
  // with its forward's saves: PyTorch's cross-entropy saves its log-softmax and its int64 labels, MSE its target
  // (ckptcheck's losses hold their targets as case data, not context), a token case's LM head its normalised
  // rows, statistics and (rows, vocab) probabilities. Both plans count them too: where the chain is tiny next to
  // them, a plan without them demands a saving the framework cannot show (torch, one transformer block of width 2
  // over micro-batches of one row: 44 of 185 bytes kept where 16 of 156 planned allowed at most 38 with
  // cross-entropy, 80 of 361 where 32 of 312 allowed 75 with MSE; numpy, one transformer block of width 2 under a
  // head over 4 tokens: 176 of 768 where 64 of 624 were planned).
  const int64_t rows = spec.microRows();
  const int64_t data = spec.loss == LossKind::kMse && !isLanguageModel(spec)
                           ? rows * spec.width * (spec.dtype == DType::kFloat ? 4 : 8)
                           : rows * static_cast<int64_t>(sizeof(int64_t));
  const int64_t loss = cost.loss.meta.contextExtraBytes + data;
  return {endOfForward(perBlockCheckpointSchedule(none), cost) + loss,
          endOfForward(perBlockCheckpointSchedule(rec), cost) + loss};
}

std::optional<std::string> savedBytesViolation(int64_t plainBytes, int64_t checkpointBytes, const SavedBytesPlan& plan,
                                               bool partial) {
  if (plainBytes <= 0 || plan.storeAll <= 0) return std::nullopt;
  const double allowed = plan.ratio() * (1.0 + kSavedBytesAllowance);  // of the plain run's bytes
  // Where even the allowance leaves room for no saving at all, none is required: a block that keeps only its
  // input and output in the framework (PyTorch's Linear + ReLU saves x and ReLU's output, which the next block
  // or the loss saves anyway) has nothing to drop, though ckptcheck's ReLU keeps its input and the plan saves it.
  if (allowed >= 1.0) return std::nullopt;
  const double bound = static_cast<double>(plainBytes) * allowed;
  const bool noEffect = checkpointBytes >= plainBytes;
  if (!noEffect && (partial || static_cast<double>(checkpointBytes) <= std::ceil(bound))) return std::nullopt;
  std::ostringstream why;
  why.precision(3);
  if (noEffect)
    why << "checkpointing had no effect on saved activations: the checkpointed run saved " << checkpointBytes
        << " bytes, the plain run " << plainBytes << ", where";
  else
    why << "the checkpointed run saved " << checkpointBytes << " activation bytes, "
        << 100.0 * static_cast<double>(checkpointBytes) / static_cast<double>(plainBytes) << "% of the plain run's "
        << plainBytes << ", above what";
  why << " the plan of the declared recomputed blocks implies: " << 100.0 * plan.ratio() << "% (" << plan.checkpointed
      << " of " << plan.storeAll << " planned bytes), " << 100.0 * allowed << "% with the "
      << 100.0 * kSavedBytesAllowance << "% allowance";
  if (!partial) why << ", at most " << static_cast<int64_t>(std::ceil(bound)) << " bytes";
  return why.str();
}

}  // namespace ckpt
