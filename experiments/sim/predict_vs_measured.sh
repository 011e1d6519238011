#!/usr/bin/env bash
# Prediction against reality on this machine: run seven executor configurations of the
# original ViT (global batch 32, 24 steps, steps 2-21 traced), calibrate the simulator
# from ONE run (the first 2x2x2 run), predict the step time of all seven, and print
# predicted vs measured with the mean absolute percentage error over the six others;
# then the same error calibrating from each configuration's first run in turn.
# Every configuration is measured ROUNDS times (default 2), the rounds one after the
# other over all seven, and "measured" is the mean: this machine drifts by 5-30% over
# minutes, and one run of each would compare predictions with that drift.
#   bash experiments/sim/predict_vs_measured.sh [OUT_DIR] [ROUNDS]      (~1.3 min a round)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${QN_BUILD_DIR:-$root/build}/bin"
out="${1:-$root/runs/predict}"
rounds="${2:-2}"
mkdir -p "$out"

# name  mesh(dp,tp,pp)  microbatches  schedule
configs=(
  "serial 1,1,1 1 1f1b"
  "dp2 2,1,1 1 1f1b"
  "tp2 1,2,1 1 1f1b"
  "pp2_afab 1,1,2 4 afab"
  "pp2_1f1b 1,1,2 4 1f1b"
  "pp4_1f1b 1,1,4 8 1f1b"
  "3d_2x2x2 2,2,2 2 1f1b"
)
calibrate_from="3d_2x2x2"

for c in "${configs[@]}"; do
  read -r name mesh m schedule <<<"$c"
  IFS=, read -r dp tp pp <<<"$mesh"
  cat >"$out/$name.yaml" <<YAML
batch_size: 32
grad_acc_steps: $m
learning_rate: 1e-4
img_size: 28
patch_size: 4
hidden_dim: 64
n_heads: 4
depth: 8
mesh_dim: [$dp, $tp, $pp]
mesh_name: ['dp', 'tp', 'pp']
schedule: $schedule
YAML
done
for round in $(seq 1 "$rounds"); do
  for c in "${configs[@]}"; do
    read -r name mesh _ <<<"$c"
    IFS=, read -r dp tp pp <<<"$mesh"
    trace="$out/$name.r$round.trace.json"
    if [ ! -f "$trace" ]; then
      echo "== measuring $name (round $round of $rounds)" >&2
      "$bin/quintnet" launch --nproc $((dp * tp * pp)) -- quintnet-train --config "$out/$name.yaml" \
        --max-steps 24 --trace-steps 20 --no-eval --quiet --threads 1 --trace "$trace" >"$out/$name.r$round.log"
    fi
  done
done

names=()
for c in "${configs[@]}"; do read -r name _ <<<"$c"; names+=("$name"); done
# One calibration per run: the headline table uses the 2x2x2 one, the matrix all of them.
for name in "${names[@]}"; do
  "$bin/quintnet" calibrate --trace "$out/$name.r1.trace.json" -o "$out/calib_$name.json" >/dev/null
done

# predict NAME CALIBRATION -> "measured predicted" step times in seconds (measured: the
# mean over the rounds)
predict() {
  local json measured=0 predicted
  for round in $(seq 1 "$rounds"); do
    json=$("$bin/quintnet" simulate --config "$out/$1.yaml" --calibration "$2" --measured "$out/$1.r$round.trace.json" --json)
    measured=$(awk -v s="$measured" -v m="$(sed -n 's/.*"measured_step_time_s": *\([0-9.e+-]*\).*/\1/p' <<<"$json")" \
      -v n="$rounds" 'BEGIN { printf "%.9g", s + m / n }')
    predicted=$(sed -n 's/.*"step_time_s": *\([0-9.e+-]*\).*/\1/p' <<<"$json" | tail -n 1)
  done
  echo "$measured $predicted"
}

echo "| config | measured step (ms, mean of $rounds runs) | predicted (ms) | error |"
echo "|---|---|---|---|"
sum=0; count=0
for c in "${configs[@]}"; do
  read -r name _ <<<"$c"
  read -r measured predicted <<<"$(predict "$name" "$out/calib_$calibrate_from.json")"
  row=$(awk -v m="$measured" -v p="$predicted" 'BEGIN { e = 100 * (p - m) / m; printf "%.1f | %.1f | %+.1f%%", 1000 * m, 1000 * p, e }')
  note=""
  if [ "$name" = "$calibrate_from" ]; then note=" (calibrated from its first run)"; else
    sum=$(awk -v s="$sum" -v m="$measured" -v p="$predicted" 'BEGIN { d = (p - m) / m; if (d < 0) d = -d; print s + 100 * d }')
    count=$((count + 1))
  fi
  echo "| $name$note | $row |"
done
awk -v s="$sum" -v n="$count" 'BEGIN { printf "\nmean absolute percentage error over the %d other configurations: %.1f%%\n", n, s / n }'

echo
echo "calibrating from each configuration's first run in turn (error predicting every configuration; MAPE over the six others):"
header="| calibrated from |"; rule="|---|"
for name in "${names[@]}"; do header="$header $name |"; rule="$rule---|"; done
echo "$header MAPE |"; echo "$rule---|"
for from in "${names[@]}"; do
  row="| $from |"; sum=0
  for name in "${names[@]}"; do
    read -r measured predicted <<<"$(predict "$name" "$out/calib_$from.json")"
    e=$(awk -v m="$measured" -v p="$predicted" 'BEGIN { printf "%+.1f", 100 * (p - m) / m }')
    row="$row $e% |"
    [ "$name" = "$from" ] || sum=$(awk -v s="$sum" -v e="$e" 'BEGIN { if (e < 0) e = -e; print s + e }')
  done
  echo "$row $(awk -v s="$sum" -v n=$((${#names[@]} - 1)) 'BEGIN { printf "%.1f%%", s / n }') |"
done
