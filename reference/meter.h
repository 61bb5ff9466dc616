// Counting of activation bytes. Every activation tensor's storage is charged to the meter that was current
// when it was allocated and credited back to that same meter when it dies, so "live" and "peak" are measured,
// not computed. Parameters and parameter gradients are plain Eigen matrices and never touch a meter.
// Temporaries inside one op's arithmetic (Eigen expression scratch) are workspace, not activations.
#pragma once
#include <cstdint>

namespace ckpt {

struct FlopCounts {
  int64_t forward = 0;    // first forward of the step
  int64_t recompute = 0;  // every forward run again to rebuild a dropped tape
  int64_t backward = 0;
  int64_t total() const { return forward + recompute + backward; }
  bool operator==(const FlopCounts&) const = default;
};

enum class Phase { kForward, kRecompute, kBackward };

class ActivationMeter {
 public:
  void allocate(int64_t bytes) {
    live_ += bytes;
    if (live_ > peak_) peak_ = live_;
  }
  void release(int64_t bytes) { live_ -= bytes; }
  int64_t live() const { return live_; }
  int64_t peak() const { return peak_; }
  void resetPeak() { peak_ = live_; }

  // FLOPs are counted as ops run, into the phase the executor says it is in.
  Phase phase = Phase::kForward;
  FlopCounts flops;
  int64_t forwardEvals = 0;  // block forward runs (initial + recompute)
  void countFlops(int64_t f) {
    switch (phase) {
      case Phase::kForward:
        flops.forward += f;
        break;
      case Phase::kRecompute:
        flops.recompute += f;
        break;
      case Phase::kBackward:
        flops.backward += f;
        break;
    }
  }

 private:
  int64_t live_ = 0;
  int64_t peak_ = 0;
};

// The meter charged by new tensors on this thread; null means "not measured" (tests, reference runs that do
// not care). Thread-local so properties can run cases on several threads.
ActivationMeter* currentMeter();
class MeterScope {
 public:
  explicit MeterScope(ActivationMeter* m);
  ~MeterScope();
  MeterScope(const MeterScope&) = delete;
  MeterScope& operator=(const MeterScope&) = delete;

 private:
  ActivationMeter* saved_;
};

}  // namespace ckpt
