// A policy's step and the reference store-all step, timed side by side: the one loop that both BM_Step's
// repetitions and the time model's calibration schedules (bench/time_model_fit.h) time, so that a calibration
// schedule is measured as a policy is. Timed apart (their own loop, each step's result dropped at once, the first
// policy's chains alive), BM_Step's full-recomputation row measured 0.03 to 0.05 less overhead than the fit of the
// calibration on 3 and on 5 of the 10 cases in two runs (2026-12-06), and every prediction of those cases was
// scaled up with it.
//
// A pair is one reference step and one policy step, in alternating order, each from the same starting weights
// (both chains are put back before every step, outside the timed region, so every step does the same work). Each
// step's result is kept until that chain's next step (BM_Step reads the last ones), so a step runs while the other
// chain's result is alive, in every pair alike.
#pragma once
#include <utility>

#include "bench/recompute_profile.h"
#include "bench/time_model.h"
#include "harness/engine/executor.h"
#include "reference/trainer.h"

namespace ckpt::bench {

struct Elapsed {
  double wall = 0;
  double cpu = 0;  // CPU time of the calling thread (threadCpuSeconds)
  Elapsed& operator+=(const Elapsed& o) {
    wall += o.wall;
    cpu += o.cpu;
    return *this;
  }
};

class Stopwatch {
 public:
  Stopwatch() : wall_(Clock::now()), cpu_(threadCpuSeconds()) {}
  Elapsed elapsed() const { return {seconds(wall_, Clock::now()), threadCpuSeconds() - cpu_}; }

 private:
  Clock::time_point wall_;
  double cpu_;
};

// Two chains of one case (the reference's and the policy's), put back before each of their steps. Not copyable:
// the snapshots refer to the chains.
template <class T>
class SideBySide {
 public:
  SideBySide(const CaseSpec& spec, Schedule schedule)
      : schedule_(std::move(schedule)),
        ref_(buildChain<T>(spec)),
        eng_(buildChain<T>(spec)),
        refStart_(ref_),
        engStart_(eng_) {}
  SideBySide(const SideBySide&) = delete;
  SideBySide& operator=(const SideBySide&) = delete;

  struct Times {
    Elapsed ref, eng;
  };
  // One reference step and one policy step; the one that goes first alternates from pair to pair.
  Times pair() {
    Times t;
    if (engFirst_) {
      t.eng = timeEng();
      t.ref = timeRef();
    } else {
      t.ref = timeRef();
      t.eng = timeEng();
    }
    engFirst_ = !engFirst_;
    return t;
  }
  const Schedule& schedule() const { return schedule_; }
  const StepResult<T>& refResult() const { return refResult_; }
  const StepResult<T>& engResult() const { return engResult_; }

 private:
  Elapsed timeRef() {
    refStart_.restore();
    const Stopwatch w;
    refResult_ = referenceStep(ref_, 0);
    return w.elapsed();
  }
  Elapsed timeEng() {
    engStart_.restore();
    const Stopwatch w;
    engResult_ = executeStep(eng_, schedule_, 0);
    return w.elapsed();
  }

  Schedule schedule_;
  Chain<T> ref_, eng_;
  ChainSnapshot<T> refStart_, engStart_;
  StepResult<T> refResult_, engResult_;
  bool engFirst_ = false;
};

}  // namespace ckpt::bench
