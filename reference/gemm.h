// Who computes the matrix products (cmake/gemm.cmake, CKPT_GEMM), and the one setting it needs at run time.
#pragma once
#include <string>

namespace ckpt {

struct GemmInfo {
  std::string library;    // "openblas" or "eigen"
  std::string config;     // OpenBLAS's own build line (version, DYNAMIC_ARCH, ...); Eigen's version
  std::string kernels;    // the kernels chosen for this processor (OpenBLAS's core name); Eigen's SIMD sets
  int threads = 1;        // threads a product may use
  bool threaded = false;  // OpenBLAS built with its thread server (and its locking), which ckptcheck needs
};

GemmInfo gemmInfo();

// Every product on the calling thread: the steps ckptcheck times are single-threaded (as the PyTorch steps beside
// them are), and `verify --threads N` runs its own threads. Idempotent and thread-safe; buildChain calls it, so
// every run of a model does.
void useOneGemmThread();

}  // namespace ckpt
