// The property runner behind `ckptcheck verify` and tests/mutants_test.cpp: runs the properties
// (properties.h) over random cases and the catalogue, and when one fails, shrinks the case toward the smallest
// model that still violates the same property.
//
// Random cases come from RapidCheck's generators (genCase, cases/generators.h; genPolicyDraw, policy_draw.h)
// driven directly: case i of seed S is generated from rc::Random({S, i}) at size i mod 100, RapidCheck's ramp
// from the smallest models up, so a case depends on (S, i) only and the outcome is the same for any thread count. The
// search stops at the first failing index; shrinking walks RapidCheck's shrink tree, taking the first
// child that still violates the property, and records the path. "S:i:path" is the reproduce token:
// `ckptcheck verify --reproduce S:i:path` regenerates exactly the shrunk case without searching again.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cases/coverage.h"
#include "cases/generators.h"
#include "harness/engine/device_steps.h"
#include "harness/verify/properties.h"

namespace ckpt {

// One verification case: the model and the random parameters of its policies.
struct VerifyCase {
  CaseSpec spec;
  PolicyDraw draw;
};
// The cases verify runs: genCase with every choice shrinking (GenLimits::shrinkChoices), and a policy draw.
GenLimits verifyLimits();
rc::Gen<VerifyCase> genVerifyCase(const GenLimits& limits = verifyLimits());
void showValue(const VerifyCase& c, std::ostream& os);

struct VerifyOptions {
  int cases = 100;  // random cases
  uint64_t seed = 1;
  std::vector<std::string> policies;      // families or policy strings (policy_draw.h); empty = every family
  std::string mutant;                     // empty = the correct engine
  const EngineVariant* engine = nullptr;  // or this variant (tests' own mutants); overrides `mutant`
  OptimalPlanner optimalPlanner;          // property 5's DP; empty: optimalPlan (tests give broken ones)
  Device device = Device::kCpu;           // where the engine runs; on a device, its own store-all is the reference
  bool catalogue = true;                  // also the named cases of cases/catalog (after the random ones)
  std::string catalogueDir;               // empty = found (catalogueDirectory())
  int threads = 0;                        // 0 = one per hardware thread
  GenLimits limits = verifyLimits();
  int maxShrinkTrials = 2000;  // cases tried while shrinking
  std::string reproduce;       // "S:i:path": check that one case only
  // --shard I/N: this run checks random case i and catalogue file f (sorted by name) only when i % N == I, resp.
  // f % N == I, so N runs with I = 0..N-1 together check exactly what one unsharded run checks.
  int shardIndex = 0;
  int shardCount = 1;
  std::string maxActivationBytes;  // the resource guard's limit for catalogue cases ("" = default)
};

struct PropertyCount {
  int64_t checked = 0;  // cases the property was evaluated on
  int64_t violated = 0;
};

struct Finding {
  Violation violation;
  std::string origin;  // "random case 17 (seed 1)" or "catalogue case tiny"
  VerifyCase original;
  VerifyCase shrunk;
  std::vector<std::string> policies;  // the policy strings the shrunk case ran
  int shrinkSteps = 0;                // accepted shrinks
  int shrinkTrials = 0;               // cases tried while shrinking
  std::string reproduce;              // "S:i:path"; empty for a catalogue case
};

struct VerifyReport {
  uint64_t seed = 0;
  std::string mutant;
  std::string device = "cpu";  // deviceName()
  int threads = 1;
  int shardIndex = 0, shardCount = 1;
  int64_t randomCases = 0;  // random cases checked (up to and including a failing one)
  int64_t catalogueCases = 0;
  int64_t policyRuns = 0;  // (case, policy) pairs run by the engine
  // Per policy family (policyFamily: "segments", "uniform+selective", ...), the checked cases that ran one of its
  // policies, as the coverage table counts cases per feature; families no case ran are left out.
  std::map<std::string, int64_t> familyCases;
  double searchSeconds = 0;   // random cases only
  double casesPerMinute = 0;  // random cases per minute of wall time, every property and policy
  double totalSeconds = 0;    // everything, shrinking included
  std::vector<PropertyCount> perProperty = std::vector<PropertyCount>(properties().size());  // in number order
  Coverage coverage;  // what the random cases checked covered (cases/coverage.h)
  std::optional<Finding> finding;
};

// Finds cases/catalog: $CKPT_SOURCE_DIR, then the source tree this binary was built from, then next to the
// binary. Empty when none exists.
std::string catalogueDirectory();

// Throws InputError for bad options (unknown mutant, policy family, reproduce token).
VerifyReport runVerify(const VerifyOptions& o);

// The policy strings a verification case runs under (options' families resolved on the case).
std::vector<std::string> policiesFor(const VerifyCase& c, const std::vector<std::string>& families);

}  // namespace ckpt
