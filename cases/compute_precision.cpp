#include "cases/compute_precision.h"

#include "cases/json_fields.h"

namespace ckpt {

void parseCompute(const nlohmann::json& j, CaseSpec& c) {
  c.compute = json_fields::getEnum<Compute>(j, "compute", "compute", Compute::kExact,
                                            {{"exact", Compute::kExact}, {"bf16", Compute::kBf16}});
  if (c.compute == Compute::kBf16 && c.dtype != DType::kFloat)
    json_fields::fail("compute", "bf16 needs \"dtype\": \"float\" (float master weights and accumulation; got " +
                                     std::string(dtypeName(c.dtype)) + ")");
}

void printCompute(const CaseSpec& c, nlohmann::json& j) {
  if (bf16Compute(c)) j["compute"] = "bf16";
}

std::string computeText(const CaseSpec& c) { return bf16Compute(c) ? ", bf16 compute" : ""; }

void applyComputeDraw(CaseSpec& c, int draw, bool enabled) {
  c.compute = enabled && c.dtype == DType::kFloat && draw >= 700 ? Compute::kBf16 : Compute::kExact;
}

void fixCompute(CaseSpec& c) {
  if (c.dtype != DType::kFloat) c.compute = Compute::kExact;
}

}  // namespace ckpt
