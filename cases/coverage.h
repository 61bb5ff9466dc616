// What a set of checked cases covered, feature by feature, in the spirit of RapidCheck's RC_CLASSIFY: `verify`
// and `validate` count how many of their cases had each feature and print the table, so a user sees what a run
// did *not* test (no case with three checkpoint segments, no odd width, no small dropout probability …).
// A feature is a predicate over a CaseSpec; the table below is the one place they are defined.
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cases/case_spec.h"

namespace ckpt {

struct CoverageFeature {
  const char* id;    // JSON key: "segments_3"
  const char* text;  // what a person reads: "≥ 3 checkpoint segments under uniform (L ≥ 7)"
  bool (*has)(const CaseSpec&);
};

// Every feature, in the order the table prints them.
const std::vector<CoverageFeature>& coverageFeatures();

// A bit per feature of coverageFeatures(), for counting cases from many threads without keeping them.
uint64_t coverageBits(const CaseSpec& c);

class Coverage {
 public:
  void add(const CaseSpec& c) { addBits(coverageBits(c)); }
  void addBits(uint64_t bits);
  int64_t cases() const { return cases_; }
  int64_t count(size_t feature) const { return counts_.at(feature); }
  // {"cases": N, "features": {"segments_3": {"cases": n, "text": "..."}, ...}}
  nlohmann::json toJson() const;
  // Reads toJson's output back (features it does not know are ignored, missing ones count 0).
  static Coverage fromJson(const nlohmann::json& j);
  // The table for people: one line per feature, "   12  (  2.4%)  ≥ 3 checkpoint segments …", with a closing
  // line naming the features no case had.
  std::string toText(const std::string& indent = "  ") const;

 private:
  int64_t cases_ = 0;
  std::array<int64_t, 64> counts_{};
};

}  // namespace ckpt
