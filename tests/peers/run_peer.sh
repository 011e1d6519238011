#!/usr/bin/env bash
# Runs one reference test written in Python with the Python that has the PyPI peers
# (transformers, tiktoken, safetensors, torch 2.x): build-torch2/venv, which
# `scripts/setup.sh --torch-wheel` creates.  Without it the test is skipped (exit 77,
# ctest's SKIP_RETURN_CODE) with that message.
#   run_peer.sh SCRIPT.py ARGS...
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="${QN_PEER_PYTHON:-$root/build-torch2/venv/bin/python}"
if ! "$python" -c 'import torch, transformers, tiktoken, safetensors' 2>/dev/null; then
  echo "skipped: the PyPI peers (torch, transformers, tiktoken, safetensors) are not installed for $python" \
       "(run: bash scripts/setup.sh --torch-wheel)"
  exit 77
fi
exec "$python" "$(dirname "$0")/$1" "${@:2}"
