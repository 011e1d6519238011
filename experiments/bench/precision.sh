#!/usr/bin/env bash
# The three precisions of a run against each other, on one rank and one thread, in
# alternating rounds: fp32; bf16 (forward passes under autocast, fp32 weights);
# bf16_weights (bf16 weights, fp32 masters and gradients, no autocast).  For the ViT
# of the original config and the small GPT-2 of the Brown config: the median rate over
# ROUNDS runs (each timed after its first 10 steps), the ratios, the first loss and the
# memory report of the fullest rank (parameters + gradients + optimizer state + peak
# activations).
#   bash experiments/bench/precision.sh [ROUNDS] [STEPS]      (defaults 3, 60: ~5 min)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${QN_BUILD_DIR:-$root/build}/bin"
rounds="${1:-3}"
steps="${2:-60}"
[ -x "$bin/quintnet-train" ] || { echo "precision: no $bin/quintnet-train; run scripts/build.sh" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
results="$tmp/results.tsv"

plan() { # plan NAME BASE PRECISION -> a serial config file
  sed "s/^mesh_dim: .*/mesh_dim: [1, 1, 1]/" "$root/experiments/configs/$2" > "$tmp/$1.yaml"
  echo "precision: $3" >> "$tmp/$1.yaml"
  echo "$tmp/$1.yaml"
}

run() { # run KEY ROUND CONFIG STEPS BATCH TOKENS_PER_SAMPLE: one timed run into $results
  "$bin/quintnet-train" --config "$3" --max-steps "$4" --no-eval --threads 1 --metrics "$tmp/$1.jsonl" \
    > "$tmp/$1.log" 2>&1 || { cat "$tmp/$1.log" >&2; exit 1; }
  python3 - "$tmp/$1.jsonl" "$5" "$6" "$tmp/$1.log" "$1" "$2" >> "$results" <<'PY'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
batch, tokens = float(sys.argv[2]), float(sys.argv[3])
t = lambda r: r["step"] * batch / r["samples_per_s"]  # samples_per_s is cumulative
a, b = rows[9], rows[-1]
rate = (b["step"] - a["step"]) * batch * tokens / (t(b) - t(a))
memory = re.search(r"memory: .*?= (.*?) \(", open(sys.argv[4]).read())
print(f"{sys.argv[5]}\t{sys.argv[6]}\t{rate:.2f}\t{rows[0]['loss']:.7f}\t{memory.group(1) if memory else ''}")
PY
}

precisions=(fp32 bf16 bf16_weights)
for r in $(seq 1 "$rounds"); do
  echo "precision: round $r of $rounds" >&2
  for p in "${precisions[@]}"; do
    run "vit_$p" "$r" "$(plan "vit_$p" vit_3d.yaml "$p")" "$steps" 32 1
    run "gpt_$p" "$r" "$(plan "gpt_$p" gpt2_brown_2x2x2.yaml "$p")" "$(( steps / 2 ))" 16 64
  done
done

python3 - "$results" "$(lscpu | sed -n 's/^Model name: *//p')" \
  "$(grep -o -w -E 'avx512_bf16|amx_bf16|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')" <<'PY'
import statistics, sys
runs, memory, first = {}, {}, {}
for line in open(sys.argv[1]):
    key, _, rate, loss, mem = line.rstrip("\n").split("\t")
    runs.setdefault(key, []).append(float(rate))
    first[key], memory[key] = float(loss), mem
med = {k: statistics.median(v) for k, v in runs.items()}
print(f"CPU: {sys.argv[2]} ({sys.argv[3].strip() or 'no avx512'}); one rank, one thread; "
      f"medians of {len(runs['vit_fp32'])} rounds\n")
print("| model | precision | rate | vs fp32 | vs bf16 autocast | first loss | memory of the rank (MiB) |")
print("|---|---|---|---|---|---|---|")
for model, unit in (("vit", "samples/s"), ("gpt", "tokens/s")):
    for p in ("fp32", "bf16", "bf16_weights"):
        k = f"{model}_{p}"
        print(f"| {'ViT' if model == 'vit' else 'GPT-2 (Brown)'} | {p} | {med[k]:.1f} {unit} | "
              f"{med[k] / med[model + '_fp32']:.2f}x | {med[k] / med[model + '_bf16']:.2f}x | "
              f"{first[k]:.5f} | {memory[k]} |")
PY
