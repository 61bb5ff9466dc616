#include "cases/case_json.h"

#include "cases/block_kind.h"
#include "cases/json_fields.h"
#include "cases/compute_precision.h"
#include "cases/lm_case.h"
#include "cases/stochastic_layers.h"
#include "cases/param_sharing.h"
#include "cases/user_file.h"

#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <vector>

namespace ckpt {
namespace {

using json_fields::fail;
using json_fields::getEnum;
using json_fields::getInt;
using json_fields::getNumber;
using json_fields::getString;
using json_fields::kMaxDim;
using nlohmann::json;

constexpr int64_t kMaxBlocks = 100000;
constexpr int kMaxSteps = 10000;

std::string typeName(const json& v) { return v.type_name(); }

bool getBool(const json& obj, const std::string& key, const std::string& field, bool def) {
  if (!obj.contains(key)) return def;
  const json& v = obj.at(key);
  if (!v.is_boolean()) fail(field, "must be true or false (got " + typeName(v) + ")");
  return v.get<bool>();
}

// "share": "b<j>", an index into the expanded chain.
int getShare(const json& b, const std::string& field) {
  if (!b.contains("share")) return -1;
  const std::string s = getString(b, "share", field, std::nullopt);
  const bool digits =
      s.size() >= 2 && s.size() <= 7 && s[0] == 'b' && s.find_first_not_of("0123456789", 1) == std::string::npos;
  if (!digits) fail(field, "must name an earlier block as \"b<index>\", e.g. \"b0\" (got '" + clipped(s) + "')");
  return std::stoi(s.substr(1));
}

void rejectUnknown(const json& obj, const std::set<std::string>& known, const std::string& where) {
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!known.count(it.key()))
      fail(where.empty() ? clipped(it.key()) : where + "." + clipped(it.key()), "unknown field");
}

// The keys a block object may hold: kind, repeat and every registered kind's fields.
// "residual-bn and transformer": the kinds that take field `name` (a field several kinds share, as drop_path).
std::string fieldOwners(const std::string& name) {
  std::vector<std::string> owners;
  for (const BlockKindDef* d : blockKinds())
    if (takesField(*d, name)) owners.push_back(d->name);
  std::string s;
  for (size_t i = 0; i < owners.size(); ++i) s += (i == 0 ? "" : i + 1 == owners.size() ? " and " : ", ") + owners[i];
  return s;
}

std::set<std::string> blockKeys() {
  std::set<std::string> keys = {"kind", "repeat", "frozen", "share"};
  for (const BlockKindDef* d : blockKinds())
    for (const BlockField& f : d->fields) keys.insert(f.name);
  return keys;
}

// Block i of the case (before "repeat"): its kind, then every kind's fields in table order, each refused on a
// block of another kind or parsed by its own, then the kind's checks against the whole case.
BlockSpec parseBlock(const json& b, const std::string& where, const CaseSpec& c) {
  if (!b.is_object()) fail(where, "must be an object (got " + typeName(b) + ")");
  rejectUnknown(b, blockKeys(), where);
  const std::string name = getString(b, "kind", where + ".kind", std::nullopt);
  const BlockKindDef* def = findBlockKind(name);
  if (!def) fail(where + ".kind", "unknown value '" + clipped(name) + "' (expected one of: " + blockKindNames() + ")");
  BlockSpec s;
  s.kind = def;
  for (const BlockKindDef* owner : blockKinds())
    for (const BlockField& f : owner->fields) {
      const std::string path = where + "." + f.name;
      if (owner == def) f.parse(b, path, c, s);
      else if (b.contains(f.name) && !takesField(*def, f.name))
        fail(path, "only " + fieldOwners(f.name) + " blocks take " + f.phrase);
    }
  if (def->validate) def->validate(s, c, where);
  return s;
}

}  // namespace

CaseSpec parseCase(const json& j) {
  if (!j.is_object()) throw InputError("case: must be a JSON object (got " + clipped(j, 40) + ")");
  {
    std::set<std::string> keys = {"name",       "dtype",         "batch",       "seq",     "width",   "blocks",
                                  "loss",       "seed",          "rng",         "dropout", "lr",      "steps",
                                  "input_grad", "micro_batches", "rrelu_range", "compute", "$schema", "description"};
    for (const char* const* k = lmFieldKeys(); *k; ++k) keys.insert(*k);
    rejectUnknown(j, keys, "");
  }
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
  c.inputGrad = getBool(j, "input_grad", "input_grad", true);
  c.microBatches = getInt(j, "micro_batches", "micro_batches", 1, kMaxDim, 1);
  if (c.batch % c.microBatches != 0)
    fail("micro_batches", std::to_string(c.microBatches) + " does not divide batch " + std::to_string(c.batch) +
                              " (micro-batches hold whole sequences)");
  parseLmFields(j, c);
  parseRreluRange(j, c);
  parseCompute(j, c);

  if (!j.contains("blocks")) fail("blocks", "missing (required)");
  const json& bs = j.at("blocks");
  if (!bs.is_array()) fail("blocks", "must be an array (got " + typeName(bs) + ")");
  if (bs.empty()) fail("blocks", "must hold at least one block (L = 0)");
  for (size_t i = 0; i < bs.size(); ++i) {
    const std::string where = "blocks[" + std::to_string(i) + "]";
    const json& b = bs[i];
    BlockSpec s = parseBlock(b, where, c);
    s.frozen = getBool(b, "frozen", where + ".frozen", false);
    s.share = getShare(b, where + ".share");
    const int64_t repeat = getInt(b, "repeat", where + ".repeat", 1, kMaxBlocks, 1);
    if (static_cast<int64_t>(c.blocks.size()) + repeat > kMaxBlocks)
      fail(where + ".repeat", "the chain may hold at most " + std::to_string(kMaxBlocks) + " blocks");
    const int first = static_cast<int>(c.blocks.size());
    // A sharing block is frozen exactly when its owner is; it may say so or leave it out.
    if (s.share >= 0 && s.share < first && !b.contains("frozen"))
      s.frozen = c.blocks[static_cast<size_t>(s.share)].frozen;
    for (int64_t r = 0; r < repeat; ++r) c.blocks.push_back(s);
    checkParamFields(c, first, where, b.contains("frozen"));
  }
  // A token case's head always trains, so a frozen embedding before frozen blocks still leaves a gradient.
  if (!c.inputGrad && !anyBlockTrains(c) && !isLanguageModel(c))
    fail("input_grad", "false with every block frozen: nothing in the case requires a gradient");
  if (c.loss == LossKind::kCrossEntropy && lossClasses(c) < 2) fail("width", "cross_entropy needs width >= 2 classes");
  return c;
}

CaseSpec parseCaseText(const std::string& text, const std::string& origin) {
  return parseCase(parseUserJson(text, origin));
}

CaseSpec loadCase(const std::string& path) {
  const std::string origin = "case file '" + path + "'";
  const std::string text = readUserFile(path, "case file", kMaxJsonFileBytes);
  try {
    return parseCaseText(text, origin);
  } catch (const InputError& e) {
    const std::string m = e.what();
    if (m.rfind("case file", 0) == 0) throw;
    throw InputError(origin + ": " + m);
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
  // printed only when off, so older cases print as they did; a token case says "frozen_embedding" instead
  if (!c.inputGrad && !isLanguageModel(c)) j["input_grad"] = false;
  printLmFields(c, j);
  if (c.microBatches > 1) j["micro_batches"] = c.microBatches;
  printRreluRange(c, j);
  printCompute(c, j);
  json blocks = json::array();
  // Runs of equal blocks print as one entry with "repeat", so a 48-block case stays readable.
  for (size_t i = 0; i < c.blocks.size();) {
    size_t k = i;
    while (k < c.blocks.size() && c.blocks[k] == c.blocks[i]) ++k;
    json b;
    const BlockKindDef& def = *c.blocks[i].kind;
    b["kind"] = def.name;
    def.print(c.blocks[i], b);
    if (c.blocks[i].frozen) b["frozen"] = true;
    if (c.blocks[i].share >= 0) b["share"] = "b" + std::to_string(c.blocks[i].share);
    if (k - i > 1) b["repeat"] = k - i;
    blocks.push_back(b);
    i = k;
  }
  j["blocks"] = blocks;
  return j;
}

}  // namespace ckpt
