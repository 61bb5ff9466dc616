// Every reference op and loss against float64 central finite differences (ARCHITECTURE.md's op invariant), plus
// the contract checks of reference/op.h: parameter gradients accumulate, input gradients are fresh, meta() states
// exactly what forward and backward allocate and draw, BatchNorm's state moves once per training forward, and
// attention is causal.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numbers>
#include <random>
#include <set>

#include "reference/block.h"
#include "reference/op_table.h"
#include "reference/ops/add.h"
#include "reference/ops/attention.h"
#include "reference/ops/batchnorm.h"
#include "reference/ops/cross_entropy.h"
#include "reference/ops/drop_path.h"
#include "reference/ops/dropout.h"
#include "reference/ops/gelu.h"
#include "reference/ops/layernorm.h"
#include "reference/ops/linear.h"
#include "reference/ops/moe.h"
#include "reference/ops/mse.h"
#include "reference/ops/relu.h"
#include "reference/ops/rrelu.h"
#include "reference/ops/tanh.h"
#include "tests/gradcheck.h"

// Every member of every op compiles in float too, not only in the precision a test happens to call.
template class ckpt::Gelu<float>;
template class ckpt::Tanh<float>;
template class ckpt::LayerNorm<float>;
template class ckpt::BatchNorm<float>;
template class ckpt::CausalSelfAttention<float>;
template class ckpt::CrossEntropyLoss<float>;
template class ckpt::MseLoss<float>;
template class ckpt::DropPath<float>;
template class ckpt::Rrelu<float>;
template class ckpt::Moe<float>;

namespace {
using namespace ckpt;
using test::FdResult;
using test::kFdTolerance;

// Replayed by every random op, so each finite-difference evaluation sees the same mask.
const RngDraw kDraw{1234, 7, 0};

NodeDraws kReplay(nullptr, 0, &kDraw, nullptr);

OpEnv replayEnv() { return OpEnv{&kReplay, {}}; }

template <class T>
Mat<T> randomMat(std::mt19937_64& g, int64_t rows, int64_t cols, double scale = 1, bool awayFromZero = false) {
  std::uniform_real_distribution<double> u(-1, 1);
  Mat<T> m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) {
    const double v = u(g);
    m.data()[i] = static_cast<T>(scale * (awayFromZero ? (v < 0 ? -0.1 : 0.1) + v : v));
  }
  return m;
}

template <class T>
struct OpCase {
  std::string name;
  std::unique_ptr<Op<T>> op;
  std::vector<Shape> in;
  bool awayFromZero = false;  // ReLU: no input within 0.1 of the kink
  double scale = 1;
};

template <class T>
std::vector<OpCase<T>> allOps() {
  std::vector<OpCase<T>> v;
  auto add = [&](std::string name, std::unique_ptr<Op<T>> op, std::vector<Shape> in, bool away = false,
                 double scale = 1) { v.push_back({std::move(name), std::move(op), std::move(in), away, scale}); };
  add("linear", std::make_unique<Linear<T>>("fc", 5, 4), {{6, 5}});
  add("relu", std::make_unique<Relu<T>>(), {{6, 5}}, true);
  add("dropout", std::make_unique<Dropout<T>>(0.3), {{6, 5}});
  add("dropout-p0", std::make_unique<Dropout<T>>(0.0), {{6, 5}});
  add("add", std::make_unique<Add<T>>(), {{6, 5}, {6, 5}});
  add("gelu", std::make_unique<Gelu<T>>(), {{6, 5}}, false, 3);  // reaches both tails
  add("tanh", std::make_unique<Tanh<T>>(), {{6, 5}}, false, 2);
  add("layernorm", std::make_unique<LayerNorm<T>>("ln", 5), {{6, 5}});
  add("batchnorm", std::make_unique<BatchNorm<T>>("bn", 5), {{6, 5}});
  add("attention", std::make_unique<CausalSelfAttention<T>>(2, 4, 0.0), {{8, 12}});
  add("attention-p0.3", std::make_unique<CausalSelfAttention<T>>(2, 4, 0.3), {{8, 12}});
  add("attention-1head", std::make_unique<CausalSelfAttention<T>>(1, 3, 0.0), {{6, 9}});
  add("drop_path", std::make_unique<DropPath<T>>(1, 0.5), {{6, 5}});  // six samples of one row
  add("drop_path-seq3", std::make_unique<DropPath<T>>(3, 0.4), {{6, 5}});
  add("rrelu", std::make_unique<Rrelu<T>>(0.125, 1.0 / 3.0), {{6, 5}}, true);
  // Top-2 of 3 experts at capacity factor 0.75 (8 slots each: some assignments dropped), jitter drawn; no auxiliary
  // loss, which the objective here does not see (tests/moe_test.cpp checks it).
  add("moe", std::make_unique<Moe<T>>("moe", 5, 3, 2, 8, 0.75, 0.2, 0.0), {{16, 5}});
  add("moe-top1", std::make_unique<Moe<T>>("moe", 5, 2, 1, 4, 2.0, 0.0, 0.0), {{16, 5}});
  return v;
}

// Built outside any MeterScope, so inputs are never charged to a meter under test.
template <class T>
std::vector<Tensor<T>> makeInputs(const OpCase<T>& c, std::mt19937_64& g) {
  std::vector<Tensor<T>> ins;
  for (const Shape& s : c.in) ins.push_back(Tensor<T>::from(randomMat<T>(g, s.rows, s.cols, c.scale, c.awayFromZero)));
  return ins;
}

template <class T>
void randomizeParams(Op<T>& op, std::mt19937_64& g) {
  for (auto* p : op.params()) {
    p->value = randomMat<T>(g, p->value.rows(), p->value.cols());
    p->grad.setZero();
  }
}

std::vector<Shape> shapesOf(const std::vector<Tensor<double>>& ins) {
  std::vector<Shape> s;
  for (const auto& t : ins) s.push_back({t.rows(), t.cols()});
  return s;
}

struct OpGradReport {
  FdResult inputs, params;
};

// Objective sum(out * R) for a fixed random R: its gradient w.r.t. out is R, so one backward gives the lot.
OpGradReport gradcheckOp(Op<double>& op, std::vector<Tensor<double>>& ins, const OpEnv& env, std::mt19937_64& g) {
  const OpMeta m = op.meta(shapesOf(ins));
  const Mat<double> R = randomMat<double>(g, m.out.rows, m.out.cols);
  for (auto* p : op.params()) p->grad.setZero();
  std::vector<Tensor<double>> din(ins.size());
  {
    Context<double> ctx;
    auto y = op.forward(ins, &ctx, env);
    op.backward(ctx, Tensor<double>::from(R), din);
  }
  auto objective = [&] { return op.forward(ins, nullptr, env).map().cwiseProduct(R).sum(); };
  OpGradReport r;
  for (size_t i = 0; i < ins.size(); ++i)
    r.inputs.merge(test::fdCompare(ins[i].data(), ins[i].size(), din[i].data(), objective));
  for (auto* p : op.params()) {
    const Mat<double> analytic = p->grad;
    r.params.merge(test::fdCompare(p->value.data(), p->value.size(), analytic.data(), objective));
  }
  return r;
}

std::string describe(const FdResult& r) {
  return "worst element " + std::to_string(r.worst) + ": analytic " + std::to_string(r.analytic) + ", numeric " +
         std::to_string(r.numeric);
}

TEST(OpsGradcheck, inputAndParameterGradientsMatchFiniteDifferences) {
  std::mt19937_64 g(42);
  for (auto& c : allOps<double>()) {
    SCOPED_TRACE(c.name);
    auto ins = makeInputs(c, g);
    randomizeParams(*c.op, g);
    const auto r = gradcheckOp(*c.op, ins, replayEnv(), g);
    std::printf("gradcheck %-16s max rel error: inputs %.3g, params %.3g\n", c.name.c_str(), r.inputs.maxRel,
                r.params.maxRel);
    EXPECT_LE(r.inputs.maxRel, kFdTolerance) << describe(r.inputs);
    EXPECT_LE(r.params.maxRel, kFdTolerance) << describe(r.params);
    // Fixed inputs away from every kink: the oracle must be able to check every element.
    EXPECT_EQ(r.inputs.unreliable + r.params.unreliable, 0) << "finite differences disagree at two step sizes";
  }
}

// Every op of the op table is checked here: a new op adds its line to allOps.
TEST(OpsGradcheck, everyOpOfTheTableIsChecked) {
  std::set<std::string> checked;
  for (const auto& c : allOps<double>()) checked.insert(c.op->kind());
  for (const std::string& kind : opKindNames())
    EXPECT_TRUE(checked.count(kind)) << "op '" << kind << "' has no line in allOps (tests/ops_gradcheck_test.cpp)";
}

// The replayed dropout masks must actually drop something, or the dropout checks above prove little.
TEST(OpsGradcheck, replayedMasksDropSomeElements) {
  std::mt19937_64 g(1);
  for (auto& c : allOps<double>()) {
    if (c.name != "dropout" && c.name != "attention-p0.3" && c.name != "drop_path") continue;
    SCOPED_TRACE(c.name);
    auto ins = makeInputs(c, g);
    Context<double> ctx;
    c.op->forward(ins, &ctx, replayEnv());
    const auto mask = ctx.tensors.back().map();
    const auto zeros = (mask.array() == 0).count();
    EXPECT_GT(zeros, 0);
    EXPECT_LT(zeros, mask.size());
    EXPECT_EQ(ctx.draw, kDraw);
  }
}

FdResult gradcheckLoss(Loss<double>& loss, Tensor<double>& x) {
  Tensor<double> dx;
  {
    Context<double> ctx;
    loss.forward(x, &ctx);
    dx = loss.backward(ctx);
  }
  return test::fdCompare(x.data(), x.size(), dx.data(), [&] { return loss.forward(x, nullptr); });
}

TEST(OpsGradcheck, lossGradientsMatchFiniteDifferences) {
  std::mt19937_64 g(3);
  auto x = Tensor<double>::from(randomMat<double>(g, 6, 5, 3));
  CrossEntropyLoss<double> ce({0, 4, 2, 2, 1, 3});
  const auto rce = gradcheckLoss(ce, x);
  MseLoss<double> mse(randomMat<double>(g, 6, 5));
  const auto rmse = gradcheckLoss(mse, x);
  std::printf("gradcheck %-16s max rel error: inputs %.3g\n", "cross_entropy", rce.maxRel);
  std::printf("gradcheck %-16s max rel error: inputs %.3g\n", "mse", rmse.maxRel);
  EXPECT_LE(rce.maxRel, kFdTolerance) << describe(rce);
  EXPECT_LE(rmse.maxRel, kFdTolerance) << describe(rmse);
  EXPECT_EQ(rce.unreliable + rmse.unreliable, 0);
}

TEST(OpsGradcheck, crossEntropyIsStableForHugeLogits) {
  auto x = Tensor<double>::from(Mat<double>{{1000.0, 0.0}, {-1000.0, 0.0}});
  CrossEntropyLoss<double> ce({0, 0});
  EXPECT_DOUBLE_EQ(ce.forward(x, nullptr), 500.0);  // rows lose 0 and 1000
}

TEST(OpsGradcheck, lossesRejectMismatchedTargets) {
  auto x = Tensor<double>::zeros(3, 2);
  EXPECT_THROW(CrossEntropyLoss<double>({0, 1}).forward(x, nullptr), std::invalid_argument);
  EXPECT_THROW(CrossEntropyLoss<double>({0, 1, 2}).forward(x, nullptr), std::invalid_argument);
  EXPECT_THROW(MseLoss<double>(Mat<double>::Zero(2, 3)).forward(x, nullptr), std::invalid_argument);
}

// llm.c's rule: two backward passes double the parameter gradients, and give the same input gradient twice.
TEST(OpsGradcheck, parameterGradientsAccumulateAndInputGradientsAreFresh) {
  std::mt19937_64 g(5);
  for (auto& c : allOps<double>()) {
    if (c.op->params().empty()) continue;
    SCOPED_TRACE(c.name);
    auto ins = makeInputs(c, g);
    randomizeParams(*c.op, g);
    Context<double> ctx;
    auto y = c.op->forward(ins, &ctx, replayEnv());
    const auto dout = Tensor<double>::from(randomMat<double>(g, y.rows(), y.cols()));
    std::vector<Tensor<double>> din1(ins.size()), din2(ins.size());
    c.op->backward(ctx, dout, din1);
    std::vector<Mat<double>> once;
    for (auto* p : c.op->params()) once.push_back(p->grad);
    c.op->backward(ctx, dout, din2);
    const auto ps = c.op->params();
    for (size_t i = 0; i < ps.size(); ++i) {
      SCOPED_TRACE(ps[i]->name);
      EXPECT_GT(once[i].cwiseAbs().maxCoeff(), 0.0);
      EXPECT_EQ((ps[i]->grad - 2 * once[i]).cwiseAbs().maxCoeff(), 0.0);
    }
    for (size_t i = 0; i < ins.size(); ++i) {
      EXPECT_NE(din1[i].storageId(), din2[i].storageId());
      EXPECT_EQ((din1[i].map() - din2[i].map()).cwiseAbs().maxCoeff(), 0.0);
    }
  }
}

template <class T>
std::set<const void*> storageIds(const std::vector<Tensor<T>>& ts) {
  std::set<const void*> s;
  for (const auto& t : ts) s.insert(t.storageId());
  return s;
}

// What meta() says forward and backward allocate and draw is what they do, as the meter measures it.
template <class T>
void checkMetaMatchesMeter() {
  std::mt19937_64 g(11);
  for (auto& c : allOps<T>()) {
    SCOPED_TRACE(c.name);
    auto ins = makeInputs(c, g);
    const OpMeta m = c.op->meta(c.in);
    const int64_t outBytes = m.out.size() * static_cast<int64_t>(sizeof(T));
    int64_t inBytes = 0;
    for (const auto& t : ins) inBytes += t.bytes();
    {
      ActivationMeter meter;
      MeterScope scope(&meter);
      auto y = c.op->forward(ins, nullptr, replayEnv());
      EXPECT_EQ((Shape{y.rows(), y.cols()}), m.out);
      EXPECT_EQ(meter.live(), outBytes);
      EXPECT_EQ(meter.peak(), outBytes);
    }
    {
      ActivationMeter meter;
      MeterScope scope(&meter);
      Context<T> ctx;
      auto y = c.op->forward(ins, &ctx, replayEnv());
      EXPECT_EQ(meter.live(), outBytes + m.contextExtraBytes);
      EXPECT_EQ(meter.peak(), outBytes + m.contextExtraBytes);
      // The context is the inputs and/or output shared, plus extras of exactly contextExtraBytes.
      const auto inIds = storageIds(ins);
      const auto ctxIds = storageIds(ctx.tensors);
      int64_t extra = 0;
      for (const auto& t : ctx.tensors)
        if (!inIds.count(t.storageId()) && t.storageId() != y.storageId()) extra += t.bytes();
      EXPECT_EQ(extra, m.contextExtraBytes);
      for (const auto& t : ins) EXPECT_EQ(ctxIds.count(t.storageId()) == 1, m.savesInputs);
      EXPECT_EQ(ctxIds.count(y.storageId()) == 1, m.savesOutput);
      // Backward allocates one fresh gradient per input and nothing else that counts.
      auto dout = Tensor<T>::from(randomMat<T>(g, y.rows(), y.cols()));
      meter.resetPeak();
      const int64_t before = meter.live();
      std::vector<Tensor<T>> din(ins.size());
      c.op->backward(ctx, dout, din);
      EXPECT_EQ(meter.live() - before, inBytes);
      EXPECT_EQ(meter.peak() - before, inBytes);
      for (size_t i = 0; i < ins.size(); ++i) EXPECT_EQ((Shape{din[i].rows(), din[i].cols()}), c.in[i]);
    }
    // A stateful generator moves by exactly the declared draws (rounded to whole Philox blocks), saving or not.
    for (bool save : {false, true}) {
      Rng rng(RngModel::kStateful, 99);
      NodeDraws draws(&rng, 0, nullptr, nullptr);
      const OpEnv env{&draws, {}};
      Context<T> ctx;
      c.op->forward(ins, save ? &ctx : nullptr, env);
      EXPECT_EQ(rng.state().offset, (static_cast<uint64_t>(m.randomDraws) + 3) & ~uint64_t{3});
    }
    EXPECT_EQ(m.mutatesState, c.name == "batchnorm" || c.name.starts_with("moe"));
  }
}

TEST(OpsMeta, matchesTheMeterInDouble) { checkMetaMatchesMeter<double>(); }
TEST(OpsMeta, matchesTheMeterInFloat) { checkMetaMatchesMeter<float>(); }

template <class T>
void checkLossMeta(Loss<T>& loss, const Tensor<T>& x) {
  SCOPED_TRACE(loss.kind());
  const OpMeta m = loss.meta({x.rows(), x.cols()});
  EXPECT_EQ(m.out, (Shape{1, 1}));
  {
    ActivationMeter meter;
    MeterScope scope(&meter);
    loss.forward(x, nullptr);
    EXPECT_EQ(meter.peak(), 0);
  }
  ActivationMeter meter;
  MeterScope scope(&meter);
  Context<T> ctx;
  loss.forward(x, &ctx);
  EXPECT_EQ(meter.live(), m.contextExtraBytes);
  EXPECT_EQ(meter.peak(), m.contextExtraBytes);
  EXPECT_EQ(storageIds(ctx.tensors).count(x.storageId()) == 1, m.savesInputs);
  const auto dx = loss.backward(ctx);
  EXPECT_EQ(meter.live(), m.contextExtraBytes + x.bytes());
  EXPECT_EQ(meter.peak(), m.contextExtraBytes + x.bytes());
}

TEST(OpsMeta, lossesMatchTheMeter) {
  std::mt19937_64 g(13);
  const auto xd = Tensor<double>::from(randomMat<double>(g, 4, 3));
  const auto xf = Tensor<float>::from(randomMat<float>(g, 4, 3));
  CrossEntropyLoss<double> ced({0, 1, 2, 0});
  CrossEntropyLoss<float> cef({0, 1, 2, 0});
  MseLoss<double> msed(randomMat<double>(g, 4, 3));
  MseLoss<float> msef(randomMat<float>(g, 4, 3));
  checkLossMeta(ced, xd);
  checkLossMeta(cef, xf);
  checkLossMeta(msed, xd);
  checkLossMeta(msef, xf);
}

TEST(BatchNorm, runningStatisticsMoveOncePerTrainingForward) {
  std::mt19937_64 g(17);
  const auto x = Tensor<double>::from(randomMat<double>(g, 6, 3, 2));
  BatchNorm<double> bn("bn", 3, 0.25);
  const auto bufs = bn.buffers();
  ASSERT_EQ(bufs.size(), 3u);
  EXPECT_EQ(bufs[0]->name, "bn.running_mean");
  EXPECT_EQ(bufs[1]->name, "bn.running_var");
  EXPECT_EQ(bufs[2]->name, "bn.num_batches_tracked");
  EXPECT_EQ(bufs[1]->value, Mat<double>::Ones(1, 3));
  const Mat<double> mean = x.map().colwise().mean();
  const Mat<double> unbiased = (x.map().rowwise() - mean.row(0)).array().square().colwise().sum().matrix() / 5.0;
  OpEnv train;
  Mat<double> rm = Mat<double>::Zero(1, 3), rv = Mat<double>::Ones(1, 3);
  for (int step = 1; step <= 2; ++step) {
    Context<double> ctx;
    bn.forward(std::vector{x}, step == 1 ? &ctx : nullptr, train);  // saving or not, a training forward counts
    rm = 0.75 * rm + 0.25 * mean;
    rv = 0.75 * rv + 0.25 * unbiased;
    EXPECT_LE((bufs[0]->value - rm).cwiseAbs().maxCoeff(), 1e-15);
    EXPECT_LE((bufs[1]->value - rv).cwiseAbs().maxCoeff(), 1e-15);
    EXPECT_EQ(bufs[2]->value(0, 0), step);
  }
}

// Once per step is the block runtime's job (StateGuard), not the op's: a forward with updateState false and an
// op-level recompute of a dropped BatchNorm leave every buffer bit for bit as it was; an ordinary forward moves
// them (so the check is not vacuous).
TEST(BatchNorm, theRuntimeKeepsARecomputeFromMovingState) {
  std::mt19937_64 g(18);
  const auto x = Tensor<double>::from(randomMat<double>(g, 6, 3, 2));
  Block<double> block;
  block.kind = "bn-only";
  block.nodes.push_back({"bn", std::make_unique<BatchNorm<double>>("bn", 3, 0.25), {-1}});
  const auto bufs = block.nodes[0].op->buffers();
  Rng rng(RngModel::kStateful, 1);
  auto snapshot = [&] {
    std::vector<Mat<double>> v;
    for (auto* b : bufs) v.push_back(b->value);
    return v;
  };
  auto same = [&](const std::vector<Mat<double>>& before) {
    for (size_t i = 0; i < bufs.size(); ++i)
      if (std::memcmp(before[i].data(), bufs[i]->value.data(), sizeof(double) * before[i].size()) != 0) return false;
    return true;
  };
  BlockEnv train{&rng, 0, 0, true, {}, {}};
  BlockEnv recompute = train;
  recompute.updateState = false;
  auto before = snapshot();
  BlockTape<double> tape;
  blockForward(block, x, &tape, KeepMask{false}, train);  // the first forward: state moves
  EXPECT_FALSE(same(before));
  before = snapshot();
  recomputeDropped(block, tape, train);  // op-level recompute of the dropped BatchNorm
  EXPECT_TRUE(same(before));
  blockForward(block, x, &tape, {}, recompute);
  blockForward<double>(block, x, nullptr, {}, recompute);
  EXPECT_TRUE(same(before));
}

TEST(BatchNorm, forwardRejectsASingleRow) {
  BatchNorm<double> bn("bn", 3);
  EXPECT_THROW(bn.forward(std::vector{Tensor<double>::zeros(1, 3)}, nullptr, OpEnv{}), std::invalid_argument);
}

TEST(Gelu, tanhByDefaultAndErfWhenNumericsAskForIt) {
  const auto x = Tensor<double>::from(Mat<double>{{-3.0, -1.0, 0.0, 0.5, 1.0, 4.0}});
  Gelu<double> gelu;
  OpEnv tanhEnv, erfEnv;
  erfEnv.numerics.erfGelu = true;
  const auto yt = gelu.forward(std::vector{x}, nullptr, tanhEnv);
  const auto ye = gelu.forward(std::vector{x}, nullptr, erfEnv);
  EXPECT_DOUBLE_EQ(yt.map()(0, 4), 0.8411919906082768);  // PyTorch GELU(approximate="tanh")(1.0)
  EXPECT_DOUBLE_EQ(ye.map()(0, 4), 0.8413447460685429);  // PyTorch GELU()(1.0)
  for (int64_t i = 0; i < x.size(); ++i) {
    const double v = x.data()[i];
    EXPECT_DOUBLE_EQ(yt.data()[i],
                     0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v))));
    EXPECT_DOUBLE_EQ(ye.data()[i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
  }
  EXPECT_NE(yt.map()(0, 0), ye.map()(0, 0));
}

// qkv for B sequences of `seq` tokens; row b*seq + t is token t of sequence b.
Tensor<double> randomQkv(std::mt19937_64& g, int64_t batch, int64_t seq, int64_t c) {
  return Tensor<double>::from(randomMat<double>(g, batch * seq, 3 * c, 2));
}

TEST(Attention, laterTokensChangeNeitherEarlierOutputsNorOtherSequences) {
  std::mt19937_64 g(19);
  for (double p : {0.0, 0.3}) {
    SCOPED_TRACE(p);
    CausalSelfAttention<double> attn(3, 5, p);
    const auto qkv = randomQkv(g, 2, 5, 6);
    const auto y = attn.forward(std::vector{qkv}, nullptr, replayEnv());
    const int64_t changed = 3;  // token 3 of sequence 0
    auto qkv2 = qkv.clone();
    qkv2.map().row(changed) = randomMat<double>(g, 1, 18, 2);
    const auto y2 = attn.forward(std::vector{qkv2}, nullptr, replayEnv());
    for (int64_t r = 0; r < y.rows(); ++r) {
      const bool same = (y.map().row(r).array() == y2.map().row(r).array()).all();
      EXPECT_EQ(same, r < changed || r >= 5) << "row " << r;
    }
    // And backward: the gradient of token t's output reaches no later token.
    Context<double> ctx;
    auto yc = attn.forward(std::vector{qkv}, &ctx, replayEnv());
    for (int64_t t = 0; t < 5; ++t) {
      auto dout = Tensor<double>::zeros(yc.rows(), yc.cols());
      dout.map().row(t).setOnes();
      std::vector<Tensor<double>> din(1);
      attn.backward(ctx, dout, din);
      for (int64_t r = t + 1; r < din[0].rows(); ++r)
        EXPECT_EQ(din[0].map().row(r).cwiseAbs().maxCoeff(), 0.0) << "t " << t << " row " << r;
    }
  }
}

TEST(Attention, probabilitiesAreACausalSoftmax) {
  std::mt19937_64 g(23);
  CausalSelfAttention<double> attn(2, 4, 0.0);
  const auto qkv = randomQkv(g, 2, 4, 4);
  Context<double> ctx;
  attn.forward(std::vector{qkv}, &ctx, replayEnv());
  const auto probs = ctx.tensors[1].map();
  ASSERT_EQ(probs.rows(), 2 * 2 * 4);
  for (int64_t r = 0; r < probs.rows(); ++r) {
    const int64_t t = r % 4;
    EXPECT_NEAR(probs.row(r).sum(), 1.0, 1e-15);
    for (int64_t s = 0; s < 4; ++s) {
      if (s > t) {
        EXPECT_EQ(probs(r, s), 0.0);  // exactly 0, not merely tiny
      } else {
        EXPECT_GT(probs(r, s), 0.0);
      }
    }
  }
}

TEST(Attention, withoutDropoutDrawsNoRandomNumbers) {
  std::mt19937_64 g(29);
  const auto qkv = randomQkv(g, 1, 4, 4);
  for (RngModel model : {RngModel::kStateful, RngModel::kCounter}) {
    Rng rng(model, 5);
    const RngState start = rng.state();
    RngDraw recorded{9, 9, 9};
    NodeDraws draws(&rng, 0, nullptr, &recorded);
    const OpEnv env{&draws, {}};
    CausalSelfAttention<double> attn(2, 4, 0.0);
    Context<double> ctx;
    attn.forward(std::vector{qkv}, &ctx, env);
    attn.forward(std::vector{qkv}, nullptr, env);
    EXPECT_EQ(rng.state(), start);
    EXPECT_EQ(recorded, (RngDraw{9, 9, 9}));  // never asked for a draw
    EXPECT_EQ(ctx.tensors.size(), 2u);
  }
  // With dropout the stateful generator moves by B*H*T*T rounded up to a Philox block.
  Rng rng(RngModel::kStateful, 5);
  NodeDraws draws(&rng, 0, nullptr, nullptr);
  const OpEnv env{&draws, {}};
  CausalSelfAttention<double> attn(2, 3, 0.1);
  attn.forward(std::vector{randomQkv(g, 1, 3, 4)}, nullptr, env);
  EXPECT_EQ(rng.state().offset, 20u);  // 18 -> 20
}

TEST(Attention, rejectsShapesThatDoNotSplit) {
  CausalSelfAttention<double> attn(2, 4, 0.0);
  EXPECT_THROW(attn.meta(std::vector<Shape>{{8, 10}}), std::invalid_argument);  // C not 3-way
  EXPECT_THROW(attn.meta(std::vector<Shape>{{8, 9}}), std::invalid_argument);   // C = 3 over 2 heads
  EXPECT_THROW(attn.meta(std::vector<Shape>{{6, 12}}), std::invalid_argument);  // rows not whole sequences
}

// Random small shapes, so shrinking heads for the smallest failing attention.
RC_GTEST_PROP(OpsGradcheck, attentionGradientsMatchFiniteDifferencesOnRandomShapes, ()) {
  const auto batch = *rc::gen::inRange<int64_t>(1, 3);
  const auto seq = *rc::gen::inRange<int64_t>(1, 5);
  const auto heads = *rc::gen::inRange<int64_t>(1, 3);
  const auto hd = *rc::gen::inRange<int64_t>(1, 4);
  const auto p = *rc::gen::element(0.0, 0.25);
  const auto seed = *rc::gen::arbitrary<uint32_t>();
  std::mt19937_64 g(seed);
  CausalSelfAttention<double> attn(heads, seq, p);
  std::vector<Tensor<double>> ins{randomQkv(g, batch, seq, heads * hd)};
  const auto r = gradcheckOp(attn, ins, replayEnv(), g);
  RC_CLASSIFY(r.inputs.unreliable > 0, "finite differences unreliable somewhere");
  RC_ASSERT(r.inputs.checked > 0);
  RC_ASSERT(r.inputs.maxRel <= kFdTolerance);
}

RC_GTEST_PROP(OpsGradcheck, normGradientsMatchFiniteDifferencesOnRandomShapes, ()) {
  const auto rows = *rc::gen::inRange<int64_t>(2, 7);
  const auto cols = *rc::gen::inRange<int64_t>(1, 7);
  const bool batch = *rc::gen::arbitrary<bool>();
  const auto seed = *rc::gen::arbitrary<uint32_t>();
  std::mt19937_64 g(seed);
  std::unique_ptr<Op<double>> op;
  if (batch) op = std::make_unique<BatchNorm<double>>("bn", cols);
  else op = std::make_unique<LayerNorm<double>>("ln", cols);
  randomizeParams(*op, g);
  std::vector<Tensor<double>> ins{Tensor<double>::from(randomMat<double>(g, rows, cols, 2))};
  const auto r = gradcheckOp(*op, ins, replayEnv(), g);
  RC_CLASSIFY(r.inputs.unreliable + r.params.unreliable > 0, "finite differences unreliable somewhere");
  RC_ASSERT(r.inputs.checked + r.params.checked > 0);
  RC_ASSERT(r.inputs.maxRel <= kFdTolerance);
  RC_ASSERT(r.params.maxRel <= kFdTolerance);
}

}  // namespace
