// segments:budget=BYTES — the cheapest placement (harness/engine/placement.h: every block stored, or recomputed
// once from the input of its segment) whose planned peak fits the budget: optimal:budget= restricted to what
// per-module torch.utils.checkpoint can express. "Cheapest" is the fewest recomputed forward FLOPs.
//
// A dynamic programme over segment ends and the bytes the segments so far hold until their backward (on a grid
// of `kLevels` levels of budget / kLevels, rounded up): a stored segment holds its blocks' tapes, a recomputed one
// its input boundary; a segment's backward peaks at what the earlier segments hold plus its own tapes (recomputed
// or kept) and the largest gradient transient of its blocks. That model adds a boundary twice where a tape and
// the next segment both hold it, so it over-estimates; the schedule it picks is then planned exactly, and when the
// exact peak is still over the budget the programme runs again with the budget lowered by the excess. Because it
// over-estimates it can miss a cheaper placement, so the plain splits (uniform's K segments for every K, every
// block alone) are planned too and the least recompute among all that fit is the answer.
#include <algorithm>
#include <initializer_list>
#include <limits>
#include <optional>

#include "common/input_error.h"
#include "harness/engine/costs_file.h"
#include "harness/engine/placement.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"

namespace ckpt {
namespace {

constexpr int kLevels = 400;
constexpr int kRetries = 24;
constexpr int kMostSplits = 256;  // uniform's K segments planned for K up to this

struct BlockFigures {
  std::vector<int64_t> held;       // what block i's tape holds after its forward (boundaries it keeps included)
  std::vector<int64_t> transient;  // its forward-and-backward peak alone, above its tape
  std::vector<int64_t> flops;      // its forward FLOPs
};

BlockFigures figuresOf(const ChainCost& c) {
  BlockFigures f;
  for (int i = 0; i < c.layers(); ++i) {
    const BlockProgram& p = c.block(i);
    BytePool pool;
    const int x = pool.allocate(p.inBytes);
    SimTape tape;
    const int y = simForward(pool, p, x, &tape, {});
    pool.release(x);
    pool.release(y);
    const int64_t held = pool.live();
    const int dy = pool.allocate(p.outBytes);
    pool.release(simBackward(pool, p, std::move(tape), dy));
    f.held.push_back(held);
    f.transient.push_back(std::max<int64_t>(0, pool.peak() - held));
    f.flops.push_back(p.forwardFlops);
  }
  return f;
}

int64_t boundary(const ChainCost& c, int i) { return i == 0 ? c.inputBytes : c.block(i - 1).outBytes; }

// Whether non-negative byte counts add up to at most `budget`, without forming a sum that could wrap (a budget
// may be near 2^63, a policy string's).
bool fits(int64_t budget, std::initializer_list<int64_t> terms) {
  for (const int64_t t : terms) {
    if (t > budget) return false;
    budget -= t;
  }
  return true;
}

// The programme at one (effective) budget; empty when nothing fits.
std::vector<Segment> solve(const ChainCost& c, const BlockFigures& f, int64_t budget) {
  const int n = c.layers();
  if (budget <= 0) return {};
  const int64_t unit = std::max<int64_t>(1, budget / kLevels + (budget % kLevels != 0));
  const int levels = static_cast<int>(budget / unit);
  auto up = [&](int64_t bytes) { return bytes / unit + (bytes % unit != 0); };  // levels, in int64
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  // best[i][m]: least recompute FLOPs covering blocks [0, i) with m levels held; from[i][m]: (a, m0, recompute).
  std::vector<std::vector<int64_t>> best(static_cast<size_t>(n) + 1, std::vector<int64_t>(levels + 1, kNone));
  struct From {
    int a = -1, m0 = 0;
    bool recompute = false;
  };
  std::vector<std::vector<From>> from(static_cast<size_t>(n) + 1, std::vector<From>(levels + 1));
  best[0][0] = 0;
  for (int a = 0; a < n; ++a)
    for (int m0 = 0; m0 <= levels; ++m0) {
      if (best[a][m0] == kNone) continue;
      int64_t tapes = 0, transient = 0, flops = 0;
      for (int b = a + 1; b <= n; ++b) {
        tapes += f.held[b - 1];
        if (tapes > budget) break;  // neither kind fits from here on
        transient = std::max(transient, f.transient[b - 1]);
        flops += f.flops[b - 1];
        const int64_t pre = m0 * unit;
        // Stored: holds its tapes; its backward peaks with the earlier segments' holdings.
        if (fits(budget, {pre, tapes, transient}) && m0 + up(tapes) <= levels) {
          const int m = m0 + static_cast<int>(up(tapes));
          if (best[a][m0] < best[b][m]) {
            best[b][m] = best[a][m0];
            from[b][m] = {a, m0, false};
          }
        }
        // Recomputed: holds its input; its backward recomputes the tapes, holding x_b too while it runs.
        const int64_t in = boundary(c, a);
        if (fits(budget, {pre, in, tapes, boundary(c, b), transient}) && m0 + up(in) <= levels) {
          const int m = m0 + static_cast<int>(up(in));
          if (best[a][m0] + flops < best[b][m]) {
            best[b][m] = best[a][m0] + flops;
            from[b][m] = {a, m0, true};
          }
        }
      }
    }
  const int64_t xL = boundary(c, n);
  int endM = -1;
  for (int m = 0; m <= levels; ++m)
    if (best[n][m] != kNone && fits(budget, {m * unit, xL, xL, c.loss.meta.contextExtraBytes}) &&
        (endM < 0 || best[n][m] < best[n][endM]))
      endM = m;
  if (endM < 0) return {};
  std::vector<Segment> segs;
  for (int b = n, m = endM; b > 0;) {
    const From& w = from[b][m];
    segs.push_back({w.a, b - 1, w.recompute});
    b = w.a;
    m = w.m0;
  }
  std::reverse(segs.begin(), segs.end());
  return segs;
}

std::string policyText(int64_t budget) { return "segments:budget=" + std::to_string(budget); }

// The work bound (policy.h); a costs file holds no more blocks than this (COSTS.md, Bounds).
static_assert(kMaxCostsBlocks <= kSegmentsMaxBlocks);
void refuseTooLong(const ChainCost& c, const std::string& policy) {
  if (c.layers() > kSegmentsMaxBlocks)
    throw InputError("policy '" + policy + "': a chain of " + std::to_string(c.layers()) +
                     " blocks is too long for segments' search (O(L^2 x levels) a try; at most " +
                     std::to_string(kSegmentsMaxBlocks) + " blocks)");
}

// Placements the search can always build: uniform's K segments for every K (up to 256), and every block
// recomputed alone but the last.
std::vector<std::vector<Segment>> plainSplits(int n) {
  std::vector<std::vector<Segment>> all;
  for (int k = 1; k <= std::min(n, kMostSplits); ++k) {
    std::vector<Segment> segs;
    for (int s = 0; s < k; ++s) {
      const int a = static_cast<int>(static_cast<int64_t>(s) * n / k);
      const int b = static_cast<int>(static_cast<int64_t>(s + 1) * n / k);
      if (b > a) segs.push_back({a, b - 1, s + 1 < k});
    }
    all.push_back(segs);
  }
  std::vector<Segment> singles;
  for (int i = 0; i < n; ++i) singles.push_back({i, i, i + 1 < n});
  all.push_back(singles);
  return all;
}

}  // namespace

namespace {

// The programme's schedule whose exact peak fits the budget; nullopt when it finds none.
std::optional<Schedule> programmeSchedule(const ChainCost& c, const BlockFigures& f, int64_t budget,
                                          const std::string& policy) {
  int64_t effective = budget;
  for (int attempt = 0; attempt < kRetries; ++attempt) {
    const std::vector<Segment> segs = solve(c, f, effective);
    if (segs.empty()) break;
    Schedule s = placementSchedule(segs, c.layers(), policy);
    const int64_t peak = planSchedule(s, c).peakActivationBytes;
    if (peak <= budget) return s;
    effective -= std::max<int64_t>(peak - budget, effective / 64 + 1);
  }
  return std::nullopt;
}

// The plain split of least recompute that fits the budget; sets `least` to the least peak among the splits.
std::optional<Schedule> splitSchedule(const ChainCost& c, int64_t budget, const std::string& policy, int64_t& least) {
  least = std::numeric_limits<int64_t>::max();
  int64_t bestFlops = least;
  std::optional<Schedule> best;
  for (const std::vector<Segment>& segs : plainSplits(c.layers())) {
    Schedule s = placementSchedule(segs, c.layers(), policy);
    const Plan p = planSchedule(s, c);
    least = std::min(least, p.peakActivationBytes);
    if (p.peakActivationBytes <= budget && p.flops.recompute < bestFlops) {
      bestFlops = p.flops.recompute;
      best = std::move(s);
    }
  }
  return best;
}

}  // namespace

// The programme's answer, or a plain split (uniform's, every block alone) where one fits with less recompute:
// the programme's model over-estimates, so a split it did not see may beat it.
Schedule segmentsSchedule(const ChainCost& c, int64_t budget) {
  const std::string policy = policyText(budget);
  refuseTooLong(c, policy);
  std::optional<Schedule> best = programmeSchedule(c, figuresOf(c), budget, policy);
  int64_t least = 0;
  if (std::optional<Schedule> split = splitSchedule(c, budget, policy, least)) {
    if (!best || planSchedule(*split, c).flops.recompute < planSchedule(*best, c).flops.recompute)
      best = std::move(split);
  }
  if (best) return *best;
  throw InputError("policy '" + policy + "': infeasible; the smallest feasible budget is " +
                   std::to_string(segmentsMinBudget(c)) + " bytes");
}

// The least budget either search meets: below the plain splits' least peak, bisected on the programme (whose
// success grows with the budget).
int64_t segmentsMinBudget(const ChainCost& c) {
  refuseTooLong(c, "segments");
  int64_t least = 0;
  splitSchedule(c, 0, "segments", least);
  const BlockFigures f = figuresOf(c);
  int64_t lo = 1, hi = least;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (programmeSchedule(c, f, mid, "segments")) hi = mid;
    else lo = mid + 1;
  }
  return hi;
}

namespace {

// Property 4: within the budget, and no more recompute than a uniform split that fits it (the search plans those
// itself, for K up to 256; placementSchedule of uniform's segments is uniform's schedule).
std::string segmentsBound(const BoundCheck& b) {
  if (std::string over = budgetBound(b); !over.empty()) return over;
  const int64_t budget = intParam(b.policy, "budget");
  for (int k = 1; k <= std::min(b.cost.layers(), kMostSplits); ++k) {
    const Plan u = planSchedule(uniformSchedule(b.cost, k), b.cost);
    if (u.peakActivationBytes <= budget && u.flops.recompute < b.recomputeFlops)
      return "recomputes " + std::to_string(b.recomputeFlops) + " FLOPs where uniform:k=" + std::to_string(k) +
             " fits the budget with " + std::to_string(u.flops.recompute);
  }
  return "";
}

}  // namespace

PolicyRule segmentsRule() {
  PolicyRule r;
  r.name = "segments";
  r.params = {{"budget", true, "budget=BYTES (BYTES >= 1)"}};
  r.make = [](const PolicySpec& p, const ChainCost& c, const std::vector<KeepMask>& keep) {
    if (!keep.empty()) throw InputError("policy '" + p.text + "': segments does not compose with selective");
    return segmentsSchedule(c, intParam(p, "budget"));
  };
  // verify draws budgets over [the least feasible, store-all's peak], each end in 15% of draws: a search that calls
  // its own least budget infeasible is a schedules-valid finding within a few cases. Not composed with selective:
  // a tape that drops op-level contexts is no per-module placement (placement.h), so plan refuses the composition.
  r.draw = [](const PolicyDraw& d, const ChainCost& c, const std::function<std::vector<KeepMask>()>&) {
    const int64_t full = planSchedule(storeAllSchedule(c), c).peakActivationBytes;
    const int64_t least = std::min(full, segmentsMinBudget(c));
    return policyText(least + (full - least) * std::clamp(d.segmentsBudget, 0, 1000) / 1000);
  };
  r.bound = segmentsBound;
  return r;
}

}  // namespace ckpt
