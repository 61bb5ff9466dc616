// The precision of a case's matrix products, the one home of "compute" (cases/SCHEMA.md): "exact" computes in
// the case's dtype; "bf16" (dtype float only) rounds every matrix product's operands to bfloat16 (round to
// nearest even) and accumulates in float, with float master weights: what torch.autocast(dtype=bfloat16) does to
// a Linear's inputs. Every forward and every recompute runs under it (reference/op.h Numerics::bf16Inputs); a
// recompute under another precision is the bug class of fairscale issue 1199 and PyTorch issues 141896 / 159359.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "cases/case_spec.h"

namespace ckpt {

inline bool bf16Compute(const CaseSpec& c) { return c.compute == Compute::kBf16; }

// Parses "compute" from a case object whose dtype is already read (InputError naming the field: bf16 with
// double), and prints it only when bf16, so older cases print as they did.
void parseCompute(const nlohmann::json& j, CaseSpec& c);
void printCompute(const CaseSpec& c, nlohmann::json& j);
// What a case text adds: ", bf16 compute" (empty otherwise).
std::string computeText(const CaseSpec& c);

// Random cases: bf16 in 30% of the float cases (a permille draw from 700 on), so shrinking ends at exact.
void applyComputeDraw(CaseSpec& c, int draw, bool enabled);
// After a simplification that may have changed the dtype: bf16 is dropped with double.
void fixCompute(CaseSpec& c);

}  // namespace ckpt
