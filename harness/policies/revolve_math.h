// Griewank & Walther's binomial checkpointing arithmetic (ACM TOMS Algorithm 799, "revolve"), in the
// vocabulary of our schedules: reversing l blocks from a held input with c checkpoint slots, the input's own
// slot included. The state being advanced is not a checkpoint; each block is also run once with its tape in its
// own turn (firsturn / youturn), and those l taped forwards are not counted here.
//
//   beta(c, r)  = binomial(c + r, c)  — the most blocks c slots reverse when no block is advanced more than r
//                 times;
//   r(l, c)     = min { r >= 0 : beta(c, r) >= l }, the repetition number;
//   numforw(l, c) = t(l, c) = r l - beta(c + 1, r - 1)   (beta(., -1) = 0)
//                 — the proven minimum number of untaped forwards (revolve's advances), the unique solution of
//                   t(1, c) = 0,  t(l, 1) = l (l - 1) / 2,  t(l, c) = min_{0<m<l} m + t(l - m, c - 1) + t(m, c).
// So a revolve schedule runs numforw(l, c) + l block forwards in all; with c >= l - 1 that is 2 l - 1 (every
// boundary but the last kept, every block recomputed once for its tape, the last one taped at once).
#pragma once
#include <cstdint>

namespace ckpt {

// binomial(c + r, c), or `cap` if it is larger; 0 for r < 0.
int64_t revolveBeta(int64_t c, int64_t r, int64_t cap = INT64_MAX);
int64_t revolveRepetitions(int64_t l, int64_t c);
int64_t revolveNumforw(int64_t l, int64_t c);
// An optimal first checkpoint for l >= 2 blocks and c >= 2 slots: advancing m blocks, reversing the last l - m
// with c - 1 slots and then the first m with c costs exactly numforw(l, c). The optimal m are exactly those with
// beta(c, r-2) <= m <= beta(c, r-1) and beta(c-1, r-1) <= l - m <= beta(c-1, r); this returns the largest.
int64_t revolveSplit(int64_t l, int64_t c);

}  // namespace ckpt
