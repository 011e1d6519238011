#!/usr/bin/env bash
# Published runs against the simulator: the ten GPT runs of Narayanan et al. 2021,
# "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
# Table 1 (1.7B to 1T parameters on 32 to 3,072 A100s of Selene: DGX-A100 nodes), each
# simulated as it was run, on the dgx-a100 preset (its figures are published hardware
# measurements, none taken from these runs: docs/SIMULATOR.md, "Platforms"), with
# Calculon's prediction of the same rows beside it when a Calculon checkout is given.
#
# How the runs were trained (every choice the table leaves open, and where it comes from):
#   - micro-batch size, interleaving (layers per virtual stage) and DDP implementation
#     per row: NVIDIA's scripts for this table, Megatron-LM examples/sc21/run_table_1.sh;
#     with --DDP-impl torch (the pp = 1 rows) the gradient all-reduce overlaps the
#     backward, with local (pp > 1) it runs after the last backward (dp_overlap: false);
#   - full activation recomputation of every layer (the scripts' --recompute-method
#     uniform; the paper's FLOP count assumes it), fp16 (--fp16), dropout 0.1 (Megatron's
#     default), Megatron's fused kernels (§4.2: kernels: fused);
#   - the scatter/gather optimisation of pipeline messages (§5.1: "we use the interleaved
#     pipeline schedule with the scatter/gather optimization enabled");
#   - tensor-parallel all-reduces not overlapped (Megatron-LM 2021 had no such overlap).
# "Achieved TFLOP/s per GPU" is the paper's own count, 96 B s l h^2 (1 + s/(6h) + V/(16 l h))
# over the step time and the GPUs.
#   bash experiments/sim/megatron_table1.sh [PLATFORM]          (~2 min on 2 cores)
#   CALCULON_DIR=/path/to/calculon bash experiments/sim/megatron_table1.sh
# PLATFORM (default dgx-a100): a preset or JSON file.  CALCULON_DIR: a checkout of
# github.com/calculon-ai/calculon; its Python dependencies go into a virtual environment
# under build/ the first time (pip).  QN_TABLE1_JSON=FILE also writes the rows as JSON
# (experiments/sim/plot_table1.py draws them).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${QN_BUILD_DIR:-$root/build}/bin"
platform="${1:-dgx-a100}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# billions heads hidden layers tp pp GPUs batch micro-batch chunks dp_overlap published-TFLOP/s
# (chunks = layers / (pp x layers per virtual stage) from run_table_1.sh; 1: not interleaved)
rows=(
  "1.7 24 2304 24 1 1 32 512 16 1 1 137"
  "3.6 32 3072 30 2 1 64 512 16 1 1 138"
  "7.5 32 4096 36 4 1 128 512 16 1 1 142"
  "18.4 48 6144 40 8 1 256 1024 8 1 1 135"
  "39.1 64 8192 48 8 2 512 1536 4 1 0 138"
  "76.1 80 10240 60 8 4 1024 1792 2 3 0 140"
  "145.6 96 12288 80 8 8 1536 2304 2 2 0 148"
  "310.1 128 16384 96 8 16 1920 2160 1 2 0 155"
  "529.6 128 20480 105 8 35 2520 2520 1 3 0 163"
  "1008.0 160 25600 128 8 64 3072 3072 1 1 0 163"
)

# The simulated step time of one row.
simulate_row() {
  local heads=$1 hidden=$2 layers=$3 tp=$4 pp=$5 gpus=$6 batch=$7 mbs=$8 chunks=$9 overlap=${10}
  local dp=$((gpus / (tp * pp))) schedule=1f1b plan="$work/plan_$hidden.yaml"
  [ "$chunks" -gt 1 ] && schedule=interleaved
  cat >"$plan" <<YAML
model: gpt2
model_config: {vocab_size: 51200, n_positions: 2048, n_embd: $hidden, n_layer: $layers, n_head: $heads}
max_seq_length: 2048
batch_size: $batch
grad_acc_steps: $((batch / (dp * mbs)))
device_type: cuda
mesh_dim: [$dp, $tp, $pp]
mesh_name: [dp, tp, pp]
schedule: $schedule
virtual_stages: $chunks
recompute: full
kernels: fused
dp_overlap: $([ "$overlap" = 1 ] && echo true || echo false)
pp_scatter_gather: true
YAML
  local json
  json=$("$bin/quintnet-simulate" --config "$plan" --seq 2048 --platform "$platform" --nodes $(((gpus + 7) / 8)) \
    --json) || exit 2  # quintnet simulate has said why
  python3 -c 'import json, sys; print(json.load(sys.stdin)["step_time_s"])' <<<"$json"
}

# Calculon's step times, one JSON line per row, or nothing without a checkout.
calculon_rows() {
  [ -n "${CALCULON_DIR:-}" ] || return 0
  if [ ! -f "$CALCULON_DIR/calculon/llm/llm.py" ]; then
    echo "megatron_table1: CALCULON_DIR=$CALCULON_DIR is not a checkout of github.com/calculon-ai/calculon" >&2
    exit 2
  fi
  local venv="${QN_BUILD_DIR:-$root/build}/calculon-venv"
  if ! "$venv/bin/python" -c 'import numpy, pandas, psutil' 2>/dev/null; then
    echo "megatron_table1: installing Calculon's Python dependencies into ${venv#$root/} ..." >&2
    python3 -m venv "$venv" && "$venv/bin/pip" install --quiet numpy pandas psutil >&2
  fi
  printf '%s\n' "${rows[@]}" | "$venv/bin/python" "$root/experiments/sim/calculon_table1.py" "$CALCULON_DIR"
}

: >"$work/ours"
for row in "${rows[@]}"; do
  read -r billions heads hidden layers tp pp gpus batch mbs chunks overlap _ <<<"$row"
  echo "simulating ${billions}B on $gpus GPUs ..." >&2
  echo "$billions $(simulate_row "$heads" "$hidden" "$layers" "$tp" "$pp" "$gpus" "$batch" "$mbs" "$chunks" "$overlap")" \
    >>"$work/ours"
done
calculon_rows >"$work/calculon"
printf '%s\n' "${rows[@]}" >"$work/rows"

python3 - "$work/rows" "$work/ours" "$work/calculon" ${QN_TABLE1_JSON:+"$QN_TABLE1_JSON"} <<'PY'
import json, sys
ours = dict(line.split() for line in open(sys.argv[2]))
calculon = {r["billions"]: r["step_s"] for r in map(json.loads, open(sys.argv[3]))}
s, V = 2048, 51200
print("| params | t × p × d | GPUs | batch | b | chunks | DP overlap | published TFLOP/s/GPU | "
      "QuintNet: step | TFLOP/s | error | Calculon: step | TFLOP/s | error |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
errors = {"ours": [], "calculon": []}
rows = []
for line in open(sys.argv[1]):
    billions, a, h, l, t, p, n, B, b, v, overlap, published = line.split()
    h, l, t, p, n, B, published = int(h), int(l), int(t), int(p), int(n), int(B), float(published)
    flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    def cells(step, who):
        if step is None:
            return "— | — | —"
        tflops = flops / (float(step) * n) / 1e12
        errors[who].append(100 * (tflops - published) / published)
        return f"{float(step):.2f} s | {tflops:.0f} | {errors[who][-1]:+.1f}%"
    print(f"| {billions}B | {t} × {p} × {n // (t * p)} | {n} | {B} | {b} | {v} | {'yes' if overlap == '1' else 'no'} "
          f"| {published:.0f} | {cells(ours[billions], 'ours')} | {cells(calculon.get(billions), 'calculon')} |")
    tflops = lambda step: None if step is None else flops / (float(step) * n) / 1e12
    rows.append({"billions": float(billions), "published": published, "quintnet": tflops(ours[billions]),
                 "calculon": tflops(calculon.get(billions))})
if len(sys.argv) > 4:
    json.dump(rows, open(sys.argv[4], "w"), indent=1)
def summary(e):
    return f"mean |error| {sum(map(abs, e)) / len(e):.1f}%, worst {max(map(abs, e)):.1f}%" if e else "not run"
print(f"\nQuintNet: {summary(errors['ours'])}; within 10%: {sum(abs(x) <= 10 for x in errors['ours'])} of "
      f"{len(errors['ours'])}")
print(f"Calculon (systems/a100_80g.json): {summary(errors['calculon'])}"
      + ("" if errors["calculon"] else " (set CALCULON_DIR to a checkout of github.com/calculon-ai/calculon)"))
PY
