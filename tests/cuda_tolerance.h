// The one place the device-backend tests state how close is close enough when bodies and the reference sum in a
// different order (sequential loops vs Eigen's vectorised reductions and blocked GEMMs; the GPU's libm).
// Everything else they compare bit for bit. A value passes when |got - want| <= rtol * (|want| + max|want|),
// i.e. relative to the element and, for elements near zero after cancellation, to the tensor's scale.
#pragma once
#include <type_traits>

namespace ckpt::gpu::test {

// Host emulator vs CPU reference: same functions (glibc), different summation order.
template <class T>
inline constexpr double kHostRtol = std::is_same_v<T, float> ? 2e-5 : 1e-12;

// GPU vs CPU reference after whole training steps: CUDA's exp/tanh/erf differ from glibc's in the last bits,
// cuBLAS blocks its sums, and differences grow through the layers.
template <class T>
inline constexpr double kGpuVsCpuRtol = std::is_same_v<T, float> ? 2e-3 : 1e-9;

}  // namespace ckpt::gpu::test
