#!/usr/bin/env bash
# Training throughput of serial, DP=2, TP=2 and DP×TP=2×2 at the same global batch
# (the original ViT config: batch 32, 2 microbatches), one intra-op thread per rank.
# Prints a Markdown table; ratios are against the serial run of the same script.
#   bash experiments/exec/throughput.sh [STEPS]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${QN_BUILD_DIR:-$root/build}/bin"
steps="${1:-60}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

run() { # run NAME MESH NPROC -> samples/s
  sed "s/^mesh_dim: .*/mesh_dim: $2/" "$root/experiments/configs/vit_3d.yaml" > "$tmp/$1.yaml"
  "$bin/quintnet-launch" --nproc "$3" -- "$bin/quintnet-train" --config "$tmp/$1.yaml" --max-steps "$steps" \
    --no-eval --quiet --threads 1 --metrics "$tmp/$1.jsonl" > "$tmp/$1.log" 2>&1
  # Skip the first 10 steps (allocation, first-touch) in the rate.
  python3 - "$tmp/$1.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
a, b = rows[9], rows[-1]
# samples_per_s is cumulative: recover the time of steps 11..N from it.
t_a = a["step"] * 32 / a["samples_per_s"]; t_b = b["step"] * 32 / b["samples_per_s"]
print(f"{(b['step'] - a['step']) * 32 / (t_b - t_a):.1f}")
PY
}

echo "| layout | ranks | samples/s | vs serial |"
echo "|---|---|---|---|"
serial=$(run serial "[1, 1, 1]" 1)
echo "| serial | 1 | $serial | 1.00 |"
for spec in "dp2:[2, 1, 1]:2" "tp2:[1, 2, 1]:2" "dp2xtp2:[2, 2, 1]:4"; do
  IFS=: read -r name mesh n <<< "$spec"
  rate=$(run "$name" "$mesh" "$n")
  echo "| $name | $n | $rate | $(python3 -c "print(f'{$rate / $serial:.2f}')") |"
done
