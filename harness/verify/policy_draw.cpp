#include "harness/verify/policy_draw.h"

#include <algorithm>

#include "common/input_error.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "harness/policies/optimal.h"

namespace ckpt {
namespace {

// 1 + permille of [0, n - 1]: 0 -> 1, 1000 -> n.
int fraction(int permille, int n) {
  return 1 + static_cast<int>(static_cast<int64_t>(std::clamp(permille, 0, 1000)) * (n - 1) / 1000);
}

std::string selectiveText(const PolicyDraw& d) {
  const auto& kinds = selectableOpKinds();
  std::string list;
  for (size_t k = 0; k < kinds.size() && k < 32; ++k)
    if (d.selectiveKinds & (uint32_t{1} << k)) list += (list.empty() ? "" : ",") + kinds[k];
  return list.empty() ? "selective" : "selective:recompute=" + list;
}

// least + permille of [least, store-all's peak], both with the op-level masks the tapes will carry.
int64_t budgetFor(const PolicyDraw& d, const ChainCost& c, const std::vector<KeepMask>& keep) {
  Schedule all = storeAllSchedule(c);
  all.keep = keep;
  const int64_t full = planSchedule(all, c).peakActivationBytes;
  const int64_t least = std::min(full, optimalMinBudget(c, keep));
  return least + (full - least) * std::clamp(d.optimalBudget, 0, 1000) / 1000;
}

std::string blockPolicy(const std::string& name, const PolicyDraw& d, const ChainCost& c, bool composed) {
  const int n = c.layers();
  if (name == "store-all" || name == "recursive") return name;
  if (name == "uniform") return "uniform:k=" + std::to_string(fraction(d.uniformK, n));
  if (name == "revolve") return "revolve:slots=" + std::to_string(fraction(d.revolveSlots, n));
  if (name == "optimal") {
    std::vector<KeepMask> keep;
    if (composed) keep = selectiveMasks(c, parsePolicy(selectiveText(d)).recomputeKinds);
    return "optimal:budget=" + std::to_string(budgetFor(d, c, keep));
  }
  throw InputError("unknown policy family '" + name + "'");
}

const std::vector<std::string> kBlockFamilies = {"uniform", "recursive", "revolve", "optimal"};

}  // namespace

const std::vector<std::string>& policyFamilies() {
  static const std::vector<std::string> all = {"store-all",         "uniform",           "recursive",
                                               "revolve",           "optimal",           "selective",
                                               "composed",          "uniform+selective", "recursive+selective",
                                               "revolve+selective", "optimal+selective"};
  return all;
}

const std::vector<std::string>& defaultPolicyFamilies() {
  static const std::vector<std::string> all = {"store-all", "uniform",   "recursive", "revolve",
                                               "optimal",   "selective", "composed"};
  return all;
}

bool isPolicyFamily(const std::string& name) {
  const auto& f = policyFamilies();
  return std::find(f.begin(), f.end(), name) != f.end();
}

void checkPolicyFamily(const std::string& item) {
  if (item.find(':') != std::string::npos) {
    parsePolicy(item);
    return;
  }
  if (isPolicyFamily(item)) return;
  std::string known;
  for (const auto& f : policyFamilies()) known += (known.empty() ? "" : ", ") + f;
  throw InputError("unknown policy family '" + item + "' (known: " + known + "; or a policy string with ':')");
}

std::string resolvePolicy(const std::string& family, const PolicyDraw& d, const ChainCost& c) {
  checkPolicyFamily(family);
  if (family.find(':') != std::string::npos) return parsePolicy(family).text;  // a fixed policy string
  if (family == "selective") return selectiveText(d);
  if (family == "composed") return blockPolicy(kBlockFamilies[static_cast<size_t>(std::clamp(d.composedWith, 0, 3))], d, c, true) + "+" + selectiveText(d);
  const size_t plus = family.find("+selective");
  if (plus != std::string::npos && plus + 10 == family.size())
    return blockPolicy(family.substr(0, plus), d, c, true) + "+" + selectiveText(d);
  return blockPolicy(family, d, c, false);
}

std::vector<std::string> splitPolicyList(const std::string& list) {
  std::vector<std::string> parts;
  const auto& kinds = selectableOpKinds();
  size_t from = 0;
  while (from <= list.size()) {
    const size_t at = std::min(list.find(',', from), list.size());
    std::string piece = list.substr(from, at - from);
    const bool kind = std::find(kinds.begin(), kinds.end(), piece) != kinds.end();
    if (kind && !parts.empty() && parts.back().find("recompute=") != std::string::npos) parts.back() += "," + piece;
    else if (!piece.empty()) parts.push_back(std::move(piece));
    from = at + 1;
  }
  return parts;
}

}  // namespace ckpt
