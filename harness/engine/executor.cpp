// The executor for both scalars, compiled once (executor.h declares these extern).
#include "harness/engine/executor.h"

namespace ckpt {

template StepResult<float> executeStep<float>(Chain<float>&, const Schedule&, int, const EngineVariant&,
                                              ExecutorTimes*);
template StepResult<double> executeStep<double>(Chain<double>&, const Schedule&, int, const EngineVariant&,
                                                ExecutorTimes*);
template std::vector<StepResult<float>> executeSteps<float>(Chain<float>&, const Schedule&, int, const EngineVariant&,
                                                            ExecutorTimes*);
template std::vector<StepResult<double>> executeSteps<double>(Chain<double>&, const Schedule&, int,
                                                              const EngineVariant&, ExecutorTimes*);

}  // namespace ckpt
