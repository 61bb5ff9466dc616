// residual-bn: x + ReLU(BatchNorm(Linear(W, W) x)). No fields; batch statistics need a micro-batch of >= 2 rows.
#include "cases/block_kind.h"
#include "cases/json_fields.h"

namespace ckpt {

const BlockKindDef& residualBnKind() {
  static const BlockKindDef def{
      .name = "residual-bn",
      .fields = {},
      .validate = [](const BlockSpec&, const CaseSpec& c, const std::string& where) {
        if (c.microRows() < 2)
          json_fields::fail(where + ".kind", "residual-bn needs batch * seq / micro_batches >= 2 rows for batch "
                                             "statistics (got " + std::to_string(c.microRows()) + ")");
      },
      .print = [](const BlockSpec&, nlohmann::json&) {},
      .canonical = [](const BlockSpec& s) {
        BlockSpec r = blockOf(&residualBnKind());
        r.frozen = s.frozen;
        r.share = s.share;
        return r;
      },
      // A micro-batch of a single row (batch 1, seq 1) gets two.
      .makeValid = [](BlockSpec&, CaseSpec& c) {
        if (c.microRows() < 2) c.batch = 2 * c.microBatches;
      },
      .describe = [](const BlockSpec&) { return std::string(); },
      .summary = [](const BlockSpec&) { return std::string(); },
      .needs = [](const BlockSpec&) { return std::vector<std::pair<std::string, std::string>>{}; },
      .program = [](const BlockSpec&, const CaseSpec& c) {
        const int64_t w = c.width;
        return std::vector<OpNode>{{"fc", "linear", {w, w}, 0, {-1}},
                                   {"bn", "batchnorm", {w}, 0, {0}},
                                   {"relu", "relu", {}, 0, {1}},
                                   {"add", "add", {}, 0, {-1, 2}}};
      },
      .coverage = {{"residual_bn", "a residual-bn block",
                    [](const CaseSpec& c) { return hasBlockKind(c, &residualBnKind()); }}},
      .smoke = nullptr,
      .simpler = {},
      .standIns = {},
  };
  return def;
}

}  // namespace ckpt
