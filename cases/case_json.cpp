#include "cases/case_json.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

namespace ckpt {
namespace {

using nlohmann::json;

// Limits that keep a case on one machine; the resource guard in the engine refuses bigger plans separately.
constexpr int64_t kMaxDim = 1 << 16;
constexpr int64_t kMaxBlocks = 100000;
constexpr int kMaxSteps = 10000;

[[noreturn]] void fail(const std::string& field, const std::string& what) {
  throw InputError("case field '" + field + "': " + what);
}

std::string typeName(const json& v) { return v.type_name(); }

void rejectUnknown(const json& obj, const std::set<std::string>& known, const std::string& where) {
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!known.count(it.key()))
      fail(where.empty() ? it.key() : where + "." + it.key(), "unknown field");
}

int64_t getInt(const json& obj, const std::string& key, const std::string& field, int64_t lo, int64_t hi,
               std::optional<int64_t> def) {
  if (!obj.contains(key)) {
    if (def) return *def;
    fail(field, "missing (required)");
  }
  const json& v = obj.at(key);
  if (!v.is_number_integer()) fail(field, "must be an integer (got " + typeName(v) + ")");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    fail(field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + " (got " + v.dump() + ")");
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    fail(field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + " (got " + v.dump() + ")");
  return x;
}

double getNumber(const json& obj, const std::string& key, const std::string& field, std::optional<double> def) {
  if (!obj.contains(key)) {
    if (def) return *def;
    fail(field, "missing (required)");
  }
  const json& v = obj.at(key);
  if (!v.is_number()) fail(field, "must be a number (got " + typeName(v) + ")");
  const double x = v.get<double>();
  if (!std::isfinite(x)) fail(field, "must be finite");
  return x;
}

std::string getString(const json& obj, const std::string& key, const std::string& field,
                      std::optional<std::string> def) {
  if (!obj.contains(key)) {
    if (def) return *def;
    fail(field, "missing (required)");
  }
  const json& v = obj.at(key);
  if (!v.is_string()) fail(field, "must be a string (got " + typeName(v) + ")");
  return v.get<std::string>();
}

template <class E>
E getEnum(const json& obj, const std::string& key, const std::string& field, std::optional<E> def,
          std::initializer_list<std::pair<const char*, E>> names) {
  if (!obj.contains(key) && def) return *def;
  const std::string s = getString(obj, key, field, std::nullopt);
  std::string allowed;
  for (const auto& [n, e] : names) {
    if (s == n) return e;
    allowed += (allowed.empty() ? "" : ", ") + std::string(n);
  }
  fail(field, "unknown value '" + s + "' (expected one of: " + allowed + ")");
}

}  // namespace

CaseSpec parseCase(const json& j) {
  if (!j.is_object()) throw InputError("case: must be a JSON object (got " + j.dump().substr(0, 40) + ")");
  rejectUnknown(j, {"name", "dtype", "batch", "seq", "width", "blocks", "loss", "seed", "rng", "dropout", "lr",
                    "steps", "$schema", "description"},
                "");
  CaseSpec c;
  c.name = getString(j, "name", "name", std::string("case"));
  c.dtype = getEnum<DType>(j, "dtype", "dtype", DType::kDouble, {{"float", DType::kFloat}, {"double", DType::kDouble}});
  c.batch = getInt(j, "batch", "batch", 1, kMaxDim, std::nullopt);
  c.seq = getInt(j, "seq", "seq", 1, kMaxDim, 1);
  c.width = getInt(j, "width", "width", 1, kMaxDim, std::nullopt);
  c.loss = getEnum<LossKind>(j, "loss", "loss", LossKind::kCrossEntropy,
                             {{"cross_entropy", LossKind::kCrossEntropy}, {"mse", LossKind::kMse}});
  {
    if (!j.contains("seed")) c.seed = 1;
    else {
      const json& v = j.at("seed");
      if (!v.is_number_integer()) fail("seed", "must be a non-negative integer (got " + typeName(v) + ")");
      if (!v.is_number_unsigned() && v.get<int64_t>() < 0) fail("seed", "must be non-negative (got " + v.dump() + ")");
      c.seed = v.get<uint64_t>();
    }
  }
  c.rng = getEnum<RngModel>(j, "rng", "rng", RngModel::kStateful,
                            {{"counter", RngModel::kCounter}, {"stateful", RngModel::kStateful}});
  c.dropout = getNumber(j, "dropout", "dropout", 0.0);
  if (c.dropout < 0 || c.dropout >= 1) fail("dropout", "must be in [0, 1) (got " + std::to_string(c.dropout) + ")");
  c.lr = getNumber(j, "lr", "lr", 0.01);
  if (c.lr < 0) fail("lr", "must be >= 0");
  c.steps = static_cast<int>(getInt(j, "steps", "steps", 1, kMaxSteps, 1));

  if (!j.contains("blocks")) fail("blocks", "missing (required)");
  const json& bs = j.at("blocks");
  if (!bs.is_array()) fail("blocks", "must be an array (got " + typeName(bs) + ")");
  if (bs.empty()) fail("blocks", "must hold at least one block (L = 0)");
  for (size_t i = 0; i < bs.size(); ++i) {
    const std::string where = "blocks[" + std::to_string(i) + "]";
    const json& b = bs[i];
    if (!b.is_object()) fail(where, "must be an object (got " + typeName(b) + ")");
    rejectUnknown(b, {"kind", "activation", "heads", "repeat"}, where);
    BlockSpec s;
    s.kind = getEnum<BlockKind>(b, "kind", where + ".kind", std::nullopt,
                                {{"mlp", BlockKind::kMlp},
                                 {"residual-bn", BlockKind::kResidualBn},
                                 {"transformer", BlockKind::kTransformer}});
    if (b.contains("activation") && s.kind != BlockKind::kMlp) fail(where + ".activation", "only mlp blocks take an activation");
    s.activation = getEnum<Activation>(b, "activation", where + ".activation", Activation::kGelu,
                                       {{"relu", Activation::kRelu}, {"gelu", Activation::kGelu}, {"tanh", Activation::kTanh}});
    if (b.contains("heads") && s.kind != BlockKind::kTransformer) fail(where + ".heads", "only transformer blocks take heads");
    s.heads = static_cast<int>(getInt(b, "heads", where + ".heads", 1, kMaxDim, 1));
    if (s.kind == BlockKind::kTransformer && c.width % s.heads != 0)
      fail(where + ".heads", "must divide width " + std::to_string(c.width) + " (got " + std::to_string(s.heads) + ")");
    if (s.kind == BlockKind::kResidualBn && c.rows() < 2)
      fail(where + ".kind", "residual-bn needs batch * seq >= 2 for batch statistics (got " + std::to_string(c.rows()) + ")");
    const int64_t repeat = getInt(b, "repeat", where + ".repeat", 1, kMaxBlocks, 1);
    if (static_cast<int64_t>(c.blocks.size()) + repeat > kMaxBlocks)
      fail(where + ".repeat", "the chain may hold at most " + std::to_string(kMaxBlocks) + " blocks");
    for (int64_t r = 0; r < repeat; ++r) c.blocks.push_back(s);
  }
  if (c.loss == LossKind::kCrossEntropy && c.width < 2) fail("width", "cross_entropy needs width >= 2 classes");
  return c;
}

CaseSpec parseCaseText(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    // parse_error, or out_of_range for a number beyond double (1e999). nlohmann's message carries the byte
    // offset; keep it on one line.
    std::string what = e.what();
    for (char& ch : what)
      if (ch == '\n') ch = ' ';
    throw InputError(origin + ": malformed JSON: " + what);
  }
  return parseCase(j);
}

CaseSpec loadCase(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError("case file '" + path + "': is a directory");
  std::ifstream in(path);
  if (!in) throw InputError("case file '" + path + "': cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return parseCaseText(ss.str(), "case file '" + path + "'");
  } catch (const InputError& e) {
    const std::string m = e.what();
    if (m.rfind("case file", 0) == 0) throw;
    throw InputError("case file '" + path + "': " + m);
  }
}

nlohmann::json caseToJson(const CaseSpec& c) {
  json j;
  j["name"] = c.name;
  j["dtype"] = dtypeName(c.dtype);
  j["batch"] = c.batch;
  j["seq"] = c.seq;
  j["width"] = c.width;
  j["loss"] = lossKindName(c.loss);
  j["seed"] = c.seed;
  j["rng"] = rngModelName(c.rng);
  j["dropout"] = c.dropout;
  j["lr"] = c.lr;
  j["steps"] = c.steps;
  json blocks = json::array();
  // Runs of equal blocks print as one entry with "repeat", so a 48-block case stays readable.
  for (size_t i = 0; i < c.blocks.size();) {
    size_t k = i;
    while (k < c.blocks.size() && c.blocks[k] == c.blocks[i]) ++k;
    json b;
    b["kind"] = blockKindName(c.blocks[i].kind);
    if (c.blocks[i].kind == BlockKind::kMlp) b["activation"] = activationName(c.blocks[i].activation);
    if (c.blocks[i].kind == BlockKind::kTransformer) b["heads"] = c.blocks[i].heads;
    if (k - i > 1) b["repeat"] = k - i;
    blocks.push_back(b);
    i = k;
  }
  j["blocks"] = blocks;
  return j;
}

}  // namespace ckpt
