// The parsers never crash, whatever they are fed: random mutations of valid case files (bytes and JSON values)
// and of valid policy strings are either accepted or refused with an InputError (exit code 2 in the CLI) — never
// another exception, and, under the sanitizer build (ci/sanitize), never undefined behaviour. What is accepted
// is a valid input: a case prints back as itself, a policy's canonical string is a fixed point.
// The libFuzzer targets in tests/fuzz/ search the same space by coverage; these run on every CI build.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <limits>

#include "cases/case_json.h"
#include "cases/generators.h"
#include "harness/engine/policy.h"
#include "tests/test_util.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A case costs microseconds: 3000 per property unless RC_PARAMS says otherwise (RapidCheck reads it at first
// use); a seed given there (ci/test pins one) is kept.
bool manyCases() {
  const char* given = std::getenv("RC_PARAMS");
  std::string params = given ? given : "";
  if (params.find("max_success") == std::string::npos)
    params += (params.empty() ? "" : " ") + std::string("max_success=3000");
  return setenv("RC_PARAMS", params.c_str(), /*overwrite=*/1) == 0;
}
[[maybe_unused]] const bool kManyCases = manyCases();

using test::readFile;

// The valid case files the mutations start from: the catalogue, and a few shapes it lacks.
const std::vector<std::string>& seeds() {
  static const std::vector<std::string> s = [] {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(test::catalogueDir())) v.push_back(readFile(e.path()));
    v.push_back(
        R"({"name":"m","dtype":"float","batch":3,"seq":2,"width":6,"loss":"mse","seed":18446744073709551615,)"
        R"("rng":"counter","dropout":0.5,"lr":0,"steps":3,"blocks":[{"kind":"mlp","activation":"tanh","repeat":4},)"
        R"({"kind":"transformer","heads":3},{"kind":"residual-bn"}]})");
    v.push_back(R"({"batch":2,"width":2,"blocks":[{"kind":"mlp","activation":"relu"}]})");
    return v;
  }();
  return s;
}

enum class Outcome { kAccepted, kRefused };

// Parses; an accepted case must print as JSON that parses back to itself. Any exception other than InputError
// fails the property with its message.
Outcome parseOrRefuse(const std::string& text) {
  CaseSpec c;
  try {
    c = parseCaseText(text, "mutant");
  } catch (const InputError& e) {
    RC_ASSERT(!std::string(e.what()).empty());
    return Outcome::kRefused;
  } catch (const std::exception& e) {
    RC_FAIL(std::string("parser threw a non-InputError: ") + e.what());
  }
  RC_ASSERT(parseCase(caseToJson(c)) == c);
  return Outcome::kAccepted;
}

// Tokens that reach the corners of a JSON number and string lexer and of the case validator.
const std::vector<std::string>& interesting() {
  static const std::vector<std::string> t = {"0",
                                             "-0",
                                             "-1",
                                             "1e999",
                                             "-1e999",
                                             "1e-999",
                                             "NaN",
                                             "Infinity",
                                             "18446744073709551615",
                                             "18446744073709551616",
                                             "9223372036854775807",
                                             "-9223372036854775808",
                                             "65536",
                                             "65537",
                                             "100000",
                                             "0.99999999999999999",
                                             "1.0",
                                             "null",
                                             "true",
                                             "\"\"",
                                             "\"\\u0000\"",
                                             "\"\\ud800\"",
                                             "\xff",
                                             "\xc3\x28",
                                             "[",
                                             "]",
                                             "{",
                                             "}",
                                             ",",
                                             ":",
                                             "\"",
                                             "\\",
                                             "{\"kind\":\"transformer\",\"heads\":65536}",
                                             "[[[[[[[[[[]]]]]]]]]]",
                                             "\"repeat\":100000"};
  return t;
}

// One byte-level edit: flip a bit, overwrite, insert, delete, duplicate or drop a range, or splice a token in.
std::string mutateOnce(std::string s) {
  const size_t n = s.size();
  const int kind = *rc::gen::inRange(0, 7);
  const size_t at = n == 0 ? 0 : *rc::gen::inRange<size_t>(0, n);
  switch (kind) {
    case 0:
      if (n) s[at] = static_cast<char>(s[at] ^ (1 << *rc::gen::inRange(0, 8)));
      break;
    case 1:
      if (n) s[at] = *rc::gen::arbitrary<char>();
      break;
    case 2:
      s.insert(s.begin() + static_cast<long>(at), *rc::gen::arbitrary<char>());
      break;
    case 3:
      if (n) s.erase(at, *rc::gen::inRange<size_t>(1, 8));
      break;
    case 4: {
      const size_t len = *rc::gen::inRange<size_t>(1, 32);
      s.insert(at, s.substr(at, len));
      break;
    }
    case 5:
      s = s.substr(0, at);
      break;  // truncated file
    default:
      s.insert(at, *rc::gen::elementOf(interesting()));
      break;
  }
  return s;
}

RC_GTEST_PROP(CaseParserFuzz, byteMutationsOfValidCasesAreAcceptedOrRefusedAsBadInput, ()) {
  std::string text = *rc::gen::elementOf(seeds());
  const int edits = *rc::gen::inRange(1, 6);
  for (int i = 0; i < edits; ++i) text = mutateOnce(text);
  RC_TAG(parseOrRefuse(text) == Outcome::kAccepted ? "accepted" : "refused");
}

// A random JSON value of any type, extremes included.
rc::Gen<json> genJsonValue() {
  return rc::gen::oneOf(
      rc::gen::just(json(nullptr)), rc::gen::map(rc::gen::arbitrary<bool>(), [](bool b) { return json(b); }),
      rc::gen::map(rc::gen::arbitrary<int64_t>(), [](int64_t v) { return json(v); }),
      rc::gen::map(rc::gen::inRange<int64_t>(-3, 70000), [](int64_t v) { return json(v); }),
      rc::gen::map(rc::gen::arbitrary<uint64_t>(), [](uint64_t v) { return json(v); }),
      rc::gen::map(rc::gen::arbitrary<double>(), [](double v) { return json(v); }),
      rc::gen::map(
          rc::gen::element(-1.0, -0.0, 0.0, 0.5, 0.999999, 1.0, 1e308, std::numeric_limits<double>::denorm_min()),
          [](double v) { return json(v); }),
      rc::gen::map(rc::gen::element<std::string>("mlp", "residual-bn", "transformer", "gelu", "relu", "float", "double",
                                                 "counter", "stateful", "mse", "cross_entropy", "", "NaN", "1"),
                   [](std::string v) { return json(v); }),
      rc::gen::just(json::array()), rc::gen::just(json::object()),
      rc::gen::just(json::array({json::object({{"kind", "mlp"}})})));
}

// Replaces, adds or removes one field of the case or of one of its blocks.
RC_GTEST_PROP(CaseParserFuzz, fieldMutationsOfValidCasesAreAcceptedOrRefusedAsBadInput, ()) {
  json j = json::parse(*rc::gen::elementOf(seeds()));
  const int edits = *rc::gen::inRange(1, 4);
  const std::vector<std::string> caseKeys = {"name", "dtype", "batch",   "seq", "width", "blocks",      "loss",
                                             "seed", "rng",   "dropout", "lr",  "steps", "description", "extra"};
  const std::vector<std::string> blockKeys = {"kind", "activation", "heads", "repeat", "other"};
  for (int i = 0; i < edits; ++i) {
    const bool inBlock = *rc::gen::arbitrary<bool>() && j["blocks"].is_array() && !j["blocks"].empty();
    json& target = inBlock ? j["blocks"][*rc::gen::inRange<size_t>(0, j["blocks"].size())] : j;
    if (!target.is_object()) continue;
    const std::string key = *rc::gen::elementOf(inBlock ? blockKeys : caseKeys);
    if (*rc::gen::inRange(0, 4) == 0) target.erase(key);
    else target[key] = *genJsonValue();
  }
  RC_TAG(parseOrRefuse(j.dump()) == Outcome::kAccepted ? "accepted" : "refused");
}

const std::vector<std::string>& validPolicies() {
  static const std::vector<std::string> p = {"store-all",
                                             "uniform",
                                             "uniform:k=8",
                                             "recursive",
                                             "revolve:slots=3",
                                             "optimal:budget=1000000",
                                             "selective",
                                             "selective:recompute=attention,dropout",
                                             "uniform:k=2+selective",
                                             "revolve:slots=2+selective:recompute=gelu"};
  return p;
}

RC_GTEST_PROP(PolicyParserFuzz, mutatedPolicyStringsAreAcceptedOrRefusedAsBadInput, ()) {
  std::string text = *rc::gen::elementOf(validPolicies());
  const int edits = *rc::gen::inRange(1, 4);
  for (int i = 0; i < edits; ++i) {
    if (*rc::gen::inRange(0, 3) == 0)
      text += *rc::gen::element<std::string>("+", ":", "=", ",", "k=", "slots=", "budget=", "recompute=", "-1", "0",
                                             "99999999999999999999", "selective");
    else text = mutateOnce(text);
  }
  try {
    const PolicySpec p = parsePolicy(text);
    RC_ASSERT(parsePolicy(p.text).text == p.text);
    RC_TAG("accepted");
  } catch (const InputError& e) {
    RC_ASSERT(!std::string(e.what()).empty());
    RC_TAG("refused");
  } catch (const std::exception& e) {
    RC_FAIL(std::string("policy parser threw a non-InputError: ") + e.what());
  }
}

}  // namespace
}  // namespace ckpt
