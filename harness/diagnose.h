// The class of a finding, computed from the tensors of its first differing step, so a report says *why* two
// runs differ, not only where:
//   missing-gradient     a gradient is absent, or all zero, in the checkpointed run where the plain run has one
//   rng-desync           a dropout-like output's zero pattern differs, or the generator ends in another state
//                        (an unexplained difference is re-run where the draws cannot differ: equal then, rng-desync)
//   state-updated-twice  every differing running statistic equals what one more momentum update would give
//                        (a counter: one more increment), the recompute having updated it again; or a few more,
//                        where a block is recomputed more than once
//   rounding-level       every difference is within N ULP of its tensor's scale (the ULP of the tensor's largest
//                        magnitude): summation order, a recompiled graph. Per-element ULP would not do: a gradient
//                        element that cancels to nearly zero is thousands of its own ULPs off after any reordering.
//                        A gradient zero in exact arithmetic (a bias before BatchNorm) is noise in both runs: within
//                        N ULP of the step's largest differing gradient it counts as rounding, never as missing.
//   semantic             anything else (its line says when only buffers differ: the computation is right)
// Checked in that order: the first that explains the evidence wins; a gradient absent where the plain run has one
// is missing whatever the plain value. Used by `validate` for user models
// (harness/user_model/user_model.h) and, through diagnose_steps.h, for every adapter's check-1 finding
// (harness/validate/validate_case.cpp); any caller with two runs' tensors can use it.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ckpt {

// Differences within this many ULP everywhere are classed rounding-level (`validate --ulp N` raises it for user
// models and accepts them).
inline constexpr uint64_t kRoundingLevelUlp = 64;

enum class FindingClass { kMissingGradient, kRngDesync, kStateUpdatedTwice, kRoundingLevel, kSemantic };
const char* findingClassName(FindingClass c);  // "missing-gradient", "rng-desync", ...

enum class TensorKind { kLoss, kGradient, kState, kParameter, kRng, kMask };

// One tensor of the first differing step in both runs. Values as double: exact for float32, float64, bool,
// bytes and integers below 2^53 (counters).
struct TensorEvidence {
  std::string name;
  TensorKind kind = TensorKind::kGradient;
  bool plainPresent = true, otherPresent = true;
  std::vector<double> plain, other;
  bool floating = true;
  int digits = 24;                 // floating: significand bits (float32 24, float64 53)
  uint64_t maxUlp = 0;             // floating: the largest per-element ULP distance (reported, not used)
  std::vector<double> before;      // state: the value before this step (empty when unknown)
  std::optional<double> momentum;  // state: the module's momentum when known (BatchNorm's 0.1)
  int64_t passes = 1;              // state: updates per step (micro-batches, cases/micro_batches.h)
};

struct Diagnosis {
  FindingClass cls = FindingClass::kSemantic;
  std::string why;            // one line: the evidence for the class
  double worstScaledUlp = 0;  // the largest difference in ULPs of its tensor's scale (infinite: not comparable)
};

// {"class": "state-updated-twice", "why": "..."}, as every report's JSON carries it.
nlohmann::json toJson(const Diagnosis& d);

// `differing`: every tensor of the step whose two versions differ (masks included: they are evidence only).
// `roundingUlp`: the N of rounding-level.
Diagnosis diagnose(const std::vector<TensorEvidence>& differing, uint64_t roundingUlp);

// The one re-run a class may ask for: a semantic difference in a case that draws random numbers (dropout,
// drop-path, RReLU: drawsRandomNumbers, cases/stochastic_layers.h) that vanishes in a re-run where the draws
// cannot differ came from the random draws (rng-desync), though no generator state or mask showed it (an engine
// that draws anew in the recompute and puts the generator back). `verify` re-runs its engine's policy run with
// the engine's generator handling made the correct one and nothing else changed (harness/verify/draws_replayed.h):
// the same model, masks and routing. `validate`, which cannot correct a framework, re-runs an adapter's case with
// the draws off (randomnessOff; harness/validate/validate_case.cpp), which removes drop-path nodes and changes
// routing, so there a non-random bug inside a stochastic block can still read as rng-desync.
bool worthDropoutOffRerun(const Diagnosis& d, bool caseDraws);
Diagnosis dropoutOffDiagnosis();     // rng-desync, with validate's evidence as its why
Diagnosis drawsReplayedDiagnosis();  // rng-desync, with verify's

// max |plain - other| in units of the ULP of max |plain| at t.digits (0 when equal, infinity for NaN or a zero
// scale with a difference).
double scaledUlp(const TensorEvidence& t);

// How many times more `other` was updated than `plain`, the way `before` became `plain` (0: it was not): a policy
// that recomputes a block twice (recursive) updates its statistics twice more. At most kMaxFurtherUpdates; more
// than one is told only where the momentum is known (or for a counter). Exposed for its unit test.
inline constexpr int kMaxFurtherUpdates = 16;
int furtherUpdates(const TensorEvidence& t);

}  // namespace ckpt
