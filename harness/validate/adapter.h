// The harness's side of an adapter (PROTOCOL.md): which command it is, what it can run, and running one case in
// one mode. Built-in adapters are named ("numpy", "torch:use_reentrant=0"); any other is a command line.
#pragma once
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cases/generators.h"
#include "harness/validate/case_dir.h"
#include "harness/validate/runner.h"

namespace ckpt {

inline constexpr int kProtocolVersion = 1;
inline constexpr double kDefaultAdapterTimeout = 120.0;

// Where the built-in adapters live: $CKPT_SOURCE_DIR, else the source tree this binary was built from, else
// two folders above the binary (build/bin/ckptcheck). Throws InputError when none holds harness/adapters.
std::string adapterSourceDir();
// The Python that runs built-in adapters: $CKPT_PYTHON, else the virtual environment ci/setup-python makes
// ($HOME/.cache/ckptcheck/venv), else python3 on PATH.
std::string adapterPython();

struct AdapterSpec {
  std::string name;               // built-in name, or "custom"
  std::vector<std::string> argv;  // the command
  std::map<std::string, std::string> options;
  std::string label;                    // "torch:preserve_rng_state=0" or the command line
  std::vector<std::string> replayArgs;  // how `ckptcheck validate` is told to use it again
};

// "NAME" or "NAME:k=v,k=v"; throws InputError on an unknown name or a malformed option.
AdapterSpec builtinAdapter(const std::string& text);
AdapterSpec commandAdapter(const std::string& commandLine);
// Parses "k=v" into spec.options (later wins); throws InputError.
void addOption(AdapterSpec& spec, const std::string& kv);

struct OptionSpec {
  std::vector<std::string> values;  // allowed values; empty with isInt for "int"
  bool isInt = false;
  std::string defaultValue;
  std::string doc;
};

struct Capabilities {
  int protocol = 0;
  std::string framework, version;
  std::set<std::string> blocks, activations, losses, dtypes, rng, modes;
  // Parameter features the adapter builds (cases/param_sharing.h): "frozen", "shared", "no_input_grad".
  std::set<std::string> paramFeatures;
  // What feeds x_0 (cases/lm_case.h): "dense" (every adapter) and "tokens", language-model cases (token and
  // position embeddings, the chain, an LM head tied to the embedding or not). A frozen embedding also needs
  // "no_input_grad" in paramFeatures: it is the token case's input without gradient.
  std::set<std::string> inputs;
  bool dropout = false;
  // Stochastic depth on residual blocks ("drop_path": true) and the precisions of the matrix products the adapter
  // computes ("compute": ["exact", "bf16"]; absent: exact only). RReLU is an activation ("rrelu" in activations).
  bool dropPath = false;
  std::set<std::string> compute;
  bool reportsMemory = false;
  bool reportsForwardCalls = false;
  bool reportsRngState = false;
  bool serve = false;
  std::map<std::string, OptionSpec> options;
  nlohmann::json raw;

  // The generator limits these capabilities allow, within the harness's own size limits.
  GenLimits limits(int maxBlocks, int maxSteps) const;
  // Why this adapter cannot run the case ("" when it can).
  std::string unsupported(const CaseSpec& c) const;
  // Throws InputError for an option the adapter does not list or a value outside the listed ones.
  void checkOptions(const std::map<std::string, std::string>& options) const;
};

// Throws AdapterError naming the field.
Capabilities parseCapabilities(const nlohmann::json& j);

struct RunMeta {
  nlohmann::json raw;
  std::optional<std::vector<int64_t>> savedBytes;                    // per step
  std::optional<std::vector<std::vector<int64_t>>> forwardCalls;     // per step, per block
  std::optional<std::vector<int>> recomputedBlocks;                  // blocks this mode recomputes at least once
  std::optional<std::vector<std::vector<int64_t>>> recomputeCounts;  // per step, per block: declared recomputes
  std::vector<double> stepSeconds;
  // The adapter's measuring pass changed its run (PROTOCOL.md, meta.json): what differed; its figures are null.
  std::optional<std::string> instrumentsChanged;
};
// Reads outDir/meta.json; throws AdapterError.
RunMeta readRunMeta(const std::string& outDir, int steps, int blocks);

class AdapterClient {
 public:
  // Logs (the serve process's stderr, the capabilities query's output) go to logDir.
  AdapterClient(AdapterSpec spec, double timeoutSeconds, std::string logDir, bool allowServe);
  ~AdapterClient();

  const AdapterSpec& spec() const { return spec_; }
  // Queries once; throws AdapterError.
  const Capabilities& capabilities();
  // Runs one case in one mode into outDir (created empty). Throws AdapterError on any failure and InputError
  // when the adapter refuses the request as bad (exit code 2 / bad_request).
  RunMeta run(const std::string& caseDir, const std::string& outDir, const std::string& mode, int steps, int blocks);
  int runs() const { return runs_; }

 private:
  void runServe(const std::string& caseDir, const std::string& outDir, const std::string& mode);
  void runProcessMode(const std::string& caseDir, const std::string& outDir, const std::string& mode);

  AdapterSpec spec_;
  double timeout_;
  std::string logDir_;
  bool allowServe_;
  std::optional<Capabilities> caps_;
  std::unique_ptr<ServeProcess> server_;
  int runs_ = 0;
};

}  // namespace ckpt
