// The bounds every reader of a user's file keeps (cases/user_file.h) and the costs format's (harness/engine/
// COSTS.md, "Bounds"), as properties that fail without them: nesting refused at exactly 100 levels, and a
// million levels refused in one line by every reader of the real binary (a SIGSEGV before); a quoted value
// clipped; an oversized file refused unread and an endless pipe after the cap (a hang before); a chain over the
// block bound refused at once; costs files with fields anywhere up to 2^64 either refused naming a field or
// planned with exact, non-negative figures (a wrapped sum before: negative FLOPs, heap corruption in
// segments:budget=); a placement's fields each checked; a report or placement written over a link, a pipe or a
// folder refused and the thing left as it was.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "cases/user_file.h"
#include "common/input_error.h"
#include "harness/user_model/plan_check.h"
#include "harness/atomic_file.h"
#include "harness/engine/costs_file.h"
#include "harness/engine/costs_plans.h"
#include "harness/engine/policy.h"
#include "tests/cli_process.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string nested(int depth, bool objects) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += objects ? "{\"a\":" : "[";
  s += "1";
  for (int i = 0; i < depth; ++i) s += objects ? "}" : "]";
  return s;
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// One line on stderr, exit 2, the expected words: what bad_inputs_test asks of every refusal.
void expectRefused(const test::CliResult& r, const std::string& want) {
  EXPECT_EQ(r.exitCode(), 2) << r.process.describe() << "\n" << r.err.substr(0, 400);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err.substr(0, 400);
  EXPECT_NE(r.err.find(want), std::string::npos) << r.err.substr(0, 400);
}

std::string mlpModule() { return "torch:module=" + (test::sourceDir() / "examples" / "torch" / "mlp.py").string(); }

TEST(UserFile, nestingIsRefusedAtExactlyOneHundredAndOneLevels) {
  for (const bool objects : {false, true}) {
    EXPECT_NO_THROW(parseUserJson(nested(kMaxJsonDepth, objects), "x"));
    EXPECT_EQ(errorOf([&] { parseUserJson(nested(kMaxJsonDepth + 1, objects), "x"); }),
              "x: nested deeper than 100 levels");
  }
}

TEST(UserFile, aMillionLevelsAreRefusedInOneLineByEveryReader) {
  const test::ScratchDir dir("deep");
  const fs::path f = dir.path() / "deep.json";
  write(f, nested(1000000, false));
  const std::string p = f.string(), tiny = test::catalogueCase("tiny").string();
  for (const std::vector<std::string>& args : {std::vector<std::string>{"train-ref", "--case", p},
                                               {"plan", "--costs", p, "--policy", "store-all"},
                                               {"run", "--case", tiny, "--policy", "schedule:" + p},
                                               {"validate", "--adapter", mlpModule(), "--plan", p}}) {
    SCOPED_TRACE(args[0]);
    expectRefused(test::runCkptcheck(args, {}, dir.path(), 60), "deep.json': nested deeper than 100 levels");
  }
}

TEST(UserFile, aQuotedValueIsClipped) {
  const std::string op(1000000, 'x');
  const std::string why = errorOf(
      [&] { scheduleFromJson(parseUserJson(R"({"layers": 1, "instructions": [{"op": ")" + op + R"("}]})", "s")); });
  EXPECT_NE(why.find("unknown op 'xxxx"), std::string::npos) << why.substr(0, 300);
  EXPECT_NE(why.find("...(1000000 bytes)'"), std::string::npos) << why.substr(0, 300);
  EXPECT_LT(why.size(), 300u);
  // A cut never splits a UTF-8 character: the clipped text is still valid JSON text when dumped.
  EXPECT_EQ(clipped(std::string(63, 'a') + "\xc3\xa9" + std::string(10, 'b')), std::string(63, 'a') + "...(75 bytes)");
}

TEST(UserFile, anOversizedFileIsRefusedUnreadAndAnEndlessPipeAtTheCap) {
  const test::ScratchDir dir("big");
  const fs::path f = dir.path() / "big.json";
  write(f, "");
  fs::resize_file(f, kMaxJsonFileBytes + 1);  // sparse: no disk, and nothing read
  EXPECT_EQ(errorOf([&] { readUserJson(f.string(), "costs file"); }),
            "costs file '" + f.string() +
                "': is 67108865 bytes (64 MiB), more than this reader takes, 67108864 bytes (64 MiB)");
  EXPECT_EQ(errorOf([&] { readUserJson(dir.path().string(), "costs file"); }),
            "costs file '" + dir.path().string() + "': is a directory");
  const fs::path err = dir.path() / "err";
  const ProcessResult r = runProcess(
      {"/bin/sh", "-c", "yes ' ' | \"$0\" plan --costs /dev/stdin --policy store-all", test::ckptcheckBinary()}, "",
      err.string(), 60);
  EXPECT_EQ(r.exitCode, 2) << r.describe();
  EXPECT_NE(test::readFile(err).find("costs file '/dev/stdin': gives more than this reader takes, 67108864 bytes"),
            std::string::npos)
      << test::readFile(err);
}

// A costs file of one small block, then `blocks` copies of it.
json costsOf(int blocks) {
  const json op = {{"op", "aten.mm.default"},
                   {"saved_bytes", 32},
                   {"forward_flops", 100},
                   {"backward_flops", 200},
                   {"matmul", true}};
  const json block = {
      {"name", "b"},          {"saves_input", true},   {"saves_output", false},    {"ops", {op}},
      {"forward_flops", 100}, {"backward_flops", 200}, {"forward_seconds", 0.001}, {"backward_seconds", 0.002}};
  const json part = {{"saved_bytes", 8},
                     {"forward_flops", 10},
                     {"backward_flops", 10},
                     {"forward_seconds", 0.0},
                     {"backward_seconds", 0.0}};
  json j = {{"format", kCostsFormat}, {"version", kCostsVersion}, {"model", "m"},           {"framework", "f"},
            {"batch_size", 2},        {"step_seconds", 0.01},     {"shared", json::array()}};
  j["blocks"] = json::array();
  for (int i = 0; i < blocks; ++i) j["blocks"].push_back(block);
  j["boundary_bytes"] = std::vector<int64_t>(static_cast<size_t>(blocks) + 1, 64);
  j["outside"] = {{"before", part}, {"after", part}};
  j["outside"]["before"]["saves_chain_input"] = false;
  j["outside"]["after"]["saves_chain_output"] = true;
  return j;
}

TEST(CostsBounds, aChainOverTheBlockBoundIsRefusedAtOnce) {
  const test::ScratchDir dir("long");
  const fs::path f = dir.path() / "long.json";
  // One block over the bound: refused as soon as it is parsed, before any planning (100,000 blocks, 27 MB, take
  // about 1 s to parse in the Release build, but two minutes under the sanitizers).
  write(f, costsOf(kMaxCostsBlocks + 1).dump());
  const test::CliResult r =
      test::runCkptcheck({"plan", "--costs", f.string(), "--budget", "100000"}, {}, dir.path(), 120);
  expectRefused(r, "long.json: blocks: holds 2001 blocks; the planner takes at most 2000");
  EXPECT_LT(r.process.seconds, 60.0);
}

// Field values that straddle the bounds and the 64-bit edges.
rc::Gen<uint64_t> edgeCount() {
  return rc::gen::weightedOneOf<uint64_t>(
      {{24, rc::gen::inRange<uint64_t>(0, 5000)},
       {4, rc::gen::element<uint64_t>(uint64_t{1} << 50, uint64_t{1} << 52, uint64_t{1} << 53)},
       {1, rc::gen::element<uint64_t>((uint64_t{1} << 53) + 1, uint64_t{1} << 62, (uint64_t{1} << 63) - 1,
                                      uint64_t{1} << 63, ~uint64_t{0})},
       {1, rc::gen::arbitrary<uint64_t>()}});
}

// Costs files whose every count is drawn at the edges: refused naming a field, or planned with exact figures:
// store-all's forward and backward FLOPs are the file's sums (computed here in 128 bits), nothing is negative,
// revolve:slots=1 recomputes without wrapping, and segments:budget= fits its budget (ASan catches the heap
// corruption a wrapped level index caused).
RC_GTEST_PROP(CostsBounds, edgeCountsAreRefusedNamingAFieldOrPlannedExactly, ()) {
  const int blocks = *rc::gen::inRange(1, 5);
  json j = costsOf(blocks);
  __int128 fwd = 0, bwd = 0;
  for (json& b : j["blocks"]) {
    const int ops = *rc::gen::inRange(1, 4);
    b["ops"] = json::array();
    __int128 f = 0, g = 0;
    for (int k = 0; k < ops; ++k) {
      const uint64_t of = *edgeCount(), ob = *edgeCount();
      b["ops"].push_back({{"op", "op" + std::to_string(k)},
                          {"saved_bytes", *edgeCount()},
                          {"forward_flops", of},
                          {"backward_flops", ob},
                          {"matmul", false}});
      f += of;
      g += ob;
    }
    // The block's own fields: its ops' sums, or those sums wrapped to 64 bits as a careless writer would.
    b["forward_flops"] = static_cast<uint64_t>(f);
    b["backward_flops"] = static_cast<uint64_t>(g);
    fwd += f;
    bwd += g;
  }
  for (json& x : j["boundary_bytes"]) x = *edgeCount();
  ChainCosts c;
  try {
    c = parseChainCosts(j, "costs.json");
  } catch (const InputError& e) {
    const std::string why = e.what();
    RC_TAG(why.find("add up to") != std::string::npos ? "refused: a total" : "refused: a field");
    RC_ASSERT(why.rfind("costs.json: ", 0) == 0);
    RC_ASSERT(why.find("must be at most 2^53") != std::string::npos ||
              why.find("add up to more than 2^53") != std::string::npos ||
              why.find("must be a non-negative integer") != std::string::npos);
    return;
  }
  RC_TAG(fwd + bwd > (__int128{1} << 50) ? "accepted, FLOPs past 2^50" : "accepted");
  RC_ASSERT(fwd + bwd <= (__int128{1} << 53));
  const ChainCost cost = chainCostOf(c);
  const CostsPlanRow all = planCostsPolicy(c, cost, "store-all");
  // + the outside parts' 10 + 10 (the stem's and the loss's)
  RC_ASSERT(static_cast<__int128>(all.plan.flops.forward) == fwd + 20);
  RC_ASSERT(static_cast<__int128>(all.plan.flops.backward) == bwd + 20);
  RC_ASSERT(all.plan.peakActivationBytes >= 0);
  RC_ASSERT(all.saved && all.saved->total >= 0);
  const CostsPlanRow revolve = planCostsPolicy(c, cost, "revolve:slots=1");
  RC_ASSERT(revolve.plan.flops.recompute >= 0);
  const int64_t budget = all.plan.peakActivationBytes / 2 + 1;
  try {
    RC_ASSERT(planCostsPolicy(c, cost, "segments:budget=" + std::to_string(budget)).plan.peakActivationBytes <= budget);
  } catch (const InputError&) {  // infeasible at that budget
  }
}

// segments:budget= at the largest budget a policy string holds: its level grid's rounding once overflowed there
// (budget + 399, a signed overflow, then a table of 2^63 levels); it must plan store-all's schedule.
TEST(CostsBounds, segmentsAtTheLargestBudgetPlansStoreAll) {
  const ChainCosts c = loadChainCosts((test::sourceDir() / "tests" / "data" / "costs" / "tiny.json").string());
  const ChainCost cost = chainCostOf(c);
  const CostsPlanRow r = planCostsPolicy(c, cost, "segments:budget=" + std::to_string(INT64_MAX));
  EXPECT_EQ(r.plan.flops.recompute, 0);
  EXPECT_EQ(r.plan.peakActivationBytes, planCostsPolicy(c, cost, "store-all").plan.peakActivationBytes);
}

// A placement of three blocks, as plan --placement writes one.
json placement() {
  return json::parse(R"({"format": "ckptcheck-placement", "version": 1, "model": "m", "policy": "uniform:k=2",
    "batch_size": 4, "blocks": ["h.0", "h.1", "h.2"],
    "segments": [{"first": 0, "last": 1, "recompute": true}, {"first": 2, "last": 2, "recompute": false}],
    "predicted": {"saved_bytes": 300, "saved_bytes_before": 10, "saved_bytes_after": 20,
                  "saved_bytes_by_block": [100, 0, 170], "forward_calls": [2, 2, 1], "peak_activation_bytes": 4000,
                  "flop_overhead": 0.25, "time_overhead": 0.1}})");
}

TEST(PlacementFields, eachDocumentedFieldIsChecked) {
  const PlacementFile ok = parsePlacementFile(placement(), "p.json");
  EXPECT_EQ(ok.batchSize, 4);
  ASSERT_TRUE(ok.timeOverhead);
  EXPECT_EQ(*ok.timeOverhead, 0.1);
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& j) { j["batch_size"] = 0; }, "batch_size: must be at least 1"},
      {[](json& j) { j["batch_size"] = (int64_t{1} << 32) + 8; }, "batch_size: must be at most 1048576"},
      {[](json& j) { j["batch_size"] = -1; }, "batch_size: must be a non-negative integer"},
      {[](json& j) { j["predicted"]["time_overhead"] = "fast"; },
       "predicted.time_overhead: must be a non-negative number or null"},
      {[](json& j) { j["predicted"]["time_overhead"] = -1; },
       "predicted.time_overhead: must be a non-negative number or null"},
      {[](json& j) { j["predicted"].erase("time_overhead"); }, "predicted.time_overhead: missing"},
      {[](json& j) { j["predicted"]["flop_overhead"] = nullptr; },
       "predicted.flop_overhead: must be a non-negative number"},
      {[](json& j) { j["predicted"]["peak_activation_bytes"] = 1.5; },
       "predicted.peak_activation_bytes: must be a non-negative integer"},
      {[](json& j) { j["predicted"]["forward_calls"][0] = 1; },
       "predicted.forward_calls[0]: must be 2: block 0 is recomputed"},
      {[](json& j) { j["predicted"]["saved_bytes"] = 301; },
       "predicted.saved_bytes: must be saved_bytes_before + saved_bytes_by_block"},
      {[](json& j) { j["predicted"]["saved_bytes_by_block"][1] = uint64_t{1} << 63; },
       "predicted.saved_bytes_by_block[1]: must be at most 9007199254740992"},
      {[](json& j) { j["blocks"][2] = ""; }, "blocks[2]: must be a non-empty string"},
  };
  for (const auto& [change, want] : cases) {
    json j = placement();
    change(j);
    const std::string got = errorOf([&] { parsePlacementFile(j, "p.json"); });
    EXPECT_EQ(got.rfind("placement file 'p.json': " + want, 0), 0u) << "got: " << got << "\nwant: " << want;
  }
  // Parts that add up to the total only modulo 2^64 are refused, not wrapped.
  json j = placement();
  j["predicted"]["saved_bytes_by_block"] = {int64_t{1} << 53, int64_t{1} << 53, int64_t{1} << 53};
  j["predicted"]["saved_bytes"] = 30;
  EXPECT_NE(errorOf([&] { parsePlacementFile(j, "p.json"); }).find("predicted.saved_bytes: must be"),
            std::string::npos);
}

TEST(AtomicDestination, aLinkAPipeOrAFolderIsRefusedAndLeftAsItWas) {
  const test::ScratchDir dir("dest");
  const fs::path link = dir.path() / "stdout", fifo = dir.path() / "fifo", regular = dir.path() / "r.json";
  fs::create_symlink("/proc/self/fd/1", link);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const std::vector<std::pair<fs::path, std::string>> refused = {
      {link, "a symbolic link"}, {fifo, "not a regular file"}, {dir.path(), "a directory"}};
  for (const auto& entry : refused) {
    const fs::path& p = entry.first;  // not a structured binding: clang's C++20 cannot capture one
    const std::string& what = entry.second;
    EXPECT_EQ(errorOf([&] { writeFileAtomic(p, "{}\n"); }),
              "cannot write '" + p.string() + "': it is " + what +
                  ", which would be replaced, not written to; give a regular file or a new path");
  }
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_fifo(fifo));
  writeFileAtomic(regular, "new\n");    // a new path
  writeFileAtomic(regular, "again\n");  // a regular file
  EXPECT_EQ(test::readFile(regular), "again\n");
  // Through the CLI: plan --placement given the link exits 2 and prints nothing on stdout.
  const fs::path tiny = test::sourceDir() / "tests" / "data" / "costs" / "tiny.json";
  const test::CliResult r =
      test::runCkptcheck({"plan", "--costs", tiny.string(), "--policy", "uniform:k=2", "--placement", link.string()});
  expectRefused(r, "it is a symbolic link");
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(fs::is_symlink(link));
}

}  // namespace
}  // namespace ckpt
