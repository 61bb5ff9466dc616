#include "harness/verify/policy_draw.h"

#include <algorithm>
#include <stdexcept>

#include "common/input_error.h"
#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"

namespace ckpt {
namespace {

std::string selectiveText(const PolicyDraw& d) {
  const auto& kinds = selectableOpKinds();
  std::string list;
  for (size_t k = 0; k < kinds.size() && k < 32; ++k)
    if (d.selectiveKinds & (uint32_t{1} << k)) list += (list.empty() ? "" : ",") + kinds[k];
  return list.empty() ? "selective" : "selective:recompute=" + list;
}

// The policy string a drawn block family resolves to; composed with selective, it plans with its masks.
std::string blockPolicy(const std::string& name, const PolicyDraw& d, const ChainCost& c, bool composed) {
  const PolicyRule* rule = findPolicyRule(name);
  if (!rule || !rule->draw) throw InputError("unknown policy family '" + name + "'");
  return rule->draw(d, c, [&] {
    return composed ? selectiveMasks(c, parsePolicy(selectiveText(d)).recomputeKinds) : std::vector<KeepMask>{};
  });
}

// The block families verify composes with selective, in policyRules() order ("composed" picks one by the draw).
const std::vector<std::string>& composableFamilies() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> v;
    for (const auto& r : policyRules())
      if (r.draw && r.drawComposed) v.push_back(r.name);
    return v;
  }();
  return all;
}

}  // namespace

const std::vector<std::string>& defaultPolicyFamilies() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> v;
    for (const auto& r : policyRules())
      if (r.draw) v.push_back(r.name);
    v.push_back("selective");
    v.push_back("composed");
    return v;
  }();
  return all;
}

const std::vector<std::string>& policyFamilies() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> v = defaultPolicyFamilies();
    for (const auto& f : composableFamilies()) v.push_back(f + "+selective");
    return v;
  }();
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
  const auto& composable = composableFamilies();
  if (family == "composed") {
    const std::string& with = composable[static_cast<size_t>(std::max(d.composedWith, 0)) % composable.size()];
    return blockPolicy(with, d, c, true) + "+" + selectiveText(d);
  }
  for (const auto& r : policyRules()) {  // a drawn policy's name, alone or composed: "NAME+selective"
    if (r.draw && family == r.name) return blockPolicy(r.name, d, c, false);
    if (r.draw && r.drawComposed && family == r.name + "+selective")
      return blockPolicy(r.name, d, c, true) + "+" + selectiveText(d);
  }
  throw InputError("unknown policy family '" + family + "'");
}

const std::vector<std::string>& runFamilies() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> v;
    for (const auto& r : policyRules()) {
      v.push_back(r.name);
      if (r.make && !r.takesRest) v.push_back(r.name + "+selective");
    }
    if (v.size() > 32) throw std::logic_error("more than 32 policy families: widen verify's family bits");
    return v;
  }();
  return all;
}

uint32_t familyBit(const std::string& family) {
  const auto& all = runFamilies();
  const auto it = std::find(all.begin(), all.end(), family);
  return it == all.end() ? 0 : uint32_t{1} << (it - all.begin());
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
