// The device op of reference/ops/tanh.h: one line in deviceOps() (device/dops.h).
#pragma once

#include "device/dops/output_activation.h"

namespace ckpt::gpu {

template <class T, class X>
using DTanh = DOutputActivation<T, X, TanhForward, TanhBackward>;

}  // namespace ckpt::gpu
