#include "cases/micro_batches.h"

#include <algorithm>
#include <vector>

namespace ckpt {

std::string microBatchText(const CaseSpec& c) {
  return hasMicroBatches(c) ? ", " + std::to_string(c.microBatches) + " micro-batches" : "";
}

bool hasMicroBatches(const CaseSpec& c) { return c.microBatches > 1; }

void fixMicroBatches(CaseSpec& c) {
  if (c.microBatches < 1 || c.batch % c.microBatches != 0) c.microBatches = 1;
}

void applyMicroBatchDraw(CaseSpec& c, int draw, bool enabled) {
  c.microBatches = 1;
  if (!enabled || draw < 700) return;
  std::vector<int64_t> divisors;
  for (int64_t d = 2; d <= c.batch; ++d)
    if (c.batch % d == 0) divisors.push_back(d);
  if (divisors.empty()) return;
  // Permilles run 0..1000 inclusive: the last one maps to the last divisor too.
  const size_t k = static_cast<size_t>(draw - 700) * divisors.size() / 300;
  c.microBatches = divisors[std::min(k, divisors.size() - 1)];
}

}  // namespace ckpt
