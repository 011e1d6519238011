#!/usr/bin/env bash
# What full activation recomputation costs, measured against what the simulator predicts:
# the original ViT on a 2-stage 1F1B pipeline (2 ranks, 4 microbatches of 8), trained and
# traced with and without `recompute: full`; the simulator is calibrated from the run
# without (quintnet calibrate) and predicts both.  Prints the step times (each trace's
# median step) and the ratios; ROUNDS rounds (default 2), alternating the two plans,
# since this machine drifts over minutes.
#   bash experiments/exec/recompute_cost.sh [OUT_DIR] [ROUNDS]       (~1 min a round)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${QN_BUILD_DIR:-$root/build}/bin"
out="${1:-$root/runs/recompute_cost}"
rounds="${2:-2}"
mkdir -p "$out"

plan() {  # plan NAME EXTRA
  sed -e 's/^mesh_dim:.*/mesh_dim: [1, 1, 2]/' -e 's/^grad_acc_steps:.*/grad_acc_steps: 4/' \
      -e "s/^strategy_name:.*/strategy_name: 'pp'/" "$root/experiments/configs/vit_3d.yaml" >"$out/$1.yaml"
  printf '%s' "$2" >>"$out/$1.yaml"
}
plan none ""
plan full "recompute: full
"

median_step() { "$bin/quintnet-simulate" --config "$out/none.yaml" --calibration "$out/calibration.json" \
                  --measured "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["measured_step_time_s"])'; }

for r in $(seq "$rounds"); do
  for p in none full; do
    echo "round $r: training $p ..." >&2
    "$bin/quintnet" launch --nproc 2 -- quintnet-train --config "$out/$p.yaml" --max-steps 24 --trace-steps 20 --no-eval --quiet \
      --threads 1 --trace "$out/${p}_$r.json" >"$out/${p}_$r.log"
  done
done
"$bin/quintnet" calibrate --trace "$out/none_1.json" -o "$out/calibration.json" >/dev/null

predicted() { "$bin/quintnet-simulate" --config "$out/$1.yaml" --calibration "$out/calibration.json" --json |
                python3 -c 'import json,sys; print(json.load(sys.stdin)["step_time_s"])'; }
pred_none=$(predicted none)
pred_full=$(predicted full)
measured_none=0; measured_full=0
for r in $(seq "$rounds"); do
  measured_none=$(python3 -c "print($measured_none + $(median_step "$out/none_$r.json") / $rounds)")
  measured_full=$(python3 -c "print($measured_full + $(median_step "$out/full_$r.json") / $rounds)")
done
python3 - "$measured_none" "$measured_full" "$pred_none" "$pred_full" <<'PY'
import sys
mn, mf, pn, pf = map(float, sys.argv[1:])
print("| | step, none | step, recompute full | cost (full / none) |")
print("|---|---|---|---|")
print(f"| measured | {1e3 * mn:.1f} ms | {1e3 * mf:.1f} ms | {mf / mn:.3f} |")
print(f"| simulated (calibrated on the run without) | {1e3 * pn:.1f} ms | {1e3 * pf:.1f} ms | {pf / pn:.3f} |")
print(f"| error of the predicted cost | | | {100 * (pf / pn - mf / mn) / (mf / mn):+.1f}% |")
PY
