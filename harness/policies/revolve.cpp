// revolve:slots=C — Griewank & Walther's binomial checkpointing (ACM TOMS Algorithm 799): the proven minimum
// number of forward steps for reversing a homogeneous chain with C checkpoint slots, the chain input taking one.
// Built by the recursive split rule rather than revolve's action loop: to reverse [s, s+l) from a held x_s with
// c slots, advance to the optimal checkpoint s+m (revolve_math.h), reverse [s+m, s+l) with c-1 slots, then
// [s, s+m) with c. A single block is its turn (tape + backward; with the loss on the first turn of the last
// block). Costs are ignored, so on a heterogeneous chain this is still a valid schedule with the same forward
// count. The recursion runs on an explicit stack: with C >= L-1 it is L deep.
#include "harness/policies/revolve_math.h"

#include <algorithm>
#include <vector>

#include "common/input_error.h"
#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"
#include "harness/policies/turns.h"

namespace ckpt {

int64_t revolveBeta(int64_t c, int64_t r, int64_t cap) {
  if (r < 0 || c < 0) return 0;
  // binomial(c + k, k) = binomial(c + k - 1, k - 1) (c + k) / k, exact at every k; non-decreasing in k.
  __int128 v = 1;
  for (int64_t k = 1; k <= r; ++k) {
    v = v * (c + k) / k;
    if (v >= cap) return cap;
  }
  return static_cast<int64_t>(std::min<__int128>(v, cap));
}

int64_t revolveRepetitions(int64_t l, int64_t c) {
  if (c == 1) return l - 1;
  int64_t r = 0;
  __int128 v = 1;  // beta(c, r)
  while (v < l) {
    ++r;
    v = v * (c + r) / r;
  }
  return r;
}

int64_t revolveNumforw(int64_t l, int64_t c) {
  if (l <= 1) return 0;
  if (c == 1) return l * (l - 1) / 2;
  const int64_t r = revolveRepetitions(l, c);
  return r * l - revolveBeta(c + 1, r - 1);
}

int64_t revolveSplit(int64_t l, int64_t c) {
  if (c == 1) return l - 1;
  const int64_t r = revolveRepetitions(l, c);
  const int64_t cap = l + 1;  // every comparison below is against numbers <= l
  return std::min({l - 1, revolveBeta(c, r - 1, cap), l - revolveBeta(c - 1, r - 1, cap)});
}

Schedule revolveSchedule(const ChainCost& c, int slots) {
  if (slots < 1)
    throw InputError("policy 'revolve:slots=" + std::to_string(slots) +
                     "': slots must be >= 1 (the chain input takes one)");
  const int n = c.layers();
  Schedule s;
  s.policy = "revolve:slots=" + std::to_string(slots);
  s.layers = n;
  s.instrs.reserve(static_cast<size_t>(scheduleLength(revolveNumforw(n, slots) + n, n, s.policy)));
  TurnWriter w(s);
  struct Range {
    int start, length, slots;
  };
  std::vector<Range> todo = {{0, n, std::min(slots, std::max(n, 1))}};
  while (!todo.empty()) {
    const Range r = todo.back();
    todo.pop_back();
    if (r.length == 1) {
      w.turn(r.start);
      continue;
    }
    const int m = static_cast<int>(revolveSplit(r.length, r.slots));
    w.advance(r.start, r.start + m);
    todo.push_back({r.start, m, r.slots});                                  // reversed second
    todo.push_back({r.start + m, r.length - m, std::max(r.slots - 1, 1)});  // reversed first
  }
  return s;
}

// Property 4: exactly Griewank's minimum, numforw(L, C) forward steps plus the L taped ones.
PolicyRule revolveRule() {
  PolicyRule r;
  r.name = "revolve";
  r.params = {{"slots", true, "slots=C (C >= 1)"}};
  r.make = [](const PolicySpec& p, const ChainCost& c, const std::vector<KeepMask>&) {
    return revolveSchedule(c, static_cast<int>(intParam(p, "slots")));
  };
  r.byDefault = [](const ChainCost& c) {
    return std::vector<std::string>{"revolve:slots=" + std::to_string(std::max(2, roundSqrt(c.layers())))};
  };
  r.draw = [](const PolicyDraw& d, const ChainCost& c, const std::function<std::vector<KeepMask>()>&) {
    return "revolve:slots=" + std::to_string(drawFraction(d.revolveSlots, c.layers()));
  };
  r.drawComposed = true;
  r.bound = [](const BoundCheck& b) -> std::string {
    const int64_t n = b.cost.layers(), slots = intParam(b.policy, "slots");
    const int64_t want = revolveNumforw(n, slots) + n;
    if (b.forwardEvals == want) return "";
    return std::to_string(b.forwardEvals) + " forward evaluations, numforw(L, C) + L = numforw(" + std::to_string(n) +
           ", " + std::to_string(slots) + ") + " + std::to_string(n) + " = " + std::to_string(want);
  };
  return r;
}

}  // namespace ckpt
