#include "reference/gemm.h"

#include <Eigen/Core>

#if defined(CKPT_GEMM_OPENBLAS)
// OpenBLAS's own entry points (its cblas.h would also declare the C BLAS interface, which nothing here uses).
extern "C" {
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);
int openblas_get_parallel(void);
char* openblas_get_config(void);
char* openblas_get_corename(void);
}
#endif

namespace ckpt {

GemmInfo gemmInfo() {
  GemmInfo g;
#if defined(CKPT_GEMM_OPENBLAS)
  g.library = "openblas";
  g.config = openblas_get_config();
  g.kernels = openblas_get_corename();
  g.threads = openblas_get_num_threads();
  g.threaded = openblas_get_parallel() != 0;
#else
  g.library = "eigen";
  g.config = "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
             std::to_string(EIGEN_MINOR_VERSION);
  g.kernels = Eigen::SimdInstructionSetsInUse();
  g.threads = 1;  // Eigen's products are multithreaded only under OpenMP, which this build does not enable
  g.threaded = false;
#endif
  return g;
}

void useOneGemmThread() {
#if defined(CKPT_GEMM_OPENBLAS)
  // A function-local static: the first caller sets it, concurrent callers wait for that, later calls cost a load.
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
#endif
}

}  // namespace ckpt
