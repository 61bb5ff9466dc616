#include "harness/adapters/case_dir.h"

namespace ckpt {

nlohmann::json manifestJson(const CaseLayout& l, LossKind loss) {
  using nlohmann::json;
  auto list = [](const std::vector<TensorLayout>& ts) {
    json a = json::array();
    for (const auto& t : ts)
      a.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", t.integral ? "int64" : "case"}});
    return a;
  };
  json j;
  j["protocol"] = 1;
  j["params"] = list(l.params);
  j["state"] = list(l.state);
  j["input"] = {{"shape", {l.rows, l.width}}};
  if (loss == LossKind::kCrossEntropy)
    j["labels"] = {{"shape", {l.rows}}, {"dtype", "int64"}};
  else
    j["target"] = {{"shape", {l.rows, l.width}}};
  return j;
}

}  // namespace ckpt
