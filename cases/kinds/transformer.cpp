// transformer: a pre-LN GPT-2 block, h = x + Dropout(Proj(Attn(QKV(LN1 x)))); y = h + Dropout(FC2(GELU(FC1(LN2 h)))),
// FC1 4W wide, causal attention with dropout on its probabilities. Fields: "heads" (divides width; default 1),
// "drop_path" (cases/stochastic_layers.h: a DropPath after each branch's dropout, before its add, as timm's ViT
// block; the nodes exist only when it is > 0).
#include "cases/block_kind.h"
#include "cases/generators.h"
#include "cases/json_fields.h"
#include "cases/stochastic_layers.h"

namespace ckpt {
namespace {

const BlockField kHeads{"heads", "heads",
                        [](const nlohmann::json& b, const std::string& path, const CaseSpec& c, BlockSpec& s) {
                          s.heads = static_cast<int>(json_fields::getInt(b, "heads", path, 1, json_fields::kMaxDim, 1));
                          if (c.width % s.heads != 0)
                            json_fields::fail(path, "must divide width " + std::to_string(c.width) + " (got " +
                                                        std::to_string(s.heads) + ")");
                        },
                        [](bool shrinks) {
                          return rc::gen::map(genChoice(std::vector<int>{1, 2}, shrinks),
                                              [](int h) { return BlockSetter([h](BlockSpec& s) { s.heads = h; }); });
                        }};

}  // namespace

const BlockKindDef& transformerKind() {
  static const BlockKindDef def{
      .name = "transformer",
      .fields = {kHeads, dropPathField()},
      .validate = nullptr,
      .print =
          [](const BlockSpec& s, nlohmann::json& b) {
            b["heads"] = s.heads;
            if (dropsPath(s)) b["drop_path"] = s.dropPath;
          },
      .canonical =
          [](const BlockSpec& s) {
            BlockSpec r = s;
            r.activation = Activation::kGelu;
            return r;
          },
      // A head count that does not divide the width falls back to one head.
      .makeValid =
          [](BlockSpec& s, CaseSpec& c) {
            if (c.width % s.heads != 0) s.heads = 1;
          },
      .describe = [](const BlockSpec& s) { return "/" + std::to_string(s.heads) + "h" + dropPathText(s); },
      .needs = [](const BlockSpec& s) { return dropPathNeeds(s); },
      .program =
          [](const BlockSpec& s, const CaseSpec& c) {
            const int64_t w = c.width;
            const double p = c.dropout;
            std::vector<OpNode> g{{"ln1", "layernorm", {w}, 0, {-1}},
                                  {"qkv", "linear", {w, 3 * w}, 0, {0}},
                                  {"attn", "attention", {s.heads, c.seq}, p, {1}},
                                  {"proj", "linear", {w, w}, 0, {2}},
                                  {"drop1", "dropout", {}, p, {3}}};
            int branch = 4;
            if (dropsPath(s)) branch = addDropPath(g, "drop_path1", branch, s, c);
            g.push_back({"res1", "add", {}, 0, {-1, branch}});
            const int h = static_cast<int>(g.size()) - 1;
            g.push_back({"ln2", "layernorm", {w}, 0, {h}});
            g.push_back({"fc1", "linear", {w, 4 * w}, 0, {h + 1}});
            g.push_back({"gelu", "gelu", {}, 0, {h + 2}});
            g.push_back({"fc2", "linear", {4 * w, w}, 0, {h + 3}});
            g.push_back({"drop2", "dropout", {}, p, {h + 4}});
            branch = h + 5;
            if (dropsPath(s)) branch = addDropPath(g, "drop_path2", branch, s, c);
            g.push_back({"res2", "add", {}, 0, {h, branch}});
            return g;
          },
      .coverage = {{"transformer", "a transformer block",
                    [](const CaseSpec& c) { return hasBlockKind(c, &transformerKind()); }},
                   {"heads_2", "a transformer block with 2+ heads",
                    [](const CaseSpec& c) {
                      for (const BlockSpec& b : c.blocks)
                        if (b.kind == &transformerKind() && b.heads > 1) return true;
                      return false;
                    }}},
      // Two heads, so a broken adapter's head split shows in the first run.
      .smoke = [](BlockSpec& s) { s.heads = 2; },
      .simpler = {[](BlockSpec& s) { s.heads = 1; }, [](BlockSpec& s) { s.dropPath = 0; }},
      .standIns = {},
  };
  return def;
}

}  // namespace ckpt
