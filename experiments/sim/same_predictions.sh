#!/usr/bin/env bash
# Every simulator prediction of the shipped configs and of GPT-3 175B, as `--json`, one
# line per case, into one file: run it with the binaries before and after a refactoring
# and diff the two files (a change that should not move a number must leave them equal).
#
#   bash experiments/sim/same_predictions.sh build/bin > /tmp/before.jsonl
#   ... change, rebuild ...
#   bash experiments/sim/same_predictions.sh build/bin > /tmp/after.jsonl && diff /tmp/before.jsonl /tmp/after.jsonl
#
# Wall times are dropped from the output (they differ run to run); everything else stays.
set -euo pipefail
bin=${1:-build/bin}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

drop_wall() { python3 -c 'import json,sys
for line in sys.stdin:
    j = json.loads(line); j.pop("wall_s", None); j.pop("simulator_wall_s", None); print(json.dumps(j, sort_keys=True))'; }

run() {  # label, then the simulator's arguments
  local label=$1; shift
  printf '%s\t' "$label"
  "$bin/quintnet-simulate" --json "$@" | drop_wall
}

for config in "$root"/experiments/configs/*.yaml "$root"/experiments/configs/original/*.yaml; do
  name=$(basename "$config")
  run "$name dgx-a100" --config "$config" --platform dgx-a100 --nodes 1
  run "$name cpu-local" --config "$config" --platform cpu-local
  run "$name exact" --config "$config" --platform dgx-a100 --nodes 1 --exact
done

# GPT-3 175B (Narayanan et al.'s layout: tp 8 x pp 16), reduced and with what-ifs.
cat > "$tmp/gpt3.yaml" <<'YAML'
model: gpt2
model_config: {n_embd: 12288, n_layer: 96, n_head: 96}
batch_size: 1536
grad_acc_steps: 64
device_type: cuda
mesh_dim: [24, 8, 8]
mesh_name: [dp, tp, pp]
schedule: interleaved
virtual_stages: 2
recompute: full
kernels: fused
YAML
run "gpt3-175b 1536 gpus tp8 pp8" --config "$tmp/gpt3.yaml" --model gpt3-175b --seq 2048 --platform dgx-a100 --nodes 192
sed -e 's/recompute: full/recompute: selective/' -e 's/kernels: fused/kernels: flash/' -e 's/schedule: interleaved/schedule: 1f1b/' \
    -e 's/virtual_stages: 2/virtual_stages: 1/' "$tmp/gpt3.yaml" > "$tmp/gpt3_sel.yaml"
echo "sequence_parallel: true" >> "$tmp/gpt3_sel.yaml"
echo "zero_stage: 1" >> "$tmp/gpt3_sel.yaml"
run "gpt3-175b selective sp zero1" --config "$tmp/gpt3_sel.yaml" --model gpt3-175b --seq 2048 --platform dgx-a100 --nodes 192
run "gpt3-175b straggler" --config "$tmp/gpt3.yaml" --model gpt3-175b --seq 2048 --platform dgx-a100 --nodes 192 --straggler 5:0.8
# The planner's best layouts for GPT-3 175B on 1,024 GPUs (its table, the wall time cut).
echo "planner"
"$bin/quintnet-plan" --model gpt3-175b --gpus 1024 --simulate 2 | grep -v -i "wall\|seconds\| in [0-9.]* s"
