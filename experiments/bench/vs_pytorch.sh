#!/usr/bin/env bash
# quintnet-train against plain PyTorch on the same LibTorch and BLAS (Debian's
# python3-torch runs experiments/bench/pytorch_vit.py), in alternating rounds, and a
# table of ratios: the ViT serial at 1 and 2 threads in fp32 and bf16, dp 2 (ours vs
# DDP over Gloo, and against two independent half-batch runs side by side: dp 2's
# ceiling on two cores; and against our own dp 2 with every byte over Gloo's TCP, the
# collectives' and messages' shared memory switched off), pp 2 1F1B and the 2x2x2 mesh (against our
# serial, and the 2x2x2 against itself over Gloo alone), and the
# small GPT-2 of the Brown config in tokens/s.  Each figure is the median of ROUNDS runs;
# each run times its steps after the first 10.  "N threads" holds both sides to N cores:
# LibTorch's count and, where libblas.so.3 is OpenBLAS's pthreads build, its pool (which
# torch.set_num_threads does not reach); one more row leaves plain PyTorch's pool free.
#   bash experiments/bench/vs_pytorch.sh [ROUNDS] [STEPS]      (defaults 3, 60: 5-15 min)
# Needs python3-torch (apt-get install python3-torch, or scripts/setup.sh --bench).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${QN_BUILD_DIR:-$root/build}/bin"
rounds="${1:-3}"
steps="${2:-60}"
peer_python=/usr/bin/python3
peer="$root/experiments/bench/pytorch_vit.py"
"$peer_python" -c 'import torch' 2>/dev/null ||
  { echo "vs_pytorch: $peer_python has no torch; install python3-torch (scripts/setup.sh --bench)" >&2; exit 2; }
[ -x "$bin/quintnet-train" ] || { echo "vs_pytorch: no $bin/quintnet-train; run scripts/build.sh" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
results="$tmp/results.tsv"

plan() { # plan NAME BASE MESH [EXTRA_LINE] -> a config file
  sed "s/^mesh_dim: .*/mesh_dim: $3/" "$root/experiments/configs/$2" > "$tmp/$1.yaml"
  [ -n "${4:-}" ] && echo "$4" >> "$tmp/$1.yaml"
  echo "$tmp/$1.yaml"
}
vit1=$(plan vit_serial vit_3d.yaml "[1, 1, 1]")
vit1_bf16=$(plan vit_serial_bf16 vit_3d.yaml "[1, 1, 1]" "precision: bf16")
vit_dp2=$(plan vit_dp2 vit_3d.yaml "[2, 1, 1]")
# What each dp 2 rank computes, as a run of its own: half the global batch, same microbatches.
vit_half=$(plan vit_half vit_3d.yaml "[1, 1, 1]")
sed -i "s/^batch_size: .*/batch_size: 16/" "$vit_half"
vit_pp2=$(plan vit_pp2 vit_3d.yaml "[1, 1, 2]")
vit_3d=$(plan vit_3d vit_3d.yaml "[2, 2, 2]")
gpt1=$(plan gpt_serial gpt2_brown_2x2x2.yaml "[1, 1, 1]")
gpt_steps=$(( steps / 2 ))

ours() { # ours NAME NPROC THREADS CONFIG STEPS BATCH [TOKENS_PER_SAMPLE] -> "rate first_loss"
  "$bin/quintnet-launch" --nproc "$2" -- "$bin/quintnet-train" --config "$4" --max-steps "$5" --no-eval --quiet \
    --threads "$3" --metrics "$tmp/$1.jsonl" > "$tmp/$1.log" 2>&1 || { cat "$tmp/$1.log" >&2; exit 1; }
  python3 - "$tmp/$1.jsonl" "$6" "${7:-1}" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
batch, tokens = float(sys.argv[2]), float(sys.argv[3])
# samples_per_s is cumulative: the time of steps 11..N from it, as the peer times them.
t = lambda r: r["step"] * batch / r["samples_per_s"]
a, b = rows[9], rows[-1]
print(f"{(b['step'] - a['step']) * batch * tokens / (t(b) - t(a)):.2f} {rows[0]['loss']:.7f}")
PY
}
ours_pair() { # ours_pair NAME CONFIG STEPS BATCH -> "summed rate first_loss": two independent one-thread runs at once
  ours "$1a" 1 1 "$2" "$3" "$4" > "$tmp/$1a.rate" & local a=$!
  ours "$1b" 1 1 "$2" "$3" "$4" > "$tmp/$1b.rate" & local b=$!
  wait "$a" && wait "$b" || exit 1
  awk '{ rate += $1; if (NR == 1) loss = $2 } END { printf "%.2f %s\n", rate, loss }' "$tmp/$1a.rate" "$tmp/$1b.rate"
}
over_gloo() { # over_gloo NAME ...: ours, every collective and message over Gloo's TCP (no shared memory)
  QN_COMM_BACKEND=gloo ours "$@"
}
theirs() { # theirs NPROC THREADS CONFIG STEPS ARGS... -> "rate first_loss"
  local n="$1" threads="$2" config="$3" s="$4"; shift 4
  local cmd=("$peer_python" "$peer" --config "$config" --steps "$s" --threads "$threads" "$@")
  if [ "$n" -gt 1 ]; then cmd=("$bin/quintnet-launch" --nproc "$n" -- "${cmd[@]}" --dp); fi
  "${cmd[@]}" 2> "$tmp/peer.err" | python3 -c '
import json, sys
line = [l for l in sys.stdin.read().splitlines() if "{" in l][-1]  # launch may prefix a rank
r = json.loads(line[line.index("{"):])
print("%.2f %.7f" % (r["rate"], r["first_loss"]))' || { cat "$tmp/peer.err" >&2; exit 1; }
}
record() { # record KEY ROUND COMMAND...: runs COMMAND, keeps its "rate first_loss" (a failure ends the script)
  local key="$1" round="$2" figures
  shift 2
  figures=$("$@")
  echo -e "$key\t$round\t$figures" >> "$results"
}

for r in $(seq 1 "$rounds"); do
  echo "vs_pytorch: round $r of $rounds" >&2
  # Global batch 32 for the ViT; 16 sequences of 64 tokens for GPT-2.
  record ours_t1 "$r" ours s1 1 1 "$vit1" "$steps" 32
  record torch_t1 "$r" theirs 1 1 "$vit1" "$steps"
  record torch_t1_free "$r" theirs 1 1 "$vit1" "$steps" --free-blas
  record ours_t2 "$r" ours s2 1 2 "$vit1" "$steps" 32
  record torch_t2 "$r" theirs 1 2 "$vit1" "$steps"
  record ours_bf16 "$r" ours b1 1 1 "$vit1_bf16" "$steps" 32
  record torch_bf16 "$r" theirs 1 1 "$vit1" "$steps" --bf16
  record ours_dp2 "$r" ours d2 2 1 "$vit_dp2" "$steps" 32
  record torch_dp2 "$r" theirs 2 1 "$vit_dp2" "$steps"
  record ours_half2 "$r" ours_pair h2 "$vit_half" "$steps" 16
  record ours_dp2_gloo "$r" over_gloo d2g 2 1 "$vit_dp2" "$steps" 32
  record ours_pp2 "$r" ours p2 2 1 "$vit_pp2" "$steps" 32
  record ours_3d "$r" ours x8 8 1 "$vit_3d" "$steps" 32
  record ours_3d_gloo "$r" over_gloo x8g 8 1 "$vit_3d" "$steps" 32
  record ours_gpt "$r" ours g1 1 1 "$gpt1" "$gpt_steps" 16 64
  record torch_gpt "$r" theirs 1 1 "$gpt1" "$gpt_steps" --model gpt2
done

python3 - "$results" "$(lscpu | sed -n 's/^Model name: *//p')" \
  "$(grep -o -w -E 'avx512_bf16|amx_bf16|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    key, _, rest = line.rstrip("\n").split("\t")
    rate, loss = rest.split()
    runs.setdefault(key, []).append((float(rate), float(loss)))
med = {k: statistics.median(r for r, _ in v) for k, v in runs.items()}
loss = {k: v[0][1] for k, v in runs.items()}
print(f"CPU: {sys.argv[2]} ({sys.argv[3].strip() or 'no avx512'}); medians of {len(runs['ours_t1'])} rounds\n")
print("| run | quintnet | plain PyTorch | ratio | target | first loss (ours / theirs) |")
print("|---|---|---|---|---|---|")
def row(name, ours, theirs, target, unit="samples/s"):
    r = med[ours] / med[theirs]
    first = f"{loss[ours]:.5f} / {loss[theirs]:.5f}" if theirs.startswith("torch") else ""
    label = {"ours_t1": "our serial", "ours_half2": "two half runs", "ours_dp2_gloo": "ours over Gloo",
             "ours_3d_gloo": "ours over Gloo"}[theirs] if not theirs.startswith("torch") else ""
    them = f"{label} {med[theirs]:.1f}".strip()
    print(f"| {name} | {med[ours]:.1f} {unit} | {them} | {r:.2f}x | {target} | {first} |")
row("ViT serial, 1 thread", "ours_t1", "torch_t1", ">= 1.2")
row("ViT serial, 1 thread vs PyTorch's BLAS pool free", "ours_t1", "torch_t1_free", "")
row("ViT serial, 2 threads", "ours_t2", "torch_t2", ">= 1.3")
row("ViT serial bf16, 1 thread", "ours_bf16", "torch_bf16", "")
row("ViT serial bf16 vs our fp32", "ours_bf16", "ours_t1", ">= 1.4 (AMX / AVX512-BF16)")
row("ViT dp 2 (vs DDP, 2 ranks x 1 thread)", "ours_dp2", "torch_dp2", ">= 1.2")
row("ViT dp 2 vs our serial", "ours_dp2", "ours_t1", "(1.85 retired: 2 vCPUs)")
row("ViT dp 2 vs two half-batch runs at once", "ours_dp2", "ours_half2", ">= 0.90")
row("ViT dp 2, shared memory vs everything over Gloo's TCP", "ours_dp2", "ours_dp2_gloo", "")
row("ViT pp 2 1F1B vs our serial", "ours_pp2", "ours_t1", ">= 1.25")
row("ViT 2x2x2 (8 ranks) vs our serial", "ours_3d", "ours_t1", ">= 1.0")
row("ViT 2x2x2, shared memory vs everything over Gloo's TCP", "ours_3d", "ours_3d_gloo", "")
row("GPT-2 (Brown config) serial, 1 thread", "ours_gpt", "torch_gpt", ">= 1.8", "tokens/s")
PY
