// The reference model's entry points for both scalars, compiled once (chain.h and trainer.h declare them extern).
#include "reference/chain.h"
#include "reference/trainer.h"

namespace ckpt {

template Chain<float> buildChain<float>(const CaseSpec&);
template Chain<double> buildChain<double>(const CaseSpec&);
template StepResult<float> referenceStep<float>(Chain<float>&, int, StepResults);
template StepResult<double> referenceStep<double>(Chain<double>&, int, StepResults);
template std::vector<StepResult<float>> trainReference<float>(Chain<float>&, int);
template std::vector<StepResult<double>> trainReference<double>(Chain<double>&, int);

}  // namespace ckpt
