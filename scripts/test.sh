#!/usr/bin/env bash
# All set-up and all tests on a fresh Debian 12 machine: installs dependencies,
# builds, runs every test suite under ctest.  .ci/run calls exactly this.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
cd "${QN_BUILD_DIR:-$root/build}"
ctest --output-on-failure --timeout 900
