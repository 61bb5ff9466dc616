// The chain the policy and schedule fuzz targets plan on: the tiny catalogue case (cases/catalog/tiny.json),
// every block kind, 3 blocks.
#pragma once
#include "cases/case_json.h"
#include "harness/engine/chain_cost.h"

namespace ckpt::fuzz {

inline const ChainCost& tinyCost() {
  static const ChainCost c = caseChainCost(parseCaseText(
      R"({"name": "tiny", "batch": 2, "seq": 4, "width": 8, "dropout": 0.1, "steps": 2,
          "blocks": [{"kind": "mlp"}, {"kind": "residual-bn"}, {"kind": "transformer", "heads": 2}]})"));
  return c;
}

}  // namespace ckpt::fuzz
