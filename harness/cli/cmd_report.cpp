// ckptcheck report: bench_engine's JSON (and optionally `ckptcheck verify --json`) into DIR/report.md and a
// self-contained DIR/report.html with plots, and DIR/runs.json, the baseline a later `report --baseline DIR`
// compares with (reports/baseline.py). The tables, summary and figures are made by reports/make_report.py
// (matplotlib); this subcommand checks the arguments, finds the script and a Python that has matplotlib, runs it
// and passes its exit code on (0 written, 1 written but --check found a failed verification or --baseline a
// regression, 2 bad input, 3 missing dependency or I/O error).
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/input_error.h"
#include "harness/atomic_file.h"
#include "harness/cli/cli_checks.h"
#include "harness/cli/commands.h"
#include "harness/engine/costs_plans.h"
#include "harness/exit_codes.h"

extern char** environ;

namespace ckpt::cli {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::vector<std::string> bench;
  std::string verify;
  std::vector<std::string> frameworks;
  std::vector<std::string> costs;
  std::vector<std::string> planLoops;
  int64_t budget = 0;
  std::string baseline;
  std::string junit;
  std::string out;
  bool quiet = false;
  bool check = false;
};

// The source tree that holds the `reports` package (run as `python -m reports.make_report`): $CKPT_SOURCE_DIR when
// set, else the tree this binary was built from.
fs::path reportSourceRoot() {
  if (const char* env = std::getenv("CKPT_SOURCE_DIR"); env && *env) {
    if (!fs::exists(fs::path(env) / "reports" / "make_report.py"))
      throw InputError(std::string("CKPT_SOURCE_DIR='") + env + "' holds no reports/make_report.py");
    return env;
  }
  const fs::path root = CKPT_REPORT_SOURCE_DIR;
  if (!fs::exists(root / "reports" / "make_report.py"))
    throw InputError("cannot find reports/make_report.py: set CKPT_SOURCE_DIR to the source tree");
  return root;
}

// $CKPT_REPORT_PYTHON, else Debian's python3 (ci/setup installs python3-matplotlib for it), else python3 on PATH.
std::string python() {
  if (const char* env = std::getenv("CKPT_REPORT_PYTHON"); env && *env) return env;
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

// The script's environment: ours, with the source root first on PYTHONPATH so that `-m reports.make_report` finds
// its package wherever the caller stands.
std::vector<std::string> scriptEnvironment(const fs::path& root) {
  std::vector<std::string> env;
  std::string pythonPath = "PYTHONPATH=" + root.string();
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind("PYTHONPATH=", 0) == 0) {
      if (kv.size() > 11) pythonPath += ":" + kv.substr(11);
    } else {
      env.push_back(kv);
    }
  }
  env.push_back(pythonPath);
  return env;
}

int runScript(const std::vector<std::string>& args, const fs::path& root) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env = scriptEnvironment(root);
  std::vector<char*> envp;
  for (auto& kv : env) envp.push_back(kv.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (const int rc = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()); rc != 0) {
    std::cerr << "ckptcheck report: cannot run " << args[0] << ": " << std::strerror(rc) << "\n";
    return kExitInfra;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      std::cerr << "ckptcheck report: waitpid: " << std::strerror(errno) << "\n";
      return kExitInfra;
    }
  if (!WIFEXITED(status)) {
    std::cerr << "ckptcheck report: the report script was killed (signal " << WTERMSIG(status) << ")\n";
    return kExitInfra;
  }
  const int code = WEXITSTATUS(status);
  if (code == kExitOk || code == kExitFinding || code == kExitBadInput) return code;
  if (code == 127) std::cerr << "ckptcheck report: " << args[0] << " not found (set CKPT_REPORT_PYTHON)\n";
  return kExitInfra;
}

// --costs FILE: every policy planned on the profiled model, written beside the report as
// costs-plans-N.json (harness/engine/costs_plans.h) for the script's --costs-plans.
std::string writeCostsPlans(const std::string& costsPath, std::optional<int64_t> budget, const fs::path& out,
                            size_t n) {
  const ChainCosts c = loadChainCosts(costsPath);
  const ChainCost cost = chainCostOf(c);
  if (budget) {
    const int64_t least = costsMinBudget(cost);
    if (*budget < least)
      throw InputError("report: --budget " + std::to_string(*budget) + " is below the smallest feasible budget of '" +
                       costsPath + "', " + std::to_string(least) + " bytes");
  }
  const std::vector<CostsPlanRow> rows = planCostsPolicies(c, cost, budget);
  const fs::path file = out / ("costs-plans-" + std::to_string(n) + ".json");
  writeFileAtomic(file, costsPlansJson(c, cost, rows, budget).dump(1) + "\n");
  return file.string();
}

}  // namespace

void addReport(CLI::App& app, int& exitCode) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("report", "Write the overhead report (Markdown and self-contained HTML with plots)");
  cmd->add_option("--bench", o->bench, "bench_engine JSON (--benchmark_out_format=json); repeatable");
  cmd->add_option("--costs", o->costs,
                  "A profiled model's chain costs (ckptcheck profile): its policies planned; repeatable");
  cmd->add_option("--plan-loop", o->planLoops,
                  "With --costs: a model's placements applied and checked (tests/adapters/check_plan_loop.py's "
                  "plan-loop.json); repeatable");
  cmd->add_option("--budget", o->budget, "With --costs: mark the cheapest policy under this many activation bytes")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 62));
  cmd->add_option("--verify", o->verify, "ckptcheck verify --json output: adds the bitwise verdicts");
  cmd->add_option("--frameworks", o->frameworks,
                  "ckptcheck validate --timing-case ... --json output: another framework's checkpointing overhead next "
                  "to ckptcheck's; repeatable");
  cmd->add_option("--baseline", o->baseline,
                  "The --out directory of an earlier report (its runs.json): compare peak bytes, forward evaluations "
                  "and FLOPs exactly, the time overhead against twice each run's spread over repetitions "
                  "(reports/README.md); exit 1 on a regression");
  cmd->add_option("--junit", o->junit, "With --baseline: write the comparison as a JUnit report to FILE");
  cmd->add_option("--out", o->out, "Output directory (report.md, report.html, runs.json, fig-*.svg)")->required();
  cmd->add_flag("--quiet", o->quiet, "Do not print the summary table");
  cmd->add_flag("--check", o->check,
                "Exit 1 when a benchmarked step is not bitwise equal or not as planned, a benchmark failed, or the "
                "verify JSON has a finding (the report is written either way)");
  cmd->callback([o, &exitCode] {
    if (o->bench.empty() && o->costs.empty()) throw InputError("report: give --bench FILE or --costs FILE");
    if (o->budget > 0 && o->costs.empty()) throw InputError("report: --budget needs --costs");
    if (!o->planLoops.empty() && o->costs.empty()) throw InputError("report: --plan-loop needs --costs");
    requireDirectory("--out", o->out, false);  // a file there was an "internal error" (cli_checks.h)
    if (!o->junit.empty() && o->baseline.empty()) throw InputError("report: --junit needs --baseline");
    if (!o->baseline.empty() && !fs::is_directory(o->baseline))
      throw InputError("report: --baseline '" + o->baseline + "': no such directory");
    for (const auto& b : o->bench)
      if (!fs::is_regular_file(b)) throw InputError("report: --bench '" + b + "': no such file");
    if (!o->verify.empty() && !fs::is_regular_file(o->verify))
      throw InputError("report: --verify '" + o->verify + "': no such file");
    const fs::path root = reportSourceRoot();
    std::vector<std::string> args = {python(), "-m", "reports.make_report"};
    for (const auto& b : o->bench) {
      args.push_back("--bench");
      args.push_back(b);
    }
    if (!o->verify.empty()) {
      args.push_back("--verify");
      args.push_back(o->verify);
    }
    for (const auto& f : o->frameworks) {
      if (!fs::is_regular_file(f)) throw InputError("report: --frameworks '" + f + "': no such file");
      args.push_back("--frameworks");
      args.push_back(f);
    }
    if (!o->costs.empty()) fs::create_directories(o->out);
    for (size_t i = 0; i < o->costs.size(); ++i) {
      args.push_back("--costs-plans");
      args.push_back(
          writeCostsPlans(o->costs[i], o->budget > 0 ? std::optional<int64_t>(o->budget) : std::nullopt, o->out, i));
    }
    for (const auto& p : o->planLoops) {
      if (!fs::is_regular_file(p)) throw InputError("report: --plan-loop '" + p + "': no such file");
      args.push_back("--plan-loop");
      args.push_back(p);
    }
    if (!o->baseline.empty()) {
      args.push_back("--baseline");
      args.push_back(o->baseline);
    }
    if (!o->junit.empty()) {
      args.push_back("--junit");
      args.push_back(o->junit);
    }
    args.push_back("--out");
    args.push_back(o->out);
    if (!o->quiet) args.push_back("--print-summary");
    if (o->check) args.push_back("--check");
    std::cout.flush();
    exitCode = runScript(args, root);
  });
}

}  // namespace ckpt::cli
