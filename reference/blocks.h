// Blocks from a case: each block kind (cases/kinds/) states its program as op nodes; the op table
// (reference/op_table.h) builds each node's op. cases/SCHEMA.md describes the kinds.
#pragma once
#include <string>

#include "cases/block_kind.h"
#include "cases/case_spec.h"
#include "reference/block.h"
#include "reference/op_table.h"

namespace ckpt {

// Builds block `index` of a case; parameter names are prefixed "b<index>.".
template <class T>
Block<T> makeBlock(const BlockSpec& s, const CaseSpec& c, int index) {
  const BlockKindDef& def = *s.kind;
  const std::string p = "b" + std::to_string(index) + ".";
  Block<T> b;
  b.kind = def.name;
  for (const OpNode& n : def.program(s, c))
    b.nodes.push_back(Node<T>{p + n.name, makeOp<T>(n, p + n.name), n.inputs, n});
  return b;
}

}  // namespace ckpt
