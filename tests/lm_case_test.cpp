// Language-model cases in the reference trainer (cases/lm_case.h): the step's gradients of every trained
// parameter (the embeddings, the blocks, the head; a tied weight's as one) are the derivatives of the step's loss
// (finite differences), the embedding's backward is a row-order scatter-add that leaves unused tokens alone, a
// frozen embedding neither reports nor moves, the planner predicts the stem and the head exactly, and the fields
// print and parse back. The engine follows the same rules on every policy (verify's properties; the
// tied-head-grad-dropped mutant in tests/mutants_test.cpp).
#include <gtest/gtest.h>

#include <set>

#include "cases/case_json.h"
#include "cases/lm_case.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "harness/engine/executor.h"
#include "reference/trainer.h"
#include "tests/chain_loss.h"
#include "tests/gradcheck.h"

namespace ckpt {
namespace {

CaseSpec parse(const std::string& text) { return parseCaseText(text, "test"); }

// A tied head, dropout and 2 micro-batches over a transformer and an mlp.
const char* kTied = R"({"input": "tokens", "vocab": 7, "tie_embeddings": true, "batch": 4, "seq": 3, "width": 6,
    "seed": 13, "micro_batches": 2, "dropout": 0.2, "blocks": [
    {"kind": "transformer", "heads": 2}, {"kind": "mlp", "activation": "tanh"}]})";

// Finite differences of the step's loss against every trained parameter's gradient; a tied weight moves its
// head copy with it (syncSharedValues), so the derivative is of the weight used twice.
void expectGradientsAreDerivatives(const CaseSpec& spec, const std::set<std::string>& expectedNames) {
  Chain<double> c = buildChain<double>(spec);
  const RngState rng = c.rng.state();
  Chain<double> stepped = buildChain<double>(spec);
  const StepResult<double> r = referenceStep(stepped, 0);
  EXPECT_DOUBLE_EQ(r.loss, test::chainLoss(c, rng));
  EXPECT_EQ(r.inputGrad.size(), 0) << "a token case reports no input gradient";
  auto objective = [&] {
    syncSharedValues(c);
    return test::chainLoss(c, rng);
  };
  const auto params = c.trainedParams();
  ASSERT_EQ(params.size(), r.grads.size());
  std::set<std::string> names;
  for (size_t k = 0; k < params.size(); ++k) {
    names.insert(r.grads[k].name);
    const test::FdResult fd = test::fdCompareChainTensor(params[k]->value.data(), params[k]->value.size(),
                                                         r.grads[k].value.data(), objective);
    EXPECT_EQ(fd.unreliable, 0) << r.grads[k].name;
    EXPECT_LT(fd.maxRel, test::kFdTolerance)
        << r.grads[k].name << " element " << fd.worst << ": analytic " << fd.analytic << ", numeric " << fd.numeric;
  }
  for (const auto& n : expectedNames) EXPECT_TRUE(names.count(n)) << n;
}

TEST(LmCases, tiedGradientIsTheDerivativeOfTheStepLoss) {
  expectGradientsAreDerivatives(parse(kTied), {"emb.weight", "pos.weight", "head.ln.weight", "head.ln.bias"});
  EXPECT_EQ(buildChain<double>(parse(kTied)).trainedParams().back()->name, "head.ln.bias")
      << "a tied head's weight is the embedding, not a second trained parameter";
}

TEST(LmCases, untiedHeadWithAFrozenEmbeddingTrainsTheHeadAndTheBlocksOnly) {
  const CaseSpec spec = parse(R"({"input": "tokens", "vocab": 5, "frozen_embedding": true, "batch": 2, "seq": 3,
      "width": 4, "seed": 3, "blocks": [{"kind": "mlp", "activation": "gelu"}, {"kind": "residual-bn"}]})");
  EXPECT_FALSE(spec.inputGrad);
  expectGradientsAreDerivatives(spec, {"head.weight", "head.ln.weight"});
  Chain<double> c = buildChain<double>(spec);
  for (auto* p : c.trainedParams()) EXPECT_NE(p->name.rfind("emb", 0), 0u) << p->name;
  const Mat<double> emb = c.stem->embedding().value, pos = c.stemParams()[1]->value;
  const Mat<double> head = c.head->weight.value;
  referenceStep(c, 0);
  EXPECT_EQ(c.stem->embedding().value, emb) << "a frozen embedding moved";
  EXPECT_EQ(c.stemParams()[1]->value, pos);
  EXPECT_NE(c.head->weight.value, head) << "the untied head trains";
}

// Tokens 0..3 only in a vocabulary of 6: untied, rows 4 and 5 of dE are exactly zero; tied, they are the head's
// gradient alone (the embedding's scatter-add adds nothing there), and the used rows are the head's plus the
// scatter-add's.
TEST(LmCases, scatterAddTouchesOnlyUsedTokens) {
  const std::string tail = R"("vocab": 6, "batch": 2, "seq": 4, "width": 3, "seed": 9,
      "tokens": [0, 1, 2, 3, 3, 2, 1, 0], "blocks": [{"kind": "mlp"}]})";
  Chain<double> untied = buildChain<double>(parse(R"({"input": "tokens", )" + tail));
  const StepResult<double> u = referenceStep(untied, 0);
  ASSERT_EQ(u.grads.front().name, "emb.weight");
  EXPECT_EQ(u.grads.front().value.bottomRows(2).cwiseAbs().maxCoeff(), 0.0);
  EXPECT_GT(u.grads.front().value.topRows(4).cwiseAbs().minCoeff(), 0.0);

  Chain<double> tied = buildChain<double>(parse(R"({"input": "tokens", "tie_embeddings": true, )" + tail));
  const StepResult<double> t = referenceStep(tied, 0);
  // The head copy still holds its own (head) gradient after the step: the tie added it into the embedding's.
  const Mat<double>& headGrad = tied.head->weight.grad;
  EXPECT_EQ(t.grads.front().value.bottomRows(2), headGrad.bottomRows(2));
  EXPECT_NE(t.grads.front().value.topRows(4), headGrad.topRows(4));
}

// The plan of a token case: x_0 is the stem's output, the head's context and g_L are the loss model's, and the
// stem's FLOPs (no backward with a frozen embedding) are in the step's; planned == measured for store-all and a
// checkpointing policy, with and without micro-batches.
TEST(LmCases, planPredictsTheStemAndTheHeadExactly) {
  for (const char* extra : {"", R"("micro_batches": 2, )", R"("frozen_embedding": true, )"}) {
    const CaseSpec spec = parse(std::string(R"({"input": "tokens", "vocab": 9, "tie_embeddings": true, )") + extra +
                                R"("batch": 4, "seq": 2, "width": 5, "seed": 4, "dropout": 0.1,
        "blocks": [{"kind": "transformer", "repeat": 3}, {"kind": "mlp"}]})");
    const ChainCost cc = caseChainCost(spec);
    for (const char* policy : {"store-all", "uniform:k=2", "revolve:slots=1"}) {
      Chain<double> c = buildChain<double>(spec);
      const ChainCost own = chainCost(c);
      EXPECT_EQ(own.stemForwardFlops, cc.stemForwardFlops);
      EXPECT_EQ(own.stemBackwardFlops, cc.stemBackwardFlops);
      EXPECT_EQ(own.loss.meta.contextExtraBytes, cc.loss.meta.contextExtraBytes);
      const Schedule s = makeSchedule(parsePolicy(policy), cc);
      const Plan p = planSchedule(s, cc);
      const StepResult<double> r = executeSteps(c, s, 1).at(0);
      EXPECT_EQ(r.peakActivationBytes, p.peakActivationBytes) << extra << policy;
      EXPECT_EQ(r.flops, p.stepFlops()) << extra << policy;
      EXPECT_EQ(r.forwardEvals, p.stepForwardEvals()) << extra << policy;
    }
    EXPECT_EQ(cc.stemBackwardFlops == 0, !spec.inputGrad) << extra;
  }
}

TEST(LmCases, fieldsPrintAndParseBack) {
  const CaseSpec spec = parse(kTied);
  EXPECT_TRUE(isLanguageModel(spec));
  EXPECT_TRUE(tiedHead(spec));
  EXPECT_EQ(lossClasses(spec), 7);
  EXPECT_EQ(parseCase(caseToJson(spec)), spec);
  EXPECT_EQ(lmText(spec), ", tokens V=7, tied head");
  CaseSpec frozen = spec;
  frozen.inputGrad = false;
  frozen.tokens = std::vector<int>(static_cast<size_t>(spec.rows()), 6);
  EXPECT_EQ(parseCase(caseToJson(frozen)), frozen);
  EXPECT_TRUE(caseToJson(frozen).value("frozen_embedding", false));
  EXPECT_FALSE(caseToJson(frozen).contains("input_grad"));
  EXPECT_FALSE(caseToJson(parse(R"({"batch": 2, "width": 4, "blocks": [{"kind": "mlp"}]})")).contains("input"));
}

// The generators' draw: below 750 dense; above, vocabularies 4..16, tied from 875 on; every permille valid.
TEST(LmCases, drawIsMonotoneAndValid) {
  int lastVocab = 0;
  for (int d = 0; d <= 1000; ++d) {
    CaseSpec c;
    c.loss = LossKind::kMse;
    applyLmDraw(c, d, true);
    EXPECT_EQ(isLanguageModel(c), d >= 750) << d;
    if (!isLanguageModel(c)) continue;
    EXPECT_EQ(c.loss, LossKind::kCrossEntropy);
    EXPECT_GE(c.vocab, 4);
    EXPECT_LE(c.vocab, 16);
    EXPECT_EQ(c.tieEmbeddings, d >= 875) << d;
    if (d != 875 && d > 750) {
      EXPECT_GE(c.vocab, lastVocab) << d;
    }
    lastVocab = static_cast<int>(c.vocab);
  }
  CaseSpec off;
  applyLmDraw(off, 999, false);
  EXPECT_FALSE(isLanguageModel(off));
}

}  // namespace
}  // namespace ckpt
