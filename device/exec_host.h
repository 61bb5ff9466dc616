// The host emulator: the executor interface of exec_cuda.cuh run on the CPU, so CI (no GPU) runs the device
// ops, the device block runtime and the device chain the schedule executor drives — the same kernel bodies,
// index arithmetic, GEMM descriptions, allocation order and RNG bookkeeping — and compares them with the CPU
// reference.
//   launch(n, body)  calls body(i) for i = 0 .. n-1, in order (a grid of one thread, walked);
//   gemm(g)          hostGemm (gemm.h), after checking cuBLAS would accept the call;
//   upload/download/copy  memcpy; memory comes from a counting DevicePool over aligned host memory.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "device/device_pool.h"
#include "device/gemm.h"

namespace ckpt::gpu {

class HostExec {
 public:
  static constexpr const char* kName = "host-emulator";
  HostExec() : pool_(hostRawAlloc, hostRawFree, "host-emulator pool") {}
  DevicePool& pool() { return pool_; }

  template <class F>
  void launch(int64_t n, const F& body) {
    for (int64_t i = 0; i < n; ++i) body(i);
  }
  // Also refuses, as cuBLAS would, a call whose column-major form is invalid (gemm.h's cublasArgumentError).
  template <class T>
  void gemm(const Gemm<T>& g) {
    const std::string err = cublasArgumentError(toColumnMajor(g));
    if (!err.empty())
      throw std::logic_error("gemm (m " + std::to_string(g.m) + ", n " + std::to_string(g.n) + ", k " +
                             std::to_string(g.k) + ") would be rejected by cuBLAS: " + err);
    hostGemm(g);
  }
  template <class T>
  void upload(T* dst, const T* src, int64_t n) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  }
  template <class T>
  void download(T* dst, const T* src, int64_t n) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  }
  template <class T>
  void copy(T* dst, const T* src, int64_t n) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  }
  void synchronize() {}

 private:
  DevicePool pool_;
};

}  // namespace ckpt::gpu
