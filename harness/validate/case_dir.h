// The two file trees of the adapter protocol (PROTOCOL.md): the case directory the harness writes from a
// CaseSpec and the reference's deterministic initial values, and the output directory an adapter writes, read
// back into StepResults that harness/compare.h compares bitwise.
#pragma once
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cases/case_json.h"
#include "cases/lm_case.h"
#include "harness/validate/npy.h"
#include "harness/diagnose_steps.h"
#include "reference/step.h"

namespace ckpt {

// A protocol violation by the adapter (a missing or malformed output, a failed run): exit code 3.
class AdapterError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A tensor of the case: its name and the shape the protocol gives it (PyTorch's), with the reference's matrix
// shape it maps onto.
struct TensorLayout {
  std::string name;
  std::vector<int64_t> shape;
  int64_t rows = 0, cols = 0;
  bool integral = false;  // num_batches_tracked: int64 in the case directory
  // Parameters only (cases/param_sharing.h): the owner's parameter a sharing block's copy is ("" for an owner),
  // and whether a gradient is expected: an owner of a block that is not frozen.
  std::string sharedWith;
  bool trains = true;
};

struct CaseLayout {
  std::vector<TensorLayout> params;  // model order: a token case's stem first, its head last
  std::vector<TensorLayout> state;
  int64_t rows = 0, width = 0;
  // Whether a step reports input_grad.npy: a dense input that requires a gradient (inputGradReported,
  // cases/lm_case.h). A token case's input is ids, which have no gradient, frozen embedding or not.
  bool inputGrad = true;
  // Token cases (cases/lm_case.h): tokens.npy instead of input.npy, over a vocabulary of `vocab`; `tied`: the
  // head's weight is the token embedding (manifest: "shared_with": "emb.weight").
  bool tokens = false;
  int64_t vocab = 0;
  bool tied = false;
};

// A parameter's layout: PyTorch's shape (Param::matrix: a Linear, nn.Embedding or LM head weight (out, in); any
// other parameter (n,)), what it shares, whether it trains.
template <class T>
TensorLayout paramLayout(const Param<T>& p, const std::string& sharedWith, bool trains) {
  TensorLayout t{p.name, {}, p.value.rows(), p.value.cols(), false, sharedWith, trains};
  t.shape = p.matrix ? std::vector<int64_t>{t.rows, t.cols} : std::vector<int64_t>{t.rows * t.cols};
  return t;
}

template <class T>
CaseLayout caseLayout(Chain<T>& chain) {
  CaseLayout l;
  const CaseSpec& spec = chain.spec;
  l.rows = spec.rows();
  l.width = spec.width;
  l.inputGrad = inputGradReported(spec);
  l.tokens = isLanguageModel(spec);
  l.vocab = l.tokens ? spec.vocab : 0;
  l.tied = tiedHead(spec);
  // The stem (emb.weight (vocab, width), pos.weight (seq, width)): trains unless the embedding is frozen.
  for (auto* p : chain.stemParams()) l.params.push_back(paramLayout(*p, "", embeddingTrains(spec)));
  for (int i = 0; i < chain.size(); ++i) {
    const int owner = paramOwner(spec, i);
    const auto owners = chain.blockParams(owner);
    size_t k = 0;
    for (auto& n : chain.blocks[static_cast<size_t>(i)].nodes) {
      for (auto* p : n.op->params()) {
        l.params.push_back(paramLayout(*p, owner == i ? "" : owners[k]->name, owner == i && blockTrains(spec, i)));
        ++k;
      }
      for (auto* s : n.op->buffers()) {
        const bool counter = s->name.find("num_batches_tracked") != std::string::npos;
        TensorLayout t{s->name,
                       counter ? std::vector<int64_t>{} : std::vector<int64_t>{s->value.rows() * s->value.cols()},
                       s->value.rows(),
                       s->value.cols(),
                       counter,
                       "",
                       false};
        l.state.push_back(t);
      }
    }
  }
  // The head (head.ln.weight, head.ln.bias (width,), head.weight (vocab, width)). A tied head's weight is the
  // embedding's, like a sharing block's copy: only the owner, emb.weight, reports a gradient.
  for (auto* p : chain.headParams()) {
    const bool shared = p == &chain.head->weight && l.tied;
    l.params.push_back(paramLayout(*p, shared ? chain.stem->embedding().name : "", !shared));
  }
  return l;
}

// manifest.json (PROTOCOL.md): the layout's tensors, and the case's blocks one object each (repeats expanded:
// the kind's own fields, "drop_path" always, 0 when off), "rrelu_range" and "compute" with their defaults filled in.
nlohmann::json manifestJson(const CaseLayout& l, const CaseSpec& spec);

// Writes case.json, manifest.json, params/, state/, input.npy (a token case: tokens.npy, int64 (rows,)) and
// labels.npy or target.npy into `dir` (created; an existing directory is emptied first).
template <class T>
void writeCaseDir(const std::string& dir, Chain<T>& chain) {
  namespace fs = std::filesystem;
  fs::remove_all(dir);
  fs::create_directories(fs::path(dir) / "params");
  fs::create_directories(fs::path(dir) / "state");
  const CaseLayout layout = caseLayout(chain);
  {
    std::ofstream f(fs::path(dir) / "case.json");
    f << caseToJson(chain.spec).dump(2) << "\n";
    std::ofstream m(fs::path(dir) / "manifest.json");
    m << manifestJson(layout, chain.spec).dump(1) << "\n";
    if (!f || !m) throw std::runtime_error("case directory '" + dir + "': cannot be written");
  }
  size_t k = 0;
  for (auto* p : chain.params()) {
    writeNpy<T>((fs::path(dir) / "params" / (p->name + ".npy")).string(), layout.params[k++].shape, p->value.data());
  }
  k = 0;
  for (auto* b : chain.buffers()) {
    const TensorLayout& t = layout.state[k++];
    const std::string path = (fs::path(dir) / "state" / (b->name + ".npy")).string();
    if (t.integral) {
      const int64_t v = static_cast<int64_t>(b->value(0, 0));
      writeNpyInt64(path, t.shape, &v);
    } else {
      writeNpy<T>(path, t.shape, b->value.data());
    }
  }
  if (layout.tokens) {
    const std::vector<int64_t> ids(chain.tokens.begin(), chain.tokens.end());
    writeNpyInt64((fs::path(dir) / "tokens.npy").string(), {static_cast<int64_t>(ids.size())}, ids.data());
  } else {
    writeNpy<T>((fs::path(dir) / "input.npy").string(), {chain.spec.rows(), chain.spec.width}, chain.input.data());
  }
  auto writeLabels = [&](const std::vector<int>& ls) {
    const std::vector<int64_t> labels(ls.begin(), ls.end());
    writeNpyInt64((fs::path(dir) / "labels.npy").string(), {static_cast<int64_t>(labels.size())}, labels.data());
  };
  if (auto* ce = dynamic_cast<CrossEntropyLoss<T>*>(chain.loss.get())) {
    writeLabels(ce->labels());
  } else if (auto* lm = dynamic_cast<LmHeadLoss<T>*>(chain.loss.get())) {
    writeLabels(lm->labels());
  } else if (auto* mse = dynamic_cast<MseLoss<T>*>(chain.loss.get())) {
    writeNpy<T>((fs::path(dir) / "target.npy").string(), {mse->target().rows(), mse->target().cols()},
                mse->target().data());
  }
}

// Reads one tensor of an adapter's output; throws AdapterError naming the file and what is wrong.
template <class T>
Mat<T> readTensor(const std::string& path, const std::vector<int64_t>& shape, int64_t rows, int64_t cols,
                  bool allowIntegral) {
  NpyArray a;
  try {
    a = readNpy(path);
  } catch (const NpyError& e) {
    throw AdapterError(std::string("adapter output ") + e.what());
  }
  if (a.shape != shape)
    throw AdapterError("adapter output " + path + ": shape " + shapeText(a.shape) + ", expected " + shapeText(shape));
  std::vector<T> v;
  try {
    v = npyValues<T>(a, path, allowIntegral);
  } catch (const NpyError& e) {
    throw AdapterError(std::string("adapter output ") + e.what());
  }
  Mat<T> m(rows, cols);
  std::copy(v.begin(), v.end(), m.data());
  return m;
}

// The gradients an adapter's framework left undefined in a step (missing_grads.json, PROTOCOL.md: parameter
// names and "input_grad"); they compare as absent. Throws AdapterError for a malformed file.
std::set<std::string> readMissingGrads(const std::string& path);

// The name under which an adapter's generator state (rng_state.npy) joins StepResult::state; diagnoseSteps
// (harness/diagnose_steps.h) reads it as generator evidence.
inline constexpr const char* kRngStateName = kAdapterRngStateName;

// Reads `steps` steps of an adapter's output directory. The generator state, when present, is appended to
// StepResult::state as kRngStateName (one element per byte); StepResult::rng stays zero.
template <class T>
std::vector<StepResult<T>> readRunResults(const std::string& outDir, const CaseLayout& layout, int steps) {
  namespace fs = std::filesystem;
  std::vector<StepResult<T>> rs;
  for (int s = 0; s < steps; ++s) {
    const fs::path d = fs::path(outDir) / ("step" + std::to_string(s));
    if (!fs::is_directory(d)) throw AdapterError("adapter output " + d.string() + ": missing");
    StepResult<T> r;
    r.loss = readTensor<T>((d / "loss.npy").string(), {}, 1, 1, false)(0, 0);
    const std::set<std::string> missing = readMissingGrads((d / "missing_grads.json").string());
    for (const auto& t : layout.params)
      if (t.trains)
        r.grads.push_back({t.name, missing.count(t.name) ? Mat<T>()
                                                         : readTensor<T>((d / "grads" / (t.name + ".npy")).string(),
                                                                         t.shape, t.rows, t.cols, false)});
    if (layout.inputGrad && !missing.count("input_grad"))
      r.inputGrad =
          readTensor<T>((d / "input_grad.npy").string(), {layout.rows, layout.width}, layout.rows, layout.width, false);
    for (const auto& t : layout.state)
      r.state.push_back(
          {t.name, readTensor<T>((d / "state" / (t.name + ".npy")).string(), t.shape, t.rows, t.cols, true)});
    const fs::path rng = d / "rng_state.npy";
    if (fs::exists(rng)) {
      NpyArray a;
      try {
        a = readNpy(rng.string());
      } catch (const NpyError& e) {
        throw AdapterError(std::string("adapter output ") + e.what());
      }
      if (a.type != NpyType::kUInt8) throw AdapterError("adapter output " + rng.string() + ": must be uint8 bytes");
      Mat<T> m(1, a.count());
      for (int64_t i = 0; i < a.count(); ++i) m(0, i) = static_cast<T>(a.bytes[static_cast<size_t>(i)]);
      r.state.push_back({kRngStateName, std::move(m)});
    }
    rs.push_back(std::move(r));
  }
  return rs;
}

}  // namespace ckpt
