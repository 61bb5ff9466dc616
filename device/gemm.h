// One GEMM description for both executors, in row-major terms (the layout of every tensor here):
//   C[b] (m x n, leading dimension ldc) = alpha * op(A[b]) op(B[b]) + beta * C[b],   b = 0 .. batch-1,
// op(A) is m x k: A stored m x k (lda) when !transA, k x m (lda) when transA; likewise op(B) is k x n.
// X[b] = X + b * strideX. CudaExec maps it onto column-major cuBLAS as C^T = op(B)^T op(A)^T; HostExec runs
// hostGemm below, whose fixed summation order (p ascending, then alpha, then + beta C) makes it deterministic.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

namespace ckpt::gpu {

template <class T>
struct Gemm {
  bool transA = false;
  bool transB = false;
  int64_t m = 0, n = 0, k = 0;
  T alpha = T(1);
  const T* a = nullptr;
  int64_t lda = 0;
  int64_t strideA = 0;
  const T* b = nullptr;
  int64_t ldb = 0;
  int64_t strideB = 0;
  T beta = T(0);  // 0: C is written without being read
  T* c = nullptr;
  int64_t ldc = 0;
  int64_t strideC = 0;
  int64_t batch = 1;
};

// The same product in column-major (BLAS / cuBLAS) terms, which is how CudaExec calls cuBLAS: a row-major
// matrix read column-major is its transpose, so row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T,
// i.e. the operands swap and m, n swap; leading dimensions and strides carry over unchanged.
template <class T>
struct ColumnMajorGemm {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  T alpha = T(1);
  const T* a = nullptr;
  int64_t lda = 0, strideA = 0;
  const T* b = nullptr;
  int64_t ldb = 0, strideB = 0;
  T beta = T(0);
  T* c = nullptr;
  int64_t ldc = 0, strideC = 0;
  int64_t batch = 1;
};

template <class T>
ColumnMajorGemm<T> toColumnMajor(const Gemm<T>& g) {
  ColumnMajorGemm<T> r;
  r.transA = g.transB, r.transB = g.transA;
  r.m = g.n, r.n = g.m, r.k = g.k;
  r.alpha = g.alpha, r.beta = g.beta;
  r.a = g.b, r.lda = g.ldb, r.strideA = g.strideB;
  r.b = g.a, r.ldb = g.lda, r.strideB = g.strideA;
  r.c = g.c, r.ldc = g.ldc, r.strideC = g.strideC;
  r.batch = g.batch;
  return r;
}

// Why cuBLAS would refuse the call (CUBLAS_STATUS_INVALID_VALUE), or "" when it is valid: sizes fit an int, and
// each leading dimension covers its stored matrix's rows (BLAS's lda >= max(1, rows of A as stored), ...).
// HostExec checks every GEMM with it, so CI catches a device op whose cuBLAS call the GPU would reject.
template <class T>
std::string cublasArgumentError(const ColumnMajorGemm<T>& c) {
  constexpr int64_t kIntMax = 2147483647;
  auto fits = [&](int64_t v) { return v >= 0 && v <= kIntMax; };
  if (!fits(c.m) || !fits(c.n) || !fits(c.k) || !fits(c.batch)) return "m, n, k or batch outside [0, INT_MAX]";
  if (!fits(c.lda) || !fits(c.ldb) || !fits(c.ldc)) return "a leading dimension outside [0, INT_MAX]";
  const int64_t aRows = c.transA ? c.k : c.m, bRows = c.transB ? c.n : c.k;
  if (c.lda < std::max<int64_t>(1, aRows))
    return "lda " + std::to_string(c.lda) + " < rows of A " + std::to_string(aRows);
  if (c.ldb < std::max<int64_t>(1, bRows))
    return "ldb " + std::to_string(c.ldb) + " < rows of B " + std::to_string(bRows);
  if (c.ldc < std::max<int64_t>(1, c.m)) return "ldc " + std::to_string(c.ldc) + " < rows of C " + std::to_string(c.m);
  return "";
}

template <class T>
void hostGemm(const Gemm<T>& g) {
  for (int64_t bi = 0; bi < g.batch; ++bi) {
    const T* a = g.a + bi * g.strideA;
    const T* b = g.b + bi * g.strideB;
    T* c = g.c + bi * g.strideC;
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        T acc = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const T av = g.transA ? a[p * g.lda + i] : a[i * g.lda + p];
          const T bv = g.transB ? b[j * g.ldb + p] : b[p * g.ldb + j];
          acc += av * bv;
        }
        T& out = c[i * g.ldc + j];
        out = g.beta == T(0) ? g.alpha * acc : g.alpha * acc + g.beta * out;
      }
    }
  }
}

}  // namespace ckpt::gpu
