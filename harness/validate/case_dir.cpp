#include "harness/validate/case_dir.h"

#include "cases/block_kind.h"
#include "cases/compute_precision.h"

namespace ckpt {

nlohmann::json manifestJson(const CaseLayout& l, const CaseSpec& spec) {
  using nlohmann::json;
  auto list = [](const std::vector<TensorLayout>& ts, bool params) {
    json a = json::array();
    for (const auto& t : ts) {
      json e = {{"name", t.name}, {"shape", t.shape}, {"dtype", t.integral ? "int64" : "case"}};
      if (params) e["trains"] = t.trains;
      if (!t.sharedWith.empty()) e["shared_with"] = t.sharedWith;
      a.push_back(e);
    }
    return a;
  };
  json j;
  j["protocol"] = 1;
  j["params"] = list(l.params, true);
  j["state"] = list(l.state, false);
  if (l.tokens) {
    // Token ids (tokens.npy) in [0, vocab): nothing to differentiate, so requires_grad is false; whether the
    // embeddings train is the params' "trains", and "tied" repeats head.weight's "shared_with" for convenience.
    j["input"] = {{"kind", "tokens"}, {"shape", {l.rows}}, {"dtype", "int64"},
                  {"vocab", l.vocab}, {"tied", l.tied},    {"requires_grad", false}};
  } else {
    j["input"] = {{"shape", {l.rows, l.width}}, {"requires_grad", l.inputGrad}};
  }
  // Stochastic layers and the compute precision (cases/stochastic_layers.h, cases/compute_precision.h), stated
  // explicitly so an adapter need not know the case format's defaults: per block its kind's fields as the case
  // prints them (an mlp's activation, which may be "rrelu"), with "drop_path" always present.
  json blocks = json::array();
  for (const BlockSpec& b : spec.blocks) {
    json o = {{"kind", b.kind->name}};
    b.kind->print(b, o);
    o["drop_path"] = b.dropPath;
    blocks.push_back(o);
  }
  j["blocks"] = blocks;
  j["rrelu_range"] = {spec.rreluLower, spec.rreluUpper};
  j["compute"] = bf16Compute(spec) ? "bf16" : "exact";
  if (spec.loss == LossKind::kCrossEntropy) j["labels"] = {{"shape", {l.rows}}, {"dtype", "int64"}};
  else j["target"] = {{"shape", {l.rows, l.width}}};
  return j;
}

std::set<std::string> readMissingGrads(const std::string& path) {
  std::set<std::string> names;
  std::ifstream in(path);
  if (!in) return names;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    throw AdapterError("adapter output " + path + ": not JSON");
  }
  if (!j.is_array()) throw AdapterError("adapter output " + path + ": must be an array of gradient names");
  for (const auto& v : j) {
    if (!v.is_string()) throw AdapterError("adapter output " + path + ": must be an array of gradient names");
    names.insert(v.get<std::string>());
  }
  return names;
}

}  // namespace ckpt
