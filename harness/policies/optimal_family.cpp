// The memory model of the optimal policy's family (optimal_family.h): each block's program walked over a BytePool
// exactly as planner.cpp walks it.
#include "harness/policies/optimal_family.h"

#include <map>
#include <utility>

namespace ckpt::optimal_detail {

BlockModel blockModel(const BlockProgram& p, const KeepMask& keep) {
  BlockModel m;
  m.in = p.inBytes;
  m.out = p.outBytes;
  m.flops = p.forwardFlops;
  {
    BytePool pool;
    simForward(pool, p, pool.allocate(p.inBytes), nullptr, keep);
    m.advancePeak = pool.peak();
  }
  {
    BytePool pool;
    const int x = pool.allocate(p.inBytes);
    SimTape tape;
    const int y = simForward(pool, p, x, &tape, keep);
    m.tapePeak = pool.peak();
    pool.release(x);
    pool.release(y);
    m.tapeBytes = pool.live();
    pool.resetPeak();
    const int dy = pool.allocate(p.outBytes);
    simRecomputeDropped(pool, p, tape);
    simBackward(pool, p, std::move(tape), dy);
    m.backPeak = pool.peak();
  }
  {
    BytePool pool;
    const int dy = pool.allocate(p.outBytes);
    const int x = pool.allocate(p.inBytes);
    SimTape tape;
    const int y = simForward(pool, p, x, &tape, keep);
    pool.release(x);
    pool.release(y);
    simRecomputeDropped(pool, p, tape);
    simBackward(pool, p, std::move(tape), dy);
    m.turnPeak = pool.peak();
  }
  return m;
}

// kLoss as planner.cpp walks it from x_L's buffer; returns g_L's.
int simLoss(BytePool& pool, const LossCost& loss, int xL) {
  std::vector<int> ctx;
  if (loss.meta.savesInputs) {
    pool.retain(xL);
    ctx.push_back(xL);
  }
  if (loss.meta.contextExtraBytes > 0) ctx.push_back(pool.allocate(loss.meta.contextExtraBytes));
  const int g = pool.allocate(loss.inBytes);
  pool.release(xL);
  for (int b : ctx) pool.release(b);
  return g;
}

ChainModel chainModel(const ChainCost& c, const std::vector<KeepMask>& keep) {
  ChainModel cm;
  cm.layers = c.layers();
  cm.modelOf.resize(static_cast<size_t>(cm.layers));
  auto intern = [&](const BlockModel& m) {
    const auto it = std::find(cm.models.begin(), cm.models.end(), m);
    if (it != cm.models.end()) return static_cast<int>(it - cm.models.begin());
    cm.models.push_back(m);
    return static_cast<int>(cm.models.size()) - 1;
  };
  if (keep.empty()) {
    std::vector<int> ofProgram(c.programs.size(), -1);  // one walk per distinct program
    for (int i = 0; i < cm.layers; ++i) {
      int& id = ofProgram[static_cast<size_t>(c.programOf[static_cast<size_t>(i)])];
      if (id < 0) id = intern(blockModel(c.block(i), {}));
      cm.modelOf[static_cast<size_t>(i)] = id;
    }
  } else {
    std::map<std::pair<int, KeepMask>, int> seen;
    for (int i = 0; i < cm.layers; ++i) {
      const auto key = std::make_pair(c.programOf[static_cast<size_t>(i)], keep[static_cast<size_t>(i)]);
      auto it = seen.find(key);
      if (it == seen.end()) it = seen.emplace(key, intern(blockModel(c.block(i), key.second))).first;
      cm.modelOf[static_cast<size_t>(i)] = it->second;
    }
  }
  {
    BytePool pool;
    simLoss(pool, c.loss, pool.allocate(c.loss.inBytes));
    cm.lossPeak = pool.peak();
  }
  {
    const int last = cm.layers - 1;
    const BlockProgram& p = c.block(last);
    BytePool pool;
    const int x = pool.allocate(p.inBytes);
    SimTape tape;
    const int y = simForward(pool, p, x, &tape, keep.empty() ? KeepMask{} : keep[static_cast<size_t>(last)]);
    pool.release(x);
    const int g = simLoss(pool, c.loss, y);
    simRecomputeDropped(pool, p, tape);
    simBackward(pool, p, std::move(tape), g);
    cm.lastTurnPeak = pool.peak();
  }
  return cm;
}

}  // namespace ckpt::optimal_detail
