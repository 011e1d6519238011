#!/usr/bin/env bash
# Configures and builds QuintNet with Ninja and ccache into build/ (executables in
# build/bin/).  Extra arguments go to CMake, e.g. scripts/build.sh -DQN_WITH_QT=OFF.
# Modules whose dependencies are missing are switched off (see the summary printed).
# A Release build (optimised, no debug info); QN_BUILD_TYPE=RelWithDebInfo for a debugger.
#
#   bash scripts/build.sh --torch-wheel [CMAKE ARGS]
#     the second build: core and exec against the LibTorch inside PyPI's torch wheel
#     (scripts/setup.sh --torch-wheel installs it), CUDA/NCCL path included, into
#     build-torch2/cmake (executables in build-torch2/cmake/bin).  The simulator, the
#     viewer and the Python module do not use LibTorch, so this build leaves them to build/,
#     and with them the test suites without LibTorch in them (QN_TORCH_TESTS_ONLY).
#     QN_TORCH_PYTHON=python3 builds against that Python's torch instead (a GPU machine's
#     own installation: experiments/gpu/check.sh); its CUDA toolkit is then found as
#     TorchConfig finds it, unless build-torch2/cuda-root exists.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${QN_BUILD_DIR:-$root/build}"
extra=()
if [ "${1:-}" = "--torch-wheel" ]; then
  shift
  wheel="$root/build-torch2"
  python="${QN_TORCH_PYTHON:-$wheel/venv/bin/python}"
  if ! "$python" -c 'import torch' 2>/dev/null; then
    echo "build: no torch for $python (run: bash scripts/setup.sh --torch-wheel)" >&2
    exit 2
  fi
  build="${QN_BUILD_DIR:-$wheel/cmake}"
  prefix="$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
  # The suites without LibTorch in them ran in the first build: not again here.
  extra=(-DCMAKE_PREFIX_PATH="$prefix" -DQN_WITH_TORCH=ON -DQN_WITH_CUDA=ON
         -DQN_WITH_SIM=OFF -DQN_WITH_QT=OFF -DQN_WITH_PYTHON=OFF -DQN_TORCH_TESTS_ONLY=ON)
  cuda_root="$wheel/cuda-root"
  [ -d "$cuda_root" ] && extra+=(-DCUDA_TOOLKIT_ROOT_DIR="$cuda_root" -DCUDAToolkit_ROOT="$cuda_root"
                                  -DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc")
fi
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
# Keep the generator of an existing build folder.
[ -f "$build/CMakeCache.txt" ] && generator=()
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE="${QN_BUILD_TYPE:-Release}" "${extra[@]}" "$@"
cmake --build "$build" -j "$(nproc)"
echo "build: executables in ${build#$root/}/bin: $(ls "$build/bin" | tr '\n' ' ')"
