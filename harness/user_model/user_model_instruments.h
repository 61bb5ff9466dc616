// The measuring passes of a user model and the property "the instruments change nothing"
// (harness/user_model/torch/USER_MODEL.md, "The compared runs are yours"). The plain and checkpointed runs whose
// tensors are compared carry nothing of ckptcheck's; each instrument (harness/user_model/torch/instruments.py)
// runs in a pass of its own, a process of its own, which trains the same model with the same seeds and dumps the
// same tensors. A pass whose dump differs from the compared run of its mode changed the model: its evidence is
// dropped and the report names the instrument; the verdict stays the compared runs'.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/user_model/user_model_run.h"
#include "harness/compare.h"
#include "harness/diagnose.h"

namespace ckpt {

// One run's step under torch.profiler's memory timeline (harness/user_model/torch/peak_memory.py).
struct StepMemory {
  int64_t peakBytes = 0;                // the most the step held at once above its start (forward and backward)
  int64_t activationBytes = 0;          // what the forward left allocated when the backward began
  int64_t profilerActivationBytes = 0;  // the profiler's own ACTIVATION category (0 under torch.compile)
  // A distributed run (harness/user_model/torch/distributed.py): every rank's activation and peak bytes, by rank;
  // the figures above are rank 0's.
  std::vector<std::pair<int64_t, int64_t>> perRank;
  int step = 0;            // the dumped step profiled: the pass's last, so the instruments check compares it
  bool firstCall = false;  // that step was a compiled model's first call (--steps 1): compilation included
  // The step's peak of every tensor but parameters, their gradients and optimizer state, op workspace left out:
  // what a plan's peak predicts (validate --plan); none where the profiler could not categorise the timeline.
  std::optional<int64_t> peakActivationBytes;
};

// One instrument's pass of one mode, against the compared run of that mode.
struct InstrumentCheck {
  std::string instrument;             // masks, saved, memory
  std::string mode;                   // plain, checkpoint
  std::optional<Difference> changed;  // the first tensor the instrumented pass got otherwise

  std::string describe() const;  // one line: "the dropout-mask probe changed the checkpointed run: ..."
};

// Runs the driver for a mode into a directory with the named instruments ("" would be a compared run).
using PassRunner =
    std::function<RunDump(const std::string& mode, const std::string& dir, const std::string& instruments)>;

struct MeasuringPasses {
  std::vector<InstrumentCheck> checks;              // every pass run, changed or not
  std::array<std::optional<RunDump>, 2> saved;      // plain, checkpoint: kept only when unchanged
  std::array<std::optional<StepMemory>, 2> memory;  // plain, checkpoint: kept only when unchanged
  std::string fault;  // a pass that could not run (the profiler records no memory): one line; empty otherwise
};

// The saved-bytes pass (saved-tensor hooks, the placement probe, --plan's meter) and the memory pass of both
// modes, each checked against `plain` / `checkpointed`.
MeasuringPasses runMeasuringPasses(const PassRunner& run, const RunDump& plain, const RunDump& checkpointed,
                                   const std::string& dir);

// A bitwise difference's dropout-mask evidence: the masks pass of both modes, whose masks of the first differing
// step are returned when neither pass changed its run (else none, and `checks` says which changed).
std::vector<TensorEvidence> maskEvidence(const PassRunner& run, const RunDump& plain, const RunDump& checkpointed,
                                         const std::string& dir, std::vector<InstrumentCheck>& checks);

nlohmann::json toJson(const InstrumentCheck& c);
// {"plain": {...}, "checkpoint": {...}, "activation_saving": f}: validate.json's memory.profiler.
nlohmann::json toJson(const StepMemory& plain, const StepMemory& checkpointed);
// "activation memory plain A B, checkpointed C B (x% saved), step peak P / Q B" for the summary, and which step
// the profiler measured when that was a compiled model's first call.
std::string toText(const StepMemory& plain, const StepMemory& checkpointed);

}  // namespace ckpt
