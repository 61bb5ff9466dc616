// A process that trains steps allocates and frees the same activation sizes every step. glibc's malloc by default
// serves large blocks with mmap and hands freed memory at the top of the heap back to the kernel, so each step
// takes fresh pages again: a page fault and a zeroed 4 KiB page per touch (mlp-wide: 4,833 faults a step, a
// sixth of its time in the kernel clearing pages). Keeping freed memory in the heap for reuse takes that to
// 1,280 faults a step. Called first thing in main() of ckptcheck and bench_engine; a no-op off glibc.
#pragma once
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ckpt {

inline void keepFreedMemoryForReuse() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest: blocks up to 32 MiB come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and are not handed back until 1 GiB sits free at its top
#endif
}

}  // namespace ckpt
