#!/usr/bin/env bash
# ZeRO-1's cost in step time: dp 2 with `zero_stage: 1` against the same plan without it,
# on both LibTorch builds.  On PyPI's torch 2.15 (build-torch2/cmake/) Gloo has a
# reduce-scatter: each DP bucket is reduce-scattered and the updated parameters all-gathered
# (the bytes of one all-reduce).  Debian's LibTorch 1.13 (build/) has none: it all-reduces
# and then all-gathers (1.5 all-reduces' bytes).  Each rank updates its half of the
# parameters either way.  The Brown-config GPT-2 (3.3M parameters, most in the token
# embedding: large buckets for its compute) and the original ViT; one thread per rank; each
# figure the median of ROUNDS runs, timed after their first 10 steps, the four variants of a
# round run back to back so the machine's drift hits them alike.
#   bash experiments/exec/zero_comm.sh [ROUNDS] [STEPS]      (defaults 3, 60: ~10 min)
# Needs both builds (scripts/build.sh; scripts/setup.sh --torch-wheel && scripts/build.sh --torch-wheel).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
rounds="${1:-3}"
steps="${2:-60}"
bin13="$root/build/bin"
bin2="$root/build-torch2/cmake/bin"
for f in "$bin13/quintnet-train" "$bin2/quintnet-train"; do
  [ -x "$f" ] || { echo "zero_comm: no $f (scripts/build.sh [--torch-wheel])" >&2; exit 2; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
results="$tmp/results.tsv"

plan() { # plan NAME BASE ZERO_STAGE -> a dp 2 config file
  sed "s/^mesh_dim: .*/mesh_dim: [2, 1, 1]/" "$root/experiments/configs/$2" > "$tmp/$1.yaml"
  echo "zero_stage: $3" >> "$tmp/$1.yaml"
  echo "$tmp/$1.yaml"
}

run() { # run KEY BIN CONFIG BATCH -> appends "KEY<tab>rate<tab>gradient path"
  local key="$1" bin="$2" config="$3" batch="$4"
  echo "zero_comm:   $key" >&2
  "$bin/quintnet-launch" --nproc 2 -- "$bin/quintnet-train" --config "$config" --max-steps "$steps" --no-eval \
    --threads 1 --metrics "$tmp/m.jsonl" > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log" >&2; exit 1; }
  python3 - "$tmp/m.jsonl" "$tmp/run.log" "$batch" "$key" >> "$results" <<'PY'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
batch = float(sys.argv[3])
t = lambda r: r["step"] * batch / r["samples_per_s"]  # samples_per_s is cumulative
a, b = rows[9], rows[-1]
line = next((l for l in open(sys.argv[2]) if "optimizer state:" in l), "")
path = re.search(r"gradients (reduce-scattered|all-reduced)", line)
print(f"{sys.argv[4]}\t{(b['step'] - a['step']) * batch / (t(b) - t(a)):.2f}\t{path.group(1) if path else '-'}")
PY
}

for r in $(seq 1 "$rounds"); do
  echo "zero_comm: round $r of $rounds" >&2
  for model in gpt2 vit; do
    if [ "$model" = gpt2 ]; then base=gpt2_brown_2x2x2.yaml batch=16; else base=vit_3d.yaml batch=32; fi
    for zero in 0 1; do
      config=$(plan "${model}_$zero" "$base" "$zero")
      run "$model 1.13 $zero" "$bin13" "$config" "$batch"
      run "$model 2.15 $zero" "$bin2" "$config" "$batch"
    done
  done
done

python3 - "$results" "$(lscpu | sed -n 's/^Model name: *//p')" <<'PY'
import statistics, sys
runs, path = {}, {}
for line in open(sys.argv[1]):
    key, rate, how = line.rstrip("\n").split("\t")
    runs.setdefault(key, []).append(float(rate))
    path[key] = how
med = {k: statistics.median(v) for k, v in runs.items()}
print(f"CPU: {sys.argv[2]}; medians of {len(next(iter(runs.values())))} round(s); samples/s, dp 2\n")
print("| model | LibTorch | zero_stage 0 | zero_stage 1 | ZeRO-1 / plain | ZeRO-1's gradients |")
print("|---|---|---|---|---|---|")
for model, name in [("gpt2", "GPT-2 (Brown config)"), ("vit", "ViT (original config)")]:
    for build in ("1.13", "2.15"):
        plain, zero = med[f"{model} {build} 0"], med[f"{model} {build} 1"]
        print(f"| {name} | {build} | {plain:.1f} | {zero:.1f} | {zero / plain:.2f}x | {path[f'{model} {build} 1']} |")
PY
