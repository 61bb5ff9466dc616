// The tensor-free mirror of reference/block.h: the same block program walked over a BytePool of abstract
// buffers whose sizes come from OpMeta. The planner drives it; the executor's measured bytes must equal it.
// Any change to the allocation order in block.h must be made here too (tests/block_sim_test.cpp checks both
// agree on every block kind, keep mask and dtype).
#pragma once
#include <array>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "reference/block.h"

namespace ckpt {

// Reference-counted abstract buffers: live bytes and their high-water mark.
class BytePool {
 public:
  int allocate(int64_t bytes) {
    int id;
    if (free_.empty()) {
      id = static_cast<int>(refs_.size());
      refs_.push_back(1);
      sizes_.push_back(bytes);
    } else {
      id = free_.back();
      free_.pop_back();
      refs_[id] = 1;
      sizes_[id] = bytes;
    }
    live_ += bytes;
    if (live_ > peak_) peak_ = live_;
    return id;
  }
  void retain(int id) { ++refs_[id]; }
  void release(int id) {
    if (--refs_[id] == 0) {
      live_ -= sizes_[id];
      dead_.push_back(id);
    }
  }
  int64_t live() const { return live_; }
  int64_t peak() const { return peak_; }
  void resetPeak() { peak_ = live_; }
  int64_t bytes(int id) const { return sizes_[id]; }
  // Lets later allocations reuse the ids of buffers that died so far, so the bookkeeping stays as small as what
  // is live; a planner over 10^6 blocks calls this between instructions, where no dead id is held any more.
  // Without it ids are never reused.
  void compact();

 private:
  std::vector<int> refs_;
  std::vector<int64_t> sizes_;
  std::vector<int> dead_;  // died since the last compact()
  std::vector<int> free_;  // reusable ids
  int64_t live_ = 0;
  int64_t peak_ = 0;
};

// One node of a block as the planner sees it.
struct NodeCost {
  std::string kind;                 // the op's kind(), for op-level policies that select by kind
  std::vector<int> inputs;          // value ids as in Node::inputs
  std::vector<int64_t> inputBytes;  // per input
  OpMeta meta;
  int64_t outBytes = 0;
};

// A block as the planner sees it: everything needed to predict bytes and FLOPs without tensors.
struct BlockProgram {
  std::string kind;
  std::vector<NodeCost> nodes;
  int64_t inBytes = 0;
  int64_t outBytes = 0;
  int64_t forwardFlops = 0;
  int64_t backwardFlops = 0;
  bool random = false;
  bool mutatesState = false;
  int size() const { return static_cast<int>(nodes.size()); }
};

template <class T>
BlockProgram blockProgram(const Block<T>& b, Shape x) {
  BlockProgram p;
  p.kind = b.kind;
  p.inBytes = x.size() * static_cast<int64_t>(sizeof(T));
  std::vector<Shape> vals;
  for (const auto& node : b.nodes) {
    NodeCost c;
    c.kind = node.op->kind();
    c.inputs = node.inputs;
    const auto ins = inputShapes(node, vals, x);
    for (const auto& s : ins) c.inputBytes.push_back(s.size() * static_cast<int64_t>(sizeof(T)));
    c.meta = node.op->meta(ins);
    c.outBytes = c.meta.out.size() * static_cast<int64_t>(sizeof(T));
    vals.push_back(c.meta.out);
    p.forwardFlops += c.meta.forwardFlops;
    p.backwardFlops += c.meta.backwardFlops;
    p.random |= c.meta.randomDraws > 0;
    p.mutatesState |= c.meta.mutatesState;
    p.nodes.push_back(std::move(c));
  }
  p.outBytes = p.nodes.back().outBytes;
  return p;
}

// The buffers one saved context references, held inline (an op saves at most its two inputs, its output and one
// extra), so a planner holding 10^6 tapes does not allocate per context.
struct SimContext {
  std::array<int, 4> buffers{};
  int size = 0;
  void push_back(int b) {
    if (size == static_cast<int>(buffers.size())) throw std::logic_error("SimContext: more than 4 buffers");
    buffers[static_cast<size_t>(size++)] = b;
  }
  const int* begin() const { return buffers.data(); }
  const int* end() const { return buffers.data() + size; }
  void clear() { size = 0; }
};

// The abstract tape: for each node, the buffers its context references (-1 free slots), plus kept values.
struct SimTape {
  std::vector<SimContext> contexts;  // empty + !present = dropped
  std::vector<bool> present;
  std::vector<int> kept;  // per node, buffer id or -1
  int input = -1;
  KeepMask keep;
};

// Each returns/consumes buffer ids in `pool` exactly as the runtime allocates and frees tensors.
// x: the block input's buffer (the caller's reference is not consumed). Returns the output's buffer.
int simForward(BytePool& pool, const BlockProgram& p, int x, SimTape* tape, const KeepMask& keep);
void simRecomputeDropped(BytePool& pool, const BlockProgram& p, SimTape& tape);
// Consumes the tape and dy's reference; returns dx's buffer.
int simBackward(BytePool& pool, const BlockProgram& p, SimTape&& tape, int dy);
// FLOPs of the nodes a keep mask drops (what recomputeDropped() runs).
int64_t droppedForwardFlops(const BlockProgram& p, const KeepMask& keep);

}  // namespace ckpt
