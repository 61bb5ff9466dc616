// Mixture of experts (reference/ops/moe.h): the router's jitter, softmax, top-k and capacity-bounded dispatch,
// the gather of each expert's buffer, the weighted combine, the module-state update and the backward's row and
// scatter bodies. The experts' and router's products are Linear's (dops/linear.h's linearForwardRows); the GELU
// between them is elementwise.cuh's. Each body performs the reference's operations in the reference's order, so
// on the host the routing (softmax, choices, slots, gates, shares), the jitter multipliers, the combine and the
// scatter are bitwise the CPU op's given the same operands; only the dot products of dL/dp sum in another order
// than Eigen's (within kHostRtol). The dispatch and the state update are sequential over tokens (one thread):
// the reference's first-come order of filling the experts' buffers is the definition.
//
// Layouts: probs (R, E); token and gate (E, C), slot s of expert e at e * C + s, token -1 (as T) when empty;
// choice (R, k) ints, a token's choices best first; slots (R, k) ints, a token's slots e * C + s in ascending
// order (so experts ascending, the order the reference adds their outputs in), -1 after them; filled (1, E).
#pragma once
#include <cmath>
#include <cstdint>

#include "device/kernels/dropout.cuh"
#include "device/kernels/hd_math.cuh"

namespace ckpt::gpu {

// reference/ops/moe.h's moeCapacity: ceil(cf * R * k / E) in double, left to right, clamped to [1, R].
inline int64_t moeSlotsPerExpert(int64_t rows, int64_t experts, int64_t topK, double capacityFactor) {
  const double c =
      std::ceil(capacityFactor * static_cast<double>(rows) * static_cast<double>(topK) / static_cast<double>(experts));
  const int64_t n = static_cast<int64_t>(c);
  return n < 1 ? 1 : n > rows ? rows : n;
}

// The jitter multiplier (1 - eps) + 2 eps u in double, as the reference; on the device the product and the sum
// rounded separately (no FMA), as rrelu.cuh's slope, so GPU multipliers are the CPU's bit for bit.
CKPT_HD inline double moeJitterMultiplier(double eps, float u) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(1.0 - eps, __dmul_rn(2.0 * eps, static_cast<double>(u)));
#else
  return (1.0 - eps) + 2.0 * eps * static_cast<double>(u);
#endif
}

// mult[i] = T(multiplier(u_i)). Index: Philox block j (philoxBlocksFor(draw.offset, n)).
template <class T>
struct MoeJitter {
  T* mult;
  int64_t n;
  DrawPos draw;
  double eps;
  CKPT_HD void operator()(int64_t j) const {
    T* m = mult;
    const double e = eps;
    forEachDrawOfBlock(draw, n, j, [m, e](int64_t i, uint32_t bits) {
      m[i] = static_cast<T>(moeJitterMultiplier(e, uniformFromBits(bits)));
    });
  }
};

// probs[t] = softmax(logits[t]): max, then exp(l - max) summed left to right, then each divided by the sum.
// Index: row t.
template <class T>
struct MoeSoftmaxRow {
  T* probs;
  const T* logits;
  int64_t experts;
  CKPT_HD void operator()(int64_t t) const {
    const T* l = logits + t * experts;
    T* p = probs + t * experts;
    T mx = l[0];
    for (int64_t e = 1; e < experts; ++e) mx = hdMax(mx, l[e]);
    T sum = 0;
    for (int64_t e = 0; e < experts; ++e) sum += (p[e] = hdExp(l[e] - mx));
    for (int64_t e = 0; e < experts; ++e) p[e] /= sum;
  }
};

// choice[t, r], r < k: the experts with the largest probabilities, best first, ties to the lower expert.
// Index: row t.
template <class T>
struct MoeTopK {
  int* choice;
  const T* probs;
  int64_t experts;
  int64_t topK;
  CKPT_HD void operator()(int64_t t) const {
    const T* p = probs + t * experts;
    int* ch = choice + t * topK;
    for (int64_t k = 0; k < topK; ++k) {
      int best = -1;
      for (int e = 0; e < static_cast<int>(experts); ++e) {
        if (k == 1 && e == ch[0]) continue;
        if (best < 0 || p[e] > p[best]) best = e;
      }
      ch[k] = best;
    }
  }
};

// The dispatch, first choices first, tokens in order: an assignment takes its expert's next slot while one is
// free and is dropped after; frac[e] = (assignments to e, drops included) / (R k). Sequential. Index: 0 only.
template <class T>
struct MoeDispatch {
  T* token;     // (E, C)
  T* gate;      // (E, C)
  T* frac;      // (1, E)
  int* counts;  // (2, E) scratch: the slots filled, then the assignments
  const int* choice;
  const T* probs;
  int64_t rows, experts, topK, slots;
  CKPT_HD void operator()(int64_t) const {
    int* filled = counts;
    int* assigned = counts + experts;
    for (int64_t i = 0; i < experts * slots; ++i) {
      token[i] = T(-1);
      gate[i] = T(0);
    }
    for (int64_t e = 0; e < experts; ++e) filled[e] = assigned[e] = 0;
    for (int64_t k = 0; k < topK; ++k)
      for (int64_t t = 0; t < rows; ++t) {
        const int e = choice[t * topK + k];
        ++assigned[e];
        if (filled[e] == slots) continue;
        const int64_t at = e * slots + filled[e];
        token[at] = static_cast<T>(t);
        gate[at] = probs[t * experts + e];
        ++filled[e];
      }
    for (int64_t e = 0; e < experts; ++e) frac[e] = static_cast<T>(assigned[e]) / static_cast<T>(rows * topK);
  }
};

// slots[t, .]: the slots holding token t, ascending (experts ascending), -1 after them; from the token table
// alone, so the backward rebuilds them from its context. Sequential. Index: 0 only.
template <class T>
struct MoeTokenSlots {
  int* slotsOf;  // (R, k)
  const T* token;
  int64_t rows, experts, topK, slots;
  CKPT_HD void operator()(int64_t) const {
    for (int64_t i = 0; i < rows * topK; ++i) slotsOf[i] = -1;
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t s = 0; s < slots && token[e * slots + s] >= T(0); ++s) {
        int* mine = slotsOf + static_cast<int64_t>(token[e * slots + s]) * topK;
        int64_t q = 0;
        while (mine[q] >= 0) ++q;
        mine[q] = static_cast<int>(e * slots + s);
      }
  }
};

// Expert buffers (E C, W): row e C + s is x[token] for a filled slot, zeros otherwise. Index: element i.
template <class T>
struct MoeGather {
  T* out;
  const T* x;
  const T* token;
  int64_t width;
  CKPT_HD void operator()(int64_t i) const {
    const int64_t slot = i / width, j = i % width;
    const T t = token[slot];
    out[i] = t >= T(0) ? x[static_cast<int64_t>(t) * width + j] : T(0);
  }
};

// y[t, j] = 0 + gate_1 z2[slot_1, j] + gate_2 z2[slot_2, j], the token's slots ascending (the reference's
// experts-in-order accumulation). The backward's scatter of the experts' input gradients is the same walk
// without gates (gate null). Index: element i of (R, W).
template <class T>
struct MoeCombine {
  T* out;
  const T* rowsOf;  // (E C, W): z2, or the experts' input gradients
  const T* gate;    // (E C) or null: no weighting
  const int* slotsOf;
  int64_t width, topK;
  CKPT_HD void operator()(int64_t i) const {
    const int64_t t = i / width, j = i % width;
    T acc = 0;
    for (int64_t q = 0; q < topK; ++q) {
      const int sl = slotsOf[t * topK + q];
      if (sl < 0) break;
      acc += gate ? gate[sl] * rowsOf[sl * width + j] : rowsOf[sl * width + j];
    }
    out[i] = acc;
  }
};

// The module state of one training forward: counts[e] += filled[e]; aux += coef (E sum_e frac[e] (sum_t p[t, e]
// / R)), sums left to right. Sequential. Index: 0 only.
template <class T>
struct MoeStateUpdate {
  T* counts;   // (1, E)
  T* auxLoss;  // (1, 1)
  const T* probs;
  const T* frac;
  const int* filled;  // MoeDispatch's counts: the slots filled first
  int64_t rows, experts;
  T coef;
  CKPT_HD void operator()(int64_t) const {
    T aux = 0;
    for (int64_t e = 0; e < experts; ++e) {
      T colSum = 0;
      for (int64_t t = 0; t < rows; ++t) colSum += probs[t * experts + e];
      aux += frac[e] * (colSum / static_cast<T>(rows));
      counts[e] += static_cast<T>(filled[e]);
    }
    auxLoss[0] += coef * (static_cast<T>(experts) * aux);
  }
};

// dL/dz2 of every slot: gate dy[token] for a filled slot, zeros otherwise. Index: element i of (E C, W).
template <class T>
struct MoeSlotGrad {
  T* dz2;
  const T* dy;
  const T* token;
  const T* gate;
  int64_t width;
  CKPT_HD void operator()(int64_t i) const {
    const int64_t slot = i / width, j = i % width;
    const T t = token[slot];
    dz2[i] = t >= T(0) ? gate[slot] * dy[static_cast<int64_t>(t) * width + j] : T(0);
  }
};

// Row t of dL/dlogits: dp[t, e] = dy[t] . z2[slot of (t, e)] (0 when e holds no slot of t) + coef E frac[e] / R
// (the load-balancing loss; frac counts assignments, constant under an infinitesimal change), then the softmax
// backward dl = p (dp - sum_e dp p). dp is the row's scratch. Index: row t.
template <class T>
struct MoeLogitGradRow {
  T* dl;        // (R, E)
  T* dp;        // (R, E) scratch
  const T* dy;  // (R, W)
  const T* z2;  // (E C, W)
  const T* probs;
  const T* frac;
  const int* slotsOf;
  int64_t width, experts, topK, slots, rows;
  T coef;
  CKPT_HD void operator()(int64_t t) const {
    T* d = dp + t * experts;
    for (int64_t e = 0; e < experts; ++e) d[e] = T(0);
    for (int64_t q = 0; q < topK; ++q) {
      const int sl = slotsOf[t * topK + q];
      if (sl < 0) break;
      T dot = 0;
      for (int64_t j = 0; j < width; ++j) dot += dy[t * width + j] * z2[sl * width + j];
      d[sl / slots] += dot;
    }
    for (int64_t e = 0; e < experts; ++e) d[e] += coef * static_cast<T>(experts) * frac[e] / static_cast<T>(rows);
    const T* p = probs + t * experts;
    T s = 0;
    for (int64_t e = 0; e < experts; ++e) s += d[e] * p[e];
    for (int64_t e = 0; e < experts; ++e) dl[t * experts + e] = p[e] * (d[e] - s);
  }
};

// dx[i] += da[i] (* mult[i] when jittered): the router's path into the input gradient. Index: element i.
template <class T>
struct MoeAddRouterGrad {
  T* dx;
  const T* da;
  const T* mult;  // null: no jitter
  CKPT_HD void operator()(int64_t i) const { dx[i] += mult ? da[i] * mult[i] : da[i]; }
};

}  // namespace ckpt::gpu
