#!/usr/bin/env bash
# The executor's losses and trace names before and after a change that should move
# nothing: the same runs with two builds' quintnet-train, compared bit for bit.
#
#   bash experiments/exec/same_training.sh OLD_BIN_DIR NEW_BIN_DIR
#
# Runs (8 CPU ranks each, a few steps with evaluation): the 2x2x2 ViT with 1F1B, the
# same with the interleaved schedule (2 chunks) and bf16, GPT-2 2x2x2 on the Brown corpus.
# Compares every metrics line's loss, gradient norm and per-microbatch losses exactly,
# the validation figures in the log, and the sorted (name, kind, rank) of every traced event.
set -euo pipefail
old=$1 new=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
launch="$root/build/bin/quintnet-launch"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cp "$root/experiments/configs/vit_3d.yaml" "$tmp/vit.yaml"
sed -e "s/^schedule: .*/schedule: interleaved/" "$root/experiments/configs/vit_3d.yaml" > "$tmp/vit_interleaved.yaml"
printf 'virtual_stages: 2\nprecision: bf16\ngrad_acc_steps: 4\nbatch_size: 64\n' >> "$tmp/vit_interleaved.yaml"
sed -i -e '/^grad_acc_steps: 2$/d' -e '/^batch_size: 32$/d' "$tmp/vit_interleaved.yaml"
cp "$root/experiments/configs/gpt2_brown_2x2x2.yaml" "$tmp/gpt2.yaml"
# Four steps to an epoch, so the sixth step's run has evaluated once (the forward-only walk).
sed -i -e '/^max_samples:/d' -e '/^max_val_samples:/d' "$tmp/vit.yaml" "$tmp/vit_interleaved.yaml" "$tmp/gpt2.yaml"
printf 'max_samples: 128\nmax_val_samples: 64\n' >> "$tmp/vit.yaml"
printf 'max_samples: 256\nmax_val_samples: 64\n' >> "$tmp/vit_interleaved.yaml"
printf 'max_samples: 64\nmax_val_samples: 32\n' >> "$tmp/gpt2.yaml"

status=0
for config in vit vit_interleaved gpt2; do
  for side in old new; do
    bin=$old; [ "$side" = new ] && bin=$new
    if ! ( cd "$root" && "$launch" --nproc 8 -- "$bin/quintnet-train" --config "$tmp/$config.yaml" --max-steps 6 \
        --threads 1 --quiet --metrics "$tmp/$config.$side.jsonl" --trace "$tmp/$config.$side.trace.json" \
        --trace-steps 2 ) > "$tmp/$config.$side.log" 2>&1; then
      echo "$config: the $side build's run failed:"; tail -5 "$tmp/$config.$side.log"; exit 1
    fi
  done
  python3 - "$tmp/$config" <<'PY' || status=1
import json, sys, re
base = sys.argv[1]
def metrics(side):
    keep = ("step", "loss", "grad_norm", "mb_losses", "lr")
    return [{k: json.loads(l).get(k) for k in keep} for l in open(f"{base}.{side}.jsonl")]
def events(side):
    t = json.load(open(f"{base}.{side}.trace.json"))
    return sorted((e.get("name"), e.get("cat"), e.get("pid"), e.get("tid")) for e in t["traceEvents"] if e.get("ph") == "X")
def validation(side):  # the epoch table's rows: train and validation figures per epoch
    return [l for l in open(f"{base}.{side}.log") if re.search(r"\|\s+\d+\s+\|", l)]
name = base.rsplit("/", 1)[1]
same = metrics("old") == metrics("new") and events("old") == events("new") and validation("old") == validation("new")
assert validation("new"), "no epoch row: nothing evaluated"
print(f"{name}: {len(metrics('new'))} steps, {len(validation('new'))} epoch rows, {len(events('new'))} traced events: " +
      ("identical (losses, norms, microbatch losses, validation, trace names)" if same else "DIFFERENT"))
if not same:
    for side in ("old", "new"): print(side, metrics(side)[:2], validation(side)[:3])
sys.exit(0 if same else 1)
PY
done
exit $status
