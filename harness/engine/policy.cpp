// Policy strings: parsing (every mistake is a one-line InputError naming the string and the part that is wrong),
// dispatch to the policy functions, and the default parameterisation of every policy.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>

#include "common/input_error.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"

namespace ckpt {
namespace {

std::string knownNames() {
  std::string s;
  for (const auto& r : policyRules()) s += (s.empty() ? "" : ", ") + r.name;
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t from = 0;
  while (true) {
    const size_t at = s.find(sep, from);
    parts.push_back(s.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) return parts;
    from = at + 1;
  }
}

// A positive integer, the whole string; nullopt otherwise.
std::optional<int64_t> positive(const std::string& v) {
  int64_t out = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size() || out < 1) return std::nullopt;
  return out;
}

class Parser {
 public:
  explicit Parser(std::string text) : text_(std::move(text)) {}

  PolicySpec parse() {
    if (text_.empty()) fail("empty policy (known: " + knownNames() + ")");
    for (const auto& r : policyRules())
      if (r.takesRest && text_.rfind(r.name + ":", 0) == 0) return wholeRest(r);
    const auto parts = split(text_, '+');
    if (parts.size() > 2) fail("at most one block policy and one selective part can be composed");
    PolicySpec p;
    bool haveBlock = false;
    for (const auto& part : parts) {
      const auto fields = split(part, ':');
      const std::string& name = fields[0];
      const PolicyRule* rule = findPolicyRule(name);
      if (!rule)
        fail(name.empty() ? "empty policy name" : "unknown policy '" + name + "' (known: " + knownNames() + ")");
      if (rule->takesRest)
        fail(parts.size() > 1 ? name + ":" + rule->params[0].help + " cannot be composed with another policy"
                              : "needs " + name + ":" + rule->params[0].help);
      std::map<std::string, std::string> params;
      for (size_t f = 1; f < fields.size(); ++f) {
        const size_t eq = fields[f].find('=');
        const std::string key = fields[f].substr(0, eq);
        const auto pr =
            std::find_if(rule->params.begin(), rule->params.end(), [&](const ParamRule& r) { return r.key == key; });
        if (pr == rule->params.end())
          fail(name + (rule->params.empty() ? " takes no parameters"
                                            : " has no parameter '" + key + "' (it takes " + helpOf(*rule) + ")"));
        if (eq == std::string::npos || eq + 1 == fields[f].size()) fail("needs " + pr->help);
        if (params.count(key)) fail(name + ": " + key + " given twice");
        params[key] = fields[f].substr(eq + 1);
      }
      for (const auto& pr : rule->params)
        if (pr.required && !params.count(pr.key)) fail("needs " + pr.help);
      if (name == "selective") {
        if (p.selective) fail("selective given twice");
        p.selective = true;
        if (params.count("recompute")) p.recomputeKinds = opKinds(params["recompute"]);
      } else {
        if (haveBlock) fail("two block policies ('" + p.name + "' and '" + name + "') cannot be composed");
        haveBlock = true;
        p.name = name;
        for (const auto& [key, value] : params) {
          const auto v = positive(value);
          const bool small = key != "budget";  // counts of layers or slots fit an int
          if (!v || (small && *v > (int64_t{1} << 30)))
            fail(name + ": " + key + " must be an integer >= 1" + (small ? " and <= 2^30" : "") + " (got '" + value +
                 "')");
          p.params[key] = std::to_string(*v);
        }
      }
    }
    if (!haveBlock) p.name = "store-all";
    p.blockGiven = haveBlock;
    p.text = canonical(p, haveBlock);
    return p;
  }

 private:
  PolicySpec wholeRest(const PolicyRule& r) const {
    const std::string rest = text_.substr(r.name.size() + 1);
    if (rest.empty()) fail("needs " + r.name + ":" + r.params[0].help);
    PolicySpec p;
    p.name = r.name;
    p.params[r.params[0].key] = rest;
    p.text = text_;
    return p;
  }

  [[noreturn]] void fail(const std::string& why) const { throw InputError("policy '" + text_ + "': " + why); }

  static std::string helpOf(const PolicyRule& r) {
    std::string s;
    for (const auto& p : r.params) s += (s.empty() ? "" : ", ") + p.help;
    return s;
  }

  std::vector<std::string> opKinds(const std::string& list) const {
    std::vector<std::string> kinds;
    for (const auto& k : split(list, ',')) {
      const auto& known = selectableOpKinds();
      if (std::find(known.begin(), known.end(), k) == known.end()) {
        std::string all;
        for (const auto& s : known) all += (all.empty() ? "" : ", ") + s;
        fail("selective: unknown op kind '" + k + "' (known: " + all + ")");
      }
      if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
    }
    return kinds;
  }

  static std::string canonical(const PolicySpec& p, bool haveBlock) {
    std::string s;
    if (haveBlock) {
      s = p.name;
      for (const auto& [key, value] : p.params) s += ":" + key + "=" + value;
    }
    if (p.selective) {
      s += haveBlock ? "+selective" : "selective";
      for (size_t i = 0; i < p.recomputeKinds.size(); ++i) s += (i ? "," : ":recompute=") + p.recomputeKinds[i];
    }
    return s;
  }

  std::string text_;
};

// The selective suffix of a policy string, as the schedule records it.
std::string selectiveText(const PolicySpec& p) {
  std::string s = "selective";
  for (size_t i = 0; i < p.recomputeKinds.size(); ++i) s += (i ? "," : ":recompute=") + p.recomputeKinds[i];
  return s;
}

}  // namespace

const PolicyRule* findPolicyRule(const std::string& name) {
  for (const auto& r : policyRules())
    if (r.name == name) return &r;
  return nullptr;
}

PolicySpec parsePolicy(const std::string& text) { return Parser(text).parse(); }

Schedule makeSchedule(const PolicySpec& p, const ChainCost& c) {
  std::vector<KeepMask> keep;
  if (p.selective) keep = selectiveMasks(c, p.recomputeKinds);
  const PolicyRule* rule = findPolicyRule(p.name);
  if (!rule || !rule->make) throw InputError("policy '" + p.text + "': unknown policy '" + p.name + "'");
  Schedule s = rule->make(p, c, keep);
  if (p.selective) {
    s.keep = std::move(keep);
    s.policy = p.blockGiven ? s.policy + "+" + selectiveText(p) : selectiveText(p);  // "selective": store-all + masks
  }
  return s;
}

std::vector<std::string> defaultPolicies(const ChainCost& c, bool quadratic) {
  std::vector<std::string> all;
  for (const auto& r : policyRules())
    if (r.byDefault && (quadratic || !r.quadraticDefault))
      for (auto& s : r.byDefault(c)) all.push_back(std::move(s));
  return all;
}

std::string policyFamily(const PolicySpec& p) {
  if (!p.blockGiven) return "selective";
  return p.selective ? p.name + "+selective" : p.name;
}

}  // namespace ckpt
