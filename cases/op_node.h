// One node of a block program, as a block kind states it (cases/block_kind.h). `op` is an Op::kind() that
// reference/op_table.h knows; the dims are the op's constructor arguments.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ckpt {

struct OpNode {
  std::string name;           // inside the block; parameters are named "b<index>.<name>.weight" and so on
  std::string op;             // "linear", "gelu", ...
  std::vector<int64_t> dims;  // linear: {in, out}; layernorm, batchnorm: {width}; attention: {heads, seq};
                              // drop_path: {seq}; moe: {experts, top_k, width, hidden}
  double p = 0;               // dropout, attention and drop_path: the drop probability
  std::vector<int> inputs;    // value ids: -1 = the block input, j >= 0 the output of node j
  double lower = 0, upper = 0;  // rrelu: the slope range
  // moe (dims {experts, top_k, width, hidden}, p the router jitter): the capacity factor and the auxiliary loss's
  // coefficient.
  double capacityFactor = 0, auxCoef = 0;
};

}  // namespace ckpt
