"""GPT-2 against Hugging Face transformers: logits, loss and every gradient.

transformers builds a tiny GPT2LMHeadModel from random weights (LayerNorms and biases
perturbed, so a swapped weight and bias would show) and writes them with the
safetensors library, its config.json beside them; QuintNet builds the model the config
describes, loads the weights at tp 1, tp 2 and pp 2 (experiments/exec/hf_reference_check.cpp,
ranks started by quintnet-launch), runs
the same tokens forward and backward, and writes its logits, loss and gradients under
the Hugging Face names.  They must agree to float32 round-off.

A negative control keeps the comparison honest: the same weights with the query and
key columns of the first c_attn swapped are fed to QuintNet, and that run must *not*
agree with transformers' on the original weights.

    run_peer.sh hf_gpt2_reference.py BIN_DIR WORK_DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

from hf_reference import Reference, finish

BIN, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)

# An odd vocabulary, so tp 2 pads its vocabulary shard.
config = GPT2Config(vocab_size=101, n_positions=32, n_embd=32, n_layer=2, n_head=4, n_inner=128,
                    activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                    layer_norm_epsilon=1e-5, bos_token_id=0, eos_token_id=0)
config._attn_implementation = "eager"  # the plain matmul-softmax path, not sdpa
torch.manual_seed(0)
model = GPT2LMHeadModel(config).eval()
with torch.no_grad():
    for name, p in model.named_parameters():
        if "ln_" in name or name.endswith(".bias"):
            p.add_(torch.randn_like(p) * 0.1)
check, weights, weights_path = Reference.of(BIN, WORK, model, config, dict(model.transformer.named_parameters()), "hf_gpt2.safetensors")
failures = check.check_layouts(weights_path, [("tp1", 1, 1), ("tp2", 2, 1), ("pp2", 2, 2)])

# The negative control: q and k columns of h.0's c_attn swapped must be caught.
swapped = dict(weights)
w = weights["h.0.attn.c_attn.weight"].clone()
d = config.n_embd
w[:, :d], w[:, d:2 * d] = weights["h.0.attn.c_attn.weight"][:, d:2 * d], weights["h.0.attn.c_attn.weight"][:, :d]
swapped["h.0.attn.c_attn.weight"] = w
swapped_path = os.path.join(WORK, "hf_gpt2_swapped_qk.safetensors")
save_file(swapped, swapped_path, metadata={"format": "pt"})
failures += check.check_control(swapped_path, "q/k swapped in h.0")
finish(failures)
