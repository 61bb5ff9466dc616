// Check 3's memory property against the plan (harness/validate/saved_bytes_plan.h) without a framework: the
// per-block checkpoint schedule is valid for any set of recomputed blocks, checkpointing a block never keeps more
// than taping it, every-block-taped is store-all, and the verdict's branches (no effect, above the planned ratio,
// within it, a selective run, a plan that requires no saving).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "cases/generators.h"
#include "cases/lm_case.h"
#include "harness/validate/saved_bytes_plan.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"

namespace ckpt {
namespace {

GenLimits small() {
  GenLimits lim;
  lim.maxBlocks = 12;
  return lim;
}

RC_GTEST_PROP(SavedBytesPlan, perBlockScheduleIsValidAndCheckpointingNeverKeepsMore, ()) {
  const CaseSpec spec = *genCase(small());
  const int n = static_cast<int>(spec.blocks.size());
  const auto mask = *rc::gen::container<std::vector<bool>>(static_cast<size_t>(n), rc::gen::arbitrary<bool>());
  const ChainCost cost = caseChainCost(spec);
  validateSchedule(perBlockCheckpointSchedule(mask), cost);  // throws on an invalid schedule
  std::vector<int> rec;
  for (int i = 0; i < n; ++i)
    if (mask[static_cast<size_t>(i)]) rec.push_back(i);
  const SavedBytesPlan p = planSavedBytes(spec, rec);
  RC_ASSERT(p.checkpointed <= p.storeAll);
  // One more recomputed block keeps no more.
  const int extra = *rc::gen::inRange(0, n);
  rec.push_back(extra);
  RC_ASSERT(planSavedBytes(spec, rec).checkpointed <= p.checkpointed);
}

RC_GTEST_PROP(SavedBytesPlan, noRecomputedBlockIsStoreAll, ()) {
  const CaseSpec spec = *genCase(small());
  const ChainCost cost = caseChainCost(spec);
  const SavedBytesPlan p = planSavedBytes(spec, {});
  RC_ASSERT(p.checkpointed == p.storeAll);
  // The same bytes as the store-all policy's schedule at the end of its forward.
  const Schedule all = makeSchedule(parsePolicy("store-all"), cost);
  const Plan plan = planSchedule(all, cost);
  size_t loss = 0;
  while (all.instrs[loss].kind != InstrKind::kLoss) ++loss;
  // The loss's context and data are counted on top (saved_bytes_plan.cpp: the adapters count them with the
  // forward's saves).
  const int64_t data = spec.loss == LossKind::kMse && !isLanguageModel(spec)
                           ? spec.microRows() * spec.width * (spec.dtype == DType::kFloat ? 4 : 8)
                           : spec.microRows() * 8;  // MSE's target; cross-entropy's int64 labels
  RC_ASSERT(p.storeAll == plan.liveAfter[loss - 1] + cost.loss.meta.contextExtraBytes + data);
}

TEST(SavedBytesPlan, checkpointingEveryMlpBlockKeepsBoundariesOnly) {
  CaseSpec spec;
  spec.batch = 2;
  spec.seq = 2;
  spec.width = 4;
  spec.dropout = 0.1;
  spec.dtype = DType::kFloat;
  spec.blocks.assign(6, BlockSpec{});
  const SavedBytesPlan p = planSavedBytes(spec, {0, 1, 2, 3, 4, 5});
  const int64_t boundary = 2 * 2 * 4 * static_cast<int64_t>(sizeof(float));
  // x_0 .. x_6, cross-entropy's probabilities and its 4 int64 labels
  EXPECT_EQ(p.checkpointed, 7 * boundary + boundary + 4 * 8);
  EXPECT_LT(p.ratio(), 0.5);
}

TEST(SavedBytesPlan, verdicts) {
  const SavedBytesPlan plan{1000, 100};                       // planned ratio 0.1; with the allowance 0.2 of plain
  EXPECT_FALSE(savedBytesViolation(5000, 900, plan, false));  // 18% of plain: within
  const auto above = savedBytesViolation(5000, 1200, plan, false);
  ASSERT_TRUE(above);
  EXPECT_NE(above->find("above what the plan of the declared recomputed blocks implies"), std::string::npos) << *above;
  EXPECT_NE(above->find("at most 1000 bytes"), std::string::npos) << *above;
  const auto none = savedBytesViolation(5000, 5000, plan, false);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->rfind("checkpointing had no effect on saved activations", 0), 0u) << *none;
  // A selective run keeps tensors inside its checkpoints by design: only "no effect" binds.
  EXPECT_FALSE(savedBytesViolation(5000, 4000, plan, true));
  EXPECT_TRUE(savedBytesViolation(5000, 5000, plan, true));
  // A plan whose allowance leaves room for no saving requires none (a framework block with nothing to drop).
  EXPECT_FALSE(savedBytesViolation(96, 96, SavedBytesPlan{96, 64}, false));
  EXPECT_FALSE(savedBytesViolation(0, 0, plan, false));  // nothing measured
}

}  // namespace
}  // namespace ckpt
