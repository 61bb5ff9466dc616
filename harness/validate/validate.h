// `ckptcheck validate`: drives an adapter (PROTOCOL.md) over random cases from cases/generators.h restricted to
// its capabilities, and reports the smallest case on which its checkpointed run differs from its plain run.
//   check 1  checkpoint vs plain, same framework and seed: bitwise equal          -> finding (exit 1)
//   check 2  plain vs ckptcheck's reference, dropout off: within tolerance.h      -> adapter fault (exit 3)
//   check 3  forward calls per block match the mode; checkpoint saves no more     -> finding (exit 1)
// Cases are drawn and shrunk by harness/random_search.h, verify's driver (the RapidCheck shrink tree, then a
// greedy pass over what that tree does not shrink: block kinds, activations, dropout); a case where only state
// differs is set aside and shrunk as a second finding. Each shrunk case is re-run once into OUT/finding*/ and reported
// (JSON, Markdown, optionally JUnit) with a replay command. PROTOCOL.md describes the whole procedure.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace ckpt {

struct ValidateOptions {
  std::string adapter;               // built-in NAME[:k=v,...]
  std::string adapterCmd;            // or any command line
  std::vector<std::string> options;  // extra k=v options for either
  int cases = 25;
  std::optional<uint64_t> seed;  // random case i of seed S depends on (S, i) alone; random (and reported) when absent
  int maxBlocks = 24;            // long enough for >= 5 segments under round(sqrt(L)) checkpointing
  int maxSteps = 2;
  std::vector<std::string> blocks;  // restrict block kinds further (e.g. {"mlp", "transformer"})
  // Restrict the parameter features random cases draw (frozen, shared, no_input_grad; "none"); unset: all the
  // adapter builds.
  std::optional<std::vector<std::string>> params;
  std::string casePath;  // check exactly this case instead of random ones (replay)
  std::string outDir = "validate-out";
  bool json = false;
  std::string junitPath;
  double timeoutSeconds = 120;
  bool noServe = false;
  bool keepWork = false;
  bool verbose = false;
  std::vector<std::string> timingCases;  // measure step-time overhead on these case files
  int timingSteps = 5;
};

// Runs the whole validation; prints a summary (or the JSON report with o.json) to `out`, progress and errors to
// `err`; returns the exit code (0 holds, 1 finding, 2 bad input, 3 adapter fault).
int runValidate(const ValidateOptions& o, std::ostream& out, std::ostream& err);

}  // namespace ckpt
