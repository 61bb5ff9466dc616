#include "harness/engine/costs_file.h"

#include <cmath>
#include <numeric>

#include "cases/user_file.h"
#include "common/input_error.h"

namespace ckpt {
namespace {

using nlohmann::json;

// Field readers: each failure is one line naming the file and the field. Byte counts and FLOPs are also added
// up over the file as they are read, and the field whose count takes its kind's total past kMaxCostsCount is
// refused: every sum the planner forms (a peak, a plan's FLOPs) is then a small multiple of these totals.
struct Reader {
  std::string where;
  int64_t bytes = 0, flops = 0;  // the totals so far, each at most kMaxCostsCount
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw InputError(where + ": " + field + ": " + what);
  }
  const json& at(const json& obj, const std::string& key, const std::string& field) const {
    if (!obj.is_object()) fail(field.substr(0, field.rfind('.')), "must be an object");
    if (!obj.contains(key)) fail(field, "missing");
    return obj.at(key);
  }
  int64_t count(const json& obj, const std::string& key, const std::string& field) const {
    return bounded(at(obj, key, field), field);
  }
  int64_t bounded(const json& v, const std::string& field) const {
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
      fail(field, "must be a non-negative integer");
    if (v.get<uint64_t>() > static_cast<uint64_t>(kMaxCostsCount))
      fail(field, "must be at most 2^53 (" + std::to_string(kMaxCostsCount) + ")");
    return v.get<int64_t>();
  }
  // A byte count or a FLOP count, added to the file's total of its kind.
  int64_t summed(int64_t& total, const char* kind, const json& v, const std::string& field) {
    const int64_t x = bounded(v, field);
    if (x > kMaxCostsCount - total)
      fail(field,
           std::string("the file's ") + kind + " add up to more than 2^53 (" + std::to_string(kMaxCostsCount) + ")");
    total += x;
    return x;
  }
  int64_t byteCount(const json& obj, const std::string& key, const std::string& field) {
    return summed(bytes, "byte counts", at(obj, key, field), field);
  }
  int64_t flopCount(const json& obj, const std::string& key, const std::string& field) {
    return summed(flops, "FLOPs", at(obj, key, field), field);
  }
  double seconds(const json& obj, const std::string& key, const std::string& field) const {
    const json& v = at(obj, key, field);
    if (!v.is_number() || !(v.get<double>() >= 0)) fail(field, "must be a non-negative number");
    if (!(v.get<double>() <= kMaxCostsSeconds)) fail(field, "must be at most 10^9 seconds");
    return v.get<double>();
  }
  double signedSeconds(const json& obj, const std::string& key, const std::string& field) const {
    const json& v = at(obj, key, field);
    if (!v.is_number() || !(std::abs(v.get<double>()) <= kMaxCostsSeconds))
      fail(field, "must be a number of seconds, at most 10^9 either way");
    return v.get<double>();
  }
  bool flag(const json& obj, const std::string& key, const std::string& field) const {
    const json& v = at(obj, key, field);
    if (!v.is_boolean()) fail(field, "must be true or false");
    return v.get<bool>();
  }
  std::string text(const json& obj, const std::string& key, const std::string& field) const {
    const json& v = at(obj, key, field);
    if (!v.is_string()) fail(field, "must be a string");
    return v.get<std::string>();
  }
  const json& array(const json& obj, const std::string& key, const std::string& field) const {
    const json& v = at(obj, key, field);
    if (!v.is_array()) fail(field, "must be an array");
    return v;
  }
};

ProfiledOp readOp(Reader& r, const json& o, const std::string& f) {
  ProfiledOp op;
  op.op = r.text(o, "op", f + ".op");
  op.savedBytes = r.byteCount(o, "saved_bytes", f + ".saved_bytes");
  op.forwardFlops = r.flopCount(o, "forward_flops", f + ".forward_flops");
  op.backwardFlops = r.flopCount(o, "backward_flops", f + ".backward_flops");
  op.matmul = r.flag(o, "matmul", f + ".matmul");
  return op;
}

ProfiledBlock readBlock(Reader& r, const json& b, const std::string& f) {
  ProfiledBlock k;
  k.name = r.text(b, "name", f + ".name");
  if (k.name.empty()) r.fail(f + ".name", "must not be empty");
  k.savesInput = r.flag(b, "saves_input", f + ".saves_input");
  k.savesOutput = r.flag(b, "saves_output", f + ".saves_output");
  const json& ops = r.array(b, "ops", f + ".ops");
  for (size_t i = 0; i < ops.size(); ++i) k.ops.push_back(readOp(r, ops[i], f + ".ops[" + std::to_string(i) + "]"));
  k.forwardFlops = r.count(b, "forward_flops", f + ".forward_flops");
  k.backwardFlops = r.count(b, "backward_flops", f + ".backward_flops");
  k.forwardSeconds = r.seconds(b, "forward_seconds", f + ".forward_seconds");
  k.backwardSeconds = r.seconds(b, "backward_seconds", f + ".backward_seconds");
  if (b.contains("recompute_seconds"))
    k.recomputeSeconds = r.signedSeconds(b, "recompute_seconds", f + ".recompute_seconds");
  if (b.contains("recompute_end_seconds")) {
    if (!k.recomputeSeconds) r.fail(f + ".recompute_end_seconds", "present without recompute_seconds");
    k.recomputeEndSeconds = r.signedSeconds(b, "recompute_end_seconds", f + ".recompute_end_seconds");
  }
  int64_t fwd = 0, bwd = 0;  // at most the file's FLOPs
  for (const ProfiledOp& op : k.ops) {
    fwd += op.forwardFlops;
    bwd += op.backwardFlops;
  }
  if (fwd != k.forwardFlops || bwd != k.backwardFlops)
    r.fail(f + ".forward_flops", "the block's FLOPs (" + std::to_string(k.forwardFlops) + " forward, " +
                                     std::to_string(k.backwardFlops) + " backward) are not the sums over its ops (" +
                                     std::to_string(fwd) + ", " + std::to_string(bwd) + ")");
  return k;
}

ProfiledPart readPart(Reader& r, const json& p, const std::string& f, const char* boundaryKey) {
  ProfiledPart part;
  part.savedBytes = r.byteCount(p, "saved_bytes", f + ".saved_bytes");
  part.forwardFlops = r.flopCount(p, "forward_flops", f + ".forward_flops");
  part.backwardFlops = r.flopCount(p, "backward_flops", f + ".backward_flops");
  part.forwardSeconds = r.seconds(p, "forward_seconds", f + ".forward_seconds");
  part.backwardSeconds = r.seconds(p, "backward_seconds", f + ".backward_seconds");
  part.savesBoundary = r.flag(p, boundaryKey, f + "." + boundaryKey);
  return part;
}

SharedStorage readShared(Reader& r, const json& s, const std::string& f, int layers) {
  SharedStorage sh;
  sh.bytes = r.byteCount(s, "bytes", f + ".bytes");
  const json& by = r.array(s, "saved_by", f + ".saved_by");
  for (size_t i = 0; i < by.size(); ++i) {
    const std::string fi = f + ".saved_by[" + std::to_string(i) + "]";
    if (!by[i].is_number_integer() || by[i].get<int64_t>() < 0 || by[i].get<int64_t>() >= layers)
      r.fail(fi, "must be a block index in [0, " + std::to_string(layers - 1) + "]");
    const int b = by[i].get<int>();
    if (!sh.savedBy.empty() && b <= sh.savedBy.back()) r.fail(fi, "block indices must be ascending and distinct");
    sh.savedBy.push_back(b);
  }
  sh.before = r.flag(s, "before", f + ".before");
  sh.after = r.flag(s, "after", f + ".after");
  sh.argument = r.flag(s, "argument", f + ".argument");
  return sh;
}

}  // namespace

int64_t ProfiledBlock::savedBytes() const {
  int64_t s = 0;
  for (const ProfiledOp& op : ops) s += op.savedBytes;
  return s;
}

ChainCosts parseChainCosts(const json& j, const std::string& where) {
  Reader r{where};
  if (!j.is_object()) throw InputError(where + ": must be a JSON object (COSTS.md)");
  if (r.text(j, "format", "format") != kCostsFormat)
    r.fail("format", std::string("must be \"") + kCostsFormat + "\" (a chain-costs file of `ckptcheck profile`)");
  const json& v = r.at(j, "version", "version");
  if (!v.is_number_integer() || v.get<int64_t>() != kCostsVersion)
    r.fail("version", "this ckptcheck reads version " + std::to_string(kCostsVersion) + ", the file has " + clipped(v) +
                          "; profile the model again");
  ChainCosts c;
  c.model = r.text(j, "model", "model");
  c.framework = r.text(j, "framework", "framework");
  c.batchSize = r.count(j, "batch_size", "batch_size");
  if (c.batchSize < 1 || c.batchSize > kMaxCostsBatch)
    r.fail("batch_size",
           "must be between 1 and " + std::to_string(kMaxCostsBatch) + " (got " + std::to_string(c.batchSize) + ")");
  c.stepSeconds = r.seconds(j, "step_seconds", "step_seconds");
  if (j.contains("checkpoint_seconds"))
    c.checkpointSeconds = r.signedSeconds(j, "checkpoint_seconds", "checkpoint_seconds");
  const json& blocks = r.array(j, "blocks", "blocks");
  if (blocks.empty()) r.fail("blocks", "must hold at least one block");
  if (blocks.size() > static_cast<size_t>(kMaxCostsBlocks))
    r.fail("blocks", "holds " + std::to_string(blocks.size()) + " blocks; the planner takes at most " +
                         std::to_string(kMaxCostsBlocks) + " (COSTS.md, Bounds)");
  for (size_t i = 0; i < blocks.size(); ++i)
    c.blocks.push_back(readBlock(r, blocks[i], "blocks[" + std::to_string(i) + "]"));
  auto allOrNone = [&](const char* key, auto has) {  // a prediction never mixes two kinds of measurement
    for (size_t i = 1; i < c.blocks.size(); ++i)
      if (has(c.blocks[i]) != has(c.blocks[0]))
        r.fail("blocks[" + std::to_string(i) + "]." + key,
               std::string(has(c.blocks[0]) ? "missing" : "present") + ", blocks[0] " +
                   (has(c.blocks[0]) ? "has one" : "has none") + " (every block has one or none does)");
  };
  allOrNone("recompute_seconds", [](const ProfiledBlock& b) { return b.recomputeSeconds.has_value(); });
  allOrNone("recompute_end_seconds", [](const ProfiledBlock& b) { return b.recomputeEndSeconds.has_value(); });
  const json& bounds = r.array(j, "boundary_bytes", "boundary_bytes");
  if (bounds.size() != blocks.size() + 1)
    r.fail("boundary_bytes", "must hold " + std::to_string(blocks.size() + 1) + " sizes (x_0 .. x_L for " +
                                 std::to_string(blocks.size()) + " blocks), has " + std::to_string(bounds.size()));
  for (size_t i = 0; i < bounds.size(); ++i)
    c.boundaryBytes.push_back(r.summed(r.bytes, "byte counts", bounds[i], "boundary_bytes[" + std::to_string(i) + "]"));
  const json& outside = r.at(j, "outside", "outside");
  c.before = readPart(r, r.at(outside, "before", "outside.before"), "outside.before", "saves_chain_input");
  c.after = readPart(r, r.at(outside, "after", "outside.after"), "outside.after", "saves_chain_output");
  const json& shared = r.array(j, "shared", "shared");
  for (size_t i = 0; i < shared.size(); ++i)
    c.shared.push_back(readShared(r, shared[i], "shared[" + std::to_string(i) + "]", c.layers()));
  return c;
}

ChainCosts loadChainCosts(const std::string& path) { return parseChainCosts(readUserJson(path, "costs file"), path); }

namespace {

// Block i as the planner's program: node k is op k (its context its op's saved bytes, its FLOPs the op's), the
// first node also keeps x_i when the block saves it, the last x_{i+1}; intermediate values are not activations
// anyone keeps, so they weigh nothing. A block of no ops is one node that only passes x_i on.
BlockProgram programOf(const ChainCosts& c, int i, const std::vector<int64_t>& sharedExtra) {
  const ProfiledBlock& b = c.blocks[static_cast<size_t>(i)];
  BlockProgram p;
  p.kind = b.name;
  p.inBytes = c.boundaryBytes[static_cast<size_t>(i)];
  p.outBytes = c.boundaryBytes[static_cast<size_t>(i) + 1];
  const size_t n = std::max<size_t>(1, b.ops.size());
  for (size_t k = 0; k < n; ++k) {
    NodeCost node;
    node.inputs = {static_cast<int>(k) - 1};
    node.inputBytes = {k == 0 ? p.inBytes : 0};
    node.outBytes = k + 1 == n ? p.outBytes : 0;
    if (k < b.ops.size()) {
      const ProfiledOp& op = b.ops[k];
      node.kind = op.op;
      node.meta.forwardFlops = op.forwardFlops;
      node.meta.backwardFlops = op.backwardFlops;
      node.meta.contextExtraBytes = op.savedBytes;
      node.meta.isMatmul = op.matmul;
    } else {
      node.kind = "pass";
    }
    if (k == 0) {
      node.meta.savesInputs = b.savesInput;
      node.meta.contextExtraBytes += sharedExtra[static_cast<size_t>(i)];
    }
    if (k + 1 == n) node.meta.savesOutput = b.savesOutput;
    p.forwardFlops += node.meta.forwardFlops;
    p.backwardFlops += node.meta.backwardFlops;
    p.nodes.push_back(std::move(node));
  }
  return p;
}

}  // namespace

ChainCost chainCostOf(const ChainCosts& c) {
  // Each shared storage charged once, to the first party that saves it in forward order; one the part before
  // the chain saves is outside the planner's chain (the same under every policy), one only the part after saves
  // joins the loss's context.
  std::vector<int64_t> sharedExtra(c.blocks.size(), 0);
  int64_t lossExtra = c.after.savedBytes;
  for (const SharedStorage& s : c.shared) {
    if (s.before) continue;
    if (!s.savedBy.empty()) sharedExtra[static_cast<size_t>(s.savedBy.front())] += s.bytes;
    else if (s.after) lossExtra += s.bytes;
  }
  ChainCost cc;
  for (int i = 0; i < c.layers(); ++i) {
    cc.programs.push_back(programOf(c, i, sharedExtra));
    cc.programOf.push_back(i);
  }
  cc.inputBytes = c.boundaryBytes.front();
  cc.loss.inBytes = c.boundaryBytes.back();
  cc.loss.meta.savesInputs = c.after.savesBoundary;
  cc.loss.meta.contextExtraBytes = lossExtra;
  cc.loss.meta.forwardFlops = c.after.forwardFlops;
  cc.loss.meta.backwardFlops = c.after.backwardFlops;
  cc.stemForwardFlops = c.before.forwardFlops;
  cc.stemBackwardFlops = c.before.backwardFlops;
  return cc;
}

}  // namespace ckpt
