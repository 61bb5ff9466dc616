// The device path (harness/engine/executor.h's StepRunner over device/'s device ops, block runtime and
// counting allocator, through harness/engine/device_steps.h's DeviceRunner) run on the host emulator, the same code the
// GPU runs apart from kernel launch and cuBLAS. What CI proves here without a GPU:
//  - every policy's schedule gives the store-all schedule's loss, gradients, BatchNorm state and generator bit
//    for bit on the device runtime, for both generator models, over several steps (compareSteps), drop-path,
//    RReLU, bf16 compute and moe blocks (top-2, tight capacity, router jitter, aux-loss trackers) included;
//  - measured activation peak, per-phase FLOPs and forward evaluations equal the planner's exactly;
//  - device store-all agrees with the CPU reference trainer within kHostRtol (GEMM summation order), with the
//    generator state, FLOPs and activation peak equal exactly (a bf16 case's later steps: kBf16LaterStepRtol);
//  - recompute envs that redraw an op from the side stream, move moe's state again or drop bf16 compute run as on
//    the CPU engine;
//  - nothing leaks: the pool's live bytes return to their level before the step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "cases/case_json.h"
#include "cases/compute_precision.h"
#include "harness/compare.h"
#include "harness/dtype_dispatch.h"
#include "harness/engine/device_steps.h"
#include "harness/engine/executor.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "reference/trainer.h"
#include "tests/cuda_test_util.h"
#include "tests/test_util.h"

namespace ckpt::gpu::test {
namespace {

template <class T>
std::vector<StepResult<T>> runOnHostDevice(const CaseSpec& spec, const Schedule& s, int steps) {
  DeviceRunner<T> runner(Device::kCudaEmulated, spec);
  std::vector<StepResult<T>> rs;
  for (int k = 0; k < steps; ++k) {
    const int64_t liveBefore = runner.memory().liveBytes;
    rs.push_back(runner.step(s, k));
    EXPECT_EQ(runner.memory().liveBytes, liveBefore) << s.policy << " step " << k << ": device memory leaked";
  }
  return rs;
}

CaseSpec smallCase(BlockKind kind, RngModel rng, DType dtype) {
  CaseSpec c;
  c.name = std::string(blockKindName(kind)) + "-" + rngModelName(rng);
  c.batch = 2;
  c.seq = kind == blockKind("transformer") ? 4 : 3;
  c.width = 8;
  c.seed = 21;
  c.rng = rng;
  c.dtype = dtype;
  c.dropout = kind == blockKind("residual-bn") ? 0.0 : 0.2;
  c.loss = kind == blockKind("residual-bn") ? LossKind::kMse : LossKind::kCrossEntropy;
  c.lr = 0.05;
  c.steps = 2;
  for (int i = 0; i < 5; ++i) {
    BlockSpec b;
    b.kind = kind;
    b.activation = i % 3 == 0 ? Activation::kGelu : i % 3 == 1 ? Activation::kRelu : Activation::kTanh;
    b.heads = 2;
    c.blocks.push_back(b);
  }
  return c;
}

// A language-model case (cases/lm_case.h) from the gpt-tiny catalogue case: tied or untied, the embedding
// trained or frozen, M micro-batches; fewer steps and blocks than the catalogue's, to keep the emulator quick.
CaseSpec gptCase(bool tied, bool frozen, int64_t microBatches, int steps = 2) {
  CaseSpec c = loadCase(ckpt::test::catalogueCase("gpt-tiny").string());
  c.name += std::string(tied ? "" : "-untied") + (frozen ? "-frozen" : "") +
            (microBatches > 1 ? "-m" + std::to_string(microBatches) : "");
  c.tieEmbeddings = tied;
  c.inputGrad = !frozen;
  c.microBatches = microBatches;
  c.steps = steps;
  return c;
}

// Every default policy, bitwise against store-all on the device runtime, and measured == planned.
template <class T>
void checkEveryPolicy(const CaseSpec& spec) {
  SCOPED_TRACE("case " + spec.name);
  Chain<T> chain = buildChain<T>(spec);
  const ChainCost cost = chainCost(chain);
  const std::vector<StepResult<T>> base = runOnHostDevice<T>(spec, storeAllSchedule(cost), spec.steps);
  for (const std::string& policy : defaultPolicies(cost)) {
    SCOPED_TRACE("policy " + policy);
    const Schedule s = makeSchedule(parsePolicy(policy), cost);
    validateSchedule(s, cost);
    const Plan plan = planSchedule(s, cost);
    const std::vector<StepResult<T>> got = runOnHostDevice<T>(spec, s, spec.steps);
    const Comparison cmp = compareSteps(base, got);
    EXPECT_TRUE(cmp.bitwiseEqual) << (cmp.differences.empty() ? "" : toText(cmp.differences.front()));
    for (const auto& r : got) {
      EXPECT_EQ(r.peakActivationBytes, plan.peakActivationBytes) << "measured vs planned activation peak";
      EXPECT_EQ(r.flops, plan.stepFlops())
          << "measured vs planned FLOPs (forward " << r.flops.forward << "/" << plan.flops.forward << ", recompute "
          << r.flops.recompute << "/" << plan.flops.recompute << ", backward " << r.flops.backward << "/"
          << plan.flops.backward << ")";
      EXPECT_EQ(r.forwardEvals, plan.stepForwardEvals());
    }
  }
}

TEST(HostDeviceRuntime, EveryPolicyIsBitwiseStoreAllFloat) {
  for (BlockKind kind : blockKinds())
    for (RngModel rng : {RngModel::kStateful, RngModel::kCounter})
      checkEveryPolicy<float>(smallCase(kind, rng, DType::kFloat));
}

TEST(HostDeviceRuntime, EveryPolicyIsBitwiseStoreAllDouble) {
  for (BlockKind kind : blockKinds())
    for (RngModel rng : {RngModel::kStateful, RngModel::kCounter})
      checkEveryPolicy<double>(smallCase(kind, rng, DType::kDouble));
}

TEST(HostDeviceRuntime, EveryPolicyIsBitwiseStoreAllOnTinyCatalogueCase) {
  CaseSpec spec = loadCase(ckpt::test::catalogueCase("tiny").string());
  for (RngModel rng : {RngModel::kStateful, RngModel::kCounter}) {
    spec.rng = rng;
    withScalar(spec.dtype, [&](auto t) { checkEveryPolicy<decltype(t)>(spec); });
  }
}

// Language-model cases: the stem before block 0, the LM head as the loss, the tied weight's gradient sum and
// value copy, micro-batches and a frozen embedding, under every default policy and both generator models.
TEST(HostDeviceRuntime, EveryPolicyIsBitwiseStoreAllOnTokenCases) {
  for (RngModel rng : {RngModel::kStateful, RngModel::kCounter}) {
    CaseSpec spec = gptCase(true, false, 1);
    spec.rng = rng;
    checkEveryPolicy<float>(spec);
  }
  checkEveryPolicy<float>(gptCase(true, false, 2, 1));
  checkEveryPolicy<float>(gptCase(true, true, 1, 1));
  checkEveryPolicy<double>(gptCase(false, false, 2, 1));
  checkEveryPolicy<float>(gptCase(false, true, 1, 1));
}

// bf16 compute after the first step: the step before left parameters that differ from the CPU's in their last
// bits (summation order), and rounding an operand to bfloat16 turns such a difference, for the rare element near
// a rounding boundary, into one bf16 ulp (2^-8 of that element), which kHostRtol cannot absorb. Nothing correct
// is further off than bf16's own precision; the first step, whose parameters and input are the CPU's, is held
// to kHostRtol.
inline constexpr double kBf16LaterStepRtol = 1.0 / 256;

// Device steps against CPU steps: within kHostRtol (summation order; see kBf16LaterStepRtol for a bf16 case's
// later steps), generator, FLOPs, peak and forward evaluations exactly.
template <class T>
void checkNear(const std::vector<StepResult<T>>& ref, const std::vector<StepResult<T>>& dev, bool bf16 = false) {
  ASSERT_EQ(ref.size(), dev.size());
  for (size_t k = 0; k < ref.size(); ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    const StepResult<T>& a = dev[k];
    const StepResult<T>& b = ref[k];
    const double rtol = bf16 && k > 0 ? kBf16LaterStepRtol : kHostRtol<T>;
    EXPECT_TRUE(near("loss", &a.loss, &b.loss, 1, rtol));
    ASSERT_EQ(a.grads.size(), b.grads.size());
    const double floor = gradScale(b.grads);
    for (size_t i = 0; i < b.grads.size(); ++i) {
      ASSERT_EQ(a.grads[i].name, b.grads[i].name);
      EXPECT_TRUE(near("grad " + b.grads[i].name, a.grads[i].value.data(), b.grads[i].value.data(),
                       b.grads[i].value.size(), rtol, floor));
    }
    EXPECT_TRUE(near("input grad", a.inputGrad.data(), b.inputGrad.data(), b.inputGrad.size(), rtol));
    ASSERT_EQ(a.state.size(), b.state.size());
    for (size_t i = 0; i < b.state.size(); ++i)
      EXPECT_TRUE(near("state " + b.state[i].name, a.state[i].value.data(), b.state[i].value.data(),
                       b.state[i].value.size(), rtol));
    EXPECT_EQ(a.rng, b.rng) << "generator after the step";
    EXPECT_EQ(a.flops, b.flops);
    EXPECT_EQ(a.peakActivationBytes, b.peakActivationBytes);
    EXPECT_EQ(a.forwardEvals, b.forwardEvals);
  }
}

// Device store-all against the CPU reference trainer.
template <class T>
void checkAgainstReference(const CaseSpec& spec) {
  SCOPED_TRACE("case " + spec.name);
  Chain<T> chain = buildChain<T>(spec);
  const Schedule s = storeAllSchedule(chainCost(chain));
  checkNear(trainReference(chain, spec.steps), runOnHostDevice<T>(spec, s, spec.steps), bf16Compute(spec));
}

TEST(HostDeviceRuntime, StoreAllAgreesWithTheReferenceTrainer) {
  for (BlockKind kind : blockKinds()) {
    for (RngModel rng : {RngModel::kStateful, RngModel::kCounter}) {
      checkAgainstReference<float>(smallCase(kind, rng, DType::kFloat));
      checkAgainstReference<double>(smallCase(kind, rng, DType::kDouble));
    }
  }
  CaseSpec tiny = loadCase(ckpt::test::catalogueCase("tiny").string());
  checkAgainstReference<double>(tiny);
  // Gradient accumulation (cases/micro_batches.h): the device sums its micro-batches as the reference does.
  checkAgainstReference<float>(loadCase(ckpt::test::catalogueCase("resnet-accum").string()));
}

// Language-model cases against the CPU reference: the stem's scatter-add, the head, the tied sum (a lost head
// contribution or a missed copy of E into the head after SGD would put the embedding's gradient or the second
// step's loss far outside the tolerance), micro-batches, frozen embeddings with a tied and an untied head.
TEST(HostDeviceRuntime, TokenCasesAgreeWithTheReferenceTrainer) {
  checkAgainstReference<float>(loadCase(ckpt::test::catalogueCase("gpt-tiny").string()));
  checkAgainstReference<double>(gptCase(true, false, 1));
  checkAgainstReference<float>(gptCase(true, false, 2));
  checkAgainstReference<float>(gptCase(true, true, 1));
  checkAgainstReference<float>(gptCase(false, false, 1));
  checkAgainstReference<float>(gptCase(false, true, 2));
}

// What a token step reports on the device: the embeddings' and the head's gradients by name in model order
// (a tied head's weight is the embedding, so it has none of its own; a frozen embedding has none), and no input
// gradient (the stem consumed it, or the input takes none).
TEST(HostDeviceRuntime, TokenCasesReportTheReferencesGradientsAndNoInputGradient) {
  for (bool tied : {true, false})
    for (bool frozen : {false, true}) {
      const CaseSpec spec = gptCase(tied, frozen, 1, 1);
      SCOPED_TRACE(spec.name);
      Chain<float> chain = buildChain<float>(spec);
      const auto dev = runOnHostDevice<float>(spec, storeAllSchedule(chainCost(chain)), 1);
      std::vector<std::string> names;
      for (const auto& g : dev[0].grads) names.push_back(g.name);
      std::vector<std::string> want;
      for (auto* p : chain.trainedParams()) want.push_back(p->name);
      EXPECT_EQ(names, want);
      auto has = [&](const char* n) { return std::find(names.begin(), names.end(), n) != names.end(); };
      EXPECT_EQ(has("emb.weight"), !frozen);
      EXPECT_EQ(has("pos.weight"), !frozen);
      EXPECT_EQ(has("head.weight"), !tied);
      EXPECT_TRUE(has("head.ln.weight") && has("head.ln.bias"));
      EXPECT_EQ(dev[0].inputGrad.size(), 0);
    }
}

// The stochastic layers and bf16 compute (cases/stochastic_layers.h, cases/compute_precision.h) on smallCase:
// drop-path on the kinds with a residual branch (rates rising with depth), RReLU for the mlp's activations (a
// range other than the default), and bf16 matrix products when the dtype is float.
CaseSpec stochasticCase(BlockKind kind, RngModel rng, DType dtype) {
  CaseSpec c = smallCase(kind, rng, dtype);
  c.name += dtype == DType::kFloat ? "-stochastic-bf16" : "-stochastic";
  c.rreluLower = 0.1;
  c.rreluUpper = 0.4;
  if (dtype == DType::kFloat) c.compute = Compute::kBf16;
  for (size_t i = 0; i < c.blocks.size(); ++i) {
    BlockSpec& b = c.blocks[i];
    if (kind == blockKind("mlp")) b.activation = i % 2 == 0 ? Activation::kRrelu : b.activation;
    else b.dropPath = 0.2 + 0.1 * static_cast<double>(i);
  }
  return c;
}

// Whether the chain of `spec` holds an op of kind `op` (so the tests below run what they name).
bool holdsOp(const CaseSpec& spec, const std::string& op) {
  Chain<double> chain = buildChain<double>(spec);
  for (const auto& b : chain.blocks)
    for (const auto& n : b.nodes)
      if (n.op->kind() == op) return true;
  return false;
}

TEST(HostDeviceRuntime, EveryPolicyIsBitwiseStoreAllWithStochasticLayersAndBf16) {
  for (BlockKind kind : blockKinds())
    EXPECT_TRUE(holdsOp(stochasticCase(kind, RngModel::kStateful, DType::kDouble),
                        kind == blockKind("mlp") ? "rrelu" : "drop_path"))
        << blockKindName(kind);
  for (BlockKind kind : blockKinds())
    for (RngModel rng : {RngModel::kStateful, RngModel::kCounter}) {
      checkEveryPolicy<float>(stochasticCase(kind, rng, DType::kFloat));
      checkEveryPolicy<double>(stochasticCase(kind, rng, DType::kDouble));
    }
}

TEST(HostDeviceRuntime, StochasticLayersAndBf16AgreeWithTheReferenceTrainer) {
  for (BlockKind kind : blockKinds())
    for (RngModel rng : {RngModel::kStateful, RngModel::kCounter}) {
      checkAgainstReference<float>(stochasticCase(kind, rng, DType::kFloat));
      checkAgainstReference<double>(stochasticCase(kind, rng, DType::kDouble));
    }
}

// A recompute env that redraws one op kind from the side stream (BlockEnv::redrawOp) or drops bf16 compute, as
// mutants drop-path-redrawn, rrelu-slopes-regenerated and bf16-recompute-in-float set it.
class RecomputeEnvVariant final : public EngineVariant {
 public:
  RecomputeEnvVariant(std::string redrawOp, bool exactRecompute, std::string stateOp = "")
      : redrawOp_(std::move(redrawOp)), exact_(exactRecompute), stateOp_(std::move(stateOp)) {}
  BlockEnv recomputeEnv(BlockEnv env) const override {
    env.updateState = false;
    env.redrawOp = redrawOp_;
    env.stateOp = stateOp_;
    if (exact_) env.numerics.bf16Inputs = false;
    return env;
  }

 private:
  std::string redrawOp_;
  bool exact_;
  std::string stateOp_;
};

// The device honours those envs as the CPU engine does: the same side-stream draws (replacing both a block-level
// recompute's and an op-level recompute's), the same generator afterwards, the same float recompute, so a broken
// engine's step on the device is the CPU's broken step within kHostRtol.
template <class T>
void checkVariantAgainstCpu(const CaseSpec& spec, const std::string& policy, const EngineVariant& variant) {
  SCOPED_TRACE("case " + spec.name + ", policy " + policy);
  Chain<T> chain = buildChain<T>(spec);
  const Schedule s = makeSchedule(parsePolicy(policy), chainCost(chain));
  const std::vector<StepResult<T>> cpu = executeSteps(chain, s, spec.steps, variant);
  checkNear(cpu, deviceSteps<T>(Device::kCudaEmulated, spec, s, spec.steps, variant), bf16Compute(spec));
  const std::vector<StepResult<T>> storeAll = runOnHostDevice<T>(spec, storeAllSchedule(chainCost(chain)), spec.steps);
  EXPECT_FALSE(compareSteps(storeAll, deviceSteps<T>(Device::kCudaEmulated, spec, s, spec.steps, variant)).bitwiseEqual)
      << "the variant changed nothing on the device";
}

TEST(HostDeviceRuntime, RecomputeEnvVariantsRunAsOnTheCpu) {
  for (RngModel rng : {RngModel::kStateful, RngModel::kCounter}) {
    const CaseSpec dp = stochasticCase(blockKind("residual-bn"), rng, DType::kFloat);
    const CaseSpec rr = stochasticCase(blockKind("mlp"), rng, DType::kDouble);
    const CaseSpec tf = stochasticCase(blockKind("transformer"), rng, DType::kFloat);
    for (const char* policy : {"uniform", "selective"}) {
      checkVariantAgainstCpu<float>(dp, policy, RecomputeEnvVariant("drop_path", false));
      checkVariantAgainstCpu<double>(rr, policy, RecomputeEnvVariant("rrelu", false));
      checkVariantAgainstCpu<float>(tf, policy, RecomputeEnvVariant("", true));
    }
  }
}

// Mixture-of-experts blocks (reference/ops/moe.h) on smallCase's shapes: top-k, the capacity factor (0.5 drops
// assignments), router jitter (a random op), micro-batches (each pass's loss takes its own aux-loss trackers,
// zeroed at the pass's start) and, in float, bf16 compute.
CaseSpec moeCase(RngModel rng, DType dtype, int topK, double capacityFactor, double jitter, int64_t microBatches,
                 bool bf16 = false) {
  CaseSpec c = smallCase(blockKind("moe"), rng, dtype);
  c.name += "-top" + std::to_string(topK) + "-cf" + std::to_string(capacityFactor) + (jitter > 0 ? "-jitter" : "") +
            (microBatches > 1 ? "-m" + std::to_string(microBatches) : "") + (bf16 ? "-bf16" : "");
  c.batch = 4;  // 12 rows: micro-batches of 6
  c.microBatches = microBatches;
  if (bf16) c.compute = Compute::kBf16;
  for (size_t i = 0; i < c.blocks.size(); ++i) {
    BlockSpec& b = c.blocks[i];
    b.experts = i % 2 == 0 ? 4 : 3;
    b.topK = topK;
    b.capacityFactor = capacityFactor;
    b.routerJitter = jitter;
    b.auxLossCoef = 0.05 * static_cast<double>(i + 1);
  }
  return c;
}

std::vector<CaseSpec> moeCases(RngModel rng, DType dtype) {
  return {moeCase(rng, dtype, 2, 0.5, 0.1, 1), moeCase(rng, dtype, 1, 1.25, 0.0, 2),
          moeCase(rng, dtype, 2, 1.0, 0.2, 3, dtype == DType::kFloat)};
}

TEST(HostDeviceRuntime, EveryPolicyIsBitwiseStoreAllWithMoe) {
  for (const CaseSpec& c : moeCases(RngModel::kStateful, DType::kDouble)) EXPECT_TRUE(holdsOp(c, "moe")) << c.name;
  for (RngModel rng : {RngModel::kStateful, RngModel::kCounter}) {
    for (const CaseSpec& c : moeCases(rng, DType::kFloat)) checkEveryPolicy<float>(c);
    for (const CaseSpec& c : moeCases(rng, DType::kDouble)) checkEveryPolicy<double>(c);
  }
}

TEST(HostDeviceRuntime, MoeAgreesWithTheReferenceTrainer) {
  for (RngModel rng : {RngModel::kStateful, RngModel::kCounter}) {
    for (const CaseSpec& c : moeCases(rng, DType::kFloat)) checkAgainstReference<float>(c);
    for (const CaseSpec& c : moeCases(rng, DType::kDouble)) checkAgainstReference<double>(c);
  }
}

// The moe recompute envs the mutants set: jitter redrawn from the side stream, and a recompute that moves the
// moe's state again (BlockEnv::stateOp: its aux-loss tracker counted twice, its token counts too), in a
// block-level (uniform) and an op-level (selective, the moe op dropped) recompute: the device's broken step is the
// CPU's.
TEST(HostDeviceRuntime, MoeRecomputeEnvVariantsRunAsOnTheCpu) {
  for (RngModel rng : {RngModel::kStateful, RngModel::kCounter}) {
    const CaseSpec f = moeCase(rng, DType::kFloat, 2, 0.5, 0.1, 1);
    const CaseSpec d = moeCase(rng, DType::kDouble, 1, 1.25, 0.1, 2);
    for (const char* policy : {"uniform", "selective:recompute=moe"}) {
      checkVariantAgainstCpu<float>(f, policy, RecomputeEnvVariant("moe", false));
      checkVariantAgainstCpu<double>(d, policy, RecomputeEnvVariant("", false, "moe"));
    }
  }
}

// Micro-batches on the device: every policy bitwise equal to store-all under both generator models.
TEST(HostDeviceRuntime, EveryPolicyIsBitwiseStoreAllWithMicroBatches) {
  CaseSpec spec = loadCase(ckpt::test::catalogueCase("resnet-accum").string());
  spec.steps = 1;
  for (RngModel rng : {RngModel::kStateful, RngModel::kCounter}) {
    spec.rng = rng;
    checkEveryPolicy<float>(spec);
  }
}

// The transformer catalogue case (the benchmark's case), store-all vs uniform, on the device runtime.
TEST(HostDeviceRuntime, TransformerCatalogueCaseUniformIsBitwiseStoreAll) {
  CaseSpec spec = loadCase(ckpt::test::catalogueCase("transformer").string());
  spec.steps = 2;
  Chain<float> chain = buildChain<float>(spec);
  const ChainCost cost = chainCost(chain);
  const auto base = runOnHostDevice<float>(spec, storeAllSchedule(cost), spec.steps);
  const Schedule s = makeSchedule(parsePolicy("uniform"), cost);
  const auto got = runOnHostDevice<float>(spec, s, spec.steps);
  const Comparison cmp = compareSteps(base, got);
  EXPECT_TRUE(cmp.bitwiseEqual) << (cmp.differences.empty() ? "" : toText(cmp.differences.front()));
  EXPECT_EQ(got[0].peakActivationBytes, planSchedule(s, cost).peakActivationBytes);
  EXPECT_LT(got[0].peakActivationBytes, base[0].peakActivationBytes);
}

TEST(DevicePool, CountsLiveReservedAndReusesBlocks) {
  DevicePool pool(hostRawAlloc, hostRawFree, "test pool");
  void* a = pool.allocate(1000);
  void* b = pool.allocate(24);
  EXPECT_EQ(pool.stats().liveBytes, 1024);
  EXPECT_EQ(pool.stats().reservedBytes, 1024 + 512);
  EXPECT_EQ(pool.stats().rawAllocations, 2);
  pool.release(a, 1000);
  EXPECT_EQ(pool.stats().liveBytes, 24);
  EXPECT_EQ(pool.stats().peakLiveBytes, 1024);
  void* c = pool.allocate(1001);  // same rounded size: the cached block comes back
  EXPECT_EQ(c, a);
  EXPECT_EQ(pool.stats().rawAllocations, 2);
  pool.release(c, 1001);
  pool.release(b, 24);
  pool.emptyCache();
  EXPECT_EQ(pool.stats().reservedBytes, 0);
  EXPECT_EQ(pool.stats().liveBytes, 0);
  EXPECT_EQ(pool.stats().peakReservedBytes, 1536);
}

}  // namespace
}  // namespace ckpt::gpu::test
