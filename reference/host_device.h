// CKPT_HD marks functions compiled for both the host and the device (nvcc), so the CPU reference and the CUDA
// backend run the very same code (Philox, the tanh of reference/tanh_of.h, the kernel bodies).
#pragma once

#if defined(__CUDACC__)
#define CKPT_HD __host__ __device__
#else
#define CKPT_HD
#endif
