// mlp: x -> Linear(W, W) -> activation -> Dropout. Field: "activation" (relu, gelu, tanh or rrelu; default gelu;
// rrelu's slope range is the case's, cases/stochastic_layers.h, and its draw a case-level one).
#include "cases/block_kind.h"
#include "cases/generators.h"
#include "cases/json_fields.h"

namespace ckpt {

const BlockKindDef& mlpKind();

namespace {

bool hasActivation(const CaseSpec& c, Activation a) {
  for (const BlockSpec& b : c.blocks)
    if (b.kind == &mlpKind() && b.activation == a) return true;
  return false;
}

const BlockField kActivation{
    "activation", "an activation",
    [](const nlohmann::json& b, const std::string& path, const CaseSpec&, BlockSpec& s) {
      s.activation = json_fields::getEnum<Activation>(b, "activation", path, Activation::kGelu,
                                                      {{"relu", Activation::kRelu},
                                                       {"gelu", Activation::kGelu},
                                                       {"tanh", Activation::kTanh},
                                                       {"rrelu", Activation::kRrelu}});
    },
    [](bool shrinks) {
      return rc::gen::map(
          genChoice(std::vector<Activation>{Activation::kRelu, Activation::kGelu, Activation::kTanh}, shrinks),
          [](Activation a) { return BlockSetter([a](BlockSpec& s) { s.activation = a; }); });
    }};

}  // namespace

const BlockKindDef& mlpKind() {
  static const BlockKindDef def{
      .name = "mlp",
      .fields = {kActivation},
      .validate = nullptr,
      .print = [](const BlockSpec& s, nlohmann::json& b) { b["activation"] = activationName(s.activation); },
      .canonical =
          [](const BlockSpec& s) {
            BlockSpec r = s;
            r.heads = 1;
            r.dropPath = 0;
            return r;
          },
      .makeValid = [](BlockSpec&, CaseSpec&) {},
      .describe = [](const BlockSpec& s) { return "/" + std::string(activationName(s.activation)); },
      .needs =
          [](const BlockSpec& s) {
            return std::vector<std::pair<std::string, std::string>>{{"activation", activationName(s.activation)}};
          },
      .program =
          [](const BlockSpec& s, const CaseSpec& c) {
            const int64_t w = c.width;
            OpNode act{activationName(s.activation), activationName(s.activation), {}, 0, {0}};
            if (s.activation == Activation::kRrelu) {
              act.lower = c.rreluLower;
              act.upper = c.rreluUpper;
            }
            return std::vector<OpNode>{
                {"fc", "linear", {w, w}, 0, {-1}}, act, {"dropout", "dropout", {}, c.dropout, {1}}};
          },
      .coverage =
          {{"mlp", "an mlp block", [](const CaseSpec& c) { return hasBlockKind(c, &mlpKind()); }},
           {"relu", "an mlp block with relu", [](const CaseSpec& c) { return hasActivation(c, Activation::kRelu); }},
           {"gelu", "an mlp block with gelu", [](const CaseSpec& c) { return hasActivation(c, Activation::kGelu); }},
           {"tanh", "an mlp block with tanh", [](const CaseSpec& c) { return hasActivation(c, Activation::kTanh); }},
           {"rrelu", "an mlp block with rrelu",
            [](const CaseSpec& c) { return hasActivation(c, Activation::kRrelu); }}},
      .smoke = nullptr,
      .simpler = {[](BlockSpec& s) { s.activation = Activation::kRelu; }},
      // In place of another kind: relu first (simplest), but relu zeroes half its outputs, which can hide what a
      // finding is about (a dropout mask), so tanh and gelu are tried too.
      .standIns = {[](BlockSpec& s) { s.activation = Activation::kRelu; },
                   [](BlockSpec& s) { s.activation = Activation::kTanh; },
                   [](BlockSpec& s) { s.activation = Activation::kGelu; }},
  };
  return def;
}

}  // namespace ckpt
