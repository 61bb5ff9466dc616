// The case format: every catalogue case round-trips through JSON, random cases print as JSON that parses back
// to the same case, and bad fields are refused with a message naming them.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cases/block_kind.h"
#include "cases/case_summary.h"
#include "cases/generators.h"
#include "tests/test_util.h"

namespace ckpt {
namespace {

std::filesystem::path catalogDir() { return test::catalogueDir(); }

TEST(CaseJson, catalogueRoundTrips) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(catalogDir())) {
    const CaseSpec c = loadCase(e.path().string());
    EXPECT_EQ(parseCase(caseToJson(c)), c) << e.path();
    ++n;
  }
  EXPECT_GE(n, 4);
}

RC_GTEST_PROP(CaseJson, generatedCasesPrintAsJsonThatParsesBack, (const CaseSpec& c)) {
  RC_ASSERT(parseCaseText(caseToJson(c).dump()) == c);
}

// Each bad case must be refused, naming the field.
struct Bad {
  const char* json;
  const char* mentions;
};

TEST(CaseJson, badFieldsAreRefusedNamingTheField) {
  const Bad cases[] = {
      {R"({"batch": 2, "width": 8})", "'blocks': missing"},
      {R"({"batch": 2, "width": 8, "blocks": []})", "'blocks': must hold at least one block"},
      {R"({"batch": 0, "width": 8, "blocks": [{"kind": "mlp"}]})", "'batch': must be between"},
      {R"({"batch": 2, "width": -3, "blocks": [{"kind": "mlp"}]})", "'width': must be between"},
      {R"({"batch": "2", "width": 8, "blocks": [{"kind": "mlp"}]})", "'batch': must be an integer"},
      {R"({"batch": 2.5, "width": 8, "blocks": [{"kind": "mlp"}]})", "'batch': must be an integer"},
      {R"({"batch": 2, "width": 8, "blocks": [{"kind": "conv"}]})", "'blocks[0].kind': unknown value 'conv'"},
      {R"({"batch": 2, "width": 8, "blocks": [{"kind": "mlp", "activation": "swish"}]})", "'blocks[0].activation'"},
      {R"({"batch": 2, "width": 8, "blocks": [{"kind": "transformer", "heads": 3}]})",
       "'blocks[0].heads': must divide width 8"},
      {R"({"batch": 2, "width": 8, "blocks": [{"kind": "mlp", "heads": 2}]})", "'blocks[0].heads': only transformer"},
      {R"({"batch": 1, "width": 8, "blocks": [{"kind": "residual-bn"}]})", "'blocks[0].kind': residual-bn needs"},
      {R"({"batch": 2, "width": 8, "dropout": 1.0, "blocks": [{"kind": "mlp"}]})", "'dropout': must be in [0, 1)"},
      {R"({"batch": 2, "width": 8, "dropout": -0.1, "blocks": [{"kind": "mlp"}]})", "'dropout'"},
      {R"({"batch": 2, "width": 8, "steps": 0, "blocks": [{"kind": "mlp"}]})", "'steps': must be between"},
      {R"({"batch": 2, "width": 8, "rng": "mersenne", "blocks": [{"kind": "mlp"}]})", "'rng': unknown value"},
      {R"({"batch": 2, "width": 8, "dtype": "half", "blocks": [{"kind": "mlp"}]})", "'dtype': unknown value 'half'"},
      {R"({"batch": 2, "width": 8, "seed": -1, "blocks": [{"kind": "mlp"}]})", "'seed': must be non-negative"},
      {R"({"batch": 2, "width": 8, "lr": -1, "blocks": [{"kind": "mlp"}]})", "'lr': must be >= 0"},
      {R"({"batch": 2, "width": 8, "bacth": 2, "blocks": [{"kind": "mlp"}]})", "'bacth': unknown field"},
      {R"({"batch": 2, "width": 1, "blocks": [{"kind": "mlp"}]})", "'width': cross_entropy needs"},
      {R"({"batch": 2, "width": 8, "blocks": [{"kind": "mlp", "repeat": 0}]})", "'blocks[0].repeat'"},
      {R"([1, 2])", "must be a JSON object"},
      {R"({"batch": 2,)", "malformed JSON"},
  };
  for (const auto& b : cases) {
    try {
      parseCaseText(b.json);
      ADD_FAILURE() << "accepted: " << b.json;
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(b.mentions), std::string::npos) << "message: " << m << "\nexpected to mention: " << b.mentions;
      EXPECT_EQ(m.find('\n'), std::string::npos) << "not one line: " << m;
    }
  }
}

// A case in one line (cases/case_summary.h), the one text verify's findings and validate's reports print: each
// kind's own text after its name, the case's fields, a case-level rule only when it is on, six blocks at most.
TEST(CaseSummary, namesTheBlocksAndWhatIsOn) {
  CaseSpec c;
  c.blocks = {BlockSpec{blockKind("mlp"), Activation::kRelu},
              BlockSpec{blockKind("transformer"), Activation::kGelu, 2}};
  c.width = 4;
  EXPECT_EQ(caseSummary(c),
            "2 blocks (mlp/relu, transformer/2h), width 4, batch 2, seq 1, 1 step, double, stateful rng, dropout 0");
  c.loss = LossKind::kMse;
  c.steps = 3;
  c.dropout = 0.25;
  c.dtype = DType::kFloat;
  EXPECT_EQ(caseSummary(c),
            "2 blocks (mlp/relu, transformer/2h), width 4, batch 2, seq 1, 3 steps, float, stateful "
            "rng, dropout 0.25, mse loss");
  c.blocks.assign(7, BlockSpec{blockKind("mlp"), Activation::kTanh});
  EXPECT_EQ(caseSummary(c).rfind("7 blocks (mlp/tanh, mlp/tanh, mlp/tanh, mlp/tanh, mlp/tanh, mlp/tanh, ...), ", 0), 0u)
      << caseSummary(c);
}

TEST(CaseJson, unreadableFileIsAnInputError) { EXPECT_THROW(loadCase("/nonexistent/case.json"), InputError); }

}  // namespace
}  // namespace ckpt
