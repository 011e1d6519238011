"""The plain-PyTorch peer of experiments/gpu/check.sh's GPT-2 rows: Hugging Face's GPT2LMHeadModel
(124M: 12 layers of 768, vocabulary 50,257, tied head, dropout 0.1), batch 8 x 1024 random tokens,
AdamW, one GPU, fp32 and bf16 autocast, tokens/s over steps 11-30 (the same as check.sh's).
   python3 experiments/gpu/pytorch_gpt2.py"""
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
for precision in ("fp32", "bf16"):
    model = GPT2LMHeadModel(GPT2Config(n_positions=1024, n_embd=768, n_layer=12, n_head=12)).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 50257, (8, 1024), device="cuda")
    times = []
    for step in range(30):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(tokens, labels=tokens).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        times.append(time.perf_counter() - start)
    rate = 20 * 8 * 1024 / sum(times[10:])
    flops = 6 * 124.4e6 + 12 * 12 * 768 * 1024
    print(f"| plain PyTorch {torch.__version__} ({model.config._attn_implementation} attention), {precision} "
          f"| {rate:.0f} | {100 * rate * flops / 989e12:.1f}% |")
