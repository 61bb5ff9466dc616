// What a device block forward leaves for its backward: reference/block_runtime.h's tape over device tensors.
// Apart from dblock.h (which needs the device ops) so the executor in harness/ can hold tapes without compiling a
// device op. The keep mask and the env are the runtime's own (KeepMask, BlockEnv).
#pragma once

#include "device/dtensor.h"
#include "reference/block_runtime.h"

namespace ckpt::gpu {

template <class T>
using DBlockTape = BlockTapeOf<DTensor<T>, DContext<T>>;

}  // namespace ckpt::gpu
