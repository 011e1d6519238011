#!/usr/bin/env bash
# The bubble check of the pipeline issue: a 1F1B run with pp 4 and 8 microbatches
# (the original ViT, 4 CPU ranks), traced over steps 2-9; the trainer prints the
# measured bubble fraction and what core's schedule statistics predict from the op
# costs the trace measured (median op times, mean message latency), and replayed with
# each op's own time.  Runs it RUNS times; prints a table and the errors.
#   [QN_BATCH=32] bash experiments/exec/bubble_pp4.sh [RUNS] [OUT_DIR]   (seconds per run)
# QN_BATCH is the global batch (micro-batch = QN_BATCH / 8).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${QN_BUILD_DIR:-$root/build}/bin"
runs="${1:-3}"
out="${2:-$root/runs/bubble_pp4}"
mkdir -p "$out"
# The original ViT config (experiments/configs/vit_3d.yaml) on a pp 4 mesh, 8 microbatches.
sed -e "s/^mesh_dim: .*/mesh_dim: [1, 1, 4]/" -e "s/^grad_acc_steps: .*/grad_acc_steps: 8/" \
    -e "s/^batch_size: .*/batch_size: ${QN_BATCH:-32}/" -e "s/^strategy_name: .*/strategy_name: 'pp'/" \
    "$root/experiments/configs/vit_3d.yaml" >"$out/pp4_1f1b.yaml"
echo "| run | measured | predicted (median op costs) | replayed (each op's time) |"
echo "|---|---|---|---|"
errors=""
for i in $(seq 1 "$runs"); do
  "$bin/quintnet" launch --nproc 4 -- quintnet-train --config "$out/pp4_1f1b.yaml" --max-steps 10 --trace-steps 8 \
    --no-eval --quiet --threads 1 --trace "$out/run$i.trace.json" >"$out/run$i.log"
  read -r measured predicted replayed < <("$bin/quintnet" bubble "$out/run$i.trace.json" --json |
    sed 's/.*"measured": \([0-9.e+-]*\), "predicted": \([0-9.e+-]*\), "replayed": \([0-9.e+-]*\).*/\1 \2 \3/')
  printf "| %d | %.4f | %.4f | %.4f |\n" "$i" "$measured" "$predicted" "$replayed"
  errors+="$measured $predicted $replayed"$'\n'
done
# |predicted - measured|: the mean, the worst run, and the runs within 0.05.
awk 'NF == 3 { n++; for (k = 2; k <= 3; k++) { e = $k - $1; if (e < 0) e = -e; s[k] += e; if (e > w[k]) w[k] = e; if (e <= 0.05) ok[k]++ } }
     END { split("predicted|replayed", name, "|");
           for (k = 2; k <= 3; k++) printf "%-10s |error| mean %.3f, worst %.3f, within 0.05 in %d of %d runs\n", name[k - 1], s[k] / n, w[k], ok[k], n }' <<<"$errors"
