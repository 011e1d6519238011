#!/usr/bin/env bash
# The full simulation's speed against an earlier build, in the same minutes: GPT-3 175B as
# Megatron-LM lays it out (tp 8 x pp 16, 16 microbatches) on 2,048 DGX-A100 GPUs with a
# straggler (--straggler 5:0.8 --exact), each binary run ROUNDS times in turn; CPU seconds
# (user + system: this machine's wall time swings with its neighbours), events per second
# and the ratio, as a markdown table.  The predictions of the two must agree (printed).
#   bash experiments/sim/exact_speed.sh BASELINE_BIN_DIR [BIN_DIR] [ROUNDS]
# A baseline build: git worktree add /tmp/base REV && cmake -S /tmp/base -B /tmp/base-build
#   -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo && ninja -C /tmp/base-build quintnet-simulate
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
[ $# -ge 1 ] || { echo "usage: $0 BASELINE_BIN_DIR [BIN_DIR] [ROUNDS]" >&2; exit 2; }
baseline="$1"
bin="${2:-${QN_BUILD_DIR:-$root/build}/bin}"
rounds="${3:-5}"
for b in "$baseline" "$bin"; do
  [ -x "$b/quintnet-simulate" ] || { echo "exact_speed: no quintnet-simulate in $b" >&2; exit 2; }
done
python3 - "$baseline/quintnet-simulate" "$bin/quintnet-simulate" "$rounds" "$root/experiments/sim/gpt3_175b_megatron.yaml" <<'PY'
import json, os, statistics, subprocess, sys
binaries, rounds, plan = sys.argv[1:3], int(sys.argv[3]), sys.argv[4]
args = ["--config", plan, "--model", "gpt3-175b", "--seq", "2048", "--platform", "dgx-a100", "--nodes", "256",
        "--straggler", "5:0.8", "--exact", "--json"]
cpu = {b: [] for b in binaries}
out = {}
for _ in range(rounds):
    for b in binaries:
        t0 = os.times()
        out[b] = json.loads(subprocess.run([b] + args, capture_output=True, text=True, check=True).stdout)
        t1 = os.times()
        cpu[b].append(t1.children_user - t0.children_user + t1.children_system - t0.children_system)
print("GPT-3 175B, tp 8 x pp 16 x dp 16 (2,048 GPUs), 16 microbatches, --straggler 5:0.8 --exact;",
      f"CPU seconds over {rounds} rounds\n")
print("| binary | events | CPU s (min) | CPU s (median) | events/s (median) | step |")
print("|---|---|---|---|---|---|")
for b in binaries:
    med = statistics.median(cpu[b])
    print(f"| {b} | {out[b]['events']:,} | {min(cpu[b]):.2f} | {med:.2f} | {out[b]['events'] / med:,.0f} | {out[b]['step_time_s']:.6f} s |")
base, new = (statistics.median(cpu[b]) for b in binaries)
step0, step1 = (out[b]["step_time_s"] for b in binaries)
print(f"\nevents/s: {base / new:.2f}x the baseline's (medians; minima {min(cpu[binaries[0]]) / min(cpu[binaries[1]]):.2f}x);",
      f"step time {100 * (step1 - step0) / step0:+.3f}%")
PY
