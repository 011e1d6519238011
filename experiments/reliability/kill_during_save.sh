#!/usr/bin/env bash
# A rank killed (SIGKILL) at random moments while checkpoints are being written: after
# each kill, resuming must find a complete checkpoint and continue with exactly the
# losses of an uninterrupted run.  Results: docs/RELIABILITY.md.
#
#   bash experiments/reliability/kill_during_save.sh [KILLS_IN_A_SAVE] [BUILD_BIN_DIR]
#
# A 4-rank run (dp 2 x pp 2) saves a checkpoint after every step (fsync'd shards, then
# rank 0's manifest and rename), so most moments fall inside a save.  Each trial waits
# for the first checkpoint, sleeps a random 0-1.5 s and kills one random rank; a
# `.partial` folder left behind shows that the kill landed inside a save.  The resumed
# run's first five steps are compared with the reference's.  Trials go on
# until KILLS_IN_A_SAVE (default 50) such kills were made; every trial, in a save or not,
# must resume and match.
set -euo pipefail
want="${1:-50}"
bin="${2:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin}"
work="$(mktemp -d /tmp/qn-kill-save-XXXXXX)"
steps=400
cat > "$work/plan.yaml" <<PLAN
batch_size: 8
grad_acc_steps: 2
depth: 6
hidden_dim: 256
n_heads: 4
mesh_dim: [2, 1, 2]
PLAN
# `exec`: a run started in the background is the launcher itself, whose children are the ranks.
train() { exec "$bin/quintnet-launch" --nproc 4 -- "$bin/quintnet-train" --config "$work/plan.yaml" --max-steps $steps \
  --no-eval --quiet --threads 1 "$@"; }
losses() { sed -E 's/.*"step":([0-9]+).*"loss":([^,]+),.*/\1 \2/' "$1"; }

echo "kill_during_save: reference run of $steps steps (in $work)"
(train --metrics "$work/reference.jsonl") > /dev/null
losses "$work/reference.jsonl" > "$work/reference.txt"

in_save=0 between=0 trials=0 failures=0
while [ "$in_save" -lt "$want" ] && [ "$trials" -lt $((3 * want)) ]; do
  trials=$((trials + 1))
  t="$work/trial"
  rm -rf "$t" && mkdir -p "$t"
  train --checkpoint-dir "$t/run" --checkpoint-every 1 --checkpoint-keep 2 --metrics "$t/a.jsonl" \
    > "$t/first.out" 2> "$t/first.err" &
  launcher=$!
  for _ in $(seq 600); do [ -s "$t/run/latest" ] && break; sleep 0.05; done
  sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.3f", r / 32767 * 1.5 }')"
  victim_index=$((RANDOM % 4 + 1))
  victim=$(pgrep -P $launcher | sort -n | sed -n "${victim_index}p" || true)
  [ -n "$victim" ] && kill -9 "$victim" 2> /dev/null || true
  wait $launcher && finished=1 || finished=0
  if [ "$finished" = 1 ]; then
    echo "trial $trials: the run ended before the kill; not counted"
    continue
  fi
  if compgen -G "$t/run/*.partial" > /dev/null; then where="in a save"; in_save=$((in_save + 1)); else where="between saves"; between=$((between + 1)); fi
  latest=$(cat "$t/run/latest")
  # Five steps past the checkpoint are enough to compare (the schedule still spans all).
  stop=$((10#${latest#step-} + 5))
  if ! (train --resume "$t/run" --stop-at-step $stop --metrics "$t/b.jsonl") > "$t/resume.out" 2> "$t/resume.err"; then
    echo "trial $trials ($where, rank $((victim_index - 1))): RESUME FAILED"; sed 's/^/  /' "$t/resume.err" | tail -5
    failures=$((failures + 1)); continue
  fi
  first=$(head -1 "$t/b.jsonl" | sed -E 's/.*"step":([0-9]+).*/\1/')
  if [ "$(wc -l < "$t/b.jsonl")" = 5 ] && losses "$t/b.jsonl" | cmp -s - <(sed -n "${first},$((first + 4))p" "$work/reference.txt"); then
    verdict="losses equal"; else
    verdict="LOSSES DIFFER"; failures=$((failures + 1)); fi
  echo "trial $trials: rank $((victim_index - 1)) killed $where; latest was $latest; resumed at step $first: $verdict"
done
echo "kill_during_save: $trials trials, $in_save kills inside a save, $between between saves, $failures failures"
rm -rf "$work"
[ "$failures" = 0 ] && [ "$in_save" -ge "$want" ]
