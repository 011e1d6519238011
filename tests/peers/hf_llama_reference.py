"""A Llama-3-style decoder against Hugging Face transformers' LlamaForCausalLM: logits,
loss and every gradient.

transformers builds a small LlamaForCausalLM from random weights (4 layers, hidden 256,
8 query heads sharing 2 key/value heads, SwiGLU width 512, rope_theta 500,000, untied
head; the RMSNorm weights perturbed away from 1) and writes them with the safetensors
library, its config.json beside them; QuintNet builds the model the config describes
and loads the weights at tp 1, tp 2 (one key/value head per rank), tp 4 (each key/value
head held whole by two ranks) and pp 2 (experiments/exec/hf_reference_check.cpp, ranks
started by quintnet-launch), runs the same tokens forward and backward, and writes its
logits, loss and gradients under the Hugging Face names.  They must agree to float32
round-off (1e-5 of each tensor's largest magnitude).

A negative control keeps the comparison honest: the same weights with the two halves
of layer 0's k_proj rows swapped within each head (rotary positions in the interleaved
order instead of Hugging Face's rotate_half order) must *not* agree.

Then a Llama 3.1/3.2-style model: rotary scaling (rope_type llama3, with a short original
context so that positions 0..16 feel it) and the head tied to the embedding, at tp 1, tp 2
and pp 2 (the embedding's gradient, held by both stages, summed over the pipeline).  Its
control: the same weights under a config.json without the scaling must not agree.

    run_peer.sh hf_llama_reference.py BIN_DIR WORK_DIR
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

from hf_reference import Reference, finish

BIN, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)


def small_llama(seed, **options):
    """A LlamaForCausalLM from random weights (4 layers, hidden 256, 8 query heads sharing 2
    key/value heads, SwiGLU 512, rope_theta 500,000, a vocabulary of 101), eager attention
    (the plain matmul-softmax path, not sdpa), its RMSNorm weights perturbed away from 1."""
    config = LlamaConfig(vocab_size=101, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=32,
                         rms_norm_eps=1e-5, rope_theta=500000.0, attention_bias=False, mlp_bias=False,
                         bos_token_id=0, eos_token_id=0, **options)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    return config, model


config, model = small_llama(0, tie_word_embeddings=False)
check, weights, weights_path = Reference.of(BIN, WORK, model, config, dict(model.named_parameters()), "model.safetensors")
failures = check.check_layouts(weights_path, [("tp1", 1, 1), ("tp2", 2, 1), ("tp4", 4, 1), ("pp2", 2, 2)])

# The negative control: layer 0's keys in the interleaved rotary order must be caught.
swapped = dict(weights)
k = weights["model.layers.0.self_attn.k_proj.weight"]
d = config.hidden_size // config.num_attention_heads
heads = k.reshape(config.num_key_value_heads, d, config.hidden_size)
interleaved = torch.stack([heads[:, : d // 2], heads[:, d // 2:]], dim=2).reshape(k.shape)
swapped["model.layers.0.self_attn.k_proj.weight"] = interleaved.contiguous()
control_dir = os.path.join(WORK, "control")
os.makedirs(control_dir, exist_ok=True)
swapped_path = os.path.join(control_dir, "model.safetensors")
save_file(swapped, swapped_path, metadata={"format": "pt"})
failures += check.check_control(swapped_path, "layer 0's keys in the interleaved rotary order")

# Llama 3.1's rotary scaling and Llama 3.2's tied embeddings.
print("\nrope_scaling llama3 (factor 8, original context 8), tie_word_embeddings")
scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8}
tied_config, tied_model = small_llama(1, tie_word_embeddings=True, rope_scaling=dict(scaling, rope_theta=500000.0))
tied_params = dict(tied_model.named_parameters())  # one embedding: lm_head is it
assert "lm_head.weight" not in tied_params, "transformers did not tie the head"
tied_dir = os.path.join(WORK, "tied")
os.makedirs(tied_dir, exist_ok=True)
tied_check, _, tied_path = Reference.of(BIN, tied_dir, tied_model, tied_config, tied_params, "model.safetensors")
failures += tied_check.check_layouts(tied_path, [("tp1", 1, 1), ("tp2", 2, 1), ("pp2", 2, 2)])

# Its control: the same weights, read under a config without the scaling.
unscaled_dir = os.path.join(tied_dir, "unscaled")
os.makedirs(unscaled_dir, exist_ok=True)
unscaled = tied_config.to_dict()
for key in ("rope_scaling", "rope_parameters"):
    unscaled.pop(key, None)
unscaled["rope_theta"] = 500000.0
with open(os.path.join(unscaled_dir, "config.json"), "w") as f:
    json.dump(unscaled, f)
shutil.copy(tied_path, os.path.join(unscaled_dir, "model.safetensors"))
tied_check.config_path = os.path.join(unscaled_dir, "config.json")
failures += tied_check.check_control(os.path.join(unscaled_dir, "model.safetensors"), "the weights without rope scaling")
finish(failures)
