// The pieces of `ckptcheck validate` that run one case (validate.cpp drives them over random cases, shrinks and
// reports): the outcome of the three checks on a case, the session they share, and the step-time measurement.
// Internal to harness/validate/.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cases/case_spec.h"
#include "cases/coverage.h"
#include "harness/validate/adapter.h"
#include "harness/validate/validate.h"
#include "harness/compare.h"
#include "harness/diagnose.h"

namespace ckpt::validate_detail {

namespace fs = std::filesystem;
using nlohmann::json;

enum class Verdict { kHolds, kFinding, kFault };

// Check names, as reports and JUnit print them.
constexpr const char* kBitwise = "bitwise";             // check 1
constexpr const char* kReference = "reference";         // check 2
constexpr const char* kForwardCalls = "forward-calls";  // check 3
constexpr const char* kSavedBytes = "saved-bytes";      // check 3
constexpr const char* kAdapter = "adapter";             // the adapter failed to run or broke the protocol

struct CaseOutcome {
  Verdict verdict = Verdict::kHolds;
  std::string check;    // which check failed
  std::string message;  // one paragraph for people
  std::optional<Difference> first;
  // What a further shrink must keep: for check 1, whether values (loss, gradients) or only state differ, so a
  // dropout finding is not simplified into "only the generator's state differs".
  // A translation fault on a case whose reference gradients are all exactly zero (a dead ReLU chain) is its own
  // signature, so shrinking a fault found on a livelier case does not end on one that shows nothing.
  std::string signature() const {
    if (!first) return check + (deadGradients && check == kReference ? ":dead" : "");
    return check + (first->tensor.rfind("state", 0) == 0 ? ":state" : ":values");
  }
  json differences = json::array();
  bool deadGradients = false;
  std::optional<Diagnosis> diagnosis;  // check 1: the class of the difference (harness/diagnose.h)
};

// The finding's report entry gains the diagnosis next to its raw difference ("diagnosis": {"class", "why"}).
void addDiagnosis(json& finding, const CaseOutcome& o);
constexpr const char* kStateOnly = "bitwise:state";  // CaseOutcome::signature of check 1 when only state differs

// The worst check-2 error seen, per dtype.
struct ReferenceStats {
  double worst[2] = {0, 0};  // float, double: difference / what the tolerance allowed
  int notComparable = 0;     // float cases left to rounding (a normalisation over identical values)
  std::string where[2];
  int cases[2] = {0, 0};
};

// Runs whose measuring pass changed them (meta.json's instruments_changed): their figures were dropped, the
// verdict is the compared runs'. Reported next to the checks, never a finding or a fault.
struct InstrumentsChanged {
  int runs = 0;
  std::string first;  // "case 3, the checkpoint run: the saved-tensor hooks' pass: step 0 grad b0.fc1.weight"

  void note(int evaluation, const std::string& mode, const RunMeta& m);
  json toJson() const { return {{"runs", runs}, {"first", first}}; }
};

// A bad request (InputError) inside a property must end the run with exit 2, not be shrunk as a finding.
struct Session {
  const ValidateOptions& opt;
  AdapterClient& client;
  const Capabilities& caps;
  fs::path work;
  ReferenceStats ref;
  int evaluations = 0;
  std::optional<std::string> fatalInput;
  std::ostream& err;
  Coverage coverage;  // every case evaluated (cases/coverage.h)
  InstrumentsChanged instruments;
};

std::string fmt(double v);
// Runs the case plain and checkpointed through the adapter and applies checks 2, 1 and 3, in that order.
CaseOutcome evaluate(Session& s, const CaseSpec& spec, const fs::path& dir);
// Step-time overhead of checkpointing on a case, the adapter's next to ckptcheck's engine (JSON for the report).
json timingOf(Session& s, const CaseSpec& spec, const fs::path& dir);

}  // namespace ckpt::validate_detail
