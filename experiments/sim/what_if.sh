#!/usr/bin/env bash
# What-if studies on one plan: the same step on other networks (one switch, rail-
# optimized, fat-trees), with a failed or degraded NIC, a straggler node and per-op
# jitter, each against the baseline, as a markdown table (docs/SIMULATOR.md).
#   bash experiments/sim/what_if.sh [MODEL] [MESH dp,tp,pp] [MICROBATCHES] [NODES]
# Default: GPT-3 175B as Megatron-LM lays it out on 1,024 A100s (dp 8 x tp 8 x pp 16,
# 192 microbatches of 1 sequence of 2,048 tokens, 1F1B), ~20 s a row on 2 cores.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${QN_BUILD_DIR:-$root/build}/bin"
model="${1:-gpt3-175b}"
mesh="${2:-8,8,16}"
microbatches="${3:-192}"
nodes="${4:-128}"
platforms="$root/experiments/sim/platforms"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

IFS=, read -r dp tp pp <<<"$mesh"
plan="$work/plan.yaml"
# A GPT plan whose model --model replaces (the plan's own only has to split over the mesh).
printf 'model: gpt2\nmodel_config: {n_embd: 768, n_layer: 96, n_head: 96}\nbatch_size: %d\ngrad_acc_steps: %d\ndevice_type: cuda\nmesh_dim: [%d, %d, %d]\nmesh_name: [dp, tp, pp]\nschedule: 1f1b\n' \
  "$((dp * microbatches))" "$microbatches" "$dp" "$tp" "$pp" >"$plan"

# label | platform | extra options
rows=(
  "one switch (dgx-a100)|dgx-a100|"
  "one switch, every replica simulated|dgx-a100|--exact"
  "rail-optimized, SU of 20 (dgx-a100-superpod)|dgx-a100-superpod|"
  "fat-tree, 16-node leaves at 2:1|$platforms/dgx_a100_fat_tree_2to1.json|"
  "fat-tree, 4-node leaves at 4:1|$platforms/dgx_a100_fat_tree_4to1.json|"
  "one switch, node 1's NIC 3 failed|dgx-a100|--failed-nic 1/3"
  "rail-optimized, node 1's NIC 3 failed|dgx-a100-superpod|--failed-nic 1/3"
  "one switch, node 1's NICs at 25%|dgx-a100|--slow-nic 1/*:0.25"
  "one switch, node 1 at 90% speed|dgx-a100|--slow-node 1:0.9"
  "one switch, op jitter lognormal cv 5%|dgx-a100|--jitter lognormal:0.05"
)

echo "$model, dp $dp x tp $tp x pp $pp, $microbatches microbatches, 1F1B, $nodes nodes of 8 GPUs"
echo
echo "| network / what-if | step time | vs baseline | bubble | exposed comm. | replicas simulated | wall |"
echo "|---|---|---|---|---|---|---|"
base=""
for row in "${rows[@]}"; do
  IFS='|' read -r label platform extra <<<"$row"
  # shellcheck disable=SC2086
  json="$("$bin/quintnet-simulate" --config "$plan" --model "$model" --seq 2048 --platform "$platform" \
          --nodes "$nodes" --json $extra)"
  read -r step bubble comm simulated wall < <(python3 -c 'import json,sys; d=json.loads(sys.argv[1]);
print(d["step_time_s"], d["bubble_fraction"], d["exposed_comm_fraction"], d["replicas_simulated"], d["wall_s"])' "$json")
  [ -n "$base" ] || base="$step"
  python3 -c 'import sys; l,s,b,bu,c,n,dp,w=sys.argv[1:]; s,b,bu,c,w=map(float,(s,b,bu,c,w)); n="all" if n==dp else n+" of "+dp;
print(f"| {l} | {s:.4f} s | {100*(s-b)/b:+.2f}% | {bu:.3f} | {100*c:.1f}% | {n} | {w:.1f} s |")' \
    "$label" "$step" "$base" "$bubble" "$comm" "$simulated" "$dp" "$wall"
done
