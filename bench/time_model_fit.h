// The time model's two weights (bench/time_model.h), fitted per case on its calibration schedules:
//   full        full recomputation (uniform:k=L), the one catalogue policy among them: BM_Step marks its rows as
//               calibration rows, and the report leaves them out of its count;
//   twos        every block recomputed once with its tape, in segments of two;
//   pairs       checkpoints at every even boundary, the first forward keeping nothing; each pair is rebuilt in
//               the backward by advancing its first block, then running both with their tapes;
//   revolve     with one slot more than the catalogue's revolve (else 2, 3, 1): advances in runs;
//   uniform:k=1 where one of those is a policy's own schedule (a short chain).
// Each is timed side by side with the store-all reference step as BM_Step times a policy (alternating which goes
// first, CPU time of the thread, both chains put back before every step), and the weights are the least-squares
// fit of their overheads y = time ratio - 1 to a_tape * taped + a_advance * advancing (RecomputeShares). The worst
// calibration schedule's |y - fitted| is reported with them: how far the two-term model is from the schedules it
// was fitted on. A chain of one block, or a calibration without an advancing schedule, keeps the per-op repeats'
// own times (weights 1). Timing them in the same loop as the policy was tried: a third chain stepping between the
// two moved the measured overheads themselves (transformer uniform:k=8 from +0.23 to +0.14).
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench/recompute_profile.h"
#include "bench/time_model.h"
#include "harness/engine/placement.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "harness/policies/turns.h"

namespace ckpt::bench {

struct TimeModelFit {
  double tape = 1, advance = 1;  // a_tape, a_advance
  double residual = 0;           // the worst calibration schedule's |measured - fitted| overhead
  bool fitted = false;
};

inline double predictTimeOverhead(const TimeModelFit& fit, const RecomputeShares& r) {
  return fit.tape * r.taped + fit.advance * r.advancing;
}

// Every block recomputed once, in segments of two.
inline Schedule twosSchedule(int layers) {
  std::vector<Segment> segs;
  for (int i = 0; i < layers; i += 2) segs.push_back({i, std::min(i + 1, layers - 1), true});
  return placementSchedule(segs, layers, "calibration:twos");
}

// Checkpoints at every even boundary, the first forward keeping nothing; each pair rebuilt in the backward by
// advancing its first block, then running both with their tapes.
inline Schedule pairsSchedule(int layers) {
  Schedule s;
  s.policy = "calibration:pairs";
  s.layers = layers;
  TurnWriter w(s);
  int last = 0;  // the last checkpoint
  for (int j = 2; j < layers; j += 2) {
    w.advance(j - 2, j);
    last = j;
  }
  for (int j = last; j >= 0; j -= 2) {
    if (j + 1 < layers) {
      w.advance(j, j + 1);
      w.turn(j + 1);
    }
    w.turn(j);
  }
  return s;
}

// The calibration set of a chain: full recomputation (every block its own recomputed segment: the one catalogue
// policy in it, as the torch side's profile calibrates on the model fully recomputed), twos, pairs and revolve
// with one slot more than the catalogue's revolve (else 2, 3, 1), then uniform with a single segment; at most
// kCalibrationSchedules of them. Apart from full recomputation none is a schedule an evaluated policy also runs
// (`evaluated`), so those rows stay predictions; BM_Step marks the full-recomputation rows as calibration rows.
inline constexpr size_t kCalibrationSchedules = 4;

inline Schedule fullRecomputeSchedule(const ChainCost& cost) {
  return makeSchedule(parsePolicy("uniform:k=" + std::to_string(cost.layers())), cost);
}

inline std::vector<Schedule> calibrationSchedules(const ChainCost& cost, const std::vector<Schedule>& evaluated) {
  const int n = cost.layers();
  std::vector<Schedule> out{fullRecomputeSchedule(cost)};
  auto add = [&](const Schedule& c) {
    if (out.size() >= kCalibrationSchedules) return false;
    for (const Schedule& e : evaluated)
      if (e.instrs == c.instrs && e.keep == c.keep) return false;
    for (const Schedule& o : out)
      if (o.instrs == c.instrs) return false;
    out.push_back(c);
    return true;
  };
  int slots = 2;
  for (const Schedule& e : evaluated)
    if (const PolicySpec p = parsePolicy(e.policy); p.name == "revolve" && !p.selective)
      slots = std::stoi(p.params.at("slots")) + 1;
  add(twosSchedule(n));
  add(pairsSchedule(n));
  for (int c : {slots, 2, 3, 1})
    if (c < n && add(makeSchedule(parsePolicy("revolve:slots=" + std::to_string(c)), cost))) break;
  add(makeSchedule(parsePolicy("uniform:k=1"), cost));
  return out;
}

// A schedule's step over the store-all reference step, side by side as BM_Step times a policy (the two in turn,
// the order reversed every pair, both chains put back before every step, CPU time of the thread): the median of
// kChunks ratios, each over pairs summing to at least minSeconds / kChunks of the schedule's time.
template <class T>
double sideBySideOverhead(const CaseSpec& spec, const Schedule& schedule, double minSeconds) {
  constexpr int kChunks = 5, kWarmupPairs = 2;
  Chain<T> ref = buildChain<T>(spec), eng = buildChain<T>(spec);
  ChainSnapshot<T> refStart(ref), engStart(eng);
  bool engFirst = false;
  auto pair = [&](double& r, double& e) {
    for (int k = 0; k < 2; ++k) {
      const bool runEng = (k == 0) == engFirst;
      (runEng ? engStart : refStart).restore();
      const double t0 = threadCpuSeconds();
      if (runEng) executeStep(eng, schedule, 0);
      else referenceStep(ref, 0);
      (runEng ? e : r) += threadCpuSeconds() - t0;
    }
    engFirst = !engFirst;
  };
  double r = 0, e = 0;
  for (int i = 0; i < kWarmupPairs; ++i) pair(r, e);
  std::vector<double> ratios;
  for (int c = 0; c < kChunks; ++c) {
    r = e = 0;
    for (int i = 0; i < 2 || e < minSeconds / kChunks; ++i) pair(r, e);
    ratios.push_back(e / r - 1.0);
  }
  return median(ratios);
}

// Least squares over the calibration schedules' measured overheads y: y ~ a_tape * taped + a_advance * advancing.
// Unfitted (weights 1: the per-op repeats' own times) with fewer than two schedules or none that advances.
inline TimeModelFit fitWeights(const std::vector<RecomputeShares>& x, const std::vector<double>& y) {
  TimeModelFit fit;
  double stt = 0, saa = 0, sta = 0, sty = 0, say = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    stt += x[i].taped * x[i].taped;
    saa += x[i].advancing * x[i].advancing;
    sta += x[i].taped * x[i].advancing;
    sty += x[i].taped * y[i];
    say += x[i].advancing * y[i];
  }
  const double det = stt * saa - sta * sta;
  if (x.size() < 2 || y.size() != x.size() || !(std::abs(det) > 1e-9 * stt * saa)) return fit;
  fit.tape = (sty * saa - say * sta) / det;
  fit.advance = (say * stt - sty * sta) / det;
  for (size_t i = 0; i < x.size(); ++i)
    fit.residual = std::max(fit.residual, std::abs(y[i] - predictTimeOverhead(fit, x[i])));
  fit.fitted = true;
  return fit;
}

// The case's calibration: its schedules, each timed side by side with store-all for minSeconds, and the weights.
template <class T>
TimeModelFit fitTimeModel(const CaseSpec& spec, const ForwardShares& shares, const std::vector<Schedule>& evaluated,
                          double minSeconds) {
  const ChainCost cost = caseChainCost(spec);
  if (cost.layers() < 2) return {};
  std::vector<RecomputeShares> x;
  std::vector<double> y;
  for (const Schedule& c : calibrationSchedules(cost, evaluated)) {
    validateSchedule(c, cost);
    x.push_back(recomputeShares(shares, policyForwardCounts<T>(spec, c)));
    y.push_back(sideBySideOverhead<T>(spec, c, minSeconds));
  }
  return fitWeights(x, y);
}

}  // namespace ckpt::bench
