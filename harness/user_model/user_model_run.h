// One run of the user's own PyTorch or JAX model (harness/user_model/torch/USER_MODEL.md,
// harness/user_model/jax/USER_MODEL.md): the spec `torch:module=PATH.py:FACTORY` (or `jax:...`), the driver process
// (harness/user_model/{torch,jax}/user_model.py, one dump format) that trains it plain or checkpointed and dumps its
// tensors, and the bitwise comparison of two such dumps.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/compare.h"
#include "harness/diagnose.h"

namespace ckpt {

struct UserModelSpec {
  std::string module;               // absolute path of the user's .py file
  std::string factory;              // the function in it
  std::string label;                // as given: "torch:module=examples/torch/gpt2.py:reentrant"
  std::string framework = "torch";  // torch | jax: which driver trains it
  // A distributed factory's ranks over several machines (torch only; USER_MODEL.md): this machine is node 0 of
  // `nnodes`, and the other nodes' torchrun joins the rendezvous at `rdzvEndpoint` (HOST:PORT).
  int nnodes = 1;
  std::string rdzvEndpoint;
};

// True when `adapter` (NAME:k=v,...) or one of the --option words names a module=.
bool isUserModelSpec(const std::string& adapter, const std::vector<std::string>& options);
// Parses "torch:module=PATH.py[:FACTORY]" (or "jax:...") plus --option words; FACTORY defaults to "factory"; torch
// also takes nnodes=N and rdzv_endpoint=HOST:PORT. Throws InputError (one line) for another framework, an unknown
// option or a bad value, or a module file that does not exist.
UserModelSpec parseUserModelSpec(const std::string& adapter, const std::vector<std::string>& options);

struct DumpedTensor {
  int step = 0;      // -1: before training (initial buffers)
  std::string kind;  // loss, grad, buffer, param, rng, mask
  std::string name;  // module path: "layer1.0.bn1.running_mean"
  std::string file;  // relative to the run directory; "" when absent (a parameter without gradient)
};

// Step 0's module-level record (harness/user_model/torch/placement.py): forward calls per module (recomputes
// included), each module's first input storages, and every storage packed for backward with the modules running.
struct Placement {
  struct Pack {
    uint64_t ptr = 0;
    int64_t bytes = 0;
    std::vector<std::string> stack;
  };
  std::map<std::string, int64_t> calls;
  std::map<std::string, std::vector<std::pair<uint64_t, int64_t>>> inputs;
  std::vector<Pack> packs;
};

struct RunDump {
  std::string dir;
  enum class Status { kOk, kBadFactory, kRaised, kCrashed } status = Status::kOk;
  std::string error;                  // one line when not kOk
  std::string phase;                  // where it stopped: "factory", "checkpoint transform", "step 1"
  std::optional<int64_t> savedBytes;  // step 0's saved activation bytes
  std::vector<double> stepSeconds;
  int batchSize = 0;
  int64_t zeroedTensors = 0;                   // with --zero-batch: floating batch tensors zeroed (0: nothing to zero)
  std::map<std::string, double> momenta;       // running buffer -> its module's momentum
  std::optional<Placement> placement;          // absent under torch.compile
  std::optional<nlohmann::json> planRecord;    // with --plan: what the applied placement saved and ran (user_model.py)
  std::optional<nlohmann::json> memoryRecord;  // the memory pass: its profiled step (peak_memory.py)
  // FSDP2 (distributed.py shard_rows): parameter -> (rows, rows per rank) of its row shards, so a difference in a
  // gathered gradient or parameter names the rank whose shard holds its first differing element.
  std::map<std::string, std::pair<int64_t, int64_t>> shardRows;
  nlohmann::json ranks = nlohmann::json::array();  // a distributed run: each rank's record (distributed.py launch)
  std::vector<DumpedTensor> tensors;               // in comparison order
  // JAX (harness/user_model/jax/residuals.py): XLA's compiled memory analysis of the step ({"temp": B, "argument":
  // B, "output": B, "alias": B, "hlo_ops": {...}}) and the largest saved residuals by source ([{"bytes": B,
  // "source": "..."}]).
  std::optional<nlohmann::json> compiledMemory;
  nlohmann::json savedResiduals = nlohmann::json::array();
};

// With a placement (--plan), the driver times at least this many plain and checkpointed steps side by side,
// alternating, after the dumped ones and two warm-up pairs, and more (up to four times as many) until the median
// is known to a point (user_model.py side_by_side, timed_enough): the measured overhead is the median of the
// pairs' ratios.
inline constexpr int kPlanTimingPairs = 48;

struct DriverRequest {
  int seed = 1;
  int steps = 2;
  int batchSize = 0;           // 0: the factory's
  bool zeroBatch = false;      // floating batch tensors set to zero (shrinking the batch's values)
  std::string mode;            // plain | checkpoint
  std::string dir;             // created empty
  std::string plan;            // a placement file applied instead of the factory's checkpoint (checkpoint mode)
  std::string instruments;     // a measuring pass (user_model_instruments.h); empty: a compared run
  bool randomnessOff = false;  // JAX: every dropout off (the diagnosis's randomness-off twin, never a verdict)
  double timeoutSeconds = 300;
};

// Runs the driver once; never throws for what the user's code does (that is the status).
RunDump runDriver(const UserModelSpec& spec, const DriverRequest& req);

struct DumpComparison {
  std::vector<Difference> differences;   // compared tensors (loss, grad, buffer, param, rng) in order
  std::optional<int> firstStep;          // the first step with a difference
  std::vector<TensorEvidence> evidence;  // that step's differing tensors, masks included, for diagnose()
};

// Compares `other` against `plain`, bit for bit. Throws AdapterError for an unreadable dump.
DumpComparison compareDumps(const RunDump& plain, const RunDump& other);

// The first non-finite loss, gradient or parameter after the step of a run (harness/compare.h, nonFinite), in
// dump order; nullopt when all are finite. Throws AdapterError for an unreadable dump.
std::optional<std::string> firstNonFinite(const RunDump& run);

// What the checkpoint placement implies the checkpointed run may save: the recomputed modules are those the
// checkpointed run calls more often than the plain run (outermost only); the bound is what the plain run saves
// outside them plus their inputs, each storage once. nullopt when nothing is recomputed or a run has no record.
struct PlacementBound {
  int64_t bytes = 0;
  std::vector<std::string> recomputed;
};
std::optional<PlacementBound> placementBound(const RunDump& plain, const RunDump& checkpointed);

std::string kindLabel(const std::string& kind);  // "grad" -> "gradient", "param" -> "parameter after the step"

}  // namespace ckpt
