#!/usr/bin/env bash
# Where a serial training step's time goes: perf samples quintnet-train for STEPS steps
# of a plan (one rank, one thread) and sorts them into the categories of
# docs/PERFORMANCE.md, in ms per optimizer step (start-up excluded: a run of 10 steps
# is subtracted from the run of STEPS).
#   bash experiments/bench/profile_step.sh [PLAN] [STEPS] [BIN_DIR]
#   (defaults: the original ViT config on one rank, 80 steps, build/bin)
# Needs perf (Debian: linux-perf).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
steps="${2:-80}"
bin="${3:-${QN_BUILD_DIR:-$root/build}/bin}"
command -v perf >/dev/null || { echo "profile_step: needs perf (apt-get install linux-perf)" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [ -n "${1:-}" ]; then plan="$1"; else
  plan="$tmp/serial.yaml"
  sed "s/^mesh_dim: .*/mesh_dim: [1, 1, 1]/" "$root/experiments/configs/vit_3d.yaml" > "$plan"
fi

profile() { # profile STEPS -> "category milliseconds" lines
  perf record -q -F 2000 -o "$tmp/perf.data" "$bin/quintnet-train" --config "$plan" --max-steps "$1" --no-eval \
    --quiet --threads 1 > /dev/null 2>&1
  perf report -i "$tmp/perf.data" --no-children --sort dso,sym -g none -F overhead,sample,dso,sym 2>/dev/null |
    grep -v '^#' | grep -v '^$' | python3 -c '
import re, sys
def category(dso, sym):
    if "attention_forward" in sym or "attention_backward" in sym: return "attention kernel (ours)"
    if "openblas" in dso: return "GEMM (OpenBLAS)"
    if "JIT" in dso or "dnnl" in dso: return "GELU (oneDNN JIT)"
    if "sleef" in dso: return "exp/erf (Sleef: softmax, GELU)"
    if "kernel" in dso: return "kernel: page faults, syscalls"
    if "libc.so" in dso: return "memory: malloc/free/memset/memcpy"
    if "libz" in dso or "pixel_statistics" in sym or "ld-linux" in dso: return "start-up: data, dynamic loading"
    if "torch_cpu" in dso or "c10" in dso: return "other LibTorch ops, autograd, dispatch"
    return "other (ours, libstdc++, gloo)"
totals = {}
for line in sys.stdin:
    parts = line.split()
    if len(parts) < 4 or not parts[0].endswith("%"): continue
    samples, dso, sym = int(parts[1]), parts[2], " ".join(parts[3:])
    totals[category(dso, sym)] = totals.get(category(dso, sym), 0) + samples
for k, v in totals.items(): print(f"{k}\t{v / 2.0:.1f}")  # 2000 Hz: ms
'
}
profile 10 > "$tmp/short.tsv"
profile "$steps" > "$tmp/long.tsv"
python3 - "$tmp/short.tsv" "$tmp/long.tsv" "$steps" <<'PY'
import sys
read = lambda p: {k: float(v) for k, v in (l.rstrip("\n").split("\t") for l in open(p))}
short, long, steps = read(sys.argv[1]), read(sys.argv[2]), int(sys.argv[3])
per_step = {k: (long.get(k, 0) - short.get(k, 0)) / (steps - 10) for k in set(long) | set(short)}
per_step = {k: v for k, v in per_step.items() if not k.startswith("start-up")}
total = sum(per_step.values())
print("| where | ms per step | share |\n|---|---|---|")
for k, v in sorted(per_step.items(), key=lambda kv: -kv[1]):
    print(f"| {k} | {v:.1f} | {100 * v / total:.0f}% |")
print(f"| **total (CPU time of steps 11-{steps})** | **{total:.1f}** | |")
PY
