// The optimal DP's three tabulations (harness/policies/optimal_table.h) fill the same table, bit for bit, whatever
// the grid: dense rows (LevelDp), frontiers (FrontierDp) and, on a homogeneous chain, a level at a time
// (HomogeneousDp). optimal.cpp picks one by the chain and the grid, so a plan must not depend on which it got.
// Random chains of the project's generator, and homogeneous chains of a case's first block, on grids of a whole
// number of the model's gcd (exact and rounded) with up to 2000 levels; every row at every level is compared.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>

#include "cases/generators.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "harness/policies/optimal_family.h"
#include "harness/policies/optimal_frontier_dp.h"
#include "harness/policies/optimal_homogeneous_dp.h"
#include "harness/policies/optimal_level_dp.h"
#include "harness/policies/optimal.h"
#include "reference/chain.h"

namespace ckpt::optimal_detail {
namespace {

ChainCost costOf(const CaseSpec& spec) {
  return spec.dtype == DType::kFloat ? chainCost(buildChain<float>(spec)) : chainCost(buildChain<double>(spec));
}

struct Grid {
  int64_t unit = 1, levels = 0;
};

// A whole number of gcds (1: the exact grid), and a budget from a little below the least feasible peak to a little
// above store-all's, so most tables have finite cells and some have none.
Grid genGrid(const ChainCost& c, const ChainModel& m) {
  Grid g;
  g.unit = m.gcdBytes() * *rc::gen::inRange<int64_t>(1, 9);
  const int64_t least = optimalMinBudget(c, {});
  const int64_t full = planSchedule(storeAllSchedule(c), c).peakActivationBytes;
  const int64_t budget = *rc::gen::inRange<int64_t>(least - least / 8, std::max(least, full) + full / 8 + 1);
  g.levels = std::min<int64_t>(2000, budget / g.unit);
  RC_CLASSIFY(g.unit == m.gcdBytes(), "exact grid");
  RC_CLASSIFY(g.levels > 1000, "over 1000 levels");
  return g;
}

template <class A, class B>
void expectSameTable(const Family& f, const Grid& g, const A& a, const B& b, const std::string& names) {
  int64_t finite = 0;
  f.states([&](const Sub& u) {
    for (int64_t j = 0; j <= g.levels; ++j) {
      const double x = a.at(u, j), y = b.at(u, j);
      if (std::bit_cast<uint64_t>(x) != std::bit_cast<uint64_t>(y))
        RC_FAIL(names + " differ at sub-problem [" + std::to_string(u.s) + ", " + std::to_string(u.t) + "]" +
                (u.pre ? " before the loss" : " after the loss") + ", level " + std::to_string(j) + " of " +
                std::to_string(g.levels) + " (unit " + std::to_string(g.unit) + " bytes): " + std::to_string(x) +
                " vs " + std::to_string(y));
      finite += x < kInf;
    }
  });
  RC_TAG(finite == 0 ? "no finite cell" : "finite cells");
}

RC_GTEST_PROP(OptimalTables, denseAndFrontierTablesAreTheSameBits, ()) {
  GenLimits lim;
  lim.maxBlocks = 14;
  const ChainCost c = costOf(*genCase(lim));
  const ChainModel m = chainModel(c, {});
  const Family f(m);
  const Grid g = genGrid(c, m);
  RC_CLASSIFY(m.homogeneous(), "homogeneous");
  expectSameTable(f, g, LevelDp(f, g.unit, g.levels), FrontierDp(f, g.unit, g.levels), "LevelDp and FrontierDp");
}

RC_GTEST_PROP(OptimalTables, homogeneousTableIsTheDenseOnesBits, ()) {
  GenLimits lim;
  lim.maxBlocks = 1;
  const CaseSpec spec = *genCase(lim);
  const int layers = *rc::gen::inRange(1, 61);
  const ChainCost c = homogeneousChainCost(spec, layers);
  const ChainModel m = chainModel(c, {});
  RC_PRE(m.homogeneous());
  const Family f(m);
  const Grid g = genGrid(c, m);
  const LevelDp dense(f, g.unit, g.levels);
  expectSameTable(f, g, dense, HomogeneousDp(f, m, g.unit, g.levels), "LevelDp and HomogeneousDp");
  expectSameTable(f, g, dense, FrontierDp(f, g.unit, g.levels), "LevelDp and FrontierDp");
}

}  // namespace
}  // namespace ckpt::optimal_detail
