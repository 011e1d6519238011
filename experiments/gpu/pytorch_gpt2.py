"""The plain-PyTorch peer of experiments/gpu/check.sh's GPT-2 rows: Hugging Face's GPT2LMHeadModel
(124M: 12 layers of 768, vocabulary 50,257, tied head, dropout 0.1), batch 8 x 1024 random tokens,
AdamW, clipping at 1.0, one GPU; tokens/s over steps 11-30 (as check.sh times ours), eager or
torch.compile, and the kernels with the most GPU time over three steps (torch.profiler).
   python3 experiments/gpu/pytorch_gpt2.py --precision bf16 [--compile] [--tf32] [--top 8]
Prints one table row, then (with --top) the top kernels as indented lines."""
import argparse
import json
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

parser = argparse.ArgumentParser()
parser.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
parser.add_argument("--compile", action="store_true", help="torch.compile the model")
parser.add_argument("--tf32", action="store_true", help="fp32 matrix products in TensorFloat-32")
parser.add_argument("--top", type=int, default=0, help="print the N kernels with the most GPU time")
parser.add_argument("--json", help="append the result as one JSON line to this file")
args = parser.parse_args()
if args.tf32:
    torch.backends.cuda.matmul.allow_tf32 = True

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_positions=1024, n_embd=768, n_layer=12, n_head=12)).cuda().train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
run = torch.compile(model) if args.compile else model
tokens = torch.randint(0, 50257, (8, 1024), device="cuda")


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
        loss = run(tokens, labels=tokens).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


times = []
for i in range(30):
    torch.cuda.synchronize()
    start = time.perf_counter()
    step().item()
    times.append(time.perf_counter() - start)
rate = 20 * 8 * 1024 / sum(times[10:])
flops = 6 * 124.4e6 + 12 * 12 * 768 * 1024
mode = "torch.compile" if args.compile else "eager"
precision = args.precision + (" (TF32)" if args.tf32 and args.precision == "fp32" else "")
print(f"| plain PyTorch {torch.__version__} {mode} ({model.config._attn_implementation} attention) | {precision} "
      f"| {rate:.0f} | {100 * rate * flops / 989e12:.1f}% |", flush=True)
if args.json:
    with open(args.json, "a") as out:
        out.write(json.dumps({"side": f"pytorch {mode}", "precision": args.precision, "tokens_per_s": rate}) + "\n")

if args.top:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    rows = [e for e in prof.key_averages() if e.self_device_time_total > 0]
    rows.sort(key=lambda e: -e.self_device_time_total)
    total = sum(e.self_device_time_total for e in rows)
    for e in rows[: args.top]:
        print(f"    {e.self_device_time_total / 3e3:8.3f} ms/step {100 * e.self_device_time_total / total:5.1f}%  "
              f"{e.key[:90]}")
