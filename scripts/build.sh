#!/usr/bin/env bash
# Configures and builds QuintNet with Ninja and ccache into build/ (executables in
# build/bin/).  Extra arguments go to CMake, e.g. scripts/build.sh -DQN_WITH_QT=OFF.
# Modules whose dependencies are missing are switched off (see the summary printed).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${QN_BUILD_DIR:-$root/build}"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
# Keep the generator of an existing build folder.
[ -f "$build/CMakeCache.txt" ] && generator=()
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE="${QN_BUILD_TYPE:-RelWithDebInfo}" "$@"
cmake --build "$build" -j "$(nproc)"
echo "build: executables in ${build#$root/}/bin: $(ls "$build/bin" | tr '\n' ' ')"
