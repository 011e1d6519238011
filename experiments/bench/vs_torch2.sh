#!/usr/bin/env bash
# quintnet-train on both LibTorch builds (Debian's 1.13 in build/, PyPI's torch 2.15 in
# build-torch2/cmake/) beside torch 2.15 itself (build-torch2/venv runs
# experiments/bench/pytorch_vit.py): eager and torch.compile for serial, DDP over Gloo for
# dp 2, torch.distributed.pipelining for pp 2 with each of its schedules beside ours.
# The same ViT (original config: global batch 32 in 2 microbatches, one thread per
# rank) and the Brown-config GPT-2.  Each figure is the median of ROUNDS runs, timed
# after their first 10 steps; the first loss shows every run starts from the same weights.
#   bash experiments/bench/vs_torch2.sh [ROUNDS] [STEPS]     (defaults 1, 60: ~15 min)
# Needs scripts/setup.sh --torch-wheel and both builds (scripts/build.sh, scripts/build.sh --torch-wheel).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
rounds="${1:-1}"
steps="${2:-60}"
bin13="$root/build/bin"
bin2="$root/build-torch2/cmake/bin"
python2="$root/build-torch2/venv/bin/python"
peer="$root/experiments/bench/pytorch_vit.py"
for f in "$bin13/quintnet-train" "$bin2/quintnet-train" "$python2"; do
  [ -x "$f" ] || { echo "vs_torch2: no $f (scripts/setup.sh --torch-wheel; scripts/build.sh [--torch-wheel])" >&2; exit 2; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
results="$tmp/results.tsv"

plan() { # plan NAME BASE MESH [EXTRA_LINE...] -> a config file
  local name="$1" base="$2" mesh="$3"
  shift 3
  sed "s/^mesh_dim: .*/mesh_dim: $mesh/" "$root/experiments/configs/$base" > "$tmp/$name.yaml"
  for line in "$@"; do
    sed -i "/^${line%%:*}:/d" "$tmp/$name.yaml"
    echo "$line" >> "$tmp/$name.yaml"
  done
  echo "$tmp/$name.yaml"
}
vit1=$(plan vit1 vit_3d.yaml "[1, 1, 1]")
vit_dp2=$(plan vit_dp2 vit_3d.yaml "[2, 1, 1]")
declare -A vit_pp2=(
  [afab]=$(plan pp_afab vit_3d.yaml "[1, 1, 2]" "schedule: afab")
  [1f1b]=$(plan pp_1f1b vit_3d.yaml "[1, 1, 2]" "schedule: 1f1b")
  [interleaved]=$(plan pp_int vit_3d.yaml "[1, 1, 2]" "schedule: interleaved" "virtual_stages: 2")
  [zb-h1]=$(plan pp_zb vit_3d.yaml "[1, 1, 2]" "schedule: zb-h1")
)
gpt1=$(plan gpt1 gpt2_brown_2x2x2.yaml "[1, 1, 1]")
gpt_steps=$(( steps / 2 ))

ours() { # ours BIN NPROC CONFIG STEPS BATCH [TOKENS_PER_SAMPLE] -> "rate first_loss"
  "$1/quintnet-launch" --nproc "$2" -- "$1/quintnet-train" --config "$3" --max-steps "$4" --no-eval --quiet \
    --threads 1 --metrics "$tmp/m.jsonl" > "$tmp/ours.log" 2>&1 || { cat "$tmp/ours.log" >&2; exit 1; }
  python3 - "$tmp/m.jsonl" "$5" "${6:-1}" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
batch, tokens = float(sys.argv[2]), float(sys.argv[3])
t = lambda r: r["step"] * batch / r["samples_per_s"]  # samples_per_s is cumulative
a, b = rows[9], rows[-1]
print(f"{(b['step'] - a['step']) * batch * tokens / (t(b) - t(a)):.2f} {rows[0]['loss']:.7f}")
PY
}
theirs() { # theirs NPROC CONFIG STEPS ARGS... -> "rate first_loss"
  local n="$1" config="$2" s="$3"
  shift 3
  local cmd=("$python2" "$peer" --config "$config" --steps "$s" --threads 1 "$@")
  [ "$n" -gt 1 ] && cmd=("$bin13/quintnet-launch" --nproc "$n" -- "${cmd[@]}")
  "${cmd[@]}" 2> "$tmp/peer.err" | python3 -c '
import json, sys
line = [l for l in sys.stdin.read().splitlines() if "{" in l][-1]  # launch prefixes a rank
r = json.loads(line[line.index("{"):])
print("%.2f %.7f" % (r["rate"], r["first_loss"]))' || { cat "$tmp/peer.err" >&2; exit 1; }
}
record() { # record KEY COMMAND...
  local key="$1" figures
  shift
  echo "vs_torch2:   $key" >&2
  figures=$("$@")
  echo -e "$key\t$figures" >> "$results"
}

for r in $(seq 1 "$rounds"); do
  echo "vs_torch2: round $r of $rounds" >&2
  record "serial ours-1.13" ours "$bin13" 1 "$vit1" "$steps" 32
  record "serial ours-2.15" ours "$bin2" 1 "$vit1" "$steps" 32
  record "serial eager" theirs 1 "$vit1" "$steps"
  record "serial compile" theirs 1 "$vit1" "$steps" --compile
  record "dp2 ours-1.13" ours "$bin13" 2 "$vit_dp2" "$steps" 32
  record "dp2 ours-2.15" ours "$bin2" 2 "$vit_dp2" "$steps" 32
  record "dp2 DDP" theirs 2 "$vit_dp2" "$steps" --dp
  for s in afab 1f1b interleaved zb-h1; do
    record "pp2-$s ours-1.13" ours "$bin13" 2 "${vit_pp2[$s]}" "$steps" 32
    record "pp2-$s ours-2.15" ours "$bin2" 2 "${vit_pp2[$s]}" "$steps" 32
  done
  record "pp2-afab pipelining" theirs 2 "$vit1" "$steps" --pp gpipe
  record "pp2-1f1b pipelining" theirs 2 "$vit1" "$steps" --pp 1f1b
  record "pp2-interleaved pipelining" theirs 2 "$vit1" "$steps" --pp interleaved-1f1b
  record "pp2-zb-h1 pipelining" theirs 2 "$vit1" "$steps" --pp zero-bubble
  record "gpt2 ours-1.13" ours "$bin13" 1 "$gpt1" "$gpt_steps" 16 64
  record "gpt2 ours-2.15" ours "$bin2" 1 "$gpt1" "$gpt_steps" 16 64
  record "gpt2 eager" theirs 1 "$gpt1" "$gpt_steps" --model gpt2
  record "gpt2 compile" theirs 1 "$gpt1" "$gpt_steps" --model gpt2 --compile
done

python3 - "$results" "$(lscpu | sed -n 's/^Model name: *//p')" "$("$python2" -c 'import torch; print(torch.__version__)')" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    key, rest = line.rstrip("\n").split("\t")
    rate, loss = rest.split()
    runs.setdefault(key, []).append((float(rate), float(loss)))
med = {k: statistics.median(r for r, _ in v) for k, v in runs.items()}
first = {k: v[0][1] for k, v in runs.items()}
print(f"CPU: {sys.argv[2]}; torch {sys.argv[3]}; medians of {len(next(iter(runs.values())))} round(s); "
      "ratios against quintnet on LibTorch 1.13\n")
print("| layout | quintnet, LibTorch 1.13 | quintnet, LibTorch 2.15 | torch 2.15 | ratio 2.15 / 1.13 | ratio torch / ours-1.13 | first loss (ours / torch) |")
print("|---|---|---|---|---|---|---|")
rows = [("ViT serial (eager)", "serial", "eager"), ("ViT serial (torch.compile)", "serial", "compile"),
        ("ViT dp 2 (DDP)", "dp2", "DDP")]
rows += [(f"ViT pp 2 {s} (pipelining {p})", f"pp2-{s}", "pipelining")
         for s, p in [("afab", "GPipe"), ("1f1b", "1F1B"), ("interleaved", "Interleaved1F1B"),
                      ("zb-h1", "InterleavedZeroBubble")]]
rows += [("GPT-2 Brown serial, tokens/s (eager)", "gpt2", "eager"), ("GPT-2 Brown serial, tokens/s (torch.compile)", "gpt2", "compile")]
for name, layout, peer in rows:
    a, b, t = med[f"{layout} ours-1.13"], med[f"{layout} ours-2.15"], med[f"{layout} {peer}"]
    print(f"| {name} | {a:.1f} | {b:.1f} | {t:.1f} | {b / a:.2f}x | {t / a:.2f}x | "
          f"{first[f'{layout} ours-1.13']:.5f} / {first[f'{layout} {peer}']:.5f} |")
PY
