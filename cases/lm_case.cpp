#include "cases/lm_case.h"

#include <algorithm>

#include "cases/json_fields.h"

namespace ckpt {

using json_fields::fail;
using json_fields::getInt;
using json_fields::getString;
using json_fields::kMaxDim;

bool isLanguageModel(const CaseSpec& c) { return c.input == InputKind::kTokens; }
bool tiedHead(const CaseSpec& c) { return isLanguageModel(c) && c.tieEmbeddings; }
bool embeddingTrains(const CaseSpec& c) { return isLanguageModel(c) && c.inputGrad; }
bool headWeightTrains(const CaseSpec& c) { return isLanguageModel(c) && (!c.tieEmbeddings || c.inputGrad); }
bool inputGradReported(const CaseSpec& c) { return !isLanguageModel(c) && c.inputGrad; }
int64_t lossClasses(const CaseSpec& c) { return isLanguageModel(c) ? c.vocab : c.width; }

namespace {

bool boolField(const nlohmann::json& j, const char* key) {
  const auto& v = j.at(key);
  if (!v.is_boolean()) fail(key, "must be true or false (got " + std::string(v.type_name()) + ")");
  return v.get<bool>();
}

}  // namespace

const char* const* lmFieldKeys() {
  static const char* const keys[] = {"input", "vocab", "tie_embeddings", "frozen_embedding", "tokens", nullptr};
  return keys;
}

void parseLmFields(const nlohmann::json& j, CaseSpec& c) {
  const std::string input = getString(j, "input", "input", std::string("dense"));
  if (input != "dense" && input != "tokens")
    fail("input", "unknown value '" + clipped(input) + "' (expected one of: dense, tokens)");
  if (input == "dense") {
    for (const char* const* k = lmFieldKeys() + 1; *k; ++k)
      if (j.contains(*k)) fail(*k, "only a case with \"input\": \"tokens\" takes it");
    return;
  }
  c.input = InputKind::kTokens;
  if (c.loss != LossKind::kCrossEntropy)
    fail("loss", "a token case's loss is its LM head's cross_entropy over the vocabulary (got mse)");
  if (j.contains("input_grad"))
    fail("input_grad",
         "a token case's input is token ids; say \"frozen_embedding\": true for an embedding without "
         "gradient");
  c.vocab = getInt(j, "vocab", "vocab", 2, kMaxDim, std::nullopt);
  c.tieEmbeddings = j.contains("tie_embeddings") && boolField(j, "tie_embeddings");
  c.inputGrad = !(j.contains("frozen_embedding") && boolField(j, "frozen_embedding"));
  c.tokens.clear();
  if (!j.contains("tokens")) return;
  const auto& t = j.at("tokens");
  if (!t.is_array()) fail("tokens", "must be an array of token ids (got " + std::string(t.type_name()) + ")");
  if (static_cast<int64_t>(t.size()) != c.rows())
    fail("tokens", "holds " + std::to_string(t.size()) + " ids; batch * seq is " + std::to_string(c.rows()));
  for (size_t i = 0; i < t.size(); ++i) {
    const auto& v = t[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.vocab)
      fail("tokens[" + std::to_string(i) + "]",
           "must be a token id in [0, vocab " + std::to_string(c.vocab) + ") (got " + clipped(v) + ")");
    c.tokens.push_back(static_cast<int>(v.get<int64_t>()));
  }
}

void printLmFields(const CaseSpec& c, nlohmann::json& j) {
  if (!isLanguageModel(c)) return;
  j["input"] = "tokens";
  j["vocab"] = c.vocab;
  if (c.tieEmbeddings) j["tie_embeddings"] = true;
  if (!c.inputGrad) j["frozen_embedding"] = true;
  if (!c.tokens.empty()) j["tokens"] = c.tokens;
}

std::string lmText(const CaseSpec& c) {
  if (!isLanguageModel(c)) return "";
  std::string s = ", tokens V=" + std::to_string(c.vocab);
  if (c.tieEmbeddings) s += ", tied head";
  if (!c.inputGrad) s += ", frozen embedding";
  return s;
}

void fixLmFields(CaseSpec& c) {
  if (!isLanguageModel(c)) return;
  if (static_cast<int64_t>(c.tokens.size()) != c.rows()) c.tokens.clear();
  c.loss = LossKind::kCrossEntropy;
}

void applyLmDraw(CaseSpec& c, int draw, bool enabled) {
  c.input = InputKind::kDense;
  c.vocab = 0;
  c.tieEmbeddings = false;
  c.tokens.clear();
  if (!enabled || draw < 750) return;
  const int k = std::min(draw, 999) - 750;  // 0..249
  c.input = InputKind::kTokens;
  c.loss = LossKind::kCrossEntropy;
  c.tieEmbeddings = k >= 125;
  c.vocab = 4 + (k % 125) * 13 / 125;  // 4..16
}

}  // namespace ckpt
