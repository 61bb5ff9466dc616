// The adapter plumbing without any framework: command-line splitting, the process runner (exit codes, signals,
// timeouts that kill the whole process group), the serve-mode pipe, and the case/output directory formats read
// back bitwise.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/input_error.h"
#include "harness/validate/adapter.h"
#include "harness/validate/case_dir.h"
#include "harness/validate/runner.h"
#include "harness/compare.h"
#include "reference/trainer.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;

fs::path tempDir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("ckpt_adapters_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(CommandLine, splitsLikeAShellWithoutExpanding) {
  EXPECT_EQ(splitCommandLine("python3  a.py --x 1"), (std::vector<std::string>{"python3", "a.py", "--x", "1"}));
  EXPECT_EQ(splitCommandLine("run 'two words' \"and \\\"three\\\"\" a\\ b $HOME"),
            (std::vector<std::string>{"run", "two words", "and \"three\"", "a b", "$HOME"}));
  EXPECT_EQ(splitCommandLine("x ''"), (std::vector<std::string>{"x", ""}));
  EXPECT_THROW(splitCommandLine("a 'open"), InputError);
  EXPECT_THROW(splitCommandLine("a \"open"), InputError);
  EXPECT_THROW(splitCommandLine("   "), InputError);
}

TEST(CommandLine, quotingRoundTrips) {
  const std::vector<std::string> argv = {"ckptcheck", "--adapter-cmd", "python3 my adapter.py", "it's", ""};
  EXPECT_EQ(splitCommandLine(shellJoin(argv)), argv);
}

TEST(Runner, reportsExitCodesAndCapturesOutput) {
  const fs::path d = tempDir("exit");
  const ProcessResult r =
      runProcess({"sh", "-c", "echo out; echo err >&2; exit 3"}, (d / "o").string(), (d / "e").string(), 10);
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(slurp(d / "o"), "out\n");
  EXPECT_EQ(slurp(d / "e"), "err\n");
  EXPECT_EQ(r.describe(), "exit code 3");
  EXPECT_TRUE(runProcess({"true"}, "", "", 10).ok());
}

TEST(Runner, reportsSignalsAndMissingPrograms) {
  const ProcessResult r = runProcess({"sh", "-c", "kill -SEGV $$"}, "", "", 10);
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_NE(r.describe().find("signal 11"), std::string::npos);
  const ProcessResult m = runProcess({"/no/such/program"}, "", "", 10);
  EXPECT_FALSE(m.started);
  EXPECT_NE(m.describe().find("/no/such/program"), std::string::npos);
}

TEST(Runner, timeoutKillsTheWholeProcessGroup) {
  const fs::path d = tempDir("timeout");
  const fs::path marker = d / "grandchild-survived";
  // The child starts a grandchild that would write the marker after 3 s, then waits forever, ignoring SIGTERM.
  const std::string script = "trap '' TERM; (sleep 3; touch '" + marker.string() + "') & while :; do sleep 1; done";
  const auto t0 = std::chrono::steady_clock::now();
  const ProcessResult r = runProcess({"sh", "-c", script}, "", "", 0.5);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(r.timedOut);
  EXPECT_NE(r.describe().find("timed out"), std::string::npos);
  EXPECT_LT(took, 3.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  EXPECT_FALSE(fs::exists(marker)) << "a grandchild outlived the timeout";
}

// Alive and not a zombie: /proc/PID/stat's state after the command name.
bool running(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// The pid a child wrote to `file`, waiting up to 5 s for it.
pid_t pidIn(const fs::path& file) {
  for (int i = 0; i < 250 && slurp(file).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return static_cast<pid_t>(std::stol(slurp(file)));
}

// A descendant that left the process group and session (setsid) is out of a group kill's reach; ckptcheck, the
// child subreaper of what it starts, ends it when the run ends (reapStrays).
TEST(Runner, endsDescendantsThatLeftTheGroupAndSession) {
  const fs::path d = tempDir("setsid");
  const ProcessResult r = runProcess(
      {"sh", "-c",
       "setsid sleep 600 & echo $! > '" + (d / "pid").string() + "'; setsid sh -c 'sleep 600 & sleep 600' &"},
      "", "", 10);
  ASSERT_TRUE(r.ok()) << r.describe();
  const pid_t escaped = pidIn(d / "pid");
  EXPECT_FALSE(running(escaped)) << "pid " << escaped << " outlived the run";
  if (running(escaped)) kill(escaped, SIGKILL);
  EXPECT_EQ(reapStrays(), 0) << "a descendant of a descendant was left";
}

TEST(Serve, stopEndsDescendantsThatLeftTheGroupAndSession) {
  const fs::path d = tempDir("serve-setsid");
  ServeProcess p;
  std::string err;
  ASSERT_TRUE(p.start({"sh", "-c", "setsid sleep 600 & echo $! > '" + (d / "pid").string() + "'; read l"},
                      (d / "err").string(), err))
      << err;
  const pid_t escaped = pidIn(d / "pid");
  EXPECT_TRUE(running(escaped));
  p.stop();
  EXPECT_FALSE(running(escaped)) << "pid " << escaped << " outlived the serve process";
  if (running(escaped)) kill(escaped, SIGKILL);
}

TEST(Serve, answersOneLinePerRequestUntilItExits) {
  const fs::path d = tempDir("serve");
  ServeProcess p;
  std::string err;
  // Echoes each request with a prefix; exits on "quit".
  ASSERT_TRUE(p.start({"sh", "-c", "while read l; do [ \"$l\" = quit ] && exit 0; echo \"got $l\"; done"},
                      (d / "err").string(), err))
      << err;
  std::string reply;
  ASSERT_TRUE(p.request("one", reply, 5, err)) << err;
  EXPECT_EQ(reply, "got one");
  ASSERT_TRUE(p.request("two", reply, 5, err)) << err;
  EXPECT_EQ(reply, "got two");
  EXPECT_FALSE(p.request("quit", reply, 5, err));
  EXPECT_FALSE(p.running());
  EXPECT_FALSE(p.request("three", reply, 5, err));
}

TEST(Serve, timeoutStopsTheServer) {
  const fs::path d = tempDir("serve-timeout");
  ServeProcess p;
  std::string err, reply;
  ASSERT_TRUE(p.start({"sh", "-c", "read l; sleep 30"}, (d / "err").string(), err));
  EXPECT_FALSE(p.request("x", reply, 0.3, err));
  EXPECT_NE(err.find("no reply"), std::string::npos) << err;
  EXPECT_FALSE(p.running());
}

CaseSpec smallCase(LossKind loss) {
  CaseSpec c;
  c.batch = 2;
  c.seq = 2;
  c.width = 4;
  c.blocks = {{blockKind("mlp"), Activation::kTanh, 1},
              {blockKind("residual-bn"), Activation::kGelu, 1},
              {blockKind("transformer"), Activation::kGelu, 2}};
  c.loss = loss;
  c.steps = 2;
  c.dtype = DType::kFloat;
  return c;
}

// An moe block's Linears (router (E, W), each expert's fc1 (4W, W) and fc2 (W, 4W)) are matrices in PyTorch, like
// any Linear's weight (reference/op.h, Param::matrix); their biases and the LayerNorm's parameters are vectors.
TEST(CaseDir, moeLinearWeightsAreMatrices) {
  CaseSpec c;
  c.width = 4;
  BlockSpec moe{blockKind("moe")};
  moe.experts = 2;
  c.blocks = {moe};
  Chain<double> chain = buildChain<double>(c);
  int matrices = 0;
  for (const TensorLayout& t : caseLayout(chain).params) {
    const bool linearWeight = t.name.find(".ln") == std::string::npos && t.name.size() > 7 &&
                              t.name.compare(t.name.size() - 7, 7, ".weight") == 0;
    EXPECT_EQ(t.shape.size(), linearWeight ? 2u : 1u) << t.name;
    if (linearWeight) {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{t.rows, t.cols})) << t.name;
      ++matrices;
    }
  }
  EXPECT_EQ(matrices, 1 + 2 * 2);  // the router and two experts' fc1 and fc2
}

TEST(CaseDir, writesEveryTensorWithPyTorchShapes) {
  const fs::path d = tempDir("casedir");
  Chain<float> chain = buildChain<float>(smallCase(LossKind::kCrossEntropy));
  writeCaseDir((d / "case").string(), chain);
  EXPECT_EQ(loadCase((d / "case" / "case.json").string()), chain.spec);
  EXPECT_EQ(readNpy((d / "case" / "params" / "b0.fc.weight.npy").string()).shape, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(readNpy((d / "case" / "params" / "b2.qkv.weight.npy").string()).shape, (std::vector<int64_t>{12, 4}));
  EXPECT_EQ(readNpy((d / "case" / "params" / "b2.fc2.bias.npy").string()).shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(readNpy((d / "case" / "params" / "b1.bn.weight.npy").string()).shape, (std::vector<int64_t>{4}));
  const NpyArray nbt = readNpy((d / "case" / "state" / "b1.bn.num_batches_tracked.npy").string());
  EXPECT_EQ(nbt.type, NpyType::kInt64);
  EXPECT_TRUE(nbt.shape.empty());
  const NpyArray labels = readNpy((d / "case" / "labels.npy").string());
  EXPECT_EQ(labels.type, NpyType::kInt64);
  EXPECT_EQ(labels.shape, (std::vector<int64_t>{4}));
  const auto w = npyValues<float>(readNpy((d / "case" / "params" / "b0.fc.weight.npy").string()), "w", false);
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(w[static_cast<size_t>(i)], chain.params()[0]->value.data()[i]);
  Chain<double> mse = buildChain<double>(smallCase(LossKind::kMse));
  writeCaseDir((d / "mse").string(), mse);
  EXPECT_EQ(readNpy((d / "mse" / "target.npy").string()).shape, (std::vector<int64_t>{4, 4}));
}

// A token case (cases/lm_case.h): the stem first and the head last in the manifest, tokens.npy instead of
// input.npy, labels over the vocabulary, a tied head as a share of emb.weight, a frozen embedding untrained, and
// never an input gradient.
TEST(CaseDir, tokenCaseLayout) {
  const fs::path d = tempDir("casedir-tokens");
  CaseSpec c = smallCase(LossKind::kCrossEntropy);
  c.input = InputKind::kTokens;
  c.vocab = 5;
  c.tieEmbeddings = true;
  Chain<float> chain = buildChain<float>(c);
  writeCaseDir((d / "case").string(), chain);
  EXPECT_EQ(loadCase((d / "case" / "case.json").string()), chain.spec);
  EXPECT_FALSE(fs::exists(d / "case" / "input.npy"));
  const NpyArray ids = readNpy((d / "case" / "tokens.npy").string());
  EXPECT_EQ(ids.type, NpyType::kInt64);
  EXPECT_EQ(ids.shape, (std::vector<int64_t>{4}));
  const auto idv = npyValues<double>(ids, "tokens", true);
  for (size_t i = 0; i < idv.size(); ++i) EXPECT_EQ(idv[i], chain.tokens[i]);
  const auto labels = npyValues<double>(readNpy((d / "case" / "labels.npy").string()), "labels", true);
  for (double l : labels) EXPECT_TRUE(l >= 0 && l < 5);
  EXPECT_EQ(readNpy((d / "case" / "params" / "emb.weight.npy").string()).shape, (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(readNpy((d / "case" / "params" / "pos.weight.npy").string()).shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(readNpy((d / "case" / "params" / "head.weight.npy").string()).shape, (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(readNpy((d / "case" / "params" / "head.ln.bias.npy").string()).shape, (std::vector<int64_t>{4}));
  const auto m = nlohmann::json::parse(slurp(d / "case" / "manifest.json"));
  EXPECT_EQ(m["input"]["kind"], "tokens");
  EXPECT_EQ(m["input"]["vocab"], 5);
  EXPECT_EQ(m["input"]["requires_grad"], false);
  EXPECT_EQ(m["input"]["tied"], true);
  const auto& ps = m["params"];
  EXPECT_EQ(ps.front()["name"], "emb.weight");
  EXPECT_EQ(ps[1]["name"], "pos.weight");
  EXPECT_EQ(ps.back()["name"], "head.weight");
  EXPECT_EQ(ps.back()["shared_with"], "emb.weight");
  EXPECT_EQ(ps.back()["trains"], false);
  EXPECT_EQ(ps[ps.size() - 2]["name"], "head.ln.bias");
  EXPECT_EQ(ps.front()["trains"], true);

  // The reference's trained parameters are the layout's, in order: what readRunResults reads back.
  const CaseLayout l = caseLayout(chain);
  std::vector<std::string> trained;
  for (const auto& t : l.params)
    if (t.trains) trained.push_back(t.name);
  std::vector<std::string> ref;
  for (auto* p : chain.trainedParams()) ref.push_back(p->name);
  EXPECT_EQ(trained, ref);
  EXPECT_FALSE(l.inputGrad);

  c.inputGrad = false;  // a frozen embedding: neither embedding trains, nor (tied) the head's weight
  Chain<float> frozen = buildChain<float>(c);
  const CaseLayout f = caseLayout(frozen);
  EXPECT_EQ(f.params.front().name, "emb.weight");
  EXPECT_FALSE(f.params.front().trains);
  EXPECT_FALSE(f.params[1].trains);
  EXPECT_FALSE(f.params.back().trains);
  trained.clear();
  for (const auto& t : f.params)
    if (t.trains) trained.push_back(t.name);
  ref.clear();
  for (auto* p : frozen.trainedParams()) ref.push_back(p->name);
  EXPECT_EQ(trained, ref);
}

// An "adapter" that is the reference itself, written in the output layout, must read back bitwise equal.
template <class T>
void writeOutputs(const fs::path& out, const CaseLayout& l, const std::vector<StepResult<T>>& rs) {
  for (size_t s = 0; s < rs.size(); ++s) {
    const fs::path d = out / ("step" + std::to_string(s));
    fs::create_directories(d / "grads");
    fs::create_directories(d / "state");
    writeNpy<T>((d / "loss.npy").string(), {}, &rs[s].loss);
    for (size_t k = 0; k < l.params.size(); ++k)
      writeNpy<T>((d / "grads" / (l.params[k].name + ".npy")).string(), l.params[k].shape, rs[s].grads[k].value.data());
    writeNpy<T>((d / "input_grad.npy").string(), {l.rows, l.width}, rs[s].inputGrad.data());
    for (size_t k = 0; k < l.state.size(); ++k) {
      if (l.state[k].integral) {
        const int64_t v = static_cast<int64_t>(rs[s].state[k].value(0, 0));
        writeNpyInt64((d / "state" / (l.state[k].name + ".npy")).string(), {}, &v);
      } else {
        writeNpy<T>((d / "state" / (l.state[k].name + ".npy")).string(), l.state[k].shape, rs[s].state[k].value.data());
      }
    }
  }
}

TEST(CaseDir, outputsReadBackBitwise) {
  const fs::path d = tempDir("outputs");
  Chain<float> chain = buildChain<float>(smallCase(LossKind::kMse));
  const CaseLayout layout = caseLayout(chain);
  auto ref = trainReference(chain, 2);
  writeOutputs(d, layout, ref);
  auto back = readRunResults<float>(d.string(), layout, 2);
  for (auto& r : ref) r.rng = RngState{};  // the protocol carries the generator as bytes, not as RngState
  const Comparison c = compareSteps(ref, back);
  EXPECT_TRUE(c.bitwiseEqual) << (c.differences.empty() ? "" : toText(c.differences[0]));

  // A gradient of the wrong shape, and a missing one, are adapter errors naming the file.
  const std::vector<float> z(16, 0.f);
  writeNpy<float>((d / "step1" / "grads" / "b0.fc.weight.npy").string(), {16}, z.data());
  try {
    readRunResults<float>(d.string(), layout, 2);
    FAIL();
  } catch (const AdapterError& e) {
    EXPECT_NE(std::string(e.what()).find("b0.fc.weight.npy: shape (16,), expected (4, 4)"), std::string::npos)
        << e.what();
  }
  fs::remove(d / "step1" / "grads" / "b0.fc.weight.npy");
  EXPECT_THROW(readRunResults<float>(d.string(), layout, 2), AdapterError);
  EXPECT_THROW(readRunResults<float>(d.string(), layout, 3), AdapterError);
}

TEST(Capabilities, restrictTheGeneratorAndCheckOptions) {
  const auto j = nlohmann::json::parse(R"({"protocol": 1, "framework": "x", "version": "1",
      "blocks": ["mlp", "transformer"], "dtypes": ["float"], "rng": ["counter"], "dropout": true,
      "options": {"k": {"values": ["0", "1"]}, "n": {"values": "int"}}, "serve": true})");
  const Capabilities c = parseCapabilities(j);
  const GenLimits l = c.limits(5, 2);
  EXPECT_TRUE(l.allows(blockKind("mlp")) && l.allows(blockKind("transformer")) && !l.allows(blockKind("residual-bn")));
  EXPECT_TRUE(l.floatType && !l.doubleType && l.counterRng && !l.statefulRng && l.dropout);
  EXPECT_NO_THROW(c.checkOptions({{"k", "1"}, {"n", "3"}}));
  EXPECT_THROW(c.checkOptions({{"k", "2"}}), InputError);
  EXPECT_THROW(c.checkOptions({{"n", "x"}}), InputError);
  EXPECT_THROW(c.checkOptions({{"zz", "1"}}), InputError);
  CaseSpec bn = smallCase(LossKind::kMse);
  EXPECT_EQ(c.unsupported(bn), "block kind residual-bn");
  // Token cases only go to an adapter whose "inputs" list "tokens"; a frozen embedding also needs no_input_grad.
  EXPECT_FALSE(l.tokens);
  CaseSpec lm;
  lm.batch = 2;
  lm.seq = 2;
  lm.width = 4;
  lm.dtype = DType::kFloat;
  lm.rng = RngModel::kCounter;
  lm.blocks = {{blockKind("mlp"), Activation::kGelu, 1}};
  lm.input = InputKind::kTokens;
  lm.vocab = 3;
  EXPECT_NE(c.unsupported(lm).find("token input"), std::string::npos) << c.unsupported(lm);
  auto tokens = j;
  tokens["inputs"] = {"dense", "tokens"};
  const Capabilities t = parseCapabilities(tokens);
  EXPECT_TRUE(t.limits(5, 2).tokens);
  EXPECT_EQ(t.unsupported(lm), "");
  lm.inputGrad = false;
  EXPECT_NE(t.unsupported(lm).find("frozen embedding"), std::string::npos) << t.unsupported(lm);
  auto bad = j;
  bad["protocol"] = 2;
  EXPECT_THROW(parseCapabilities(bad), AdapterError);
  bad = j;
  bad.erase("blocks");
  EXPECT_THROW(parseCapabilities(bad), AdapterError);
}

// Stochastic layers and bf16 compute (cases/stochastic_layers.h, cases/compute_precision.h): the manifest states
// them per block and per case, defaults filled in; capabilities that do not advertise them keep them out of random
// cases and refuse a case that needs them.
TEST(CaseDir, manifestStatesStochasticLayersAndCompute) {
  const fs::path d = tempDir("casedir-stochastic");
  CaseSpec c = smallCase(LossKind::kCrossEntropy);
  c.blocks[0].activation = Activation::kRrelu;
  c.blocks[2].dropPath = 0.25;
  c.rreluLower = 0.1;
  c.rreluUpper = 0.2;
  c.compute = Compute::kBf16;
  Chain<float> chain = buildChain<float>(c);
  writeCaseDir((d / "case").string(), chain);
  EXPECT_EQ(loadCase((d / "case" / "case.json").string()), chain.spec);
  const auto m = nlohmann::json::parse(slurp(d / "case" / "manifest.json"));
  ASSERT_EQ(m["blocks"].size(), 3u);
  EXPECT_EQ(m["blocks"][0]["kind"], "mlp");
  EXPECT_EQ(m["blocks"][0]["activation"], "rrelu");
  EXPECT_EQ(m["blocks"][0]["drop_path"], 0.0);
  EXPECT_EQ(m["blocks"][1]["drop_path"], 0.0);
  EXPECT_EQ(m["blocks"][2]["drop_path"], 0.25);
  EXPECT_EQ(m["blocks"][2]["heads"], 2);
  EXPECT_EQ(m["rrelu_range"], nlohmann::json::array({0.1, 0.2}));
  EXPECT_EQ(m["compute"], "bf16");
  Chain<float> plain = buildChain<float>(smallCase(LossKind::kCrossEntropy));
  writeCaseDir((d / "plain").string(), plain);
  const auto p = nlohmann::json::parse(slurp(d / "plain" / "manifest.json"));
  EXPECT_EQ(p["compute"], "exact");
  EXPECT_EQ(p["rrelu_range"], nlohmann::json::array({0.125, 1.0 / 3.0}));
}

TEST(Capabilities, stochasticLayersAndComputeOnlyWhereAdvertised) {
  auto j = nlohmann::json::parse(R"({"protocol": 1, "blocks": ["mlp", "residual-bn", "transformer"],
      "dtypes": ["float"], "dropout": true})");
  const Capabilities none = parseCapabilities(j);
  const GenLimits ln = none.limits(5, 2);
  EXPECT_FALSE(ln.dropPath || ln.rrelu || ln.bf16);
  EXPECT_EQ(none.compute, (std::set<std::string>{"exact"}));
  CaseSpec c = smallCase(LossKind::kMse);
  EXPECT_EQ(none.unsupported(c), "");
  CaseSpec dp = c;
  dp.blocks[1].dropPath = 0.5;
  EXPECT_EQ(none.unsupported(dp).rfind("drop_path", 0), 0u) << none.unsupported(dp);
  CaseSpec rr = c;
  rr.blocks[0].activation = Activation::kRrelu;
  EXPECT_EQ(none.unsupported(rr), "activation rrelu");
  CaseSpec bf = c;
  bf.compute = Compute::kBf16;
  EXPECT_EQ(none.unsupported(bf).rfind("bf16 compute", 0), 0u) << none.unsupported(bf);
  j["drop_path"] = true;
  j["activations"] = {"relu", "gelu", "tanh", "rrelu"};
  j["compute"] = {"exact", "bf16"};
  const Capabilities all = parseCapabilities(j);
  const GenLimits la = all.limits(5, 2);
  EXPECT_TRUE(la.dropPath && la.rrelu && la.bf16);
  for (const CaseSpec& x : {dp, rr, bf}) EXPECT_EQ(all.unsupported(x), "");
}

}  // namespace
}  // namespace ckpt
