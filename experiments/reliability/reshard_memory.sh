#!/usr/bin/env bash
# What resuming on another mesh costs each rank in reads and host memory.  A wider Brown
# GPT-2 (experiments/configs/gpt2_brown_2x2x2.yaml with n_embd 256: 16.3M parameters,
# 196 MB of fp32 masters and moments) trains on dp 2 x tp 2 with ZeRO-1 and saves after
# step 3; it then resumes for 2 more steps on tp 4, dp 4, pp 4 and one rank, each rank
# under strace (the shard files it opens) and /usr/bin/time (its peak resident memory),
# and the same mesh trains 2 steps from scratch for the memory a run takes without a
# checkpoint to load.  To compare two builds: the same losses, fewer shards, less memory.
# Results: docs/EXECUTOR.md ("Checkpoints").
#
#   bash experiments/reliability/reshard_memory.sh [BUILD_BIN_DIR]     (QN_KEEP=1 keeps its /tmp folder)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-$root/build/bin}"
command -v strace > /dev/null || { echo "reshard_memory: needs strace (apt install strace)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "reshard_memory: needs /usr/bin/time (apt install time)" >&2; exit 2; }
work="$(mktemp -d /tmp/qn-reshard-XXXXXX)"
trap '[ -n "${QN_KEEP:-}" ] || rm -rf "$work"' EXIT
plan() {  # name mesh
  sed -e "s/^mesh_dim: .*/mesh_dim: $2/" -e 's/^  n_embd: .*/  n_embd: 256/' -e 's/^  n_inner: .*/  n_inner: 1024/' \
    "$root/experiments/configs/gpt2_brown_2x2x2.yaml" > "$work/$1.yaml"
  echo "zero_stage: 1" >> "$work/$1.yaml"
}
# Each rank under /usr/bin/time, its peak resident memory written to $work/rss_NAME.RANK;
# the whole launch under "${wrap[@]}" when set.
wrap=()
train() {  # name nproc steps args...
  local name="$1" nproc="$2" steps="$3"
  shift 3
  "${wrap[@]}" "$bin/quintnet-launch" --nproc "$nproc" -- bash -c 'exec /usr/bin/time -f %M -o "$0.$RANK" "$@"' "$work/rss_$name" \
    "$bin/quintnet-train" --config "$work/$name.yaml" --max-steps "$steps" --no-eval --quiet --threads 1 "$@" > /dev/null
}
rss_mb() { for f in "$work/rss_$1".*; do awk '{printf "%.0f ", $1 / 1024}' "$f"; done; }

plan saved "[2, 2, 1]"
train saved 4 5 --checkpoint-dir "$work/run" --checkpoint-every 3 --stop-at-step 3
ckpt="$work/run/step-00000003"
echo "checkpoint: $(du -sb "$ckpt" | awk '{printf "%.1f MB", $1 / 1e6}') in $(ls "$ckpt"/rank-*.pt | wc -l) shards"
echo
echo "| resumed on | ranks | shards each rank opened (MB read) | peak RSS per rank, resumed (MB) | the same, from scratch (MB) | losses, steps 4-5 |"
echo "|---|---|---|---|---|---|"
for layout in "tp4|[1, 4, 1]|4" "dp4|[4, 1, 1]|4" "pp4|[1, 1, 4]|4" "serial|[1, 1, 1]|1"; do
  IFS='|' read -r name mesh nproc <<< "$layout"
  plan "$name" "$mesh"
  wrap=(strace -f -qq -e trace=openat -o "$work/strace_$name.txt")
  train "$name" "$nproc" 5 --resume "$work/run" --metrics "$work/$name.jsonl"
  wrap=()
  opened="$(grep -E 'rank-[0-9]+\.pt"' "$work/strace_$name.txt" | grep -v ENOENT | grep -v '\.tmp' |
    sed -E 's/^([0-9]+) .*"([^"]*rank-[0-9]+\.pt)".*/\1 \2/' | sort -u |
    while read -r pid file; do echo "$pid $(stat -c %s "$file")"; done |
    awk '{n[$1]++; b[$1] += $2} END {for (p in n) printf "%d (%.1f)\n", n[p], b[p] / 1e6}' | sort | paste -sd' ')"
  resumed="$(rss_mb "$name")"
  rm -f "$work/rss_$name".*
  train "$name" "$nproc" 2
  losses="$(sed -E 's/.*"loss":([^,]+),.*/\1/' "$work/$name.jsonl" | paste -sd' ')"
  echo "| $name | $nproc | $opened | $resumed | $(rss_mb "$name") | $losses |"
done
