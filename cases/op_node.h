// One node of a block program, as a block kind states it (cases/block_kind.h). `op` is an Op::kind() that
// reference/op_table.h knows; the dims are the op's constructor arguments. Both the reference op (the op table's
// line) and the device op (device/dops.h) are built from a node through the named accessors below, so an
// attribute has one home and neither side copies it from the other.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ckpt {

struct OpNode {
  std::string name;             // inside the block; parameters are named "b<index>.<name>.weight" and so on
  std::string op;               // "linear", "gelu", ...
  std::vector<int64_t> dims;    // linear: {in, out}; layernorm, batchnorm: {width}; attention: {heads, seq};
                                // drop_path: {seq}; moe: {experts, top_k, width, hidden}
  double p = 0;                 // dropout, attention and drop_path: the drop probability
  std::vector<int> inputs;      // value ids: -1 = the block input, j >= 0 the output of node j
  double lower = 0, upper = 0;  // rrelu: the slope range
  // moe (dims {experts, top_k, width, hidden}, p the router jitter): the capacity factor and the auxiliary loss's
  // coefficient.
  double capacityFactor = 0, auxCoef = 0;

  // The constants no block program states: PyTorch's defaults for LayerNorm and BatchNorm.
  static constexpr double kNormEps = 1e-5;
  static constexpr double kBatchNormMomentum = 0.1;

  // The dims by name, per op (std::out_of_range when a program gives too few).
  int64_t inFeatures() const { return dims.at(0); }    // linear
  int64_t outFeatures() const { return dims.at(1); }   // linear
  int64_t normWidth() const { return dims.at(0); }     // layernorm, batchnorm
  int64_t heads() const { return dims.at(0); }         // attention
  int64_t attentionSeq() const { return dims.at(1); }  // attention
  int64_t sampleRows() const { return dims.at(0); }    // drop_path: the rows of one sample (its sequence)
  int64_t experts() const { return dims.at(0); }       // moe
  int64_t topK() const { return dims.at(1); }          // moe
  int64_t moeWidth() const { return dims.at(2); }      // moe
  int64_t hidden() const { return dims.at(3); }        // moe
  double jitter() const { return p; }                  // moe: the router jitter
};

}  // namespace ckpt
