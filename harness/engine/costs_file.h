// A profiled model's chain costs (harness/engine/COSTS.md, format ckptcheck-chain-costs version 1): what
// `ckptcheck profile` measured of each block of a user's model, read back and checked field by field, and the
// planner's ChainCost built from it, so `plan --costs` and `report --costs` plan a profiled model as a case.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/engine/chain_cost.h"

namespace ckpt {

struct ProfiledOp {
  std::string op;  // "aten.addmm.default"
  int64_t savedBytes = 0;
  int64_t forwardFlops = 0, backwardFlops = 0;
  bool matmul = false;
};

struct ProfiledBlock {
  std::string name;  // module path, "transformer.h.3"
  bool savesInput = false, savesOutput = false;
  std::vector<ProfiledOp> ops;
  int64_t forwardFlops = 0, backwardFlops = 0;
  double forwardSeconds = 0, backwardSeconds = 0;
  std::optional<double> recomputeSeconds;     // what recomputing it adds to the step, may be negative (optional; older
                                              // files: forward_seconds + checkpoint_seconds)
  std::optional<double> recomputeEndSeconds;  // the same with its successor stored (optional; absent:
                                              // recomputeSeconds)
  int64_t savedBytes() const;                 // its ops' saved bytes
};

struct ProfiledPart {  // what runs before or after the chain
  int64_t savedBytes = 0;
  int64_t forwardFlops = 0, backwardFlops = 0;
  double forwardSeconds = 0, backwardSeconds = 0;
  bool savesBoundary = false;  // before: saves x_0; after: saves x_L
};

struct SharedStorage {
  int64_t bytes = 0;
  std::vector<int> savedBy;  // block indices, ascending
  bool before = false, after = false;
  bool argument = false;  // a further argument every block takes: a recomputed segment's checkpoint keeps it
};

struct ChainCosts {
  std::string model, framework;
  int64_t batchSize = 1;
  double stepSeconds = 0;
  double checkpointSeconds = 0;        // what recomputing a block costs beyond its forward, may be negative
                                       // (optional; older files: 0)
  std::vector<int64_t> boundaryBytes;  // x_0 .. x_L
  std::vector<ProfiledBlock> blocks;
  ProfiledPart before, after;
  std::vector<SharedStorage> shared;
  int layers() const { return static_cast<int>(blocks.size()); }
};

inline constexpr const char* kCostsFormat = "ckptcheck-chain-costs";
inline constexpr int kCostsVersion = 1;

// The format's bounds (COSTS.md, "Bounds"), refused on load with the field named. Every integer is at most
// kMaxCostsCount, and so are the file's byte counts added up and its FLOPs added up: a peak, a plan's FLOPs with
// blocks recomputed (the planner checks its own sums) and the placement's sums then stay far inside 64 bits.
// Blocks are bounded by the planner's work: segments:budget= is O(L^2 x levels) a try (3000 identical blocks took 20 s
// on a loaded 2-core machine, 10000 over 200 s); optimal refuses heterogeneous chains past ~1600 blocks itself.
inline constexpr int64_t kMaxCostsCount = int64_t{1} << 53;
inline constexpr double kMaxCostsSeconds = 1e9;
inline constexpr int64_t kMaxCostsBatch = int64_t{1} << 20;  // as profile's and validate's --batch-size
inline constexpr int kMaxCostsBlocks = 2000;                 // segments' own bound, kSegmentsMaxBlocks (policy.h)

// Throws InputError of one line naming the file and the field: "costs.json: blocks[3].forward_flops: must be a
// non-negative integer".
ChainCosts parseChainCosts(const nlohmann::json& j, const std::string& where);
ChainCosts loadChainCosts(const std::string& path);

// The planner's view (COSTS.md): block i a program of one node per op, boundaries from boundary_bytes, the part
// before the chain as the stem's FLOPs, the part after as the loss. A shared storage is charged once, to the
// first party that saves it in forward order.
ChainCost chainCostOf(const ChainCosts& c);

}  // namespace ckpt
