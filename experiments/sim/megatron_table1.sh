#!/usr/bin/env bash
# Published runs against the simulator: the ten GPT runs of Narayanan et al. 2021,
# "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
# Table 1 (1.7B to 1T parameters on 32 to 3,072 A100s of Selene: DGX-A100 nodes),
# simulated from the table's own configuration on the dgx-a100 preset (efficiency 0.5,
# chosen before this comparison and not changed for it) with full activation
# recomputation, as the paper trains them.  The table gives no micro-batch size or
# schedule: micro-batch 1 throughout, and each row both with 1F1B and with the
# interleaved schedule (2 chunks per rank where the layers divide).  "Achieved TFLOP/s per
# GPU" is the paper's own count, 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) over the step
# time and the GPUs — the FLOPs the simulator's cost model executes.
#   bash experiments/sim/megatron_table1.sh [PLATFORM]   (~1 min on 2 cores)
# PLATFORM (default dgx-a100): a preset or JSON file, e.g. the what-if
# experiments/sim/platforms/dgx_a100_best_matmul.json (the best matrix-product rate
# measured on an A100 instead of the preset's 50%).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${QN_BUILD_DIR:-$root/build}/bin"
platform="${1:-dgx-a100}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# billions, heads, hidden, layers, tp, pp, GPUs, batch, published TFLOP/s per GPU
rows=(
  "1.7 24 2304 24 1 1 32 512 137"
  "3.6 32 3072 30 2 1 64 512 138"
  "7.5 32 4096 36 4 1 128 512 142"
  "18.4 48 6144 40 8 1 256 1024 135"
  "39.1 64 8192 48 8 2 512 1536 138"
  "76.1 80 10240 60 8 4 1024 1792 140"
  "145.6 96 12288 80 8 8 1536 2304 148"
  "310.1 128 16384 96 8 16 1920 2160 155"
  "529.6 128 20480 105 8 35 2520 2520 163"
  "1008.0 160 25600 128 8 64 3072 3072 163"
)

# Prints the simulated step time of one row under `schedule` (1f1b or interleaved), or "-".
simulate_row() {
  local heads=$1 hidden=$2 layers=$3 tp=$4 pp=$5 gpus=$6 batch=$7 schedule=$8
  local dp=$((gpus / (tp * pp))) chunks=1
  [ "$schedule" = interleaved ] && chunks=2
  if [ "$schedule" = interleaved ] && { [ "$pp" = 1 ] || [ $((layers % (pp * chunks))) != 0 ]; }; then
    echo "-"
    return
  fi
  local plan="$work/plan_${hidden}_$schedule.yaml"
  cat >"$plan" <<YAML
model: gpt2
model_config: {vocab_size: 51200, n_positions: 2048, n_embd: $hidden, n_layer: $layers, n_head: $heads}
max_seq_length: 2048
batch_size: $batch
grad_acc_steps: $((batch / dp))
device_type: cuda
mesh_dim: [$dp, $tp, $pp]
mesh_name: [dp, tp, pp]
schedule: $schedule
virtual_stages: $chunks
recompute: full
YAML
  local json
  json=$("$bin/quintnet-simulate" --config "$plan" --seq 2048 --platform "$platform" --nodes $(((gpus + 7) / 8)) \
    --json) || exit 2  # quintnet simulate has said why
  python3 -c 'import json, sys; print(json.load(sys.stdin)["step_time_s"])' <<<"$json"
}

echo "| params | t × p × d | GPUs | batch | published TFLOP/s/GPU | 1F1B: step | predicted | error | interleaved: step | predicted | error |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
  read -r billions heads hidden layers tp pp gpus batch published <<<"$row"
  echo "simulating ${billions}B on $gpus GPUs ..." >&2
  plain=$(simulate_row "$heads" "$hidden" "$layers" "$tp" "$pp" "$gpus" "$batch" 1f1b)
  inter=$(simulate_row "$heads" "$hidden" "$layers" "$tp" "$pp" "$gpus" "$batch" interleaved)
  python3 - "$billions" "$hidden" "$layers" "$tp" "$pp" "$gpus" "$batch" "$published" "$plain" "$inter" <<'PY'
import sys
billions, h, l, t, p, n, B, published, plain, inter = sys.argv[1:]
h, l, t, p, n, B, published = int(h), int(l), int(t), int(p), int(n), int(B), float(published)
s, V = 2048, 51200
flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
def cells(step):
    if step == "-":
        return "— | — | —"
    tflops = flops / (float(step) * n) / 1e12
    return f"{float(step):.2f} s | {tflops:.0f} | {100 * (tflops - published) / published:+.1f}%"
print(f"| {billions}B | {t} × {p} × {n // (t * p)} | {n} | {B} | {published:.0f} | {cells(plain)} | {cells(inter)} |")
PY
done
