// Mixture-of-experts cases: the rules about a case's "moe" blocks (cases/kinds/moe.cpp) that are not one block's
// — the generators' case-level draw, and what the "randomness off" twin and the case texts need to know.
#pragma once
#include <string>

#include "cases/case_spec.h"

namespace ckpt {

BlockKind moeKind();
bool anyMoe(const CaseSpec& c);
// Whether some moe block multiplies its router input by random jitter (a random op, like dropout).
bool anyRouterJitter(const CaseSpec& c);
// ", moe 4x top-2" for the first moe block (empty when none).
std::string moeText(const CaseSpec& c);

// Random cases, from one permille draw appended after the older ones (so a seed's earlier cases stay as they
// were): below 700 no moe block; from 700 every third block from the second (the only block of a one-block
// chain) becomes one, its fields spread over 2-4 experts, top-1 and top-2, capacity factors 0.5 (tokens dropped)
// to 2, router jitter off or 0.1 and two loss coefficients, all at their simplest at 700, where shrinking goes.
void applyMoeDraw(CaseSpec& c, int draw, bool allowed);

}  // namespace ckpt
