// The two generator models every random op supports (see reference/PHILOX.md):
//  - counter-based (JAX-like): an op's draws are a pure function of (seed, op key, element index);
//  - stateful (PyTorch-like): one generator (seed, offset) that every random op advances in execution order.
// Either way an op asks for a RngDraw: the Philox stream position its n draws come from.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/rng_model.h"
#include "reference/philox.h"

namespace ckpt {

// Where an op's draws come from: element i is philoxBits(seed, subsequence, offset + i).
struct RngDraw {
  uint64_t seed = 0;
  uint64_t subsequence = 0;
  uint64_t offset = 0;
  float uniform(int64_t i) const { return uniformFromBits(philoxBits(seed, subsequence, offset + i)); }
  // out[j] = uniform(first + j) for 0 <= j < n, each Philox block computed once (philoxUniforms).
  void uniforms(int64_t first, int64_t n, float* out) const {
    philoxUniforms(seed, subsequence, offset + static_cast<uint64_t>(first), n, out);
  }
  bool operator==(const RngDraw&) const = default;
};

// The generator state that is part of a training step's observable state.
struct RngState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // stateful model only; stays 0 for the counter-based model
  bool operator==(const RngState&) const = default;
};

class Rng {
 public:
  Rng(RngModel model, uint64_t seed) : model_(model), state_{seed, 0} {}
  RngModel model() const { return model_; }
  const RngState& state() const { return state_; }
  void setState(const RngState& s) { state_ = s; }

  // Reserves n draws for the op identified by opKey (unique per step, block and node). The stateful model
  // advances its offset by n rounded up to a whole Philox block of 4, as PyTorch's Philox offsets do, so every
  // op starts on a fresh counter.
  RngDraw reserve(uint64_t opKey, int64_t n) {
    if (model_ == RngModel::kCounter) return RngDraw{state_.seed, opKey, 0};
    RngDraw d{state_.seed, 0, state_.offset};
    state_.offset += (static_cast<uint64_t>(n) + 3) & ~uint64_t{3};
    return d;
  }

 private:
  RngModel model_;
  RngState state_;
};

// Where a random op's numbers come from, as the op sees it: n numbers, nothing more. Whether they are a fresh
// reservation or the draw an earlier forward used (a recompute) is decided by whoever runs the op.
class DrawSource {
 public:
  virtual ~DrawSource() = default;
  virtual RngDraw draw(int64_t n) = 0;
};

// The block runtime's source for one node (reference/block_runtime.h, on both backends): reserves from the
// generator under the node's op key, or replays a draw recorded earlier; notes what it handed out in `record`
// so an op-level recompute can replay it.
class NodeDraws final : public DrawSource {
 public:
  NodeDraws(Rng* rng, uint64_t opKey, const RngDraw* replay, RngDraw* record)
      : rng_(rng), opKey_(opKey), replay_(replay), record_(record) {}
  RngDraw draw(int64_t n) override {
    const RngDraw d = replay_ ? *replay_ : rng_->reserve(opKey_, n);
    if (record_) *record_ = d;
    return d;
  }

 private:
  Rng* rng_;
  uint64_t opKey_;
  const RngDraw* replay_;
  RngDraw* record_;
};

// opKey layout for the counter-based model: step, block and node packed so keys never collide.
inline uint64_t makeOpKey(int step, int block, int node) {
  return (static_cast<uint64_t>(step + 1) << 40) | (static_cast<uint64_t>(block) << 12) | static_cast<uint64_t>(node);
}

}  // namespace ckpt
