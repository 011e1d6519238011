#!/usr/bin/env bash
# A long 2x2x2 run whose ranks are paused (SIGSTOP ... SIGCONT) at random moments for
# random times shorter than the communication timeout: it must end with exactly the
# losses of an undisturbed run of the same steps.  Results: docs/RELIABILITY.md.
#
#   bash experiments/reliability/pause_run.sh [MINUTES] [BUILD_BIN_DIR]
#
# A short calibration run measures the step rate; the step count is chosen so the
# disturbed run lasts about MINUTES (default 20).  The undisturbed reference runs at the
# same time (each gets about half the machine; the losses do not depend on timing), and
# the two are compared line by line (losses are printed with every bit).
set -euo pipefail
minutes="${1:-20}"
bin="${2:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin}"
work="$(mktemp -d /tmp/qn-pause-XXXXXX)"
timeout=30
cat > "$work/plan.yaml" <<PLAN
batch_size: 32
grad_acc_steps: 2
depth: 4
hidden_dim: 64
n_heads: 4
mesh_dim: [2, 2, 2]
PLAN
# `exec`: a run started in the background is the launcher itself, whose children are the ranks.
train() { exec "$bin/quintnet-launch" --nproc 8 -- "$bin/quintnet-train" --config "$work/plan.yaml" --no-eval --quiet \
  --threads 1 --timeout $timeout "$@"; }
losses() { sed -E 's/.*"step":([0-9]+).*"loss":([^,]+),.*/\1 \2/' "$1"; }

start=$(date +%s.%N)
(train --max-steps 200 --metrics "$work/calibrate.jsonl") > /dev/null
rate=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3f", 200 / (e - s) }')
# The pauses and the reference running alongside leave the disturbed run 50-60% of the
# calibrated rate when the machine is otherwise busy (2188 steps at 5.2 steps/s took
# 767 s), more when it is idle; 0.8 errs on the long side (5397 steps: 1674 s).
steps=$(awk -v r="$rate" -v m="$minutes" 'BEGIN { printf "%d", r * m * 60 * 0.8 }')
echo "pause_run: $rate steps/s undisturbed; $steps steps (in $work)"

train --max-steps "$steps" --metrics "$work/reference.jsonl" > /dev/null &
reference=$!
start=$(date +%s)
train --max-steps "$steps" --metrics "$work/paused.jsonl" > "$work/paused.out" 2> "$work/paused.err" &
launcher=$!
pauses=0 paused_ms=0 longest_ms=0
sleep 5
while kill -0 $launcher 2> /dev/null; do
  # One rank, or now and then three of them, paused for 0.2-4 s (< the timeout).
  ranks=$(pgrep -P $launcher | shuf -n $(( RANDOM % 5 == 0 ? 3 : 1 )) || true)
  ms=$(( 200 + RANDOM % 3800 ))
  [ -z "$ranks" ] && break
  kill -STOP $ranks 2> /dev/null || true
  sleep "$(awk -v m=$ms 'BEGIN { printf "%.3f", m / 1000 }')"
  kill -CONT $ranks 2> /dev/null || true
  pauses=$((pauses + 1)) paused_ms=$((paused_ms + ms))
  [ $ms -gt $longest_ms ] && longest_ms=$ms
  sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.3f", 2 + r / 32767 * 6 }')"
done
wait $launcher && rc=0 || rc=$?
elapsed=$(( $(date +%s) - start ))
wait $reference
echo "pause_run: disturbed run: exit $rc after $elapsed s; $pauses pauses, $((paused_ms / 1000)) s paused in all," \
  "longest $longest_ms ms (timeout $timeout s)"
if [ $rc = 0 ] && cmp -s <(losses "$work/reference.jsonl") <(losses "$work/paused.jsonl"); then
  echo "pause_run: all $steps losses equal bit for bit"
  rm -rf "$work"
else
  echo "pause_run: FAILED: the losses differ or the run failed (kept in $work)"; tail -5 "$work/paused.err"
  exit 1
fi
