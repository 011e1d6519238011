#!/usr/bin/env bash
# Peak memory per rank, measured by the executor against predicted by the simulator, for
# layouts x memory options of the original ViT (experiments/configs/vit_3d.yaml: micro-
# batches of 16 samples, or 8 where dp is 2).  Measured: quintnet-train's "memory: fullest
# rank ..." line (a counting CPU allocator: parameters, gradients and optimizer state are
# their buffers' bytes; activations the peak of a step's forward and backward less what
# was alive before it).  Predicted: quintnet simulate --json, peak_memory_split (Korthikanti
# et al.'s per-layer counts without dropout, per microbatch in flight).  Prints a Markdown
# table with the error of the total and of the activations per row.
#   bash experiments/exec/memory_vs_sim.sh [OUT_DIR]          (~1 min)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${QN_BUILD_DIR:-$root/build}/bin"
out="${1:-$root/runs/memory_vs_sim}"
mkdir -p "$out"

# name | mesh | extra plan lines (\n-separated)
rows=(
  "serial|1, 1, 1|"
  "serial, selective|1, 1, 1|recompute: selective"
  "serial, full|1, 1, 1|recompute: full"
  "dp 2|2, 1, 1|"
  "dp 2, ZeRO-1|2, 1, 1|zero_stage: 1"
  "tp 2|1, 2, 1|"
  "tp 2, selective|1, 2, 1|recompute: selective"
  "tp 2, sequence parallel|1, 2, 1|sequence_parallel: true"
  "tp 2, sequence parallel + selective|1, 2, 1|sequence_parallel: true\nrecompute: selective"
  "pp 2 1F1B, 4 microbatches|1, 1, 2|grad_acc_steps: 4"
  "pp 2 1F1B, 4 microbatches, full|1, 1, 2|grad_acc_steps: 4\nrecompute: full"
  "pp 2 ZB-H1, 4 microbatches|1, 1, 2|grad_acc_steps: 4\nschedule: zb-h1"
  "2x2x2|2, 2, 2|"
  "2x2x2, ZeRO-1 + selective|2, 2, 2|zero_stage: 1\nrecompute: selective"
  "2x2x2, sequence parallel + selective + ZeRO-1|2, 2, 2|sequence_parallel: true\nrecompute: selective\nzero_stage: 1"
)

echo "| layout, options | measured total (MiB) | predicted total | error | measured activations | predicted activations | error |"
echo "|---|---|---|---|---|---|---|"
i=0
for row in "${rows[@]}"; do
  IFS='|' read -r name mesh extra <<<"$row"
  i=$((i + 1))
  plan="$out/plan_$i.yaml"
  grep -v '^grad_acc_steps:\|^schedule:' "$root/experiments/configs/vit_3d.yaml" | sed "s/^mesh_dim: .*/mesh_dim: [$mesh]/" >"$plan"
  printf '%b\n' "$extra" >>"$plan"
  grep -q '^grad_acc_steps:' "$plan" || echo "grad_acc_steps: 2" >>"$plan"
  grep -q '^schedule:' "$plan" || echo "schedule: 1f1b" >>"$plan"
  nproc=$(echo "$mesh" | tr -d ' ' | awk -F, '{print $1 * $2 * $3}')
  echo "memory_vs_sim: $name ($nproc ranks) ..." >&2
  "$bin/quintnet-launch" --nproc "$nproc" -- "$bin/quintnet-train" --config "$plan" --max-steps 4 --no-eval --quiet \
    --threads 1 >"$out/run_$i.log" 2>&1 || { cat "$out/run_$i.log" >&2; exit 1; }
  "$bin/quintnet-simulate" --config "$plan" --json >"$out/sim_$i.json"
  python3 - "$name" "$out/run_$i.log" "$out/sim_$i.json" <<'PY'
import json, re, sys
name, log, sim = sys.argv[1:]
line = next(l for l in open(log) if "memory: fullest rank" in l)
mib = lambda key: float(re.search(key + r" ([0-9.]+)", line).group(1))
measured_total = float(re.search(r": ([0-9.]+) MiB =", line).group(1))
measured_act = mib("activations")
split = json.load(open(sim))["peak_memory_split"]
to_mib = 1 / 2**20
predicted_total = (split["weights"] + split["gradients"] + split["optimizer"] + split["activations"]) * to_mib
predicted_act = split["activations"] * to_mib
err = lambda p, m: f"{100 * (p - m) / m:+.1f}%"
print(f"| {name} | {measured_total:.2f} | {predicted_total:.2f} | {err(predicted_total, measured_total)} | "
      f"{measured_act:.2f} | {predicted_act:.2f} | {err(predicted_act, measured_act)} |")
PY
done
