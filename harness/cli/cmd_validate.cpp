// ckptcheck validate: another framework's checkpointing, driven through an adapter (harness/adapters/PROTOCOL.md),
// checked bitwise against its own plain run over random cases, with the smallest failing case reported.
#include <algorithm>
#include <iostream>
#include <memory>

#include "cases/block_kind.h"
#include "common/input_error.h"
#include "harness/user_model/user_model.h"
#include "harness/user_model/user_model_run.h"
#include "harness/validate/validate.h"
#include "harness/cli/cli_checks.h"
#include "harness/cli/commands.h"

namespace ckpt::cli {

// A user model's seeds are ints (torch.manual_seed takes far more; --seeds adds up to 1000 to the first).
constexpr uint64_t kMaxUserModelSeed = uint64_t{1} << 30;

void addValidate(CLI::App& app, int& exitCode) {
  auto o = std::make_shared<ValidateOptions>();
  auto u = std::make_shared<UserModelOptions>();
  auto noShrink = std::make_shared<bool>(false);
  auto seed = std::make_shared<uint64_t>(0);
  auto* cmd = app.add_subcommand(
      "validate",
      "Validate another framework's checkpointing through an adapter: checkpointed vs plain bitwise, over random "
      "cases, shrunk to the smallest failing one");
  auto* a = cmd->add_option("--adapter", o->adapter,
                            "Built-in adapter NAME[:k=v,...]: numpy [segments=K]; torch [use_reentrant=0|1, "
                            "preserve_rng_state=0|1, mode=checkpoint|sequential|selective, segments=K]; jax "
                            "[policy=nothing_saveable|dots_saveable|everything_saveable]; your own PyTorch model: "
                            "torch:module=PATH.py[:FACTORY] (harness/user_model/torch/USER_MODEL.md); your own JAX "
                            "model: jax:module=PATH.py[:FACTORY] (harness/user_model/jax/USER_MODEL.md)");
  auto* c = cmd->add_option("--adapter-cmd", o->adapterCmd, "Any adapter command line \"COMMAND ARGS\" (PROTOCOL.md)");
  a->excludes(c);
  c->excludes(a);
  cmd->add_option("--option", o->options, "Adapter option KEY=VALUE (repeatable)");
  cmd->add_option("--cases", o->cases, "Random cases that must pass (default 25; 0 with --timing-case: timing only)")
      ->check(CLI::Range(0, 100000));
  auto* s = cmd->add_option("--seed", *seed, "RapidCheck seed (default: random, printed in the report)")
                ->check(unsignedAtMost(UINT64_MAX));
  cmd->add_option("--max-blocks", o->maxBlocks, "Largest random chain (default 24: five segments under round(sqrt(L)))")
      ->check(CLI::Range(1, 40));
  cmd->add_option("--max-steps", o->maxSteps, "Most training steps of a random case (default 2)")
      ->check(CLI::Range(1, 10));
  cmd->add_option("--blocks", o->blocks, "Generate only these block kinds (" + blockKindNames() + ")")->delimiter(',');
  cmd->add_option("--params", o->params,
                  "Draw only these model and training features (frozen, shared, no_input_grad, micro_batches, tokens, "
                  "drop_path, "
                  "rrelu, bf16, moe; none: plain cases only)")
      ->delimiter(',');
  cmd->add_option("--case", o->casePath, "Check exactly this case file instead of random ones (replay a finding)");
  cmd->add_option("--out", o->outDir,
                  "Report directory: validate.json, validate.md, the shrunk case (default validate-out)");
  cmd->add_flag("--json", o->json, "Print the JSON report instead of the summary");
  cmd->add_option("--junit", o->junitPath, "Also write a JUnit XML report to FILE");
  cmd->add_option("--adapter-timeout", o->timeoutSeconds,
                  "Seconds per adapter run before its process group is killed (default 120)")
      ->check(finiteIn(0, kMaxTimeoutSeconds, true));
  cmd->add_flag("--no-serve", o->noServe, "Start the adapter once per run even if it offers serve mode");
  cmd->add_flag("--keep-work", o->keepWork, "Keep every case and run directory under OUT/work");
  cmd->add_flag("--verbose", o->verbose, "Print every case as it is checked");
  cmd->add_option("--timing-case", o->timingCases,
                  "Measure checkpointing's step-time overhead on this case file (repeatable)");
  cmd->add_option("--timing-steps", o->timingSteps, "Steps per timing run; the first is warm-up (default 5)")
      ->check(CLI::Range(2, 1000));
  // Options of a user model (module=): seeds, steps and batch of its training runs, the memory property.
  std::vector<CLI::Option*> userOnly = {
      cmd->add_option("--seeds", u->seeds, "module=: how many seeds, from --seed (default 1) on (default 2)")
          ->check(CLI::Range(1, 1000)),
      cmd->add_option("--steps", u->steps, "module=: training steps per run, optimizer step included (default 2)")
          ->check(CLI::Range(1, 1000)),
      cmd->add_option("--batch-size", u->batchSize, "module=: batch size (default: the factory's batch_size)")
          ->check(CLI::Range(1, 1 << 20)),
      cmd->add_option("--min-saving", u->minSaving,
                      "module=: the fraction of saved activation bytes checkpointing must cut (default 0.1)")
          ->check(finiteIn(0.0, 1.0)),
      cmd->add_option("--ulp", u->ulp, "module=: accept differences within N ULP everywhere (rounding-level)")
          ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 62)),
      cmd->add_flag("--no-shrink", *noShrink, "module=: report a finding as found, without shrinking it"),
      cmd->add_flag("--zero-batch", u->zeroBatch,
                    "module=: zero the batch's floating tensors (labels and ids kept), as shrinking tries"),
      cmd->add_option("--plan", u->planPath,
                      "module=: apply this placement (ckptcheck plan --costs --placement) instead of the factory's "
                      "checkpoint, and check its predicted saved bytes and forward runs")};
  auto* timeout = cmd->get_option("--adapter-timeout");
  // Options of the random-case search, which a user model has no use for: refused rather than ignored.
  std::vector<CLI::Option*> casesOnly;
  for (const char* n : {"--cases", "--max-blocks", "--max-steps", "--blocks", "--params", "--case", "--junit",
                        "--no-serve", "--keep-work", "--verbose", "--timing-case", "--timing-steps"})
    casesOnly.push_back(cmd->get_option(n));
  auto* ulpOpt = cmd->get_option("--ulp");
  cmd->callback([o, u, noShrink, seed, s, timeout, ulpOpt, userOnly, casesOnly, &exitCode] {
    if (isUserModelSpec(o->adapter, o->options)) {
      for (const auto* opt : casesOnly)
        if (opt->count() > 0)
          throw InputError(opt->get_name() + ": not with module= (a user model has no random cases)");
      u->adapter = o->adapter;
      u->options = o->options;
      u->outDir = o->outDir;
      u->json = o->json;
      u->shrink = !*noShrink;
      if (s->count() > 0 && *seed > kMaxUserModelSeed)
        throw InputError("--seed " + std::to_string(*seed) + ": a user model's seeds must be at most " +
                         std::to_string(kMaxUserModelSeed));
      if (s->count() > 0) u->firstSeed = static_cast<int>(*seed);
      if (timeout->count() > 0) u->timeoutSeconds = o->timeoutSeconds;
      u->ulpGiven = ulpOpt->count() > 0;  // else a JAX model gets its measured default
      exitCode = runUserModelValidate(*u, std::cout, std::cerr);
      return;
    }
    for (const auto* opt : userOnly)
      if (opt->count() > 0)
        throw InputError(opt->get_name() + ": only with --adapter torch:module=PATH.py (or jax:module=)");
    if (const auto parent = std::filesystem::path(o->junitPath).parent_path(); !parent.empty())
      requireDirectory("--junit's folder", parent.string(), false);  // before the run, not after it
    if (s->count() > 0) o->seed = *seed;
    exitCode = runValidate(*o, std::cout, std::cerr);
  });
}

}  // namespace ckpt::cli
