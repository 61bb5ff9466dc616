#include "harness/engine/resource_guard.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <unistd.h>

#include "cases/block_kind.h"
#include "common/input_error.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/plan.h"
#include "reference/op_table.h"

namespace ckpt {
namespace {

using Real = long double;  // exact for every integer below 2^64: the spec's products cannot overflow it

// The planner and executor count FLOPs in int64; recompute can multiply a step's forward FLOPs a few times over.
constexpr Real kMaxStepFlops = static_cast<Real>(int64_t{1} << 60);

std::string human(Real bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  std::ostringstream s;
  s.precision(u == 0 ? 0 : 3);
  s << std::fixed << static_cast<double>(bytes) << " " << units[u];
  return s.str();
}

std::string figure(Real bytes) {
  std::ostringstream s;
  s.precision(0);
  s << std::fixed << bytes << " bytes (" << human(bytes) << ")";
  return s.str();
}

std::string limitText(const MemoryLimit& l) {
  return "the limit " + figure(static_cast<Real>(l.bytes)) + " set by " + l.source +
         (l.source.rfind("--", 0) == 0 ? "" : "; raise it with --max-activation-bytes");
}

int64_t cgroupLimit() {
  std::ifstream in("/sys/fs/cgroup/memory.max");  // cgroup v2; "max" when unlimited
  std::string s;
  if (!(in >> s) || s.empty() ||
      !std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return std::numeric_limits<int64_t>::max();
  try {
    return std::stoll(s);
  } catch (const std::exception&) {
    return std::numeric_limits<int64_t>::max();
  }
}

// The block's op nodes as its kind states them (cases/kinds/); nothing is allocated.
std::vector<OpNode> programOf(const BlockSpec& b, const CaseSpec& c) { return b.kind->program(b, c); }

// Elements of the largest activation tensor a block allocates: the block boundary or an op's largest output.
Real largestTensor(const BlockSpec& b, const CaseSpec& c) {
  const Real rows = static_cast<Real>(c.batch) * static_cast<Real>(c.seq);
  Real largest = rows * static_cast<Real>(c.width);
  for (const OpNode& n : programOf(b, c))
    largest = std::max(largest, opKindEntry<double>(n.op).largest(n, static_cast<Real>(c.batch), rows));
  return largest;
}

// A generous estimate of a block's forward FLOPs (matmuls and attention dominate).
Real blockForwardFlops(const BlockSpec& b, const CaseSpec& c) {
  const Real rows = static_cast<Real>(c.batch) * static_cast<Real>(c.seq);
  Real f = 2 * rows * static_cast<Real>(blockParameterCount(b, c)) + 16 * rows * static_cast<Real>(c.width);
  for (const OpNode& n : programOf(b, c))
    f += opKindEntry<double>(n.op).extraFlops(n, static_cast<Real>(c.batch), static_cast<Real>(c.width));
  return f;
}

}  // namespace

int64_t parseByteCount(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) { return InputError(what + ": " + why + " (got '" + text + "')"); };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i);
  std::string suffix = text.substr(i);
  for (char& ch : suffix) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1 || number.front() == '.' ||
      number.back() == '.')
    throw bad("must be a positive byte count such as 1000000, 512M or 8G");
  Real scale = 1;
  if (!suffix.empty()) {
    const std::string units = "KMGT";
    const size_t u = units.find(suffix[0]);
    const std::string rest = suffix.substr(1);
    if (suffix == "B") {
      scale = 1;
    } else if (u == std::string::npos || !(rest.empty() || rest == "B" || rest == "IB")) {
      throw bad("unknown unit '" + text.substr(i) + "' (use K, M, G or T: powers of 1024)");
    } else {
      for (size_t k = 0; k <= u; ++k) scale *= 1024;
    }
  }
  const Real bytes = std::floor(std::strtold(number.c_str(), nullptr) * scale);
  if (!(bytes >= 1)) throw bad("must be at least 1 byte");
  if (bytes > static_cast<Real>(int64_t{1} << 62)) throw bad("must be at most 2^62 bytes");
  return static_cast<int64_t>(bytes);
}

int64_t machineMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  int64_t phys = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{8} << 30;
  return std::min(phys, cgroupLimit());
}

MemoryLimit memoryLimit(const std::string& flagText) {
  const int64_t half = machineMemoryBytes() / 2;
  MemoryLimit l{half, "default (half of this machine's memory)", half};
  if (!flagText.empty()) l = {parseByteCount(flagText, "--max-activation-bytes"), "--max-activation-bytes", 0};
  else if (const char* env = std::getenv(kMaxActivationBytesEnv); env && *env)
    l = {parseByteCount(env, kMaxActivationBytesEnv), kMaxActivationBytesEnv, 0};
  l.parameterBytes = std::max(half, l.bytes);
  return l;
}

int64_t blockParameterCount(const BlockSpec& b, const CaseSpec& c) {
  int64_t n = 0;
  for (const OpNode& node : programOf(b, c)) n += opKindEntry<double>(node.op).params(node);
  return n;
}

void guardCaseSizes(const CaseSpec& c, const MemoryLimit& limit) {
  const Real scalar = c.dtype == DType::kFloat ? 4 : 8;
  const Real lim = static_cast<Real>(limit.bytes);
  Real params = 0, largest = 0, flops = 0;
  for (const BlockSpec& b : c.blocks) {
    params += static_cast<Real>(blockParameterCount(b, c));
    largest = std::max(largest, largestTensor(b, c));
    flops += blockForwardFlops(b, c);
  }
  const std::string who = "case '" + c.name + "': ";
  // Values and gradients; every command holds at least one chain.
  const Real paramBytes = 2 * params * scalar;
  const int64_t paramLimit = limit.parameterBytes > 0 ? limit.parameterBytes : limit.bytes;
  if (paramBytes > static_cast<Real>(paramLimit))
    throw InputError(who + "its parameters and their gradients take " + figure(paramBytes) + ", over the limit " +
                     figure(static_cast<Real>(paramLimit)) +
                     " for parameters (half of this machine's memory, or --max-activation-bytes when higher)");
  // The input stays live for the whole step, and some block's largest tensor lives beside it.
  const Real boundary = static_cast<Real>(c.batch) * static_cast<Real>(c.seq) * static_cast<Real>(c.width) * scalar;
  const Real least = boundary + largest * scalar;
  if (least > lim)
    throw InputError(who + "planned activation bytes are at least " + figure(least) +
                     " (the input and the largest tensor of one block), over " + limitText(limit));
  if (3 * flops > kMaxStepFlops) {
    std::ostringstream f;
    f.precision(3);
    f << static_cast<double>(3 * flops);
    throw InputError(who + "a training step takes about " + f.str() +
                     " FLOPs, beyond what ckptcheck's 64-bit FLOP counters can hold with recompute (2^60)");
  }
}

void guardPlanning(const CaseSpec& c) {
  const Real scalar = c.dtype == DType::kFloat ? 4 : 8;
  std::vector<BlockSpec> distinct;
  Real params = 0;
  for (const BlockSpec& b : c.blocks) {
    if (std::find(distinct.begin(), distinct.end(), b) != distinct.end()) continue;
    distinct.push_back(b);
    params += static_cast<Real>(blockParameterCount(b, c));
  }
  const Real bytes = 2 * params * scalar;
  const Real limit = static_cast<Real>(machineMemoryBytes() / 2);
  if (bytes > limit)
    throw InputError("case '" + c.name +
                     "': planning builds one block of each kind, whose parameters and gradients take " + figure(bytes) +
                     ", over half of this machine's memory " + figure(limit));
}

void guardCase(const CaseSpec& c, const std::vector<PolicySpec>& policies, const MemoryLimit& limit) {
  guardCaseSizes(c, limit);
  const ChainCost cost = caseChainCost(c);
  auto check = [&](const Schedule& s, const std::string& role) {
    const int64_t peak = planSchedule(s, cost).peakActivationBytes;
    if (peak > limit.bytes)
      throw InputError("case '" + c.name + "': planned peak activation bytes " + figure(static_cast<Real>(peak)) +
                       " of " + s.policy + role + ", over " + limitText(limit));
  };
  check(storeAllSchedule(cost), " (the reference)");
  for (const PolicySpec& p : policies) check(makeSchedule(p, cost), "");
}

}  // namespace ckpt
