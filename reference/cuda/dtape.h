// What a device block forward leaves for its backward, and where it runs: the device mirrors of
// reference/block.h's KeepMask, BlockTape and BlockEnv. Apart from dblock.h (which needs the device ops) so the
// executor in harness/ can hold tapes without compiling a device op.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "reference/cuda/dtensor.h"

namespace ckpt::gpu {

using DKeepMask = std::vector<bool>;  // empty = keep every context
inline bool keepsNode(const DKeepMask& keep, int k) { return keep.empty() || keep[static_cast<size_t>(k)]; }

template <class T>
struct DBlockTape {
  std::vector<std::optional<DContext<T>>> contexts;
  std::vector<DTensor<T>> kept;
  DTensor<T> input;
  std::vector<RngDraw> draws;
  DKeepMask keep;
};

// reference/block.h's BlockEnv.
struct DBlockEnv {
  Rng* rng = nullptr;
  int step = 0;
  int block = 0;
  bool updateState = true;  // false: the forward leaves module state as it found it (DStateGuard)
  bool erfGelu = false;
  bool bf16Matmul = false;
  bool bf16Inputs = false;
  // BlockEnv::redrawOp: random ops of this kind() draw from a side stream the generator does not track ("" none).
  std::string redrawOp;
  // BlockEnv::stateOp: with updateState false, the buffers of ops of this kind() still move (DStateGuard leaves
  // them alone, in a forward and in an op-level recompute) ("" none). Only engine variants set it.
  std::string stateOp = {};
};

}  // namespace ckpt::gpu
