#!/usr/bin/python3
"""The peer of quintnet-train: the same ViT (and a small GPT-2) in plain eager PyTorch.

Run by Debian's python3-torch (/usr/bin/python3), which calls the very libtorch_cpu
and BLAS that quintnet-train links, so a ratio between the two measures the executors,
not the kernels.  The ViT is built in QuintNet's registration order from the same seed,
so both start from bitwise the same weights (the first step's loss agrees to the last
printed digit), reads the same IDX files, normalises them the same way and visits
them in QuintNet's order (its mt19937_64 Fisher-Yates shuffle, re-implemented below).
Training is the same arithmetic: microbatches with gradient accumulation, global-norm
clipping, AdamW, warm-up + cosine learning rate.

    /usr/bin/python3 experiments/bench/pytorch_vit.py --config experiments/configs/vit_3d.yaml --steps 60
    quintnet launch --nproc 2 -- /usr/bin/python3 experiments/bench/pytorch_vit.py --dp ...   (DDP over Gloo)
    /usr/bin/python3 experiments/bench/pytorch_vit.py --model gpt2 --config experiments/configs/gpt2_brown_2x2x2.yaml
    build-torch2/venv/bin/python experiments/bench/pytorch_vit.py --compile ...            (torch 2.x)
    quintnet launch --nproc 2 -- build-torch2/venv/bin/python experiments/bench/pytorch_vit.py --pp 1f1b ...
                   (torch.distributed.pipelining: gpipe, 1f1b, interleaved-1f1b, zero-bubble)

Prints one JSON line: samples/s (tokens/s for GPT-2) over the steps after the first
10, the first and last loss; --epochs runs whole epochs with the per-epoch table of
quintnet-train (the plain-PyTorch column of docs/EXECUTOR.md).
"""
import argparse
import gzip
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------- plan (flat YAML keys)

def read_plan(path):
    """The few flat keys this benchmark needs, without a YAML dependency."""
    plan = {}
    section = None
    for raw in open(path):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        key, _, value = line.strip().partition(":")
        value = value.strip().strip("'\"")
        if not raw.startswith(" ") and value == "":
            section = key
            continue
        if raw.startswith(" ") and section:
            plan.setdefault(section, {})[key] = value
        else:
            section = None
            plan[key] = value
    return plan


# ---------------------------------------------------------------- data

def read_idx(folder, stem):
    for name in (stem, stem + ".gz"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rb") as f:
                return f.read()
    sys.exit(f"pytorch_vit: {folder} has no {stem}[.gz]")


def load_images(folder, split):
    images, labels = read_idx(folder, f"{split}-images-idx3-ubyte"), read_idx(folder, f"{split}-labels-idx1-ubyte")
    count, rows, cols = (int.from_bytes(images[i:i + 4], "big") for i in (4, 8, 12))
    x = torch.frombuffer(bytearray(images[16:]), dtype=torch.uint8).view(count, 1, rows, cols)
    y = torch.frombuffer(bytearray(labels[8:]), dtype=torch.uint8).to(torch.int64)
    return x, y


class Mt19937_64:
    """std::mt19937_64, so the shuffle is QuintNet's BatchSampler order."""
    N, M, MASK = 312, 156, (1 << 64) - 1

    def __init__(self, seed):
        self.mt = [seed & self.MASK]
        for i in range(1, self.N):
            self.mt.append((6364136223846793005 * (self.mt[-1] ^ (self.mt[-1] >> 62)) + i) & self.MASK)
        self.index = self.N

    def __call__(self):
        if self.index >= self.N:
            mt = self.mt
            for i in range(self.N):
                x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % self.N] & 0x7FFFFFFF)
                mt[i] = mt[(i + self.M) % self.N] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            self.index = 0
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return y ^ (y >> 43)


def epoch_order(size, seed, epoch):
    rng, order = Mt19937_64(seed * 1000003 + epoch), list(range(size))
    for i in range(size - 1, 0, -1):
        j = rng() % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


# ---------------------------------------------------------------- models (QuintNet's registration order)

class Attention(nn.Module):
    def __init__(self, dim, heads, causal=False):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (y.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for y in self.qkv(x).chunk(3, -1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        if self.causal:
            scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        return self.out((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden, causal=False, eps=1e-5):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim, eps=eps)
        self.attn = Attention(dim, heads, causal)
        self.ln2 = nn.LayerNorm(dim, eps=eps)
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        self.gelu = "tanh" if causal else "none"  # GPT-2's approximation; the ViT's exact GELU

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        return h + self.fc2(F.gelu(self.fc1(self.ln2(h)), approximate=self.gelu))


class ViT(nn.Module):
    def __init__(self, img, patch, dim, channels, heads, depth, classes=10):
        super().__init__()
        self.patch, self.grid = patch, img // patch
        self.patch_proj = nn.Linear(channels * patch * patch, dim)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, self.grid ** 2 + 1, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, heads, 4 * dim) for _ in range(depth))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def embed(self, x):
        b, c, g, p = x.shape[0], x.shape[1], self.grid, self.patch
        x = self.patch_proj(x.reshape(b, c, g, p, g, p).permute(0, 2, 4, 1, 3, 5).reshape(b, g * g, c * p * p))
        return torch.cat([self.cls_token.expand(b, 1, -1), x], 1) + self.pos_embed

    def classify(self, x):
        return self.head(self.ln_f(x[:, 0]))

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.classify(x)


class ViTStage(nn.Module):
    """Blocks [first, last) of a ViT (a pipeline stage): the embedding on the stage with
    block 0, the head on the stage with the last block; the ViT's own parameters, shared."""

    def __init__(self, vit, first, last):
        super().__init__()
        self.has_embed, self.has_head = first == 0, last == len(vit.blocks)
        self.grid, self.patch = vit.grid, vit.patch
        if self.has_embed:
            self.patch_proj, self.cls_token, self.pos_embed = vit.patch_proj, vit.cls_token, vit.pos_embed
        self.blocks = nn.ModuleList(vit.blocks[first:last])
        if self.has_head:
            self.ln_f, self.head = vit.ln_f, vit.head

    def forward(self, x):
        if self.has_embed:
            x = ViT.embed(self, x)
        for block in self.blocks:
            x = block(x)
        return ViT.classify(self, x) if self.has_head else x


class Gpt2(nn.Module):
    def __init__(self, vocab, positions, dim, layers, heads, inner, eps=1e-5):
        super().__init__()
        self.wte = nn.Parameter(torch.randn(vocab, dim) * 0.02)
        self.wpe = nn.Parameter(torch.randn(positions, dim))  # nn::Embedding's own draw, as QuintNet's
        self.wpe.data.normal_(0.0, 0.01)
        self.blocks = nn.ModuleList(Block(dim, heads, inner, causal=True, eps=eps) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim, eps=eps)

    def forward(self, ids):
        x = F.embedding(ids, self.wte) + self.wpe[: ids.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.t()


# ---------------------------------------------------------------- training

def learning_rate_at(step, total, warmup, peak, min_ratio=0.1):
    if warmup > 0 and step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress)))


def clip(params, max_norm, distributed=False):
    """QuintNet's clipping: the global norm, scaled by max / (norm + 1e-6) above max.
    distributed: each rank holds different parameters (pipeline stages): sum over ranks."""
    squares = sum(p.grad.double().square().sum() for p in params)
    if distributed:
        torch.distributed.all_reduce(squares)
    norm = torch.sqrt(squares).item()
    if max_norm > 0 and norm > max_norm:
        for p in params:
            p.grad.mul_(max_norm / (norm + 1e-6))


# torch.distributed.pipelining's schedules by name, and how many stages each rank holds.
SCHEDULES = {"gpipe": ("ScheduleGPipe", 1), "1f1b": ("Schedule1F1B", 1),
             "interleaved-1f1b": ("ScheduleInterleaved1F1B", 2), "zero-bubble": ("ScheduleInterleavedZeroBubble", 2)}


class Pipeline:
    """This rank's stages of the ViT under one torch.distributed.pipelining schedule."""

    def __init__(self, schedule, first_rank, last_rank):
        self.schedule, self.first_rank, self.last_rank = schedule, first_rank, last_rank

    def step(self, x, y):
        """One batch through the schedule (it cuts the microbatches); the mean loss on the
        rank of the last stage, 0 elsewhere.  Gradients are scaled by 1/microbatches."""
        losses = []
        args = (x,) if self.first_rank else ()
        if self.last_rank:
            self.schedule.step(*args, target=y, losses=losses)
            return sum(l.item() for l in losses) / len(losses)
        self.schedule.step(*args)
        return 0.0


def make_pipeline(vit, name, rank, world, microbatches):
    """Stages in loop order (rank r holds stages r, r + world, ...), blocks split evenly;
    every rank built the whole ViT from the seed, so the stages start from QuintNet's weights."""
    from torch.distributed import pipelining
    cls, per_rank = SCHEDULES[name]
    num_stages, depth = world * per_rank, len(vit.blocks)
    mine = [rank + c * world for c in range(per_rank)]
    parts = [ViTStage(vit, s * depth // num_stages, (s + 1) * depth // num_stages) for s in mine]
    stages = [pipelining.PipelineStage(part, s, num_stages, torch.device("cpu")) for part, s in zip(parts, mine)]
    loss = lambda out, y: F.cross_entropy(out, y)
    schedule = getattr(pipelining, cls)(stages if per_rank > 1 else stages[0], n_microbatches=microbatches,
                                        loss_fn=loss)
    params = [p for part in parts for p in part.parameters()]
    return Pipeline(schedule, 0 in mine, num_stages - 1 in mine), params


def blas_pool(threads):
    """Holds a pthreads OpenBLAS pool to `threads`, as quintnet-train does
    (exec/kernels/blas_threads.h): torch.set_num_threads reaches OpenMP only, and Debian's
    libblas.so.3 is often OpenBLAS's pthreads build, whose pool otherwise has a thread per
    core.  None leaves it as it is.  Returns what the BLAS is and its pool's size."""
    import ctypes
    # Python loads libtorch's libraries locally: the BLAS is found by its loaded path.
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split()[-1] for line in maps if "blas" in line and line.split()[-1].startswith("/")})
    def loaded(path):
        try:
            return ctypes.CDLL(path)
        except OSError:  # a mapped file that is not a library of its own
            return None
    process = next((lib for lib in map(loaded, paths) if lib and hasattr(lib, "openblas_get_parallel")), None)
    if process is None:
        return "no OpenBLAS"
    if process.openblas_get_parallel() != 1:
        return "OpenBLAS (OpenMP or sequential: follows torch.set_num_threads)"
    if threads is not None:
        process.openblas_set_num_threads(threads)
    return f"OpenBLAS pthreads pool of {process.openblas_get_num_threads()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--model", choices=["vit", "gpt2"], default="vit")
    ap.add_argument("--steps", type=int, default=60, help="optimizer steps (timed after the first 10)")
    ap.add_argument("--epochs", type=int, default=0, help="train whole epochs with evaluation instead of --steps")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads")
    ap.add_argument("--dp", action="store_true", help="DistributedDataParallel over Gloo (start under quintnet launch)")
    ap.add_argument("--dataset-path", default=None)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast around the forward pass")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (torch 2.x)")
    ap.add_argument("--pp", choices=sorted(SCHEDULES), default=None,
                    help="torch.distributed.pipelining over Gloo, ViT only (torch 2.x; start under quintnet launch): "
                         "one stage per rank, two for the interleaved and zero-bubble schedules")
    ap.add_argument("--free-blas", action="store_true",
                    help="leave a pthreads OpenBLAS pool at its own size (all cores, whatever --threads says)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    blas = blas_pool(None if args.free_blas else args.threads)

    plan = read_plan(args.config)
    batch, microbatches = int(plan.get("batch_size", 32)), int(plan.get("grad_acc_steps", 1))
    lr, warmup = float(plan.get("learning_rate", 1e-4)), int(plan.get("warmup_steps", 0))
    max_norm, seed = float(plan.get("max_grad_norm", 1.0)), int(plan.get("seed", 42))
    rank, world = 0, 1
    if (args.dp or args.pp) and args.epochs:
        sys.exit("pytorch_vit: --epochs is for the serial run")
    if args.pp and args.model != "vit":
        sys.exit("pytorch_vit: --pp is for the ViT")
    if args.dp or args.pp:
        torch.distributed.init_process_group("gloo")
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    micro = batch // (1 if args.pp else world) // microbatches

    torch.manual_seed(seed)
    if args.model == "vit":
        model = ViT(int(plan["img_size"]), int(plan["patch_size"]), int(plan["hidden_dim"]),
                    int(plan.get("in_channels", 1)), int(plan["n_heads"]), int(plan["depth"]))
        folder = args.dataset_path or plan["dataset_path"]
        train_x, train_y = load_images(folder, "train")
        val_x, val_y = load_images(folder, "t10k")
        if int(plan.get("max_samples", 0) or 0) > 0:
            train_x, train_y = train_x[: int(plan["max_samples"])], train_y[: int(plan["max_samples"])]
        pixels = train_x.double() / 255.0
        mean, std = pixels.mean().item(), math.sqrt(max(1e-12, pixels.square().mean().item() - pixels.mean().item() ** 2))
        del pixels
        normalise = lambda x: (x.float().div_(255.0).sub_(mean)).div_(std)
        size, unit = train_x.shape[0], 1
        batch_at = lambda idx: (normalise(train_x[idx]), train_y[idx])
    else:
        c = plan["model_config"]
        seq = int(plan.get("max_seq_length", 64))
        model = Gpt2(int(c["vocab_size"]), int(c["n_positions"]), int(c["n_embd"]), int(c["n_layer"]),
                     int(c["n_head"]), int(c.get("n_inner", 4 * int(c["n_embd"]))))
        # Throughput only: seeded random token ids of the plan's shape (the Brown corpus
        # needs QuintNet's tokenizer; the shapes, not the words, set the speed).
        tokens = torch.randint(0, int(c["vocab_size"]), (4096, seq + 1), generator=torch.Generator().manual_seed(seed))
        size, unit = tokens.shape[0], seq
        batch_at = lambda idx: (tokens[idx, :-1], tokens[idx, 1:])
    params = list(model.parameters())
    pipeline = None
    if args.pp:
        pipeline, params = make_pipeline(model, args.pp, rank, world, microbatches)
    if args.dp:
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=25)
    if args.compile:
        model = torch.compile(model)
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=float(plan.get("weight_decay", 0.01)))

    per_epoch = size // batch
    total = per_epoch * args.epochs if args.epochs else args.steps
    losses, times, order, order_epoch = [], [], None, -1
    if rank == 0 and args.epochs:
        print("| Epoch | Train Loss | Train Acc | Val Loss | Val Acc |\n|-------|------------|-----------|----------|---------|",
              flush=True)
    epoch_loss = epoch_correct = epoch_seen = 0.0
    start = time.perf_counter()
    for step in range(total):
        epoch, k = divmod(step, per_epoch)
        if epoch != order_epoch:
            order, order_epoch = torch.tensor(epoch_order(size, seed, epoch)), epoch
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(step, total, warmup, lr)
        optimizer.zero_grad(set_to_none=False)
        step_loss = 0.0
        if pipeline is not None:
            step_loss = pipeline.step(*batch_at(order[k * batch:(k + 1) * batch]))
        for j in range(microbatches if pipeline is None else 0):
            first = k * batch + rank * (batch // world) + j * micro
            x, y = batch_at(order[first:first + micro])
            sync = not args.dp or j == microbatches - 1
            with (model.no_sync() if not sync else _null()), torch.autocast("cpu", torch.bfloat16, enabled=args.bf16):
                out = model(x).float()
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            (loss / microbatches).backward()
            step_loss += loss.item() / microbatches
            if args.model == "vit":
                epoch_correct += (out.argmax(1) == y).sum().item()
            epoch_loss += loss.item() * micro
            epoch_seen += micro
        clip(params, max_norm, distributed=args.pp is not None)
        optimizer.step()
        losses.append(step_loss)
        times.append(time.perf_counter())
        if args.epochs and k == per_epoch - 1 and rank == 0:
            vl, va = evaluate(model, val_x, val_y, normalise)
            print(f"| {epoch + 1:5d} | {epoch_loss / epoch_seen:10.4f} | {100 * epoch_correct / epoch_seen:8.2f}% "
                  f"| {vl:8.4f} | {100 * va:6.2f}% |", flush=True)
            epoch_loss = epoch_correct = epoch_seen = 0.0
    skip = min(10, len(times) - 1)
    rate = (len(times) - 1 - skip) * batch * unit / (times[-1] - times[skip]) if len(times) > skip + 1 else 0.0
    if rank == (world - 1 if args.pp else 0):  # a pipeline's loss is known on its last stage
        print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "model": args.model,
                          "dp": 1 if args.pp else world, "pp": world if args.pp else 1, "schedule": args.pp,
                          "compile": args.compile, "threads": args.threads, "blas": blas, "bf16": args.bf16,
                          "steps": total, "rate": round(rate, 2), "unit": "tokens/s" if unit > 1 else "samples/s",
                          "first_loss": losses[0], "last_loss": losses[-1], "wall_s": round(time.perf_counter() - start, 1)}),
              flush=True)
    if args.dp or args.pp:
        torch.distributed.destroy_process_group()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@torch.no_grad()
def evaluate(model, x, y, normalise):
    model.eval()
    loss = correct = 0.0
    for s in range(0, x.shape[0], 500):
        out = model(normalise(x[s:s + 500]))
        loss += F.cross_entropy(out, y[s:s + 500], reduction="sum").item()
        correct += (out.argmax(1) == y[s:s + 500]).sum().item()
    model.train()
    return loss / x.shape[0], correct / x.shape[0]


if __name__ == "__main__":
    main()
