#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: installs dependencies, builds, trains
# the original QuintNet ViT config (2x2x2 mesh: data x tensor x pipeline parallel) on
# Fashion-MNIST with 8 CPU ranks, traces it, renders the traced timeline, and shows
# its pipeline schedule.
#   bash scripts/quickstart.sh           a short run (QN_STEPS optimizer steps, default 200)
#   bash scripts/quickstart.sh --full    the config's full 10 epochs on Fashion-MNIST (~1 h on 2 cores)
#   bash scripts/quickstart.sh --mnist   the same 10 epochs on MNIST, the original's own data
#                                        (its README: 93.24% validation accuracy)
# Outputs in runs/quickstart/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
full=0
config="$root/experiments/configs/vit_3d.yaml"
case "${1:-}" in
  "") ;;
  --full) full=1 ;;
  --mnist) full=1; config="$root/experiments/configs/vit_mnist_3d.yaml" ;;
  *) echo "quickstart: unknown option '$1' (known: --full, --mnist)" >&2; exit 2 ;;
esac
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
bin="${QN_BUILD_DIR:-$root/build}/bin"
out="$root/runs/quickstart"
mkdir -p "$out"

echo
echo "== 1. The plan: the original QuintNet ViT config (2x2x2 mesh) =="
"$bin/quintnet" check-config "$config" --world-size 8

if [ -x "$bin/quintnet-train" ]; then
  budget=(--max-steps "${QN_STEPS:-200}")
  [ "$full" = 1 ] && budget=()
  echo
  echo "== 2. Train it: 8 CPU ranks (dp 2 x tp 2 x pp 2, 1F1B), $(sed -n 's/^dataset_path: *\([^ ]*\).*/\1/p' "$config") =="
  "$bin/quintnet" launch --nproc 8 -- quintnet-train --config "$config" "${budget[@]}" --threads 1 \
    --metrics "$out/train_metrics.jsonl" --trace "$out/train_trace.json"
else
  echo "(quintnet-train is not in this build: LibTorch was not found)"
fi

if [ -x "$bin/quintnet-render" ] && [ -f "$out/train_trace.json" ]; then
  echo
  echo "== 2b. Render the traced training step: one lane per rank, bubbles, messages =="
  "$bin/quintnet" render "$out/train_trace.json" --step 2 -o "$out/train_timeline.png"
fi

if [ -x "$bin/quintnet-simulate" ]; then
  echo
  echo "== 2c. Simulate the same plan with SimGrid: calibrated from this run, then on a DGX-A100 =="
  if [ -f "$out/train_trace.json" ]; then
    "$bin/quintnet" calibrate --trace "$out/train_trace.json" -o "$out/calibration.json"
    "$bin/quintnet" simulate --config "$config" --calibration "$out/calibration.json" \
      --measured "$out/train_trace.json" --trace "$out/sim_trace.json"
  else
    "$bin/quintnet" simulate --config "$config" --platform cpu-local --trace "$out/sim_trace.json"
  fi
  "$bin/quintnet" simulate --config "$config" --platform dgx-a100
  if [ -x "$bin/quintnet-render" ]; then
    "$bin/quintnet" render "$out/sim_trace.json" -o "$out/sim_timeline.png"
  fi
fi

echo
echo "== 3. The 1F1B schedule those 2 pipeline stages ran, and a deeper pipeline (pp 4, 8 microbatches) =="
"$bin/quintnet" schedule --schedule 1f1b --pp 2 --microbatches 2
"$bin/quintnet" schedule --schedule 1f1b --pp 4 --microbatches 8 --trace "$out/schedule_1f1b.json"

echo
echo "== 4. Zero-bubble ZB-H1 on the same pipeline =="
"$bin/quintnet" schedule --schedule zb-h1 --pp 4 --microbatches 8 --trace "$out/schedule_zb_h1.json"
if [ -x "$bin/quintnet-render" ]; then
  "$bin/quintnet" render "$out/schedule_1f1b.json" --compare "$out/schedule_zb_h1.json" -o "$out/compare_1f1b_zb_h1.png"
fi

echo
echo "quickstart: outputs in ${out#$root/}/: train_metrics.jsonl, train_trace.json (also opens in"
echo "https://ui.perfetto.dev), train_timeline.png, sim_trace.json, sim_timeline.png, compare_1f1b_zb_h1.png"
