// The device op of reference/ops/relu.h: one line in deviceOps() (device/dops.h).
#pragma once

#include "device/dops/output_activation.h"

namespace ckpt::gpu {

template <class T, class X>
using DRelu = DOutputActivation<T, X, ReluForward, ReluBackward>;

}  // namespace ckpt::gpu
