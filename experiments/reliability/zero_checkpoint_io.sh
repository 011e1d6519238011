#!/usr/bin/env bash
# What a ZeRO-1 checkpoint costs on disk and to resume: the Brown GPT-2 (experiments/
# configs/gpt2_brown_2x2x2.yaml) on dp 4 with ZeRO-1 and bf16 weights saves after step 5,
# then resumes on the same mesh for 5 more steps under strace, which records the shard
# files each rank opens.  Prints the checkpoint's size, the shards each rank opened and the
# resumed run's losses (to compare two builds: the same losses, fewer bytes).  Results:
# docs/EXECUTOR.md.
#
#   bash experiments/reliability/zero_checkpoint_io.sh [BUILD_BIN_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-$root/build/bin}"
command -v strace > /dev/null || { echo "zero_checkpoint_io: needs strace (apt install strace)" >&2; exit 2; }
work="$(mktemp -d /tmp/qn-zero-ckpt-XXXXXX)"
trap 'rm -rf "$work"' EXIT
sed -e 's/^mesh_dim: .*/mesh_dim: [4, 1, 1]/' -e 's/^batch_size: .*/batch_size: 32/' \
  "$root/experiments/configs/gpt2_brown_2x2x2.yaml" > "$work/plan.yaml"
printf 'zero_stage: 1\nprecision: bf16_weights\n' >> "$work/plan.yaml"
train() { "$bin/quintnet-launch" --nproc 4 -- "$bin/quintnet-train" --config "$work/plan.yaml" --max-steps 10 \
  --no-eval --quiet --threads 1 "$@"; }

train --checkpoint-dir "$work/run" --checkpoint-every 5 --stop-at-step 5 > /dev/null
ckpt="$work/run/step-00000005"
echo "checkpoint: $(du -sb "$ckpt" | cut -f1) bytes in $(ls "$ckpt"/rank-*.pt | wc -l) shards" \
  "($(du -b "$ckpt"/rank-*.pt | awk '{print $1}' | paste -sd' '))"

strace -f -qq -e trace=openat -o "$work/strace.txt" \
  "$bin/quintnet-launch" --nproc 4 -- "$bin/quintnet-train" --config "$work/plan.yaml" --max-steps 10 \
  --no-eval --quiet --threads 1 --resume "$work/run" --metrics "$work/resumed.jsonl" > /dev/null
# One line per process that opened shards: how many, and which.
grep -E 'rank-[0-9]+\.pt"' "$work/strace.txt" | grep -v ENOENT |
  sed -E 's/^([0-9]+) .*(rank-[0-9]+\.pt).*/\1 \2/' | sort -u |
  awk '{files[$1] = files[$1] " " $2; n[$1]++} END {for (p in n) print "resume: process " p " opened " n[p] " shard(s):" files[p]}' |
  sort -k5
echo "resumed losses (steps 6-10): $(sed -E 's/.*"loss":([^,]+),.*/\1/' "$work/resumed.jsonl" | paste -sd' ')"
