// ckptcheck verify: the properties (harness/verify/properties.h) over random cases and the catalogue, with the
// correct engine or a mutant; a violation is shrunk to the smallest case that still shows it, written to a file,
// and printed with the commands that replay it.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cases/case_json.h"
#include "common/input_error.h"
#include "harness/atomic_file.h"
#include "harness/cli/cli_checks.h"
#include "harness/cli/commands.h"
#include "harness/compare.h"
#include "harness/dtype_dispatch.h"
#include "harness/engine/policy.h"
#include "harness/engine/resource_guard.h"
#include "harness/exit_codes.h"
#include "harness/mutants/catalog.h"
#include "harness/verify/policy_draw.h"
#include "harness/verify/report.h"
#include "reference/trainer.h"

namespace ckpt::cli {
namespace {

struct Args {
  VerifyOptions o;
  std::string policies;
  bool noCatalogue = false;
  bool json = false;
  std::string junit;
  std::string out;
  std::string shard;
  std::string device = "cpu";
};

// "I/N" with 0 <= I < N.
void parseShard(const std::string& text, VerifyOptions& o) {
  const size_t slash = text.find('/');
  try {
    size_t used = 0;
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    o.shardIndex = std::stoi(text.substr(0, slash), &used);
    if (used != slash) throw std::invalid_argument("index");
    o.shardCount = std::stoi(text.substr(slash + 1), &used);
    if (used != text.size() - slash - 1) throw std::invalid_argument("count");
  } catch (const std::exception&) {
    throw InputError("--shard '" + text + "': expected I/N with 0 <= I < N, e.g. 0/4");
  }
  if (o.shardCount < 1 || o.shardIndex < 0 || o.shardIndex >= o.shardCount)
    throw InputError("--shard '" + text + "': expected I/N with 0 <= I < N, e.g. 0/4");
}

std::string defaultFindingsDir() {
  const char* tmp = std::getenv("TMPDIR");
  return (std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / "ckptcheck-findings").string();
}

// The catalogue's case files verify checks, in order; none without the catalogue (or when runVerify will say it
// is missing).
std::vector<std::filesystem::path> catalogueFiles(const VerifyOptions& o) {
  std::vector<std::filesystem::path> files;
  const std::string dir = o.catalogueDir.empty() ? catalogueDirectory() : o.catalogueDir;
  if (!o.catalogue || dir.empty()) return files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// A catalogue case whose reference diverges (an lr that overflows its parameters) would hold every property, NaN
// being equal to NaN bit for bit: it cannot be judged (harness/compare.h). One reference run per case, next to the
// dozens of policy runs verify makes of it; the first that is not finite is named.
std::optional<std::string> nonFiniteCatalogueCase(const VerifyOptions& o) {
  if (!o.reproduce.empty()) return std::nullopt;
  const MemoryLimit memory = memoryLimit(o.maxActivationBytes);
  for (const auto& f : catalogueFiles(o)) {
    const CaseSpec spec = loadCase(f.string());
    guardCase(spec, {}, memory);
    const auto why = withScalar(spec.dtype, [&](auto t) {
      Chain<decltype(t)> chain = buildChain<decltype(t)>(spec);
      return firstNonFinite(trainReference(chain, spec.steps));
    });
    if (why)
      return "catalogue case '" + spec.name + "' (" + f.string() + "): the reference run is not finite: " + *why +
             "; " + kNotJudged;
  }
  return std::nullopt;
}

// A schedule:FILE policy fits one chain length, and verify's random cases have every length from 1 block up, so
// it is refused unless verify runs catalogue cases only (--cases 0) and every one of them has that length.
void checkScheduleFits(const VerifyOptions& o) {
  for (const std::string& item : o.policies) {
    if (item.find(':') == std::string::npos || parsePolicy(item).name != "schedule") continue;
    const Schedule s = readScheduleFile(parsePolicy(item).params.at("file"));
    const std::string n = std::to_string(s.layers);
    const std::string runInstead = "; check it with `ckptcheck run --case CASE --policy " + item + "` on a case of " +
                                   n + " blocks, or verify --cases 0 --catalogue-dir DIR with cases of " + n +
                                   " blocks";
    if (o.cases > 0 || !o.reproduce.empty())
      throw InputError("verify --policies " + item + ": the schedule is for " + n +
                       " blocks only, and random cases have other lengths" + runInstead);
    for (const auto& f : catalogueFiles(o)) {
      const size_t blocks = loadCase(f.string()).blocks.size();
      if (blocks != static_cast<size_t>(s.layers))
        throw InputError("verify --policies " + item + ": the schedule is for " + n + " blocks and catalogue case " +
                         f.filename().string() + " has " + std::to_string(blocks) + runInstead);
    }
  }
}

}  // namespace

void addVerify(CLI::App& app, int& exitCode) {
  auto a = std::make_shared<Args>();
  std::string ids;
  for (const PropertyDef& p : properties()) ids += (ids.empty() ? "" : ", ") + std::string(p.id);
  auto* cmd = app.add_subcommand(
      "verify", "Check properties 1-" + std::to_string(properties().size()) + " (" + ids +
                    ") over random cases and the catalogue; a violation is shrunk to the smallest case that shows it");
  cmd->add_option("--cases", a->o.cases, "Random cases (default 100)")->check(CLI::Range(0, 100000000));
  cmd->add_option("--seed", a->o.seed, "Seed of the random cases (default 1); case i depends on (seed, i) only")
      ->check(unsignedAtMost(UINT64_MAX));
  cmd->add_option("--policies", a->policies,
                  "Comma-separated policy families (store-all, uniform, recursive, revolve, optimal, selective, "
                  "composed, BLOCK+selective) or fixed policy strings (uniform:k=4; schedule:FILE with --cases 0 on a "
                  "catalogue of its chain length); default: every family");
  cmd->add_option("--mutant", a->o.mutant, "Run against this broken engine (see `ckptcheck mutants`); expect exit 1");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->add_option("--junit", a->junit, "Write a JUnit XML report (one test case per property) to FILE");
  cmd->add_option("--out", a->out, "Where a finding's shrunk case is written (default $TMPDIR/ckptcheck-findings)");
  cmd->add_option("--threads", a->o.threads,
                  "Worker threads (default: one per hardware thread); results do not depend on it")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--no-catalogue", a->noCatalogue, "Random cases only, not the named cases of cases/catalog");
  cmd->add_option("--catalogue-dir", a->o.catalogueDir,
                  "The catalogue directory (default: found from CKPT_SOURCE_DIR or the build)");
  cmd->add_option("--reproduce", a->o.reproduce,
                  "Check only the case of a finding's reproduce token SEED:INDEX[:PATH]");
  cmd->add_option("--max-blocks", a->o.limits.maxBlocks, "Longest random chain (default 40)")
      ->check(CLI::Range(1, 200));
  cmd->add_option("--max-steps", a->o.limits.maxSteps, "Most training steps of a random case (default 3)")
      ->check(CLI::Range(1, 10));
  cmd->add_option("--shrink-trials", a->o.maxShrinkTrials, "Most cases tried while shrinking (default 2000)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--shard", a->shard,
                  "Check only shard I of N (0 <= I < N): random case i and catalogue case k when i, k = I mod N; the N "
                  "shards together check what one run checks");
  cmd->add_option("--max-activation-bytes", a->o.maxActivationBytes, kMaxActivationBytesHelp);
  cmd->add_option("--device", a->device,
                  "cpu (default), cuda (the GPU backend; each policy against GPU store-all) or cuda-emulated (the "
                  "same device code on the CPU)");
  cmd->callback([a, &exitCode] {
    a->o.device = parseDevice(a->device);
    if (!a->shard.empty()) parseShard(a->shard, a->o);
    if (!a->policies.empty()) a->o.policies = splitPolicyList(a->policies);
    a->o.catalogue = !a->noCatalogue;
    if (!a->o.catalogueDir.empty()) requireDirectory("--catalogue-dir", a->o.catalogueDir, true);
    if (!a->out.empty()) requireDirectory("--out", a->out, false);
    if (const auto parent = std::filesystem::path(a->junit).parent_path(); !parent.empty())
      requireDirectory("--junit's folder", parent.string(), false);  // before the run, not after it
    checkScheduleFits(a->o);
    if (const auto why = nonFiniteCatalogueCase(a->o)) {  // not judged: neither holds nor a finding
      std::cerr << "ckptcheck: " << escapeControl(*why) << "\n";
      exitCode = kExitInfra;
      return;
    }
    const VerifyReport r = runVerify(a->o);
    FindingReplay replay;
    if (r.finding) replay = writeFinding(r, a->o, a->out.empty() ? defaultFindingsDir() : a->out);
    const FindingReplay* rp = r.finding ? &replay : nullptr;
    if (a->json) std::cout << toJson(r, rp).dump(2) << "\n";
    else std::cout << toText(r, rp);
    if (!a->junit.empty()) {
      const auto parent = std::filesystem::path(a->junit).parent_path();
      if (!parent.empty()) std::filesystem::create_directories(parent);
      writeFileAtomic(a->junit, toJUnit(r, rp));  // an interrupted run leaves the previous report whole
    }
    exitCode = r.finding ? kExitFinding : kExitOk;
  });
}

}  // namespace ckpt::cli
