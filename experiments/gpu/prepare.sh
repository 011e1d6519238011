#!/usr/bin/env bash
# Run HERE (the Debian machine) before sending the tree to a GPU machine: copies the
# header-only dependencies core needs into .deps/ (git-ignored), which the device
# tool carries: run(..., carry=[".deps"]).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$root/.deps/include"
cp -r /usr/include/nlohmann "$root/.deps/include/"
echo "prepare: .deps/include/nlohmann ready; carry .deps to the GPU machine"
