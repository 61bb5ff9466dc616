// How verify and validate draw and shrink random cases: one driver over RapidCheck's public API (rc::Gen,
// rc::Random, rc::Shrinkable), used by both.
//
// - Drawing. Random case i of seed S is gen(randomFor(S, i), sizeFor(i)): it depends on (S, i) alone, so cases
//   can run on any thread in any order, and `verify --reproduce S:i[:PATH]` regenerates exactly one.
// - Shrinking. A failing case is shrunk greedily: walk its shrink tree, take the first child that still fails,
//   until none does or the trial budget is spent. The child indices taken form the path that reproduces the
//   result. The tree is RapidCheck's (from the generator), or one built from a list of simpler candidates
//   (`candidateTree`: catalogue cases, validate's kind-aware simplifications), walked the same way.
#pragma once
#include <rapidcheck.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ckpt::search {

inline rc::Random randomFor(uint64_t seed, int64_t index) {
  return rc::Random(rc::Random::Key{seed, static_cast<uint64_t>(index), 0x636b7074636865ULL, 0x766572696679ULL});
}
// Generators in cases/generators.h draw every field at full range whatever the size; the size only varies what
// RapidCheck's own combinators (containers) would scale.
inline int sizeFor(int64_t index) { return static_cast<int>(index % 100); }

// Random case `index` of `seed`, with its shrink tree.
template <class T>
rc::Shrinkable<T> drawCase(const rc::Gen<T>& gen, uint64_t seed, int64_t index) {
  return gen(randomFor(seed, index), sizeFor(index));
}

// The node reached by taking child path[0] of the root, then child path[1] of that, ...; nullopt when a step
// names a child that does not exist.
template <class T>
std::optional<rc::Shrinkable<T>> followPath(rc::Shrinkable<T> s, const std::vector<int>& path) {
  for (int k : path) {
    auto children = s.shrinks();
    std::optional<rc::Shrinkable<T>> pick;
    for (int i = 0; i <= k; ++i) {
      auto child = children.next();
      if (!child) return std::nullopt;
      if (i == k) pick = *child;
    }
    s = *pick;
  }
  return s;
}

// A shrink tree whose children are `simpler(value)`, recursively.
template <class T, class Simpler>
rc::Shrinkable<T> candidateTree(T value, Simpler simpler) {
  return rc::shrinkable::shrinkRecur(std::move(value),
                                     [simpler](const T& v) { return rc::seq::fromContainer(simpler(v)); });
}

template <class T>
struct Shrunk {
  T value;
  std::vector<int> path;  // child indices taken from the root
  int trials = 0;         // candidates tried
};

// Greedy shrinking: `stillFails(candidate)` is asked of the children of the current node in order; the first
// that says true becomes the current node. Stops when no child fails or after `maxTrials` candidates.
template <class T, class StillFails>
Shrunk<T> shrinkGreedy(rc::Shrinkable<T> current, StillFails&& stillFails, int maxTrials) {
  Shrunk<T> s{current.value(), {}, 0};
  for (bool progressed = true; progressed && s.trials < maxTrials;) {
    progressed = false;
    auto children = current.shrinks();
    for (int index = 0; auto child = children.next(); ++index) {
      if (s.trials++ >= maxTrials) break;
      T candidate = child->value();
      if (stillFails(candidate)) {
        current = *child;
        s.value = std::move(candidate);
        s.path.push_back(index);
        progressed = true;
        break;
      }
    }
  }
  return s;
}

// "0.3.1": a shrink path as verify prints it and --reproduce reads it.
inline std::string pathText(const std::vector<int>& path) {
  std::string t;
  for (size_t i = 0; i < path.size(); ++i) t += (i ? "." : "") + std::to_string(path[i]);
  return t;
}

}  // namespace ckpt::search
