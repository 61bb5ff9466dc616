// A case in one line, for people: what verify's finding ("found in", "shrunk to") and validate's reports
// ("case_summary") print next to the case file, e.g.
//   3 blocks (mlp/relu, residual-bn, transformer/2h), width 4, batch 2, seq 1, 1 step, double, stateful rng,
//   dropout 0.2
// Each kind says what follows its name (BlockKindDef::describe) and each case-level rule its own part (lmText,
// microBatchText, ...: empty when off), so a new field is printed where its rule lives. The first six blocks are
// named; the case file holds the rest.
#pragma once
#include <string>

#include "cases/case_spec.h"

namespace ckpt {

std::string caseSummary(const CaseSpec& c);

}  // namespace ckpt
