// residual-bn: x + DropPath(ReLU(BatchNorm(Linear(W, W) x))). Field: "drop_path" (cases/stochastic_layers.h; the
// DropPath node exists only when it is > 0). Batch statistics need a micro-batch of >= 2 rows.
#include "cases/block_kind.h"
#include "cases/json_fields.h"
#include "cases/stochastic_layers.h"

namespace ckpt {

const BlockKindDef& residualBnKind() {
  static const BlockKindDef def{
      .name = "residual-bn",
      .fields = {dropPathField()},
      .validate =
          [](const BlockSpec&, const CaseSpec& c, const std::string& where) {
            if (c.microRows() < 2)
              json_fields::fail(where + ".kind",
                                "residual-bn needs batch * seq / micro_batches >= 2 rows for batch "
                                "statistics (got " +
                                    std::to_string(c.microRows()) + ")");
          },
      .print =
          [](const BlockSpec& s, nlohmann::json& b) {
            if (dropsPath(s)) b["drop_path"] = s.dropPath;
          },
      .canonical =
          [](const BlockSpec& s) {
            BlockSpec r = blockOf(&residualBnKind());
            r.frozen = s.frozen;
            r.share = s.share;
            r.dropPath = s.dropPath;
            return r;
          },
      // A micro-batch of a single row (batch 1, seq 1) gets two.
      .makeValid =
          [](BlockSpec&, CaseSpec& c) {
            if (c.microRows() < 2) c.batch = 2 * c.microBatches;
          },
      .describe = [](const BlockSpec& s) { return dropPathText(s); },
      .needs = [](const BlockSpec& s) { return dropPathNeeds(s); },
      .program =
          [](const BlockSpec& s, const CaseSpec& c) {
            const int64_t w = c.width;
            std::vector<OpNode> p{
                {"fc", "linear", {w, w}, 0, {-1}}, {"bn", "batchnorm", {w}, 0, {0}}, {"relu", "relu", {}, 0, {1}}};
            int branch = 2;
            if (dropsPath(s)) branch = addDropPath(p, "drop_path", branch, s, c);
            p.push_back({"add", "add", {}, 0, {-1, branch}});
            return p;
          },
      .coverage = {{"residual_bn", "a residual-bn block",
                    [](const CaseSpec& c) { return hasBlockKind(c, &residualBnKind()); }}},
      .smoke = nullptr,
      .simpler = {[](BlockSpec& s) { s.dropPath = 0; }},
      .standIns = {},
  };
  return def;
}

}  // namespace ckpt
