// What `ckptcheck verify` prints and writes: a finding for people (the property, the shrunk case and where it
// was written, the replay and reproduce commands, the first differing tensor with its ULP distance), the same as
// JSON for machines, and a JUnit report (one test case per property) for CI systems.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "harness/verify/search.h"

namespace ckpt {

// Where a finding's shrunk case was written and how to replay it.
struct FindingReplay {
  std::string caseFile;  // the shrunk case JSON
  std::string run;       // ckptcheck run --case FILE --policy P [--mutant M]
  std::string verify;    // ckptcheck verify --reproduce S:i:path ... (random cases only)
};

// Writes the shrunk case of r.finding into `dir` (created) and returns the replay commands.
FindingReplay writeFinding(const VerifyReport& r, const VerifyOptions& o, const std::string& dir);

std::string toText(const VerifyReport& r, const FindingReplay* replay);
nlohmann::json toJson(const VerifyReport& r, const FindingReplay* replay);
std::string toJUnit(const VerifyReport& r, const FindingReplay* replay);

}  // namespace ckpt
