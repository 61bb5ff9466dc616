#include "cases/coverage.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cases/block_kind.h"
#include "cases/lm_case.h"
#include "cases/compute_precision.h"
#include "cases/micro_batches.h"
#include "cases/stochastic_layers.h"
#include "cases/param_sharing.h"

namespace ckpt {
namespace {

bool powerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }
// The default segment count of uniform (and of PyTorch's checkpoint_sequential recipes): round(sqrt(L)).
int64_t defaultSegments(const CaseSpec& c) { return std::llround(std::sqrt(static_cast<double>(c.blocks.size()))); }

}  // namespace

// Features of the whole case; the block kinds' own lines (BlockKindDef::coverage) go after the chain-length
// ones: first "a block of this kind" for every kind, then each kind's field values, in table order.
const std::vector<CoverageFeature>& coverageFeatures() {
  static const std::vector<CoverageFeature> all = [] {
    // Captureless lambdas: the lists are data, one line per feature.
    const std::vector<CoverageFeature> chain = {
        {"one_block", "a single block (L = 1)", [](const CaseSpec& c) { return c.blocks.size() == 1; }},
        {"segments_3", ">= 3 segments under round(sqrt(L)) (L >= 7)",
         [](const CaseSpec& c) { return defaultSegments(c) >= 3; }},
        {"segments_5", ">= 5 segments under round(sqrt(L)) (L >= 21)",
         [](const CaseSpec& c) { return defaultSegments(c) >= 5; }},
    };
    const std::vector<CoverageFeature> rest = {
        {"width_odd", "odd width", [](const CaseSpec& c) { return c.width % 2 == 1; }},
        {"width_not_pow2", "width not a power of two (1/C inexact)",
         [](const CaseSpec& c) { return !powerOfTwo(c.width); }},
        {"rows_not_pow2", "batch * seq not a power of two (1/N inexact)",
         [](const CaseSpec& c) { return !powerOfTwo(c.rows()); }},
        {"batch_1", "batch 1", [](const CaseSpec& c) { return c.batch == 1; }},
        {"batch_odd_3", "odd batch >= 3", [](const CaseSpec& c) { return c.batch >= 3 && c.batch % 2 == 1; }},
        {"seq_4", "seq >= 4", [](const CaseSpec& c) { return c.seq >= 4; }},
        {"dropout_off", "dropout off", [](const CaseSpec& c) { return c.dropout == 0; }},
        {"dropout_small", "dropout 0 < p < 0.15", [](const CaseSpec& c) { return c.dropout > 0 && c.dropout < 0.15; }},
        {"dropout_mid", "dropout 0.15 <= p < 0.5",
         [](const CaseSpec& c) { return c.dropout >= 0.15 && c.dropout < 0.5; }},
        {"dropout_large", "dropout p >= 0.5", [](const CaseSpec& c) { return c.dropout >= 0.5; }},
        {"steps_2", "2+ training steps", [](const CaseSpec& c) { return c.steps >= 2; }},
        {"lr_other", "a learning rate other than 0.05", [](const CaseSpec& c) { return c.lr != 0.05; }},
        {"rng_stateful", "stateful generator", [](const CaseSpec& c) { return c.rng == RngModel::kStateful; }},
        {"rng_counter", "counter-based generator", [](const CaseSpec& c) { return c.rng == RngModel::kCounter; }},
        {"float", "float", [](const CaseSpec& c) { return c.dtype == DType::kFloat; }},
        {"double", "double", [](const CaseSpec& c) { return c.dtype == DType::kDouble; }},
        {"cross_entropy", "cross-entropy loss", [](const CaseSpec& c) { return c.loss == LossKind::kCrossEntropy; }},
        {"mse", "MSE loss", [](const CaseSpec& c) { return c.loss == LossKind::kMse; }},
        {"frozen", "a frozen block", [](const CaseSpec& c) { return hasFrozenBlock(c); }},
        {"shared_3", "parameters used by >= 3 blocks (their gradient's sum order matters)",
         [](const CaseSpec& c) {
           for (const ShareGroup& g : shareGroups(c))
             if (g.users.size() >= 3) return true;
           return false;
         }},
        {"no_input_grad", "an input without gradient", [](const CaseSpec& c) { return !c.inputGrad; }},
        {"no_grad_boundary", "a block whose input requires no gradient (input without gradient, frozen blocks)",
         [](const CaseSpec& c) { return !boundaryRequiresGrad(c, 1) && c.blocks.size() > 1; }},
        {"micro_batches", "gradients accumulated over >= 2 micro-batches",
         [](const CaseSpec& c) { return hasMicroBatches(c); }},
        {"micro_batches_dropout", "micro-batches with dropout (one generator through them)",
         [](const CaseSpec& c) { return hasMicroBatches(c) && c.dropout > 0; }},
        {"tokens", "a language-model case (token embedding, LM head)",
         [](const CaseSpec& c) { return isLanguageModel(c); }},
        {"tied_head", "an LM head tied to the token embedding", [](const CaseSpec& c) { return tiedHead(c); }},
        {"frozen_embedding", "a frozen token embedding",
         [](const CaseSpec& c) { return isLanguageModel(c) && !c.inputGrad; }},
        {"drop_path", "a block with drop-path (stochastic depth)", [](const CaseSpec& c) { return anyDropPath(c); }},
        {"bf16_compute", "matrix products in bfloat16 (autocast)", [](const CaseSpec& c) { return bf16Compute(c); }},
    };
    std::vector<CoverageFeature> all = chain;
    for (const BlockKindDef* d : blockKinds()) all.push_back(d->coverage.at(0));
    for (const BlockKindDef* d : blockKinds()) all.insert(all.end(), d->coverage.begin() + 1, d->coverage.end());
    all.insert(all.end(), rest.begin(), rest.end());
    return all;
  }();
  return all;
}

uint64_t coverageBits(const CaseSpec& c) {
  const auto& f = coverageFeatures();
  uint64_t bits = 0;
  for (size_t k = 0; k < f.size() && k < 64; ++k)
    if (f[k].has(c)) bits |= uint64_t{1} << k;
  return bits;
}

void Coverage::addBits(uint64_t bits) {
  ++cases_;
  for (size_t k = 0; k < counts_.size(); ++k)
    if (bits & (uint64_t{1} << k)) ++counts_[k];
}

nlohmann::json Coverage::toJson() const {
  nlohmann::json features = nlohmann::json::object();
  const auto& f = coverageFeatures();
  for (size_t k = 0; k < f.size(); ++k) features[f[k].id] = {{"cases", counts_[k]}, {"text", f[k].text}};
  return {{"cases", cases_}, {"features", features}};
}

Coverage Coverage::fromJson(const nlohmann::json& j) {
  Coverage c;
  c.cases_ = j.value("cases", int64_t{0});
  const auto& f = coverageFeatures();
  if (j.contains("features") && j["features"].is_object())
    for (size_t k = 0; k < f.size(); ++k)
      if (j["features"].contains(f[k].id)) c.counts_[k] = j["features"][f[k].id].value("cases", int64_t{0});
  return c;
}

std::string Coverage::toText(const std::string& indent) const {
  std::string out = indent + "coverage of " + std::to_string(cases_) + " checked case(s):\n";
  std::string never;
  const auto& f = coverageFeatures();
  for (size_t k = 0; k < f.size(); ++k) {
    char line[160];
    const double pct = cases_ ? 100.0 * static_cast<double>(counts_[k]) / static_cast<double>(cases_) : 0.0;
    std::snprintf(line, sizeof line, "%s  %6lld (%5.1f%%)  %s\n", indent.c_str(), static_cast<long long>(counts_[k]),
                  pct, f[k].text);
    out += line;
    if (counts_[k] == 0) never += (never.empty() ? "" : "; ") + std::string(f[k].text);
  }
  out += indent + (never.empty() ? "every feature was covered" : "NOT covered: " + never) + "\n";
  return out;
}

}  // namespace ckpt
