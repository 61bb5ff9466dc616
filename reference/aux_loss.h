// Loss trackers among module buffers, Eigen-free so that the device code (device/) shares it: a buffer
// whose name ends in ".aux_loss" (reference/ops/moe.h's auxiliary loss) is zeroed when a pass starts, its value
// joins the pass's loss (Chain::withAuxLoss; the device chain's own sum, device/exec_chain.h), and, as any
// buffer, it moves once per step.
#pragma once
#include <string>

namespace ckpt {

inline constexpr const char* kAuxLossSuffix = ".aux_loss";
inline bool isAuxLossBuffer(const std::string& name) {
  const std::string suffix = kAuxLossSuffix;
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace ckpt
