#!/usr/bin/env bash
# The second LibTorch: PyPI's torch wheel (a CUDA build, with its LibTorch, headers and
# CMake config inside) in a virtual environment under build-torch2/, plus the Python
# peers the reference tests and benchmarks use (transformers, tiktoken, safetensors).
# Called by `scripts/setup.sh --torch-wheel`; idempotent.
#
# The wheel's TorchConfig.cmake insists on a CUDA toolkit with nvcc.  NVIDIA publishes
# the pieces on PyPI too: the wheel already pulls the runtime, cuBLAS, NCCL, ... and we
# add nvcc, its crt headers and NVVM of the same CUDA version.  Those packages lay the
# files out as nvidia/cu13/{bin,include,lib} without the unversioned .so names a linker
# wants, so build-torch2/cuda-root is a toolkit-shaped folder of links into them.
#
# Exit status: 0 ready, 3 PyPI could not be reached or the install failed (the caller
# reports the 2.x build as not run), anything else a bug.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/build-torch2"
venv="$dir/venv"
torch_version="${QN_TORCH_VERSION:-2.15.0}"
stamp="$dir/.wheel-ready-$torch_version"
[ -f "$stamp" ] && { echo "setup: torch $torch_version wheel ready in ${venv#$root/}"; exit 0; }

mkdir -p "$dir"
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
pip=("$venv/bin/pip" install --progress-bar off --disable-pip-version-check)
echo "setup: installing torch $torch_version, transformers, tiktoken, safetensors into ${venv#$root/} (~4 GB, CUDA libraries included)"
"${pip[@]}" "torch==$torch_version" transformers tiktoken safetensors ||
  { echo "setup: could not install torch $torch_version from PyPI" >&2; exit 3; }

# nvcc, crt and NVVM of exactly the CUDA runtime the wheel brought (a newer NVVM's PTX
# is rejected by an older ptxas).
cuda="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("nvidia-cuda-runtime"))')"
cuda="${cuda%.*}"  # 13.2.86
"${pip[@]}" "nvidia-cuda-nvcc==$cuda.*" "nvidia-cuda-crt==$cuda.*" "nvidia-nvvm==$cuda.*" ||
  { echo "setup: could not install nvcc $cuda from PyPI" >&2; exit 3; }

site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
major="${cuda%%.*}"
cuda_root="$dir/cuda-root"
rm -rf "$cuda_root"
mkdir -p "$cuda_root/lib"
for d in bin include nvvm; do ln -s "$site/nvidia/cu$major/$d" "$cuda_root/$d"; done
ln -s lib "$cuda_root/lib64"
for lib in "$site"/nvidia/*/lib/*; do
  name="$(basename "$lib")"
  ln -sf "$lib" "$cuda_root/lib/$name"
  case "$name" in *.so.*) ln -sf "$lib" "$cuda_root/lib/${name%%.so.*}.so" ;; esac
done
touch "$stamp"
echo "setup: torch $torch_version (CUDA $cuda) ready; build with: bash scripts/build.sh --torch-wheel"
