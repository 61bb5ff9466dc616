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
#include "harness/policies/optimal.h"

namespace ckpt {
namespace {

// What each policy accepts: parameter name, whether it is required, and what it means (for messages).
struct ParamRule {
  std::string key;
  bool required;
  std::string help;  // "k=K (K >= 1)"
};
// A block policy's schedule on a chain; `keep` holds the op-level masks when it is composed with selective
// (only the optimal policy's DP needs to know them).
using MakeFn = Schedule (*)(const PolicySpec& p, const ChainCost& c, const std::vector<KeepMask>& keep);
struct PolicyRule {
  std::string name;
  std::vector<ParamRule> params;
  MakeFn make = nullptr;  // null for selective, which is not a block policy
  // The rest of the string after "name:" is the one parameter, verbatim (a file path may hold ':', '+', '='),
  // so the policy composes with nothing.
  bool takesRest = false;
};

int roundSqrt(int n) { return std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(n))))); }
int64_t param(const PolicySpec& p, const char* key) { return std::stoll(p.params.at(key)); }

// Every policy, one record each: its name, its parameters and its schedule maker (harness/policies/).
const std::vector<PolicyRule>& rules() {
  using Keep = const std::vector<KeepMask>&;
  static const std::vector<PolicyRule> r = {
      {"store-all", {}, [](const PolicySpec&, const ChainCost& c, Keep) { return storeAllSchedule(c); }},
      {"uniform", {{"k", false, "k=K (K >= 1)"}}, [](const PolicySpec& p, const ChainCost& c, Keep) {
         return uniformSchedule(c, p.params.count("k") ? static_cast<int>(param(p, "k")) : roundSqrt(c.layers()));
       }},
      {"recursive", {}, [](const PolicySpec&, const ChainCost& c, Keep) { return recursiveSchedule(c); }},
      {"revolve", {{"slots", true, "slots=C (C >= 1)"}},
       [](const PolicySpec& p, const ChainCost& c, Keep) { return revolveSchedule(c, static_cast<int>(param(p, "slots"))); }},
      {"optimal", {{"budget", true, "budget=BYTES (BYTES >= 1)"}}, [](const PolicySpec& p, const ChainCost& c, Keep keep) {
         return optimalPlan(c, param(p, "budget"), OptimalOptions{.keep = keep}).schedule;
       }},
      {"selective", {{"recompute", false, "recompute=KIND,KIND... (op kinds)"}}},
      {"schedule", {{"file", true, "FILE (a schedule JSON as `ckptcheck plan --schedule --json` prints it)"}},
       [](const PolicySpec& p, const ChainCost& c, Keep) { return fileSchedule(p.params.at("file"), c); }, true},
  };
  return r;
}

std::string knownNames() {
  std::string s;
  for (const auto& r : rules()) s += (s.empty() ? "" : ", ") + r.name;
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
    for (const auto& r : rules())
      if (r.takesRest && text_.rfind(r.name + ":", 0) == 0) return wholeRest(r);
    const auto parts = split(text_, '+');
    if (parts.size() > 2) fail("at most one block policy and one selective part can be composed");
    PolicySpec p;
    bool haveBlock = false;
    for (const auto& part : parts) {
      const auto fields = split(part, ':');
      const std::string& name = fields[0];
      const auto rule = std::find_if(rules().begin(), rules().end(), [&](const PolicyRule& r) { return r.name == name; });
      if (rule == rules().end())
        fail(name.empty() ? "empty policy name" : "unknown policy '" + name + "' (known: " + knownNames() + ")");
      if (rule->takesRest)
        fail(parts.size() > 1 ? name + ":" + rule->params[0].help + " cannot be composed with another policy"
                              : "needs " + name + ":" + rule->params[0].help);
      std::map<std::string, std::string> params;
      for (size_t f = 1; f < fields.size(); ++f) {
        const size_t eq = fields[f].find('=');
        const std::string key = fields[f].substr(0, eq);
        const auto pr = std::find_if(rule->params.begin(), rule->params.end(), [&](const ParamRule& r) { return r.key == key; });
        if (pr == rule->params.end())
          fail(name + (rule->params.empty() ? " takes no parameters" : " has no parameter '" + key + "' (it takes " + helpOf(*rule) + ")"));
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
            fail(name + ": " + key + " must be an integer >= 1" + (small ? " and <= 2^30" : "") + " (got '" + value + "')");
          p.params[key] = std::to_string(*v);
        }
      }
    }
    if (!haveBlock) p.name = "store-all";
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

PolicySpec parsePolicy(const std::string& text) { return Parser(text).parse(); }

Schedule makeSchedule(const PolicySpec& p, const ChainCost& c) {
  std::vector<KeepMask> keep;
  if (p.selective) keep = selectiveMasks(c, p.recomputeKinds);
  const auto rule = std::find_if(rules().begin(), rules().end(), [&](const PolicyRule& r) { return r.name == p.name; });
  if (rule == rules().end() || !rule->make) throw InputError("policy '" + p.text + "': unknown policy '" + p.name + "'");
  Schedule s = rule->make(p, c, keep);
  if (p.selective) {
    s.keep = std::move(keep);
    const bool alone = p.text.rfind("selective", 0) == 0;  // "selective" = store-all with masks
    s.policy = alone ? selectiveText(p) : s.policy + "+" + selectiveText(p);
  }
  return s;
}

std::vector<std::string> defaultPolicies(const ChainCost& c) {
  const int n = c.layers();
  // optimal: halfway between its smallest feasible budget and store-all's peak, so it has to choose.
  const int64_t full = planSchedule(storeAllSchedule(c), c).peakActivationBytes;
  const int64_t least = std::min(full, optimalMinBudget(c));
  return {"store-all",
          "uniform",
          "recursive",
          "revolve:slots=" + std::to_string(std::max(2, roundSqrt(n))),
          "optimal:budget=" + std::to_string(least + (full - least) / 2),
          "selective",
          "uniform+selective"};
}

}  // namespace ckpt
