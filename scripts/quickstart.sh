#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: installs dependencies, builds, then
# runs what this build can do and leaves its outputs in runs/quickstart/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
bin="${QN_BUILD_DIR:-$root/build}/bin"
out="$root/runs/quickstart"
mkdir -p "$out"
config="$root/experiments/configs/vit_3d.yaml"

echo
echo "== 1. The plan: the original QuintNet ViT config (2x2x2 mesh) =="
"$bin/quintnet" check-config "$config" --world-size 8

if [ -x "$bin/quintnet-train" ]; then
  echo
  echo "== 2. Train it as data x tensor parallel 2x2 on Fashion-MNIST (4 CPU ranks, ${QN_QUICKSTART_STEPS:-300} steps)"
  "$bin/quintnet" launch --nproc 4 -- quintnet-train --config "$root/experiments/configs/vit_dp_tp.yaml" \
    --max-steps "${QN_QUICKSTART_STEPS:-300}" --threads 1 --metrics "$out/train_metrics.jsonl"
else
  echo "(quintnet-train is not in this build: LibTorch was not found)"
fi

echo
echo "== 3. Its pipeline schedule, proved and timed (1F1B, pp 4, 8 microbatches) =="
"$bin/quintnet" schedule --schedule 1f1b --pp 4 --microbatches 8 --trace "$out/schedule_1f1b.json"

echo
echo "== 4. Zero-bubble ZB-H1 on the same pipeline =="
"$bin/quintnet" schedule --schedule zb-h1 --pp 4 --microbatches 8 --trace "$out/schedule_zb_h1.json"

echo
echo "quickstart: outputs in ${out#$root/}/ (traces open in https://ui.perfetto.dev)"
