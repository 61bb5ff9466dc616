// The cases `ckptcheck validate` runs besides its random draws: a smoke case first, and a failing case's simpler
// variants while it shrinks a finding (validate.cpp).
#pragma once

#include <vector>

#include "cases/case_spec.h"
#include "cases/gen_limits.h"

namespace ckpt {

// A small case with every block kind the adapter runs, for a first run that catches a broken adapter or a bad
// option before any random case (whose failure would otherwise be shrunk as if it were a finding).
CaseSpec smokeCase(const GenLimits& lim);

// Simpler variants of a failing case, in the directions cases/generators.h orders its choices (first element
// simplest), each valid for the adapter's limits.
std::vector<CaseSpec> simplerCases(const CaseSpec& c, const GenLimits& lim);

}  // namespace ckpt
