// The class of a difference that merely sits in a stochastic block (harness/verify/draws_replayed.h): a wrong
// non-random computation in a drop-path block (the recompute's tape applies each sample's decision to the next
// sample's rows) or in an moe block (the recompute's tape keeps one slot fewer per expert, a capacity rounded
// down) is `semantic`, in a trial and in verify's search, while the draws' own bugs (drop-path-redrawn,
// moe-jitter-redrawn) stay `rng-desync` on the same cases. The old rerun, with the draws off
// (randomnessOff: no drop-path node, no jitter), let both test bugs vanish and blamed the draws; the tests show
// that it would have. The rerun forwards every EngineVariant hook but the generator's (checked on the source).
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <regex>
#include <set>

#include "cases/case_json.h"
#include "cases/stochastic_layers.h"
#include "harness/mutants/catalog.h"
#include "harness/verify/properties.h"
#include "harness/verify/search.h"
#include "tests/test_util.h"

namespace ckpt {
namespace {

// A saved tensor's elements in storage order (a hook sees one element at a time).
std::vector<double> readTensor(StepView& v, int block, int node, int tensor) {
  std::vector<double> values;
  v.mapContextTensor(block, node, tensor, [&](double x) {
    values.push_back(x);
    return x;
  });
  return values;
}

// Rewrites one saved tensor of each recomputed tape's `kind` nodes through `edit`.
class TapeEdit : public EngineVariant {
 public:
  TapeEdit(std::string name, std::string kind, int tensor)
      : name_(std::move(name)), kind_(std::move(kind)), t_(tensor) {}
  std::string name() const override { return name_; }
  void afterForward(int block, bool recompute, StepView& v) const override {
    if (!recompute || !v.hasTape(block)) return;
    for (int node = 0; node < v.tapeNodes(block); ++node) {
      if (v.nodeKind(block, node) != kind_ || v.contextTensors(block, node) <= t_) continue;
      const std::vector<double> edited = edit(readTensor(v, block, node, t_), v, block, node);
      size_t k = 0;
      v.mapContextTensor(block, node, t_, [&](double) { return edited[k++]; });
    }
  }

 protected:
  virtual std::vector<double> edit(const std::vector<double>& values, StepView& v, int block, int node) const = 0;

 private:
  std::string name_, kind_;
  int t_;
};

// DropPath's context is its per-sample scales (reference/ops/drop_path.h): rotated by one sample, so the backward
// applies sample s + 1's decision to sample s's rows. No random number is involved.
class DropPathRowsShifted final : public TapeEdit {
 public:
  DropPathRowsShifted() : TapeEdit("test-drop-path-rows-shifted", "drop_path", 0) {}

 protected:
  std::vector<double> edit(const std::vector<double>& scales, StepView&, int, int) const override {
    std::vector<double> out(scales.size());
    for (size_t s = 0; s < scales.size(); ++s) out[s] = scales[(s + 1) % scales.size()];
    return out;
  }
};

// Moe's context tensor 2 is the routing, (experts, capacity) token indices, -1 for an empty slot
// (reference/ops/moe.h): each expert's last slot emptied, the backward of an expert one slot smaller than the
// forward's (capacity rounded down in the recompute; like moeCapacity's clamp, never below one slot, so no expert
// is left without tokens, which would read as a missing gradient). Tensor 4 is frac, one value per expert.
class MoeCapacityShort final : public TapeEdit {
 public:
  MoeCapacityShort() : TapeEdit("test-moe-capacity-short", "moe", 2) {}

 protected:
  std::vector<double> edit(const std::vector<double>& token, StepView& v, int block, int node) const override {
    std::vector<double> out = token;
    const size_t experts = readTensor(v, block, node, 4).size(), capacity = token.size() / experts;
    if (capacity < 2) return out;
    for (size_t e = 0; e < experts; ++e) out[e * capacity + capacity - 1] = -1;
    return out;
  }
};

CaseSpec caseOf(const std::string& json) { return parseCase(nlohmann::json::parse(json)); }

// Block 0 carries the stochastic layer; uniform:k=2 recomputes it.
CaseSpec dropPathCase() {
  return caseOf(R"({"name": "dp", "dtype": "double", "batch": 4, "seq": 1, "width": 4, "dropout": 0, "seed": 3,
                    "blocks": [{"kind": "residual-bn", "drop_path": 0.5}, {"kind": "mlp", "activation": "tanh"}]})");
}
// 8 tokens, 2 experts of 6 slots: the jittered routing fills an expert past 5, the plain one does not.
CaseSpec moeCase() {
  return caseOf(R"({"name": "moe", "dtype": "double", "batch": 4, "seq": 2, "width": 4, "dropout": 0, "seed": 9,
                    "blocks": [{"kind": "moe", "experts": 2, "top_k": 1, "capacity_factor": 1.5,
                                "router_jitter": 0.5}, {"kind": "mlp", "activation": "tanh"}]})");
}

std::string classOf(const CaseSpec& spec, const EngineVariant& engine) {
  const auto v = checkProperty(findProperty("bitwise-equal"), runTrial(spec, {"uniform:k=2"}, engine));
  if (!v) return "no finding";
  return v->diagnosis ? findingClassName(v->diagnosis->cls) + std::string(": ") + v->diagnosis->why : "no class";
}

bool startsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// The wrong computation is semantic, and vanishes with the draws off (so the old rerun would have called it
// rng-desync); the draws' own bug in the same block, on the same case, is rng-desync.
void expectSemanticBesideRngDesync(const CaseSpec& spec, const EngineVariant& wrong, const std::string& redraw) {
  ASSERT_TRUE(drawsRandomNumbers(spec));
  EXPECT_TRUE(startsWith(classOf(spec, wrong), "semantic: ")) << classOf(spec, wrong);
  EXPECT_EQ(classOf(randomnessOff(spec), wrong), "no finding");
  const auto redrawn = findMutant(redraw)->make();
  EXPECT_TRUE(startsWith(classOf(spec, *redrawn), "rng-desync: ")) << classOf(spec, *redrawn);
}

// With the draws off there is no drop-path node for the bug to act on.
TEST(DrawsReplayed, aWrongDropPathRowIsSemanticAndARedrawnDecisionRngDesync) {
  expectSemanticBesideRngDesync(dropPathCase(), DropPathRowsShifted(), "drop-path-redrawn");
}

// Without the jitter the routing fills no expert's last slot.
TEST(DrawsReplayed, aShortMoeCapacityIsSemanticAndRedrawnJitterRngDesync) {
  expectSemanticBesideRngDesync(moeCase(), MoeCapacityShort(), "moe-jitter-redrawn");
}

// verify's own search with each test variant as its engine: the first finding is classed semantic.
TEST(DrawsReplayed, verifyClassesBothTestBugsSemantic) {
  const DropPathRowsShifted shifted;
  const MoeCapacityShort shortened;
  for (const EngineVariant* engine : std::initializer_list<const EngineVariant*>{&shifted, &shortened}) {
    VerifyOptions o;
    o.cases = 100;
    o.seed = 1;
    o.engine = engine;
    o.catalogue = false;
    o.maxShrinkTrials = 0;
    const VerifyReport r = runVerify(o);
    ASSERT_TRUE(r.finding) << engine->name();
    ASSERT_TRUE(r.finding->violation.diagnosis) << engine->name() << ": " << r.finding->violation.message;
    EXPECT_STREQ(findingClassName(r.finding->violation.diagnosis->cls), "semantic")
        << engine->name() << " at " << r.finding->origin << ": " << r.finding->violation.diagnosis->why;
  }
}

// DrawsReplayed overrides every hook of EngineVariant: a hook added later and not forwarded would be run as the
// correct engine's in the rerun, and a bug in it read as a draw.
TEST(DrawsReplayed, forwardsEveryHook) {
  auto hooks = [](const std::string& text, const std::regex& re) {
    std::set<std::string> names;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
      names.insert((*it)[1]);
    return names;
  };
  const std::string variant = test::readFile(test::sourceDir() / "harness/engine/engine_variant.h");
  const size_t from = variant.find("class EngineVariant {");
  ASSERT_NE(from, std::string::npos);
  const std::string body = variant.substr(from, variant.find("\n};", from) - from);
  const auto declared = hooks(body, std::regex(R"(virtual [^(]*?(\w+)\()"));
  const auto forwarded = hooks(test::readFile(test::sourceDir() / "harness/verify/draws_replayed.h"),
                               std::regex(R"((\w+)\([^)]*\)[^;{]*override)"));
  std::set<std::string> want = declared;
  want.erase("EngineVariant");  // the destructor
  EXPECT_GE(want.size(), 12u);  // the regex reads them all: 12 hooks since property 5 plans through the trial
  EXPECT_EQ(forwarded, want);
}

}  // namespace
}  // namespace ckpt
