// recursive — Chen, Xu, Zhang & Guestrin 2016 ("Training deep nets with sublinear memory cost"), the recursive
// O(log L)-memory scheme: to back-propagate through [a, b) from a held x_a, advance to the middle m = a + (b-a)/2
// keeping x_a, back-propagate through [m, b) (which ends by freeing x_m), then through [a, m). A single block is
// its turn: forward with tape, the loss if it is the step's first turn of the last block, backward.
// Peak: one held boundary per recursion level (ceil(log2 L)) plus one tape and the gradients; forward
// evaluations F(n) = floor(n/2) + F(ceil(n/2)) + F(floor(n/2)), F(1) = 1, i.e. about (L/2) log2 L + L.
#include <map>
#include <vector>

#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"
#include "harness/policies/turns.h"

namespace ckpt {
namespace {

// Forward evaluations of the recursion over n blocks; each level has at most two distinct lengths.
int64_t forwardsOver(int64_t n, std::map<int64_t, int64_t>& memo) {
  if (n <= 1) return n;
  if (const auto it = memo.find(n); it != memo.end()) return it->second;
  return memo[n] = n / 2 + forwardsOver(n - n / 2, memo) + forwardsOver(n / 2, memo);
}

}  // namespace

Schedule recursiveSchedule(const ChainCost& c) {
  const int n = c.layers();
  Schedule s;
  s.policy = "recursive";
  s.layers = n;
  std::map<int64_t, int64_t> memo;
  s.instrs.reserve(static_cast<size_t>(scheduleLength(forwardsOver(n, memo), n, s.policy)));
  TurnWriter w(s);
  struct Range {
    int start, length;
  };
  std::vector<Range> todo = {{0, n}};  // a stack: the right half is reversed before the left
  while (!todo.empty()) {
    const Range r = todo.back();
    todo.pop_back();
    if (r.length == 1) {
      w.turn(r.start);
      continue;
    }
    const int half = r.length / 2;
    w.advance(r.start, r.start + half);
    todo.push_back({r.start, half});
    todo.push_back({r.start + half, r.length - half});
  }
  return s;
}

// Property 4: one held boundary per recursion level, one tape and the gradients: (ceil(log2 L) + 2) M.
PolicyRule recursiveRule() {
  PolicyRule r;
  r.name = "recursive";
  r.make = [](const PolicySpec&, const ChainCost& c, const std::vector<KeepMask>&) { return recursiveSchedule(c); };
  r.byDefault = [](const ChainCost&) { return std::vector<std::string>{"recursive"}; };
  r.draw = [](const PolicyDraw&, const ChainCost&, const std::function<std::vector<KeepMask>()>&) {
    return std::string("recursive");
  };
  r.drawComposed = true;
  r.bound = [](const BoundCheck& b) -> std::string {
    if (b.policy.selective) return "";
    int levels = 0;
    while ((int64_t{1} << levels) < b.cost.layers()) ++levels;
    const int64_t m = b.largestLayerPeak(), bound = (levels + 2) * m;
    if (b.peakBytes <= bound) return "";
    return "peak " + std::to_string(b.peakBytes) + " bytes > (ceil(log2 L) + 2) M = (" + std::to_string(levels) +
           " + 2) x " + std::to_string(m) + " = " + std::to_string(bound);
  };
  return r;
}

}  // namespace ckpt
