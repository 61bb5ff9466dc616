# Sourced by the ci scripts: one place for paths and build settings.
CKPT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="/usr/local/cuda/bin:$PATH"
CKPT_BUILD="${CKPT_BUILD:-$CKPT_ROOT/build}"
CKPT_JOBS="${CKPT_JOBS:-$(nproc)}"

ckpt_configure_build() {
  cmake -S "$CKPT_ROOT" -B "$CKPT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$CKPT_BUILD" -j "$CKPT_JOBS"
}
