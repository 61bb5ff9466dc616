// moe: a pre-LN mixture-of-experts block, y = x + DropPath(Dropout(MoE(LN x))), as a Switch Transformer layer:
// a linear router with optional multiplicative jitter on its input, softmax, top-k routing into capacity-padded
// expert buffers (tokens over capacity are dropped, so the FLOPs are static), experts that are GELU mlps (width
// 4W), and the load-balancing auxiliary loss added to the training loss. The per-expert token counts and the
// auxiliary-loss tracker are module state, moved once per step. The op is reference/ops/moe.h. Fields: "experts",
// "top_k", "capacity_factor", "router_jitter", "aux_loss_coef", "drop_path" (cases/SCHEMA.md).
#include "cases/block_kind.h"
#include "cases/json_fields.h"
#include "cases/moe_case.h"
#include "cases/stochastic_layers.h"

namespace ckpt {

using json_fields::fail;
using json_fields::number;

namespace {

using Parse = void (*)(const nlohmann::json&, const std::string&, const CaseSpec&, BlockSpec&);

BlockField field(const char* name, Parse parse) { return BlockField{name, name, parse, nullptr}; }

const BlockField kExperts =
    field("experts", [](const nlohmann::json& b, const std::string& path, const CaseSpec&, BlockSpec& s) {
      s.experts = static_cast<int>(json_fields::getInt(b, "experts", path, 1, 64, 4));
    });
const BlockField kTopK =
    field("top_k", [](const nlohmann::json& b, const std::string& path, const CaseSpec&, BlockSpec& s) {
      s.topK = static_cast<int>(json_fields::getInt(b, "top_k", path, 1, 2, 1));
      if (s.topK > s.experts)
        fail(path, "must not exceed experts " + std::to_string(s.experts) + " (got " + std::to_string(s.topK) + ")");
    });
const BlockField kCapacity =
    field("capacity_factor", [](const nlohmann::json& b, const std::string& path, const CaseSpec&, BlockSpec& s) {
      s.capacityFactor = json_fields::getNumber(b, "capacity_factor", path, 1.25);
      if (!(s.capacityFactor > 0 && s.capacityFactor <= 64))
        fail(path, "must be in (0, 64] (got " + number(s.capacityFactor) + ")");
    });
const BlockField kJitter =
    field("router_jitter", [](const nlohmann::json& b, const std::string& path, const CaseSpec&, BlockSpec& s) {
      s.routerJitter = json_fields::getNumber(b, "router_jitter", path, 0.0);
      if (!(s.routerJitter >= 0 && s.routerJitter < 1))
        fail(path, "must be in [0, 1) (got " + number(s.routerJitter) + ")");
    });
const BlockField kAuxCoef =
    field("aux_loss_coef", [](const nlohmann::json& b, const std::string& path, const CaseSpec&, BlockSpec& s) {
      s.auxLossCoef = json_fields::getNumber(b, "aux_loss_coef", path, 0.01);
      if (!(s.auxLossCoef >= 0 && s.auxLossCoef <= 10))
        fail(path, "must be in [0, 10] (got " + number(s.auxLossCoef) + ")");
    });

bool anyBlock(const CaseSpec& c, bool (*pred)(const BlockSpec&)) {
  for (const BlockSpec& b : c.blocks)
    if (b.kind == moeKind() && pred(b)) return true;
  return false;
}

}  // namespace

const BlockKindDef& moeKindDef() {
  static const BlockKindDef def{
      .name = "moe",
      .fields = {kExperts, kTopK, kCapacity, kJitter, kAuxCoef, dropPathField()},
      .validate = nullptr,
      // Every field, always: an adapter need not know the defaults.
      .print =
          [](const BlockSpec& s, nlohmann::json& b) {
            b["experts"] = s.experts;
            b["top_k"] = s.topK;
            b["capacity_factor"] = s.capacityFactor;
            b["router_jitter"] = s.routerJitter;
            b["aux_loss_coef"] = s.auxLossCoef;
            if (dropsPath(s)) b["drop_path"] = s.dropPath;
          },
      .canonical =
          [](const BlockSpec& s) {
            BlockSpec r = s;
            r.activation = Activation::kGelu;
            r.heads = 1;
            return r;
          },
      .makeValid =
          [](BlockSpec& s, CaseSpec&) {
            if (s.topK > s.experts) s.topK = 1;
          },
      .describe =
          [](const BlockSpec& s) {
            std::string d =
                "/" + std::to_string(s.experts) + "x" + std::to_string(s.topK) + "/cf" + number(s.capacityFactor);
            if (s.routerJitter > 0) d += "/j" + number(s.routerJitter);
            return d + dropPathText(s);
          },
      .needs = [](const BlockSpec& s) { return dropPathNeeds(s); },
      .program =
          [](const BlockSpec& s, const CaseSpec& c) {
            const int64_t w = c.width;
            OpNode moe{"moe", "moe", {s.experts, s.topK, w, 4 * w}, s.routerJitter, {0}};
            moe.capacityFactor = s.capacityFactor;
            // Each pass's auxiliary loss is divided by the micro-batches, as the loss function's is, so a step's loss
            // and gradient mean the same with and without gradient accumulation.
            moe.auxCoef = s.auxLossCoef / static_cast<double>(c.microBatches);
            std::vector<OpNode> g{{"ln", "layernorm", {w}, 0, {-1}}, moe, {"drop", "dropout", {}, c.dropout, {1}}};
            int branch = 2;
            if (dropsPath(s)) branch = addDropPath(g, "drop_path", branch, s, c);
            g.push_back({"res", "add", {}, 0, {-1, branch}});
            return g;
          },
      .coverage = {{"moe", "a mixture-of-experts block", [](const CaseSpec& c) { return anyMoe(c); }},
                   {"moe_top2", "an moe block routing each token to 2 experts",
                    [](const CaseSpec& c) { return anyBlock(c, [](const BlockSpec& b) { return b.topK == 2; }); }},
                   {"moe_tight_capacity", "an moe block whose capacity factor is below 1 (tokens dropped)",
                    [](const CaseSpec& c) {
                      return anyBlock(c, [](const BlockSpec& b) { return b.capacityFactor < 1; });
                    }},
                   {"router_jitter", "an moe block with router jitter",
                    [](const CaseSpec& c) { return anyRouterJitter(c); }}},
      // Two experts, top-2 and jitter, so a broken adapter's routing and draws show in the first run.
      .smoke =
          [](BlockSpec& s) {
            s.experts = 2;
            s.topK = 2;
            s.routerJitter = 0.1;
          },
      .simpler = {[](BlockSpec& s) { s.routerJitter = 0; }, [](BlockSpec& s) { s.dropPath = 0; },
                  [](BlockSpec& s) { s.topK = 1; },
                  [](BlockSpec& s) {
                    s.experts = 2;
                    if (s.topK > 2) s.topK = 1;
                  },
                  [](BlockSpec& s) { s.capacityFactor = 2; }, [](BlockSpec& s) { s.auxLossCoef = 0; }},
      .standIns = {},
      .drawnByCase = true,
  };
  return def;
}

BlockKind moeKind() { return &moeKindDef(); }

bool anyMoe(const CaseSpec& c) { return hasBlockKind(c, moeKind()); }

bool anyRouterJitter(const CaseSpec& c) {
  return anyBlock(c, [](const BlockSpec& b) { return b.routerJitter > 0; });
}

std::string moeText(const CaseSpec& c) {
  for (const BlockSpec& b : c.blocks)
    if (b.kind == moeKind()) return ", moe " + std::to_string(b.experts) + "x top-" + std::to_string(b.topK);
  return {};
}

void applyMoeDraw(CaseSpec& c, int draw, bool allowed) {
  if (!allowed || draw < 700 || c.blocks.empty()) return;
  const int t = draw - 700;
  static const double kCapacity[] = {2.0, 0.5, 1.25, 0.75};
  const int n = static_cast<int>(c.blocks.size());
  for (int i = n > 1 ? 1 : 0; i < n; i += 3) {
    BlockSpec& b = c.blocks[static_cast<size_t>(i)];
    b.kind = moeKind();
    b.experts = 2 + t % 3;
    b.topK = 1 + (t / 3) % 2;
    b.capacityFactor = kCapacity[(t / 6) % 4];
    b.routerJitter = (t / 24) % 2 ? 0.1 : 0.0;
    b.auxLossCoef = (t / 48) % 2 ? 0.1 : 0.01;
  }
}

}  // namespace ckpt
