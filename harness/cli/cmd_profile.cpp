// ckptcheck profile: measures a user's PyTorch model once, plain, and writes its chain costs (harness/engine/
// COSTS.md) for `plan --costs` and `report --costs`. harness/user_model/torch/chain_profile.py does the measuring; this
// command checks the arguments, runs it, and reads the file back through the same checks every reader applies,
// so a costs file it leaves behind always loads.
#include <filesystem>
#include <iostream>
#include <memory>

#include "common/input_error.h"
#include "harness/validate/adapter.h"
#include "harness/validate/runner.h"
#include "harness/user_model/user_model_run.h"
#include "harness/cli/cli_checks.h"
#include "harness/cli/commands.h"
#include "harness/engine/costs_file.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "harness/exit_codes.h"
#include "harness/text_format.h"

namespace ckpt::cli {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string adapter;
  std::string out;
  int batchSize = 0;
  int steps = 4;
  int seed = 1;
  double timeoutSeconds = 600;
};

// profile.py's exit codes: 2 a bad factory or a chain that is not sequential, 4 the user's code raised; either
// way its last stderr line is the one-line reason.
constexpr int kProfileBadFactory = 2;
constexpr int kProfileRaised = 4;

std::string lastLine(const std::string& path) {
  std::string tail = fileTail(path, 600);
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  const size_t nl = tail.rfind('\n');
  return nl == std::string::npos ? tail : tail.substr(nl + 1);
}

int profile(const Options& o) {
  const UserModelSpec spec = parseUserModelSpec(o.adapter, {});
  const fs::path out = fs::absolute(o.out);
  if (!out.has_filename() || fs::is_directory(out)) throw InputError("--out '" + o.out + "': give a file name");
  if (!fs::is_directory(out.parent_path())) throw InputError("--out '" + o.out + "': no such directory");
  const fs::path script = fs::path(adapterSourceDir()) / "harness" / "user_model" / "torch" / "chain_profile.py";
  std::vector<std::string> argv = {adapterPython(), script.string(),
                                   "--module",      spec.module,
                                   "--factory",     spec.factory,
                                   "--out",         out.string(),
                                   "--steps",       std::to_string(o.steps),
                                   "--seed",        std::to_string(o.seed),
                                   "--label",       spec.label};
  if (o.batchSize > 0) {
    argv.push_back("--batch-size");
    argv.push_back(std::to_string(o.batchSize));
  }
  const std::string err = out.string() + ".stderr";
  const ProcessResult r = runProcess(argv, "", err, o.timeoutSeconds);
  if (r.started && !r.timedOut && r.signal == 0 && r.exitCode == kProfileBadFactory) throw InputError(lastLine(err));
  if (!r.ok()) {
    std::cerr << "ckptcheck: "
              << escapeControl("profile of " + spec.label + " failed (" +
                               (r.exitCode == kProfileRaised ? "the model raised" : r.describe()) +
                               "): " + lastLine(err) + " (stderr in " + err + ")")
              << "\n";
    return kExitInfra;
  }
  fs::remove(err);
  const ChainCosts c = loadChainCosts(out.string());
  const ChainCost cost = chainCostOf(c);
  const Plan all = planSchedule(storeAllSchedule(cost), cost);
  int64_t inBlocks = 0;
  for (const ProfiledBlock& b : c.blocks) inBlocks += b.savedBytes();
  std::cout << "profiled " << c.model << " (" << c.framework << ", batch " << c.batchSize << "): " << c.layers()
            << " blocks, " << c.blocks.front().name << " .. " << c.blocks.back().name << "\n"
            << "  plain step " << fixed(1e3 * c.stepSeconds, 2) << " ms; store-all peak " << all.peakActivationBytes
            << " B planned; saved inside the blocks " << inBlocks << " B, outside "
            << c.before.savedBytes + c.after.savedBytes << " B (boundaries and shared storages apart)\n"
            << "  costs written to " << o.out << "\n";
  return kExitOk;
}

}  // namespace

void addProfile(CLI::App& app, int& exitCode) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "profile", "Measure a user's PyTorch model per block (FLOPs, saved bytes, times) into a chain-costs file");
  cmd->add_option("--adapter", o->adapter, "torch:module=PATH.py[:FACTORY]; the factory names its chain")->required();
  cmd->add_option("--out", o->out, "The chain-costs file to write (harness/engine/COSTS.md)")->required();
  cmd->add_option("--batch-size", o->batchSize, "Batch size (default: the factory's)")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--steps", o->steps, "Training steps: the first measured under hooks, the rest timed (default 4)")
      ->check(CLI::Range(3, 1000));
  cmd->add_option("--seed", o->seed, "The seed of the model and its batches (default 1)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--adapter-timeout", o->timeoutSeconds, "Seconds before the profiler is stopped (default 600)")
      ->check(finiteIn(0, kMaxTimeoutSeconds, true));
  cmd->callback([o, &exitCode] { exitCode = profile(*o); });
}

}  // namespace ckpt::cli
