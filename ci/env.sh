# Sourced by the ci scripts: one place for paths and build settings.
CKPT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="/usr/local/cuda/bin:$PATH"
CKPT_BUILD="${CKPT_BUILD:-$CKPT_ROOT/build}"
CKPT_JOBS="${CKPT_JOBS:-$(nproc)}"
# OpenBLAS's pthread build (cmake/gemm.cmake) starts a thread per core when it loads, and each spins about 0.1 s
# before it sleeps; ckptcheck then runs every product on the calling thread. Told at load that it has one thread,
# it starts none: about 0.05 s of CPU less for each of the suite's ~900 processes.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"

# Runs a command and then prints "ci/test: NAME N s", whether it passed or not (CI's time is budgeted per step).
ckpt_timed() {
  local name="$1" t0 rc=0
  shift
  t0=$(date +%s)
  "$@" || rc=$?
  echo "ci/test: $name $(( $(date +%s) - t0 )) s"
  return $rc
}

# ccache, where installed, compiles each object once for the tree's build and the wheel's (build-wheel/, CTest
# wheel_install_pytest): paths relative to the checkout, so that the two build folders share entries.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$CKPT_ROOT}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
CKPT_LAUNCHER=()
command -v ccache >/dev/null && CKPT_LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)

ckpt_configure_build() {
  cmake -S "$CKPT_ROOT" -B "$CKPT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "${CKPT_LAUNCHER[@]}" "$@" >/dev/null
  cmake --build "$CKPT_BUILD" -j "$CKPT_JOBS"
}

# The ASan + UBSan build (clang, -O1, assertions on) of the given targets: ci/sanitize and ci/fuzz share it.
CKPT_SANITIZE_BUILD="${CKPT_SANITIZE_BUILD:-$CKPT_ROOT/build-sanitize}"
ckpt_configure_sanitize_build() {
  cmake -S "$CKPT_ROOT" -B "$CKPT_SANITIZE_BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCKPT_SANITIZE=ON -DCKPT_FUZZ=ON \
    -DCKPT_CUDA=OFF -DCKPT_BUILD_BENCH=OFF -DCKPT_WERROR=OFF >/dev/null
  cmake --build "$CKPT_SANITIZE_BUILD" -j "$CKPT_JOBS" --target "$@"
}
