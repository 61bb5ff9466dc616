#include <Eigen/Core>
#include <iostream>
#include <nlohmann/json.hpp>

#include "harness/build_info.h"
#include "harness/cli/commands.h"
#include "reference/gemm.h"

#if defined(CKPT_HAVE_CURAND)
#include <curand.h>
#endif
#if defined(CKPT_HAVE_CUDA_BACKEND)  // defined by linking ckpt_cuda (device/)
#include "device/gpu.h"
#endif

namespace ckpt::cli {

void addInfo(CLI::App& app, int& exitCode) {
  auto* cmd = app.add_subcommand("info", "Version, compiler, and which backends this build has");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Machine-readable output");
  cmd->callback([json, &exitCode] {
    nlohmann::json j;
    j["version"] = kVersion;
    j["git_commit"] = kGitCommit;
    j["compiler"] = kCompiler;
    j["build_type"] = kBuildType;
    j["cpu_arch"] = kCpuArch;
    j["cpu_arch_flags"] = kCpuArchFlags;
    j["eigen_simd"] = Eigen::SimdInstructionSetsInUse();  // what this binary's Eigen was compiled to use
    useOneGemmThread();                // as every run of a model does, so that "threads" is what runs use
    const GemmInfo gemm = gemmInfo();  // who computes the matrix products (CKPT_GEMM, cmake/gemm.cmake)
    j["gemm"] = {
        {"library", gemm.library}, {"config", gemm.config}, {"kernels", gemm.kernels}, {"threads", gemm.threads}};
    j["cuda_backend"] = kCudaBackend;
    int curandVersion = 0;
#if defined(CKPT_HAVE_CURAND)
    if (curandGetVersion(&curandVersion) != CURAND_STATUS_SUCCESS) curandVersion = 0;
#endif
    j["curand_version"] = curandVersion;
#if defined(CKPT_HAVE_CUDA_BACKEND)
    j["cuda"] = gpu::cudaDeviceInfo();  // devices, driver/runtime/cuRAND/cuBLAS versions, each GPU
#endif
    if (*json) {
      std::cout << j.dump(2) << "\n";
    } else {
      for (auto it = j.begin(); it != j.end(); ++it) std::cout << it.key() << ": " << it.value() << "\n";
    }
    exitCode = 0;
  });
}

}  // namespace ckpt::cli
