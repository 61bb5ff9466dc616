// The planner without tensors: store-all never recomputes, uniform stays within its (K + L/K) bound, a case's cost
// model equals the built chain's, and selective masks drop exactly what they say (under recompute=attention the
// attention probabilities are not in the tape).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cases/case_json.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "reference/chain.h"
#include "tests/test_util.h"

namespace ckpt {
namespace {

std::vector<std::string> catalogue() {
  const std::filesystem::path dir = test::catalogueDir();
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

CaseSpec homogeneousSpec(BlockKind kind, DType dtype) {
  CaseSpec c;
  c.batch = 2;
  c.seq = 4;
  c.width = 8;
  c.dtype = dtype;
  c.dropout = 0.1;
  BlockSpec b;
  b.kind = kind;
  b.heads = 2;
  c.blocks = {b};
  return c;
}

TEST(Planner, storeAllNeverRecomputes) {
  for (const auto& file : catalogue()) {
    const ChainCost c = caseChainCost(loadCase(file));
    const Plan p = planSchedule(storeAllSchedule(c), c);
    EXPECT_EQ(p.flops.recompute, 0) << file;
    EXPECT_EQ(p.forwardEvals, c.layers()) << file;
    EXPECT_EQ(p.flopOverhead(), 0.0) << file;
  }
}

TEST(Planner, liveBytesEndWithTheInputGradientAlone) {
  const ChainCost c = homogeneousChainCost(homogeneousSpec(blockKind("transformer"), DType::kFloat), 5);
  for (const char* policy : {"store-all", "uniform", "selective", "uniform:k=5+selective"}) {
    const Schedule s = makeSchedule(parsePolicy(policy), c);
    const Plan p = planSchedule(s, c);
    ASSERT_EQ(p.liveAfter.size(), s.instrs.size());
    EXPECT_EQ(p.liveAfter.back(), c.inputBytes) << policy;
    EXPECT_GE(p.peakActivationBytes, *std::max_element(p.liveAfter.begin(), p.liveAfter.end()));
  }
}

// Loss FLOPs count as forward and backward; a block's first forward is forward work, any other is recompute.
TEST(Planner, flopsByPhase) {
  const ChainCost c = homogeneousChainCost(homogeneousSpec(blockKind("mlp"), DType::kDouble), 6);
  const BlockProgram& b = c.block(0);
  const Plan p = planSchedule(uniformSchedule(c, 3), c);
  EXPECT_EQ(p.flops.forward, 6 * b.forwardFlops + c.loss.meta.forwardFlops);
  EXPECT_EQ(p.flops.backward, 6 * b.backwardFlops + c.loss.meta.backwardFlops);
  EXPECT_EQ(p.flops.recompute, 4 * b.forwardFlops);
  EXPECT_EQ(p.forwardEvals, 10);
}

TEST(Planner, caseCostEqualsTheBuiltChainsCost) {
  for (const auto& file : catalogue()) {
    const CaseSpec spec = loadCase(file);
    const ChainCost fromSpec = caseChainCost(spec);
    const ChainCost fromChain =
        spec.dtype == DType::kFloat ? chainCost(buildChain<float>(spec)) : chainCost(buildChain<double>(spec));
    for (const char* policy : {"store-all", "uniform", "selective"}) {
      const Plan a = planSchedule(makeSchedule(parsePolicy(policy), fromSpec), fromSpec);
      const Plan b = planSchedule(makeSchedule(parsePolicy(policy), fromChain), fromChain);
      EXPECT_EQ(a.peakActivationBytes, b.peakActivationBytes) << file << " " << policy;
      EXPECT_EQ(a.flops, b.flops) << file << " " << policy;
      EXPECT_EQ(a.liveAfter, b.liveAfter) << file << " " << policy;
    }
  }
}

// Bytes a block holds after a taped forward from a held input: input, tape and output.
int64_t tapedBlockBytes(const BlockProgram& p) {
  BytePool pool;
  const int x = pool.allocate(p.inBytes);
  SimTape tape;
  simForward(pool, p, x, &tape, {});
  return pool.peak();
}

// Uniform holds at most K checkpoints and one segment's tapes (ceil(L/K) blocks) at a time; the constant covers
// the loss and one block's backward, i.e. a one-block chain's whole step.
RC_GTEST_PROP(Planner, uniformPeakWithinKPlusLOverKBlocks, ()) {
  const auto kind = *rc::gen::element(blockKind("mlp"), blockKind("residual-bn"), blockKind("transformer"));
  const int layers = *rc::gen::inRange(1, 60);
  const int k = *rc::gen::inRange(1, layers + 1);
  const CaseSpec spec = homogeneousSpec(kind, DType::kFloat);
  const ChainCost c = homogeneousChainCost(spec, layers);
  const ChainCost one = homogeneousChainCost(spec, 1);
  const int64_t block = tapedBlockBytes(c.block(0));
  const int64_t constant = planSchedule(storeAllSchedule(one), one).peakActivationBytes;
  const Plan p = planSchedule(uniformSchedule(c, k), c);
  const int64_t segment = (layers + k - 1) / k;
  RC_ASSERT(p.peakActivationBytes <= (k + segment) * block + constant);
}

TEST(Planner, uniformSqrtBeatsStoreAllOnDeepChains) {
  const ChainCost c = homogeneousChainCost(homogeneousSpec(blockKind("mlp"), DType::kFloat), 400);
  const int64_t all = planSchedule(storeAllSchedule(c), c).peakActivationBytes;
  const int64_t sqrtK = planSchedule(makeSchedule(parsePolicy("uniform"), c), c).peakActivationBytes;
  EXPECT_LT(sqrtK * 5, all);
}

TEST(Planner, plansAHundredThousandBlocks) {
  const ChainCost c = homogeneousChainCost(homogeneousSpec(blockKind("mlp"), DType::kFloat), 100000);
  const Plan p = planSchedule(makeSchedule(parsePolicy("uniform"), c), c);
  // k = round(sqrt(L)) = 316; the last segment [315 L / 316, L) = [99683, L) is taped at once, never recomputed.
  EXPECT_EQ(p.forwardEvals, 100000 + 99683);
}

int nodeOfKind(const BlockProgram& p, const std::string& kind) {
  for (int k = 0; k < p.size(); ++k)
    if (p.nodes[static_cast<size_t>(k)].kind == kind) return k;
  return -1;
}

TEST(Selective, defaultKeepsOnlyMatrixProducts) {
  const ChainCost c = homogeneousChainCost(homogeneousSpec(blockKind("transformer"), DType::kFloat), 2);
  const auto masks = selectiveMasks(c, {});
  ASSERT_EQ(masks.size(), 2u);
  const BlockProgram& p = c.block(0);
  for (int k = 0; k < p.size(); ++k)
    EXPECT_EQ(masks[0][static_cast<size_t>(k)], p.nodes[static_cast<size_t>(k)].kind == "linear")
        << p.nodes[static_cast<size_t>(k)].kind;
}

TEST(Selective, recomputeListDropsOnlyThoseKinds) {
  const ChainCost c = homogeneousChainCost(homogeneousSpec(blockKind("transformer"), DType::kFloat), 1);
  const auto masks = selectiveMasks(c, {"attention", "dropout"});
  const BlockProgram& p = c.block(0);
  for (int k = 0; k < p.size(); ++k) {
    const std::string& kind = p.nodes[static_cast<size_t>(k)].kind;
    EXPECT_EQ(masks[0][static_cast<size_t>(k)], kind != "attention" && kind != "dropout") << kind;
  }
}

// Under recompute=attention the tape holds no attention context: exactly its extras (probabilities and dropout
// mask) are missing from the live bytes, since the attention input stays kept for the recompute.
TEST(Selective, attentionProbabilitiesAreNotInTheTape) {
  const CaseSpec spec = homogeneousSpec(blockKind("transformer"), DType::kDouble);
  Chain<double> chain = buildChain<double>(spec);
  const ChainCost c = chainCost(chain);
  const KeepMask keep = selectiveMasks(c, {"attention"})[0];
  const int attn = nodeOfKind(c.block(0), "attention");
  ASSERT_GE(attn, 0);
  // Meters are declared before the tapes they charge, so they outlive them.
  ActivationMeter fullMeter, selectiveMeter;
  BlockTape<double> full, selective;
  auto liveAfterForward = [&](ActivationMeter& meter, const KeepMask& mask, BlockTape<double>& tape) {
    MeterScope scope(&meter);
    Tensor<double> x = Tensor<double>::from(chain.input);
    BlockEnv env{&chain.rng, 0, 0, true, {}, {}};
    Tensor<double> y = blockForward(chain.blocks[0], x, &tape, mask, env);
    return meter.live();
  };
  const int64_t fullBytes = liveAfterForward(fullMeter, {}, full);
  const int64_t selectiveBytes = liveAfterForward(selectiveMeter, keep, selective);
  EXPECT_TRUE(full.contexts[static_cast<size_t>(attn)].has_value());
  EXPECT_FALSE(selective.contexts[static_cast<size_t>(attn)].has_value());
  EXPECT_EQ(fullBytes - selectiveBytes, c.block(0).nodes[static_cast<size_t>(attn)].meta.contextExtraBytes);
  const Plan planned = planSchedule(makeSchedule(parsePolicy("selective:recompute=attention"), c), c);
  EXPECT_EQ(planned.flops.recompute, c.block(0).nodes[static_cast<size_t>(attn)].meta.forwardFlops);
}

}  // namespace
}  // namespace ckpt
