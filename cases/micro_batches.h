// Gradient accumulation over micro-batches: the one home of the rules of a case's "micro_batches"
// (cases/SCHEMA.md). The reference trainer, both executor backends, the planner, the case directory handed to
// adapters and the generators follow these.
//
// A step with M micro-batches runs forward and backward M times, on rows [m R/M, (m+1) R/M) of the input and
// targets (R = batch * seq, so each slice holds whole sequences), with each micro-batch's loss divided by M, as
// `(loss_fn(model(x_m), y_m) / M).backward()` does in a training loop. Within a micro-batch, the gradients of a
// parameter several blocks use add up as without micro-batches (cases/param_sharing.h); the micro-batches' sums
// then accumulate into the step's gradient in micro-batch order, the first taken as it is (g = g_0, then
// g += g_1, ...: a framework's .grad, set by the first backward and added to by the next). The step's loss is
// the same left fold of the M divided losses, the input gradient the micro-batches' slices stacked. BatchNorm
// normalises each micro-batch by its own statistics and moves its running statistics once per micro-batch; one
// generator runs through the micro-batches in order, and under the counter-based model a micro-batch is keyed as
// step `microStep`.
#pragma once
#include <cstdint>
#include <string>

#include "cases/case_spec.h"

namespace ckpt {

// The first row of micro-batch m (each has c.microRows() rows).
inline int64_t microBatchFirstRow(const CaseSpec& c, int m) { return static_cast<int64_t>(m) * c.microRows(); }

// The step number micro-batch m of step `step` is keyed as by the counter-based generator model: steps of M
// micro-batches number their micro-batches consecutively (step * M + m), so no two share an op key, and a case
// without micro-batches keeps its keys.
inline int microStep(const CaseSpec& c, int step, int m) { return step * static_cast<int>(c.microBatches) + m; }

// What a case text adds: ", 2 micro-batches" (empty without).
std::string microBatchText(const CaseSpec& c);

bool hasMicroBatches(const CaseSpec& c);

// The smallest change that makes the field consistent after a simplification changed the batch: micro-batches
// that no longer divide it are turned off.
void fixMicroBatches(CaseSpec& c);

// Random cases: from a permille draw, 30% of the cases whose batch has a divisor above one accumulate over one of
// those divisors. The map is monotone, so shrinking turns the feature off.
void applyMicroBatchDraw(CaseSpec& c, int draw, bool enabled);

}  // namespace ckpt
