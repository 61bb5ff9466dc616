#include "reference/meter.h"

namespace ckpt {
namespace {
thread_local ActivationMeter* tCurrent = nullptr;
}
ActivationMeter* currentMeter() { return tCurrent; }
MeterScope::MeterScope(ActivationMeter* m) : saved_(tCurrent) { tCurrent = m; }
MeterScope::~MeterScope() { tCurrent = saved_; }
}  // namespace ckpt
