// schedule:FILE: an explicit schedule written by someone else (an external solver such as Checkmate, Rotor or
// checkpoint_schedules, or by hand), in the JSON `ckptcheck plan --schedule --json` prints: either that whole
// output (the schedule is its "schedule" member) or the schedule object alone:
//   {"layers": 3, "instructions": [{"op": "forward", "index": 0, "tape": true}, {"op": "free", "index": 0}, ...,
//    {"op": "loss"}, {"op": "backward", "index": 2}, ...], "keep": ["1101", ...]}   (keep and policy optional)
// The file is read strictly (unknown fields, wrong types and out-of-range numbers are refused, naming the
// instruction), then checked against the chain it is asked to run on: a schedule fits one chain length, and it
// must pass validateSchedule. Refusals are InputErrors, so the CLI exits 2 with one line.
#include <climits>
#include <nlohmann/json.hpp>

#include "cases/user_file.h"
#include "common/input_error.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"

namespace ckpt {
namespace {

// A schedule of 10^6 blocks is ~100 MB of JSON; anything larger is not a schedule.
constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{512} << 20;

[[noreturn]] void bad(const std::string& why) { throw InputError(why); }

void onlyKeys(const nlohmann::json& j, std::initializer_list<const char*> keys, const std::string& where) {
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : keys) known = known || key == k;
    if (!known) bad(where + ": unknown field '" + clipped(key) + "'");
  }
}

int intField(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) bad(where + ": needs \"" + key + "\"");
  const auto& v = j.at(key);
  if (!v.is_number_integer()) bad(where + ": \"" + key + "\" must be an integer (got " + clipped(v) + ")");
  // Ranges against the chain are validateSchedule's; here only what an int holds.
  if (v.is_number_unsigned() ? v.get<uint64_t>() > INT_MAX : (v.get<int64_t>() < INT_MIN || v.get<int64_t>() > INT_MAX))
    bad(where + ": \"" + key + "\" " + v.dump() + " is out of range");
  return v.get<int>();
}

Instr instrFrom(const nlohmann::json& j, size_t k) {
  const std::string where = "instruction " + std::to_string(k);
  if (!j.is_object())
    bad(where + ": must be an object like {\"op\": \"forward\", \"index\": 0} (got " + clipped(j) + ")");
  if (!j.contains("op") || !j.at("op").is_string()) bad(where + ": needs \"op\": forward, free, loss or backward");
  const std::string op = j.at("op").get<std::string>();
  Instr in;
  if (op == "loss") {
    onlyKeys(j, {"op"}, where + " (loss)");
    in.kind = InstrKind::kLoss;
    return in;
  }
  if (op == "forward") {
    onlyKeys(j, {"op", "index", "tape"}, where + " (forward)");
    in.kind = InstrKind::kForward;
    if (j.contains("tape")) {
      if (!j.at("tape").is_boolean()) bad(where + " (forward): \"tape\" must be true or false");
      in.tape = j.at("tape").get<bool>();
    }
  } else if (op == "free" || op == "backward") {
    onlyKeys(j, {"op", "index"}, where + " (" + op + ")");
    in.kind = op == "free" ? InstrKind::kFree : InstrKind::kBackward;
  } else {
    bad(where + ": unknown op '" + clipped(op) + "' (known: forward, free, loss, backward)");
  }
  in.block = intField(j, "index", where + " (" + op + ")");
  return in;
}

KeepMask maskFrom(const nlohmann::json& j, size_t b) {
  const std::string where = "keep mask " + std::to_string(b);
  if (!j.is_string())
    bad(where + ": must be a string of 0s and 1s, one per node of the block (got " + clipped(j) + ")");
  KeepMask m;
  for (char ch : j.get<std::string>()) {
    if (ch != '0' && ch != '1')
      bad(where + ": '" + clipped(j.get<std::string>()) + "' holds a character other than 0 or 1");
    m.push_back(ch == '1');
  }
  return m;
}

}  // namespace

Schedule scheduleFromJson(const nlohmann::json& doc) {
  if (!doc.is_object()) bad("must be a JSON object (a schedule, or the output of `ckptcheck plan --schedule --json`)");
  const nlohmann::json& j = doc.contains("schedule") ? doc.at("schedule") : doc;
  if (!j.is_object()) bad("\"schedule\" must be an object");
  onlyKeys(j, {"policy", "layers", "instructions", "keep"}, "schedule");
  Schedule s;
  s.layers = intField(j, "layers", "schedule");
  if (s.layers < 1) bad("schedule: \"layers\" must be >= 1 (got " + std::to_string(s.layers) + ")");
  if (!j.contains("instructions") || !j.at("instructions").is_array())
    bad("schedule: needs \"instructions\", an array of {\"op\": ..., \"index\": ...}");
  const auto& instrs = j.at("instructions");
  s.instrs.reserve(instrs.size());
  for (size_t k = 0; k < instrs.size(); ++k) s.instrs.push_back(instrFrom(instrs[k], k));
  if (j.contains("keep")) {
    if (!j.at("keep").is_array()) bad("schedule: \"keep\" must be an array of mask strings, one per block");
    for (size_t b = 0; b < j.at("keep").size(); ++b) s.keep.push_back(maskFrom(j.at("keep")[b], b));
  }
  return s;
}

Schedule readScheduleFile(const std::string& path) {
  const nlohmann::json doc = readUserJson(path, "schedule file", kMaxFileBytes);
  try {
    Schedule s = scheduleFromJson(doc);
    s.policy = "schedule:" + path;
    return s;
  } catch (const InputError& e) {
    throw InputError("schedule file '" + path + "': " + e.what());
  }
}

Schedule fileSchedule(const std::string& path, const ChainCost& c) {
  Schedule s = readScheduleFile(path);
  try {
    if (s.layers != c.layers())
      bad("it is for a chain of " + std::to_string(s.layers) + " blocks and this chain has " +
          std::to_string(c.layers()) + " (a schedule fits one chain length)");
    validateSchedule(s, c);
  } catch (const InputError& e) {
    throw InputError("schedule file '" + path + "': " + e.what());
  }
  return s;
}

// Fixed to one chain length, so verify never draws it; `verify --policies schedule:FILE` runs it on the catalogue.
PolicyRule scheduleFileRule() {
  PolicyRule r;
  r.name = "schedule";
  r.params = {{"file", true, "FILE (a schedule JSON as `ckptcheck plan --schedule --json` prints it)"}};
  r.make = [](const PolicySpec& p, const ChainCost& c, const std::vector<KeepMask>&) {
    return fileSchedule(p.params.at("file"), c);
  };
  r.takesRest = true;
  return r;
}

}  // namespace ckpt
