// The executor against the reference and the planner: every catalogue case x every policy x both generator
// models, over several steps, must give results bitwise equal to the reference trainer and measure exactly the
// planned peak activation bytes, forward evaluations and FLOPs per phase. The EngineVariant hooks are checked to
// reach the executor (a variant that skips the RNG restore is caught, and so on).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cases/case_json.h"
#include "common/input_error.h"
#include "harness/compare.h"
#include "harness/dtype_dispatch.h"
#include "harness/engine/executor.h"
#include "harness/engine/policy.h"
#include "reference/trainer.h"
#include "tests/test_util.h"

namespace ckpt {
namespace {

std::string cataloguePath(const std::string& name) { return test::catalogueCase(name).string(); }

// Policies beyond the defaults that exercise compositions and op-level lists.
const std::vector<std::string> kExtraPolicies = {"selective:recompute=attention,dropout",
                                                 "uniform:k=2+selective:recompute=attention",
                                                 "recursive+selective:recompute=batchnorm,relu,gelu,tanh"};

std::string describe(const Comparison& c) {
  std::string s;
  for (size_t i = 0; i < c.differences.size() && i < 5; ++i) s += "\n  " + toText(c.differences[i]);
  return s;
}

template <class T>
void checkCase(CaseSpec spec, int steps) {
  for (RngModel model : {RngModel::kStateful, RngModel::kCounter}) {
    spec.rng = model;
    SCOPED_TRACE(std::string("rng ") + rngModelName(model));
    Chain<T> refChain = buildChain<T>(spec);
    const auto reference = trainReference(refChain, steps);
    const ChainCost cost = caseChainCost(spec);
    auto policies = defaultPolicies(cost);
    policies.insert(policies.end(), kExtraPolicies.begin(), kExtraPolicies.end());
    for (const auto& policy : policies) {
      SCOPED_TRACE("policy " + policy);
      const Schedule s = makeSchedule(parsePolicy(policy), cost);
      const Plan plan = planSchedule(s, cost);
      Chain<T> chain = buildChain<T>(spec);
      const auto measured = executeSteps(chain, s, steps);
      const Comparison cmp = compareSteps(reference, measured);
      EXPECT_TRUE(cmp.bitwiseEqual) << describe(cmp);
      for (int step = 0; step < steps; ++step) {
        const auto& r = measured[static_cast<size_t>(step)];
        EXPECT_EQ(r.peakActivationBytes, plan.peakActivationBytes) << "step " << step;
        EXPECT_EQ(r.forwardEvals, plan.stepForwardEvals()) << "step " << step;
        EXPECT_EQ(r.flops, plan.stepFlops()) << "step " << step;
        if (policy == "store-all") {
          // store-all is the reference's schedule: the same bytes and FLOPs.
          EXPECT_EQ(r.peakActivationBytes, reference[static_cast<size_t>(step)].peakActivationBytes);
          EXPECT_EQ(r.flops, reference[static_cast<size_t>(step)].flops);
        }
      }
    }
  }
}

void checkCatalogueCase(const std::string& name, int steps) {
  const CaseSpec spec = loadCase(cataloguePath(name));
  withScalar(spec.dtype, [&](auto t) { checkCase<decltype(t)>(spec, steps); });
}

// Three steps and both generator models throughout; the larger cases keep the suite's runtime small.
TEST(Executor, tinyMatchesReferenceAndPlan) { checkCatalogueCase("tiny", 3); }
TEST(Executor, mlpDeepMatchesReferenceAndPlan) { checkCatalogueCase("mlp-deep", 3); }
TEST(Executor, resnetBnMatchesReferenceAndPlan) { checkCatalogueCase("resnet-bn", 3); }
TEST(Executor, transformerMatchesReferenceAndPlan) { checkCatalogueCase("transformer", 3); }

TEST(Executor, rejectsAnInvalidSchedule) {
  Chain<double> chain = buildChain<double>(loadCase(cataloguePath("tiny")));
  Schedule s = storeAllSchedule(chainCost(chain));
  s.instrs.pop_back();  // backward 0 missing
  EXPECT_THROW(executeSteps(chain, s, 1), InputError);
}

// A variant's results on tiny under uniform:k=3 (blocks 0 and 1 recomputed), compared with the reference.
Comparison underVariant(const EngineVariant& v, RngModel model = RngModel::kStateful) {
  CaseSpec spec = loadCase(cataloguePath("tiny"));
  spec.rng = model;
  Chain<double> ref = buildChain<double>(spec);
  Chain<double> eng = buildChain<double>(spec);
  const Schedule s = uniformSchedule(chainCost(eng), 3);
  return compareSteps(trainReference(ref, 2), executeSteps(eng, s, 2, v));
}

bool anyDifferenceIn(const Comparison& c, const std::string& prefix) {
  for (const auto& d : c.differences)
    if (d.tensor.rfind(prefix, 0) == 0) return true;
  return false;
}

TEST(EngineVariant, defaultIsTheCorrectEngine) { EXPECT_TRUE(underVariant(EngineVariant()).bitwiseEqual); }

TEST(EngineVariant, hooksReachTheExecutor) {
  struct NoRngRestore : EngineVariant {
    void rngForRecompute(Rng&, const RngState&) const override {}
  };
  struct StateUpdatedTwice : EngineVariant {
    BlockEnv recomputeEnv(BlockEnv env) const override { return env; }
  };
  // (erfGelu would go unseen here: in tiny's recomputed mlp block the GELU output feeds only a dropout, which
  // saves its mask, not its input, so nothing the backward reads changes.)
  struct Bf16OnRecompute : EngineVariant {
    BlockEnv recomputeEnv(BlockEnv env) const override {
      env.updateState = false;
      env.numerics.bf16Matmul = true;
      return env;
    }
  };
  struct InputGradDropped : EngineVariant {
    bool reportInputGradient() const override { return false; }
  };
  struct GradsTwice : EngineVariant {
    void afterBackward(int block, bool recomputed, StepView& v) const override {
      if (recomputed) v.mapParamGrads(block, [](double g) { return g + g; });
    }
  };
  struct SegmentInputFed : EngineVariant {
    int forwardInput(int block, bool recompute, const StepView& v) const override {
      int b = block;
      while (recompute && !v.isCheckpoint(b)) --b;
      return b;
    }
  };
  EXPECT_TRUE(anyDifferenceIn(underVariant(NoRngRestore()), "grad"));
  EXPECT_TRUE(anyDifferenceIn(underVariant(StateUpdatedTwice()), "state"));
  EXPECT_TRUE(anyDifferenceIn(underVariant(Bf16OnRecompute()), "grad"));
  EXPECT_TRUE(anyDifferenceIn(underVariant(InputGradDropped()), "input_grad"));
  EXPECT_TRUE(anyDifferenceIn(underVariant(GradsTwice()), "grad"));
  // Under uniform:k=3 every recomputed block is its own segment, so feeding the segment input is correct here.
  EXPECT_TRUE(underVariant(SegmentInputFed()).bitwiseEqual);
}

}  // namespace
}  // namespace ckpt
