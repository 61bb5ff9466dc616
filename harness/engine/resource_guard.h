// The resource guard: a case too big for this machine is refused (InputError, exit code 2) before anything of it
// is allocated, with the planned figure in the message, instead of ending in the OOM killer or bad_alloc.
//
// Two stages, because the planner itself builds one block of each kind to read its op metadata:
//  1. from the spec alone, in long double (no allocation, no integer overflow): the chain's parameters with
//     their gradients against the parameter limit, and the input plus the largest single activation tensor of
//     any block (a lower bound of every plan) against the activation limit;
//  2. from the plan: the planned peak activation bytes of every schedule that will run, against the activation
//     limit.
// The activation limit: --max-activation-bytes, else $CKPT_MAX_ACTIVATION_BYTES, else half of the machine's memory
// (the smaller of physical memory and the cgroup's memory.max). Parameters are not activations: their limit is
// half of the machine's memory, or the activation limit when that is set higher.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cases/case_spec.h"
#include "harness/engine/policy.h"

namespace ckpt {

inline constexpr const char* kMaxActivationBytesEnv = "CKPT_MAX_ACTIVATION_BYTES";
inline constexpr const char* kMaxActivationBytesHelp =
    "Refuse a case whose planned activation bytes exceed BYTES (suffixes K, M, G, T: powers of 1024); default "
    "$CKPT_MAX_ACTIVATION_BYTES, else half of this machine's memory";

struct MemoryLimit {
  int64_t bytes = 0;           // activation bytes
  std::string source;          // "--max-activation-bytes", "CKPT_MAX_ACTIVATION_BYTES", "default (half of ...)"
  int64_t parameterBytes = 0;  // parameters and their gradients; 0 = the same as `bytes`
};

// "123", "64M", "2G", "1.5T" -> bytes; throws InputError("<what>: ...") unless a whole positive byte count.
int64_t parseByteCount(const std::string& text, const std::string& what);
// The flag's text ("" when not given) wins over the environment, which wins over the default.
MemoryLimit memoryLimit(const std::string& flagText);
// Bytes of memory this process may use: min(physical memory, cgroup memory.max).
int64_t machineMemoryBytes();

// Parameter elements of block `b` of case `c` (weights and biases; BatchNorm's running statistics are buffers):
// the sum over its ops (reference/op_table.h), without building them.
int64_t blockParameterCount(const BlockSpec& b, const CaseSpec& c);

// What planning alone allocates: caseChainCost builds one block of each distinct kind (parameters and their
// gradients) to read its op metadata. Refuses (InputError) when that exceeds half of this machine's memory, so
// `ckptcheck plan` on a huge width is refused instead of being killed for memory.
void guardPlanning(const CaseSpec& c);
// Stage 1 (spec only). Throws InputError naming the case, the figure and the limit.
void guardCaseSizes(const CaseSpec& c, const MemoryLimit& limit);
// Stage 2: plans store-all (the reference every command runs beside a policy) and each policy given, and
// refuses when a planned peak exceeds the limit. Runs stage 1 first, so it is the one call a command needs.
void guardCase(const CaseSpec& c, const std::vector<PolicySpec>& policies, const MemoryLimit& limit);

}  // namespace ckpt
