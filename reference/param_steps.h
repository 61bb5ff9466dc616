// The parts of a step that move parameters rather than activations, written once for the CPU chain
// (reference/step.h, reference/chain.h) and the device chain (device/exec_chain.h): which parameters train, the
// sums of shared and tied gradients, gradient accumulation's sums, SGD and the copies' values. They run over a
// parameter set S that says where a chain's parameters are and how its backend adds, copies, zeroes and updates a
// matrix; Eigen-free, so nvcc compiles it for the device.
//   S::Param                                         a parameter: value and grad, matrices of the backend
//   s.spec()                                         the case, whose sharing, freezing and tying rules apply
//   s.stemParams(), s.blockParams(i), s.headParams() the parameters, model order
//   s.tiedWeight(), s.embedding()                    a tied head's weight (else null), the token embedding
//   s.add(dst, src), s.copy(dst, src), s.zero(dst)   dst += src, dst = src, dst = 0
//   s.update(p)                                      SGD: p.value -= lr p.grad
#pragma once
#include <algorithm>
#include <vector>

#include "cases/lm_case.h"
#include "cases/param_sharing.h"

namespace ckpt::param_steps {

// The parameters that train, model order: an embedding that is not frozen, each owner's of blocks that are not
// frozen, the head's (its weight only when untied: tied, it is the embedding).
template <class S>
std::vector<typename S::Param*> trainedParams(S& s) {
  std::vector<typename S::Param*> ps;
  if (embeddingTrains(s.spec())) ps = s.stemParams();
  for (int i : trainedOwners(s.spec()))
    for (auto* p : s.blockParams(i)) ps.push_back(p);
  for (auto* p : s.headParams())
    if (!(tiedHead(s.spec()) && p == s.tiedWeight())) ps.push_back(p);
  return ps;
}

// Adds the gradients of parameters several blocks use into block `owner`'s, in the order `users` lists the blocks
// (shareGroups: backward order, owner last): each step adds the running sum into the next block's copy, so the
// last one ends with ((g_first + g_second) + ...) + g_last, which the owner takes when it is not last (an engine
// variant's order).
template <class S>
void reduceSharedGrads(S& s, const std::vector<int>& users, int owner) {
  for (size_t m = 1; m < users.size(); ++m) {
    const auto from = s.blockParams(users[m - 1]), into = s.blockParams(users[m]);
    for (size_t k = 0; k < into.size(); ++k) s.add(into[k]->grad, from[k]->grad);
  }
  if (users.back() == owner) return;
  const auto sum = s.blockParams(users.back()), owners = s.blockParams(owner);
  for (size_t k = 0; k < owners.size(); ++k) s.copy(owners[k]->grad, sum[k]->grad);
}

// A tied head whose embedding trains: the embedding's gradient becomes g_emb + g_head (IEEE addition commutes, so
// it is g_head + g_emb bit for bit). Without `headContribution` the head's part is lost (a mutant's).
template <class S>
void reduceTiedGrads(S& s, bool headContribution) {
  if (!tiedHead(s.spec()) || !embeddingTrains(s.spec()) || !headContribution) return;
  s.add(s.embedding()->grad, s.tiedWeight()->grad);
}

// Every sharing block's parameter copies take their owner's values, and a tied head's weight the embedding's.
template <class S>
void syncSharedValues(S& s) {
  for (int i = 0; i < static_cast<int>(s.spec().blocks.size()); ++i) {
    if (paramOwner(s.spec(), i) == i) continue;
    const auto mine = s.blockParams(i), owners = s.blockParams(paramOwner(s.spec(), i));
    for (size_t k = 0; k < mine.size(); ++k) s.copy(mine[k]->value, owners[k]->value);
  }
  if (tiedHead(s.spec())) s.copy(s.tiedWeight()->value, s.embedding()->value);
}

// SGD on the trained parameters; then every copy takes its owner's value. `frozenToo` is mutant
// frozen-params-updated's: an optimiser over every parameter that has a .grad (a frozen embedding's too).
template <class S>
void sgd(S& s, bool frozenToo) {
  if (frozenToo || embeddingTrains(s.spec()))
    for (auto* p : s.stemParams()) s.update(*p);
  for (int i = 0; i < static_cast<int>(s.spec().blocks.size()); ++i)
    if (paramOwner(s.spec(), i) == i && (frozenToo || blockTrains(s.spec(), i)))
      for (auto* p : s.blockParams(i)) s.update(*p);
  for (auto* p : s.headParams())
    if (!(tiedHead(s.spec()) && p == s.tiedWeight())) s.update(*p);
  syncSharedValues(s);
}

// Gradient accumulation (cases/micro_batches.h): micro-batch m's trained gradients go into `sums` (the first as
// they are, the next added in micro-batch order); after the last micro-batch the parameters take the sums.
template <class S, class M>
void accumulateGrads(S& s, std::vector<M>& sums, int m) {
  const auto ps = trainedParams(s);
  for (size_t k = 0; k < ps.size(); ++k)
    if (m == 0) s.copy(sums[k], ps[k]->grad);
    else s.add(sums[k], ps[k]->grad);
  if (m == static_cast<int>(s.spec().microBatches) - 1)
    for (size_t k = 0; k < ps.size(); ++k) s.copy(ps[k]->grad, sums[k]);
}

// The sums so far of block `block`'s trained parameters become zero (mutant micro-batch-grads-zeroed's).
template <class S, class M>
void zeroBlockSums(S& s, std::vector<M>& sums, int block) {
  if (!blockTrains(s.spec(), block)) return;
  const auto ps = trainedParams(s), mine = s.blockParams(paramOwner(s.spec(), block));
  for (size_t k = 0; k < ps.size(); ++k)
    if (std::find(mine.begin(), mine.end(), ps[k]) != mine.end()) s.zero(sums[k]);
}

}  // namespace ckpt::param_steps
