// The C++ half of `validate --adapter torch:module=...` without PyTorch: the module= spec, and the comparison of
// two run dumps (harness/user_model/user_model_run.h) on hand-written .npy files — the first difference by module
// path, an absent gradient, integer counters, the evidence diagnose() gets, a malformed dump.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/input_error.h"
#include "harness/validate/case_dir.h"
#include "harness/validate/npy.h"
#include "harness/user_model/user_model_jax.h"
#include "harness/user_model/user_model_run.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;

fs::path tempDir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("ckpt_user_model_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(UserModelSpec, parsesModuleAndFactoryFromAdapterOrOption) {
  const fs::path d = tempDir("spec");
  const std::string py = (d / "my:model.py").string();  // a ':' in the path itself
  std::ofstream(py) << "def f(seed): pass\n";
  const UserModelSpec a = parseUserModelSpec("torch:module=" + py + ":make_it", {});
  EXPECT_EQ(a.module, py);
  EXPECT_EQ(a.factory, "make_it");
  const UserModelSpec b = parseUserModelSpec("torch", {"module=" + py});
  EXPECT_EQ(b.factory, "factory");
  EXPECT_TRUE(isUserModelSpec("torch:module=x.py", {}));
  EXPECT_TRUE(isUserModelSpec("torch", {"module=x.py"}));
  EXPECT_FALSE(isUserModelSpec("torch:use_reentrant=1", {"segments=2"}));
  EXPECT_EQ(a.framework, "torch");
  const UserModelSpec j = parseUserModelSpec("jax:module=" + py + ":remat", {});  // the JAX driver, same spec
  EXPECT_EQ(j.framework, "jax");
  EXPECT_EQ(j.factory, "remat");
}

TEST(UserModelSpec, badSpecsAreOneLineInputErrors) {
  const fs::path d = tempDir("badspec");
  std::ofstream(d / "m.py") << "\n";
  const std::string py = (d / "m.py").string();
  auto message = [](const std::string& adapter, std::vector<std::string> options = {}) {
    try {
      parseUserModelSpec(adapter, options);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message("torch:module=" + (d / "nope.py").string()).find("does not exist"), std::string::npos);
  EXPECT_NE(message("numpy:module=" + py).find("torch and jax adapters only"), std::string::npos);
  EXPECT_NE(message("torch:module=" + py + ",use_reentrant=1").find("'use_reentrant': not available"),
            std::string::npos);
  EXPECT_NE(message("torch:module=" + py + ":").find("empty factory name"), std::string::npos);
  EXPECT_NE(message("torch", {"module="}).find("needs a PATH.py"), std::string::npos);
}

// A run directory as the driver writes it: index entries and their .npy files.
class Dump {
 public:
  explicit Dump(const fs::path& dir) { d_.dir = dir.string(); }
  void floats(int step, const std::string& kind, const std::string& name, std::vector<float> v) {
    const std::string rel = "s" + std::to_string(step) + "_" + kind + "_" + name + ".npy";
    writeNpy(d_.dir + "/" + rel, {static_cast<int64_t>(v.size())}, v.data());
    d_.tensors.push_back({step, kind, name, rel});
  }
  void counter(int step, const std::string& name, int64_t v) {
    const std::string rel = "s" + std::to_string(step) + "_buffer_" + name + ".npy";
    writeNpyInt64(d_.dir + "/" + rel, {}, &v);
    d_.tensors.push_back({step, "buffer", name, rel});
  }
  void absent(int step, const std::string& kind, const std::string& name) {
    d_.tensors.push_back({step, kind, name, ""});
  }
  RunDump& dump() { return d_; }

 private:
  RunDump d_;
};

// One step of a two-parameter model with a BatchNorm: loss, gradients, running mean and counter, dropout mask.
void oneStep(Dump& d, int step, float gradScale, float runningMean, int64_t batches, bool gradAbsent = false,
             std::vector<float> mask = {1.0f, 0.0f}) {
  d.floats(step, "loss", "loss", {0.75f});
  d.floats(step, "grad", "fc.weight", {0.5f, -0.25f});
  if (gradAbsent) d.absent(step, "grad", "layer1.0.conv1.weight");
  else d.floats(step, "grad", "layer1.0.conv1.weight", {gradScale, 1.0f});
  d.floats(step, "buffer", "layer1.0.bn1.running_mean", {runningMean, 0.0f});
  d.counter(step, "layer1.0.bn1.num_batches_tracked", batches);
  d.floats(step, "mask", "drop", std::move(mask));
}

TEST(UserModelDumps, equalDumpsHaveNoDifference) {
  Dump a(tempDir("eq-a")), b(tempDir("eq-b"));
  oneStep(a, 0, 2.0f, 0.1f, 1);
  oneStep(b, 0, 2.0f, 0.1f, 1);
  const DumpComparison c = compareDumps(a.dump(), b.dump());
  EXPECT_TRUE(c.differences.empty());
  EXPECT_FALSE(c.firstStep);
  EXPECT_TRUE(c.evidence.empty());
}

TEST(UserModelDumps, firstDifferenceIsNamedByModulePathAndStep) {
  Dump a(tempDir("diff-a")), b(tempDir("diff-b"));
  oneStep(a, 0, 2.0f, 0.1f, 1);
  oneStep(b, 0, 2.0f, 0.1f, 1);
  oneStep(a, 1, 2.0f, 0.19f, 2);
  oneStep(b, 1, 2.0f, 0.271f, 3);  // step 1: the running statistics moved once more
  oneStep(a, 2, 1.0f, 0.2f, 3);
  oneStep(b, 2, 3.0f, 0.3f, 4);  // later steps are not listed
  const DumpComparison c = compareDumps(a.dump(), b.dump());
  ASSERT_EQ(c.differences.size(), 2u);
  EXPECT_EQ(*c.firstStep, 1);
  EXPECT_EQ(c.differences[0].tensor, "buffer layer1.0.bn1.running_mean");
  EXPECT_EQ(c.differences[0].step, 1);
  EXPECT_EQ(c.differences[0].count, 1);
  EXPECT_EQ(c.differences[1].tensor, "buffer layer1.0.bn1.num_batches_tracked");
  EXPECT_EQ(c.differences[1].ulpDistance, 1u);
  ASSERT_EQ(c.evidence.size(), 2u);
  EXPECT_EQ(c.evidence[0].kind, TensorKind::kState);
  EXPECT_EQ(c.evidence[0].before, (std::vector<double>{0.1f, 0.0f}));  // the plain value of step 0
  EXPECT_FALSE(c.evidence[1].floating);
  EXPECT_EQ(c.evidence[1].before, (std::vector<double>{1}));
}

TEST(UserModelDumps, absentGradientAndMaskAreEvidence) {
  Dump a(tempDir("abs-a")), b(tempDir("abs-b"));
  oneStep(a, 0, 2.0f, 0.1f, 1);
  oneStep(b, 0, 2.0f, 0.1f, 1, /*gradAbsent=*/true, /*mask=*/{0.0f, 1.0f});
  const DumpComparison c = compareDumps(a.dump(), b.dump());
  ASSERT_EQ(c.differences.size(), 1u);  // a mask alone is never a difference
  EXPECT_EQ(c.differences[0].tensor, "grad layer1.0.conv1.weight");
  EXPECT_EQ(c.differences[0].shape, "present vs absent");
  ASSERT_EQ(c.evidence.size(), 2u);
  EXPECT_FALSE(c.evidence[0].otherPresent);
  EXPECT_EQ(c.evidence[1].kind, TensorKind::kMask);
  EXPECT_EQ(diagnose(c.evidence, 64).cls, FindingClass::kMissingGradient);
}

TEST(UserModelDumps, aMissingFileIsAnAdapterError) {
  Dump a(tempDir("bad-a")), b(tempDir("bad-b"));
  oneStep(a, 0, 2.0f, 0.1f, 1);
  oneStep(b, 0, 2.0f, 0.1f, 1);
  fs::remove(fs::path(b.dump().dir) / b.dump().tensors[1].file);
  EXPECT_THROW(compareDumps(a.dump(), b.dump()), AdapterError);
}

// The placement bound: recomputed = called more often when checkpointed (outermost kept); bound = storages the
// plain run packs outside them plus their inputs, each once.
TEST(UserModelPlacement, boundIsWhatPlainSavesOutsideTheRecomputedModulesPlusTheirInputs) {
  RunDump plain, ckpt;
  plain.placement = Placement{};
  plain.placement->calls = {{"stem", 1}, {"blocks.0", 1}, {"blocks.0.fc", 1}, {"head", 2}};
  plain.placement->inputs = {{"blocks.0", {{100, 64}}}, {"blocks.0.fc", {{100, 64}}}};
  plain.placement->packs = {{100, 64, {"blocks.0", "blocks.0.fc"}},   // the block's input, saved inside it...
                            {100, 64, {"head"}},                      // ...and again outside: kept
                            {200, 512, {"blocks.0", "blocks.0.fc"}},  // only inside: recomputed instead
                            {300, 32, {}},                            // the loss
                            {400, 128, {"head"}}};
  ckpt.placement = Placement{};
  ckpt.placement->calls = {{"stem", 1}, {"blocks.0", 2}, {"blocks.0.fc", 2}, {"head", 2}};  // head: twice in both
  const auto b = placementBound(plain, ckpt);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->recomputed, (std::vector<std::string>{"blocks.0"}));
  EXPECT_EQ(b->bytes, 64 + 32 + 128);

  ckpt.placement->calls["blocks.0"] = 1;  // nothing recomputed at module level: no bound
  ckpt.placement->calls["blocks.0.fc"] = 1;
  EXPECT_FALSE(placementBound(plain, ckpt));
  ckpt.placement.reset();  // no record (torch.compile): no bound
  EXPECT_FALSE(placementBound(plain, ckpt));
}

// JAX's tolerance judges the gradients, not the parameters after the update: Adam turns a last-bit change of a
// near-zero gradient into a full step. A missing gradient or a large gradient difference is still no rounding.
TEST(UserModelJax, gradientsJudgedParametersAfterTheUpdateNot) {
  const auto t = [](TensorKind kind, std::vector<double> plain, std::vector<double> other) {
    TensorEvidence e;
    e.name = kind == TensorKind::kParameter ? "param w" : "grad w";
    e.kind = kind;
    e.plain = std::move(plain);
    e.other = std::move(other);
    return e;
  };
  const double ulp1 = std::ldexp(1.0, -23);  // one float32 ULP at 1.0
  const std::vector<TensorEvidence> rounding = {t(TensorKind::kGradient, {1.0, 0.5}, {1.0 + 3 * ulp1, 0.5}),
                                                t(TensorKind::kParameter, {1e-3, 2.0}, {-1e-3, 2.0})};
  EXPECT_EQ(diagnose(rounding, 16).cls, FindingClass::kSemantic);  // the parameters alone would say semantic
  const auto d = gradientsWithinScale(rounding, 16);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->cls, FindingClass::kRoundingLevel);
  EXPECT_EQ(d->worstScaledUlp, 3.0);
  EXPECT_FALSE(gradientsWithinScale({t(TensorKind::kGradient, {1.0, 0.5}, {1.0 + 40 * ulp1, 0.5})}, 16));
  EXPECT_FALSE(gradientsWithinScale({t(TensorKind::kGradient, {1.0, 0.5}, {0.0, 0.0})}, 16));  // missing
  EXPECT_FALSE(gradientsWithinScale({t(TensorKind::kParameter, {1.0}, {2.0})}, 16));           // no gradient differs
}

}  // namespace
}  // namespace ckpt
