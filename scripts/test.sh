#!/usr/bin/env bash
# All set-up and all tests on a fresh Debian 12 machine: installs dependencies,
# builds, runs every test suite under ctest.  .ci/run calls exactly this.
#   1. Debian's LibTorch 1.13 (build/): every suite, the reference tests against
#      tiktoken and Hugging Face included; then the installation (tests/install/:
#      cmake --install, the .deb, a find_package(QuintNet) project).
#   2. PyPI's torch 2.15 wheel (build-torch2/cmake/): the suites that run on LibTorch again
#      (exec, multinode, the Hugging Face references; QN_TORCH_TESTS_ONLY) but the heavy
#      ones tests/libtorch2_not_rerun.txt names,
#      the CUDA/NCCL path compiled and linked (its GPU check skips without a GPU).
#   3. The sanitizer build (build-asan/, clang, ASan + UBSan): the core, sim, visualizer
#      and text suites again, and 10 s of each libFuzzer target (scripts/sanitize.sh).
# QN_TEST_TORCH_WHEEL=0 leaves out the second build (and the PyPI download, ~4 GB).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
wheel="${QN_TEST_TORCH_WHEEL:-1}"
wheel_ready=0
# Each phase's end says how long the run has taken so far (CI must stay under 45 minutes).
took() { echo "test: $1 done, $((SECONDS / 60)) min $((SECONDS % 60)) s since the start"; }

# Disk: a full run needs ~14 GB beside the sources (build/ ~3 GB, build-torch2/ ~9 GB with
# the CUDA wheel, build-asan/ and the tests' files ~1 GB; ~5 GB without the wheel). Say so
# now rather than fail in a linker 20 minutes in. Build folders already here count as room.
need_gb=14
[ "$wheel" = 1 ] || need_gb=5
free_kb="$(df -Pk "$root" | awk 'NR == 2 { print $4 }')"
built_kb=0
for d in "$root/build" "$root/build-torch2" "$root/build-asan"; do
  [ -d "$d" ] && built_kb=$((built_kb + $(du -sk "$d" | cut -f1)))
done
if [ $(((free_kb + built_kb) / 1048576)) -lt "$need_gb" ]; then
  hint=""
  [ "$wheel" = 1 ] && hint=" (QN_TEST_TORCH_WHEEL=0 leaves out the 9 GB second build)"
  echo "test: only $((free_kb / 1048576)) GB free on the disk of $root; the tests need ~$need_gb GB$hint" >&2
  exit 1
fi

if [ "$wheel" = 1 ]; then
  if bash "$root/scripts/setup.sh" --torch-wheel; then
    wheel_ready=1
  else
    status=$?
    [ "$status" = 3 ] || exit "$status"
    # PyPI unreachable: the Debian build still runs; the summary says what did not.
    echo "test: WARNING: torch wheel not installed; the LibTorch 2.x build and the reference tests will not run"
  fi
else
  bash "$root/scripts/setup.sh"
fi

took "set-up"
bash "$root/scripts/build.sh"
took "build"
(cd "${QN_BUILD_DIR:-$root/build}" && ctest --output-on-failure --timeout 900 -j "$(nproc)")
took "tests"
# The installation (cmake --install, the .deb, find_package downstream): it moves the
# build tree away while it runs, so after ctest, never beside it.
bash "$root/tests/install/install_test.sh" "${QN_BUILD_DIR:-$root/build}"
took "installation tests"

if [ "$wheel_ready" = 1 ]; then
  echo "test: second build, LibTorch $("$root/build-torch2/venv/bin/python" -c 'import torch; print(torch.__version__)')"
  # No benchmarks here: they ran in the first build, and experiments/gpu/check.sh builds its own.
  QN_BUILD_DIR= bash "$root/scripts/build.sh" --torch-wheel -DQN_BUILD_BENCHMARKS=OFF
  took "LibTorch 2.x build"
  # Not repeated here: the heavy suites tests/libtorch2_not_rerun.txt lists, each with the
  # lighter test that covers it on this build. A name there that no longer exists stops
  # the run, so the list cannot quietly go stale.
  build2="$root/build-torch2/cmake"
  not_rerun="$(grep -v '^#' "$root/tests/libtorch2_not_rerun.txt" | awk 'NF { print $1 }')"
  listed="$(cd "$build2" && ctest -N | sed -n 's/^ *Test *#[0-9]*: //p')"
  for name in $not_rerun; do
    grep -qxF "$name" <<< "$listed" ||
      { echo "test: tests/libtorch2_not_rerun.txt names $name, which this build does not have" >&2; exit 1; }
  done
  (cd "$build2" && ctest --output-on-failure --timeout 900 -j "$(nproc)" \
    -E "^($(tr '\n' '|' <<< "$not_rerun" | sed 's/|$//; s/\./\\./g'))\$")
  took "LibTorch 2.x tests"
else
  echo "test: LibTorch 2.x build NOT run (QN_TEST_TORCH_WHEEL=0 or PyPI unreachable)"
fi

echo "test: sanitizer build (ASan + UBSan) and fuzzers"
bash "$root/scripts/sanitize.sh"
took "sanitizer build and fuzzers"
