// schedule:FILE: a schedule written outside ckptcheck, read from the JSON `plan --schedule --json` prints. The
// reader against every policy's own output (what it loads is what was written), its refusals naming the field
// or instruction, and the shipped examples (cases/schedules/) end to end through the real binary: planned, run
// bitwise equal with planned == measured, verified on the catalogue, refused where a schedule cannot fit.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cases/case_json.h"
#include "common/input_error.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "tests/cli_process.h"

namespace ckpt::test {
namespace {

namespace fs = std::filesystem;

fs::path catalogue(const std::string& name) { return fs::path(sourceDir()) / "cases" / "catalog" / (name + ".json"); }
fs::path example(const std::string& name) { return fs::path(sourceDir()) / "cases" / "schedules" / (name + ".json"); }

// The shipped examples and the catalogue case each was written for.
struct Example {
  std::string file, forCase;
};
const std::vector<Example> kExamples = {{"tiny-hand-written", "tiny"},
                                        {"transformer-revolve-selective", "transformer"}};

std::string refusal(const nlohmann::json& doc) {
  try {
    scheduleFromJson(doc);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ScheduleFile, everyPolicysJsonReadsBackAsTheSameSchedule) {
  const ChainCost cost = caseChainCost(loadCase(catalogue("tiny").string()));
  for (const std::string& policy : defaultPolicies(cost)) {
    const Schedule s = makeSchedule(parsePolicy(policy), cost);
    // Both forms: the schedule object alone and the whole output of plan --schedule --json.
    for (const nlohmann::json& doc : {toJson(s), nlohmann::json{{"policy", s.policy}, {"schedule", toJson(s)}}}) {
      const Schedule back = scheduleFromJson(doc);
      EXPECT_EQ(back.layers, s.layers) << policy;
      EXPECT_EQ(back.instrs, s.instrs) << policy;
      EXPECT_EQ(back.keep, s.keep) << policy;
    }
  }
}

TEST(ScheduleFile, refusesMalformedInstructionsNamingThem) {
  auto doc = [](nlohmann::json instr) {
    return nlohmann::json{{"layers", 1}, {"instructions", {{{"op", "forward"}, {"index", 0}, {"tape", true}}, instr}}};
  };
  EXPECT_EQ(refusal(doc({{"op", "recompute"}, {"index", 0}})),
            "instruction 1: unknown op 'recompute' (known: forward, free, loss, backward)");
  EXPECT_EQ(refusal(doc({{"op", "free"}})), "instruction 1 (free): needs \"index\"");
  EXPECT_EQ(refusal(doc({{"op", "free"}, {"index", 1.5}})),
            "instruction 1 (free): \"index\" must be an integer (got 1.5)");
  EXPECT_EQ(refusal(doc({{"op", "backward"}, {"index", 99999999999}})),
            "instruction 1 (backward): \"index\" 99999999999 is out of range");
  EXPECT_EQ(refusal(doc({{"op", "forward"}, {"index", 0}, {"tape", "yes"}})),
            "instruction 1 (forward): \"tape\" must be true or false");
  EXPECT_EQ(refusal(doc({{"op", "loss"}, {"index", 0}})), "instruction 1 (loss): unknown field 'index'");
  EXPECT_EQ(refusal(doc("loss")),
            "instruction 1: must be an object like {\"op\": \"forward\", \"index\": 0} (got \"loss\")");
  EXPECT_EQ(refusal(nlohmann::json{{"layers", 1}, {"instructions", nlohmann::json::array()}, {"keep", {"102"}}}),
            "keep mask 0: '102' holds a character other than 0 or 1");
  EXPECT_EQ(refusal(nlohmann::json{{"layers", 0}, {"instructions", nlohmann::json::array()}}),
            "schedule: \"layers\" must be >= 1 (got 0)");
  EXPECT_EQ(refusal(nlohmann::json{{"layers", 2}, {"instrs", nlohmann::json::array()}}),
            "schedule: unknown field 'instrs'");
  EXPECT_EQ(refusal(nlohmann::json::array()),
            "must be a JSON object (a schedule, or the output of `ckptcheck plan --schedule --json`)");
}

TEST(ScheduleFile, aScheduleFitsOneChainLength) {
  const ChainCost mlpDeep = caseChainCost(loadCase(catalogue("mlp-deep").string()));
  const std::string file = example("tiny-hand-written").string();
  try {
    fileSchedule(file, mlpDeep);
    FAIL() << "a 3-block schedule ran on 64 blocks";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "schedule file '" + file +
                                         "': it is for a chain of 3 blocks and this chain has 64 (a schedule fits one "
                                         "chain length)");
  }
}

// The policy string parses as the whole rest, so a path may hold the characters policy strings use.
TEST(ScheduleFile, policyStringTakesTheRestVerbatim) {
  const PolicySpec p = parsePolicy("schedule:dir:a+b=c.json");
  EXPECT_EQ(p.name, "schedule");
  EXPECT_EQ(p.params.at("file"), "dir:a+b=c.json");
  EXPECT_EQ(p.text, "schedule:dir:a+b=c.json");
  EXPECT_THROW(parsePolicy("uniform+schedule:x.json"), InputError);
  EXPECT_THROW(parsePolicy("schedule:"), InputError);
  EXPECT_THROW(parsePolicy("schedule"), InputError);
}

nlohmann::json cliJson(const std::vector<std::string>& args) {
  const CliResult r = runCkptcheck(args);
  EXPECT_EQ(r.exitCode(), 0) << r.err;
  return r.exitCode() == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

TEST(ScheduleFile, examplesRunBitwiseEqualWithPlannedEqualsMeasured) {
  for (const auto& [file, forCase] : kExamples) {
    const std::string policy = "schedule:" + example(file).string();
    const nlohmann::json plan = cliJson({"plan", "--case", catalogue(forCase).string(), "--policy", policy, "--json"});
    EXPECT_EQ(plan["policy"], policy);
    const nlohmann::json run = cliJson({"run", "--case", catalogue(forCase).string(), "--policy", policy, "--json"});
    EXPECT_EQ(run["policy"], policy);
    EXPECT_EQ(run["bitwise_equal"], true) << file;
    EXPECT_EQ(run["planned_equals_measured"], true) << file;
    EXPECT_EQ(run["planned"], run["measured"]) << file;
    EXPECT_EQ(run["planned"]["peak_activation_bytes"], plan["peak_activation_bytes"]) << file;
  }
}

// The example taken from another policy's output costs exactly what that policy costs, and it recomputes:
// the round trip through the file is faithful, masks included.
TEST(ScheduleFile, exampleFromAnotherPolicyPlansAsThatPolicy) {
  const std::string file = example("transformer-revolve-selective").string();
  const nlohmann::json original = nlohmann::json::parse(readFile(file));
  const std::string made = original["policy"];
  const std::string tr = catalogue("transformer").string();
  nlohmann::json a = cliJson({"plan", "--case", tr, "--policy", made, "--json"});
  nlohmann::json b = cliJson({"plan", "--case", tr, "--policy", "schedule:" + file, "--json"});
  EXPECT_GT(b["flops"]["recompute"].get<int64_t>(), 0);
  EXPECT_FALSE(original["schedule"]["keep"].empty());
  a.erase("policy");
  b.erase("policy");
  EXPECT_EQ(a, b);
}

// verify runs a schedule on catalogue cases of its length; anywhere else it refuses with one line.
TEST(ScheduleFile, verifyOnACatalogueOfTheSameLength) {
  ScratchDir dir("schedule-verify");
  fs::copy_file(catalogue("tiny"), dir.path() / "tiny.json");
  const std::string policy = "schedule:" + example("tiny-hand-written").string();
  const nlohmann::json v = cliJson({"verify", "--cases", "0", "--catalogue-dir", dir.path().string(), "--policies",
                                    policy + ",uniform", "--json", "--threads", "1"});
  EXPECT_EQ(v["ok"], true);
  EXPECT_EQ(v["catalogue_cases"], 1);
  EXPECT_EQ(v["policy_runs"], 2);

  const CliResult random = runCkptcheck({"verify", "--cases", "5", "--policies", policy});
  EXPECT_EQ(random.exitCode(), 2);
  EXPECT_NE(random.err.find("the schedule is for 3 blocks only, and random cases have other lengths"),
            std::string::npos)
      << random.err;
  const CliResult other = runCkptcheck({"verify", "--cases", "0", "--policies", policy});
  EXPECT_EQ(other.exitCode(), 2);
  // The first catalogue case in name order whose length differs.
  EXPECT_NE(other.err.find("the schedule is for 3 blocks and catalogue case albert-frozen-stem.json has 7"),
            std::string::npos)
      << other.err;
}

}  // namespace
}  // namespace ckpt::test
