"""What the Hugging Face reference tests share (hf_gpt2_reference.py, hf_llama_reference.py):
running QuintNet's side (experiments/exec/hf_reference_check.cpp under quintnet-launch) on
a layout, the comparison, the table of layouts and the negative control's verdict.
"""
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

TOLERANCE = 1e-5


class Reference:
    """transformers' results (`tensors`: logits, loss, grad.<name>) and the files QuintNet reads."""

    def __init__(self, bin_dir, work, config_path, inputs_path, tensors):
        self.bin, self.work = bin_dir, work
        self.config_path, self.inputs_path, self.tensors = config_path, inputs_path, tensors

    @classmethod
    def of(cls, bin_dir, work, model, config, parameters, weights_name):
        """Writes `parameters` (name -> tensor of `model`) as WORK/weights_name and the config
        as WORK/config.json, draws tokens and targets [3, 17] (one ignored), and runs
        transformers' forward, the token cross-entropy (no shift: the targets are already
        per position) and autograd.  Returns the Reference, the weights and their path."""
        weights = {k: v.detach().contiguous() for k, v in parameters.items()}
        weights_path = os.path.join(work, weights_name)
        save_file(weights, weights_path, metadata={"format": "pt"})
        config_path = os.path.join(work, "config.json")
        config.to_json_file(config_path, use_diff=False)
        tokens = torch.randint(0, config.vocab_size, (3, 17))
        targets = torch.randint(0, config.vocab_size, (3, 17))
        targets[0, 0] = -100  # an ignored position
        inputs_path = os.path.join(work, "inputs.safetensors")
        save_file({"tokens": tokens.float(), "targets": targets.float()}, inputs_path)  # the reader takes floats
        logits = model(tokens).logits
        loss = F.cross_entropy(logits.reshape(-1, config.vocab_size), targets.reshape(-1), ignore_index=-100)
        loss.backward()
        tensors = {"logits": logits.detach(), "loss": loss.detach().reshape(1)}
        for name, p in parameters.items():
            tensors["grad." + name] = p.grad  # GPT-2's wte gradient includes the tied head's
        return cls(bin_dir, work, config_path, inputs_path, tensors), weights, weights_path

    def quintnet(self, nproc, pp, weights_file, tag):
        out = os.path.join(self.work, f"quintnet_{tag}.safetensors")
        cmd = [os.path.join(self.bin, "quintnet-launch"), "--nproc", str(nproc), "--",
               os.path.join(self.bin, "hf_reference_check"), self.config_path, weights_file, self.inputs_path, out,
               str(pp)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            sys.exit(f"FAIL {tag}: {' '.join(cmd)} exited {done.returncode}\n{done.stdout}{done.stderr}")
        return load_file(out)

    def worst_error(self, ours):
        """Largest difference relative to the reference tensor's largest magnitude."""
        missing = sorted(set(self.tensors) - set(ours))
        if missing:
            sys.exit(f"FAIL: QuintNet wrote no {missing}")
        worst = ("", 0.0)
        for name, ref in self.tensors.items():
            err = (ours[name] - ref).abs().max().item() / max(ref.abs().max().item(), 1e-12)
            worst = max(worst, (name, err), key=lambda x: x[1])
        return worst

    def check_layouts(self, weights_path, layouts):
        """Each (tag, nproc, pp) must agree; returns the number that did not."""
        failures = 0
        print(f"{'layout':<8} {'tensors':>7} {'worst relative error':>21}  tensor")
        for tag, nproc, pp in layouts:
            name, err = self.worst_error(self.quintnet(nproc, pp, weights_path, tag))
            ok = err < TOLERANCE
            failures += not ok
            print(f"{tag:<8} {len(self.tensors):>7} {err:>21.2e}  {name}  {'ok' if ok else 'FAIL'}")
        return failures

    def check_control(self, weights_path, what):
        """The negative control must disagree; returns 1 if it did not."""
        name, err = self.worst_error(self.quintnet(1, 1, weights_path, "control"))
        caught = err >= TOLERANCE
        print(f"control: {what} -> worst relative error {err:.2e} ({name}): "
              f"{'caught' if caught else 'NOT caught: the comparison has no teeth'}")
        return 0 if caught else 1


def finish(failures):
    print("PASS" if failures == 0 else f"FAIL ({failures})")
    sys.exit(1 if failures else 0)
