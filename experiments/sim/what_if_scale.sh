#!/usr/bin/env bash
# What-ifs at full scale (docs/SIMULATOR.md, "What-ifs at full scale"): GPT-3 175B as
# Megatron-LM lays it out (tp 8 x pp 16, 16 microbatches) on 131,072 DGX-A100 GPUs with
# each what-if — wall time and peak memory of the simulator (/usr/bin/time), the memory it
# estimated before starting — then each what-if kind against the full simulation (--exact)
# on three layouts of 256 to 512 GPUs, and the wall time and memory of a straggler's
# simulation from 1,024 to 131,072 GPUs, reduced and exact (up to 16,384), as markdown
# tables.  ~3 minutes on 2 cores.
#   bash experiments/sim/what_if_scale.sh [BIN_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-${QN_BUILD_DIR:-$root/build}/bin}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# GPT-3 175B with dp as given, the global batch 16 microbatches of one sample per replica.
gpt3_plan() {
  sed -e "s/mesh_dim: \[16, 8, 16\]/mesh_dim: [$1, 8, 16]/" -e "s/batch_size: 256/batch_size: $((16 * $1))/" \
    "$root/experiments/sim/gpt3_175b_megatron.yaml" >"$2"
}
gpt3_plan 1024 "$work/gpt3_131k.yaml"

# One simulation: its --json summary and /usr/bin/time's "wall s, peak KB".
simulate() {
  /usr/bin/time -f "%e %M" -o "$work/time" "$bin/quintnet-simulate" --json "$@" >"$work/out.json"
  python3 - "$work/out.json" "$work/time" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); wall, kb = open(sys.argv[2]).read().split()
print(d["step_time_s"], d["replicas_simulated"], wall, int(kb) / 1024, d["estimated_memory_bytes"] / 2**20)
PY
}

echo "GPT-3 175B, tp 8 x pp 16 x dp 1,024 (131,072 GPUs), 16 microbatches, DGX-A100"
echo
echo "| what-if | step | vs none | replicas simulated | wall | peak RSS | estimated before |"
echo "|---|---|---|---|---|---|---|"
base=""
for what_if in "" "--straggler 5:0.8" "--slow-node 3:0.8" "--slow-nic 3/2:0.25" "--failed-nic 3/2" "--jitter lognormal:0.05"; do
  # shellcheck disable=SC2086
  read -r step simulated wall rss estimated < <(simulate --config "$work/gpt3_131k.yaml" --model gpt3-175b --seq 2048 \
                                                   --platform dgx-a100 --nodes 16384 $what_if)
  [ -n "$base" ] || base="$step"
  python3 -c 'import sys; w,s,b,n,wall,rss,est=sys.argv[1:]; s,b=float(s),float(b); w=w or "none"
print(f"| {w} | {s:.4f} s | {100*(s-b)/b:+.2f}% | {n} | {float(wall):.2f} s | {float(rss):.0f} MB | {float(est):.0f} MB |")' \
    "$what_if" "$step" "$base" "$simulated" "$wall" "$rss" "$estimated"
done

echo
echo "Against --exact (GPT-3 6.7B, DGX-A100): step time, reduced vs exact"
echo
echo "| layout | what-if | replicas simulated | reduced | exact | difference |"
echo "|---|---|---|---|---|---|"
for layout in "64 8 1 4 1f1b" "16 8 4 8 zb-h1" "32 4 2 4 1f1b"; do
  read -r dp tp pp m schedule <<<"$layout"
  printf 'model: gpt2\nmodel_config: {n_embd: 4096, n_layer: 32, n_head: 32, n_positions: 2048}\nbatch_size: %d\ngrad_acc_steps: %d\ndevice_type: cuda\nmesh_dim: [%d, %d, %d]\nmesh_name: [dp, tp, pp]\nschedule: %s\n' \
    "$((dp * m))" "$m" "$dp" "$tp" "$pp" "$schedule" >"$work/plan.yaml"
  for what_if in "--straggler 13:0.8" "--slow-node 5:0.7" "--slow-nic 5/3:0.25" "--failed-nic 5/3" "--jitter normal:0.05" \
                 "--jitter lognormal:0.05 --seed 2"; do
    args=(--config "$work/plan.yaml" --model gpt3-6.7b --seq 2048 --platform dgx-a100 --nodes "$((dp * tp * pp / 8))")
    # shellcheck disable=SC2086
    read -r reduced simulated _ < <(simulate "${args[@]}" $what_if)
    # shellcheck disable=SC2086
    read -r exact _ < <(simulate "${args[@]}" $what_if --exact)
    python3 -c 'import sys; l,w,n,r,e=sys.argv[1:]; r,e=float(r),float(e)
print(f"| {l} | {w} | {n} | {r:.6f} s | {e:.6f} s | {100*(r-e)/e:+.3f}% |")' \
      "dp $dp x tp $tp x pp $pp $schedule" "$what_if" "$simulated" "$reduced" "$exact"
  done
done

echo
echo "A straggler (--straggler 5:0.8) from 1,024 to 131,072 GPUs: GPT-3 175B, tp 8 x pp 16, 16 microbatches"
echo
echo "| GPUs | model | events | wall | events/s | peak RSS | estimated before | bytes per event |"
echo "|---|---|---|---|---|---|---|---|"
for dp in 8 32 128 1024; do
  gpt3_plan "$dp" "$work/curve.yaml"
  for exact in "" --exact; do
    [ "$dp" -gt 128 ] && [ -n "$exact" ] && continue  # the full simulation of 131,072 GPUs needs ~150 GiB
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e %M" -o "$work/time" "$bin/quintnet-simulate" --json --config "$work/curve.yaml" --model gpt3-175b \
      --seq 2048 --platform dgx-a100 --nodes $((dp * 16)) --straggler 5:0.8 $exact >"$work/out.json"
    python3 - "$work/out.json" "$work/time" "$((dp * 128))" "${exact:-reduced}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); wall, kb = map(float, open(sys.argv[2]).read().split())
ev = d["events"]; rss = kb * 1024
print(f"| {int(sys.argv[3]):,} | {sys.argv[4].lstrip('-')} | {ev:,} | {wall:.2f} s | {ev / wall:,.0f} | {rss / 2**20:,.0f} MB | "
      f"{d['estimated_memory_bytes'] / 2**20:,.0f} MB | {rss / ev:,.0f} |")
PY
  done
done
